// The dependency model of a trace: what waits for what (issue 50). Built once per Analyze() and
// handed to every family in AnalysisContext, so no family rebuilds its own correlation, External-id
// or stream lookups (private to analyzers/).
//
// Per rank it holds:
//  - every host runtime / driver call, classified once by name (runtime_names.h): a launch (kernel,
//    async copy or memset, CUDA and HIP), a graph launch, a blocking call (synchronize, a synchronous
//    copy), an allocator call (cudaMalloc / cudaFree / hipMalloc / hipFree ...: frees synchronize the
//    device), a stream wait or an event record;
//  - every device activity (kernel, copy, memset on a stream) in stream order, with the call that
//    enqueued it (by correlation id; a graph launch fans out to all the kernels that carry its
//    correlation) and the activity before it on its stream;
//  - for each blocking or allocator call, the device activity whose end released it (the last one to
//    end inside the call, on the synchronized stream where the trace says which: a cuda_sync record
//    with the call's correlation, or the copy the call made);
//  - CPU ops by Kineto "External id" (the op that made a call);
//  - event edges where sync records say what a wait waited on (profiler::SyncWait): a stream's next
//    work after cudaStreamWaitEvent waits for the recorded stream's last work before
//    cudaEventRecord, and cudaEventSynchronize is released by that work;
//  - waits between host threads (issue 59): a stretch of an op's own time (no child op running) on
//    one thread that ends just after an op on another thread of the rank ended, while that thread
//    was busy through most of the stretch: `backward()` on the main thread waiting for the autograd
//    engine's device threads, an op waiting for a collective backend's own thread (Gloo's run
//    loop), a DataLoader fetch waiting for the pin-memory thread. The trace has no record of these
//    waits; the rule is by time (the release within max(10 us, 2 %) of the stretch's end, or within
//    a tenth of it where the other thread was idle before the stretch: a fork and join, such as
//    `loss.backward()` with no op of its own on the main thread), and each one names its releaser
//    so the critical path and the replay can follow it.
// Linear in events but for sorts of the correlation and end-time keys.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime_names.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

enum class CallKind : uint8_t {
  kOther,
  kLaunch,       // enqueues one kernel, async copy or memset and returns (IsLaunchCall)
  kGraphLaunch,  // cudaGraphLaunch / hipGraphLaunch: one call, many kernels
  kBlocking,     // returns when the device (a stream, an event) caught up, or a synchronous copy is done
  kAllocator,    // cudaMalloc / cudaFree / hipMalloc / hipFree ... (frees wait for the device)
  kStreamWait,   // cudaStreamWaitEvent / hipStreamWaitEvent: a stream waits on an event
  kEventRecord,  // cudaEventRecord / hipEventRecord
};
CallKind CallKindOf(std::string_view name);
// A host event that is a thread's work in the call tree: ops, annotations, runtime and driver
// calls, Python frames (the thread waits and the replay's slices walk the same events).
bool IsHostTask(profiler::EventKind k);
// An allocator call that allocates or frees device memory (not the pinned-host or async-pool calls).
bool IsAllocatorCall(std::string_view name);

struct DeviceWork {
  const profiler::Event* e = nullptr;
  uint32_t track = 0;
  int32_t device = -1;
  int64_t stream = -1;
  int32_t call = -1;  // index in RankLinks::calls of the call that enqueued it; -1: not in the trace
  int32_t prev = -1;  // the activity before it on its stream; -1: the stream's first
  bool graph = false; // enqueued by a graph launch
  // The work on another stream it waited for by an event (cudaEventRecord there ->
  // cudaStreamWaitEvent here, from a sync record's wait_on_stream / record correlation): the last
  // work launched on the recorded stream before the record; -1: no such record.
  int32_t waits_on = -1;
  int64_t ts() const { return e->ts_ns; }
  int64_t end() const { return e->end_ns(); }
};

struct HostCall {
  const profiler::Event* e = nullptr;
  uint32_t track = 0;
  CallKind kind = CallKind::kOther;
  int32_t work = -1;        // its first device activity (RankLinks::work), -1: none
  int32_t work_count = 0;   // how many (a graph launch: its kernels)
  int32_t waited_for = -1;  // blocking and allocator calls: the activity whose end released it
  int64_t synced_stream = -1;  // a cuda_sync record names the stream it synchronized (-1: unknown)
};

// A host thread that waited for another: [start_ns, end_ns) of `op`'s own time on `track`, released
// when `releaser` (an op on `releaser_track`) ended at `release_ns`.
struct ThreadWait {
  const profiler::Event* op = nullptr;
  uint32_t track = 0;
  int64_t start_ns = 0, end_ns = 0;
  const profiler::Event* releaser = nullptr;
  uint32_t releaser_track = 0;
  int64_t release_ns = 0;
};
// A launch that blocked on a full launch queue (links.cc ResolveQueuedLaunches): at least this long
// and this many times the rank's tenth-percentile launch, with this many launches pending on the device.
inline constexpr int64_t kQueuedLaunchMinNs = 100'000, kQueuedLaunchFactor = 20, kQueuedLaunchPending = 256;
// Thresholds of the thread-wait rule (links.cc): a stretch shorter than this is not looked at.
inline constexpr int64_t kThreadWaitMinNs = 50'000;

// What a kernel's name says it is (runtime_names.h), per string of the trace, classified once for
// all its ranks when the links are built (the what-if's transforms ask of every kernel of every rank
// of a set; lower-casing each name there was the what-if's largest cost on the 8-rank DLRM set).
class KernelNames {
 public:
  KernelNames() = default;
  explicit KernelNames(size_t strings) : bits_(strings, 0) {}
  void Classify(profiler::StrId id, std::string_view name);
  GemmMath Gemm(profiler::StrId id) const { return static_cast<GemmMath>(At(id) & 3); }
  bool Comm(profiler::StrId id) const { return (At(id) & kComm) != 0; }
  bool Fusable(profiler::StrId id) const { return (At(id) & kFusable) != 0; }
  bool Fp32Data(profiler::StrId id) const { return (At(id) & kFp32Data) != 0; }
  bool CudnnBatchNorm(profiler::StrId id) const { return (At(id) & kCudnnNorm) != 0; }
  bool SaysTf32(profiler::StrId id) const { return (At(id) & kSaysTf32) != 0; }  // "tf32" in its name, any case
  bool LayoutConversion(profiler::StrId id) const { return (At(id) & kLayout) != 0; }
  bool Reduction(profiler::StrId id) const { return (At(id) & kReduction) != 0; }

 private:
  static constexpr uint16_t kComm = 4, kFusable = 8, kFp32Data = 16, kCudnnNorm = 32, kSaysTf32 = 64, kDone = 128,
                            kLayout = 256, kReduction = 512;
  uint16_t At(profiler::StrId id) const { return id < bits_.size() ? bits_[id] : 0; }
  std::vector<uint16_t> bits_;
};

// Values worked out once from what does not change (a RankLinks once built), each of its own type
// T (made in place: it may hold a lock), on first use from any thread. A copy starts empty: its
// values are made again for it.
class DerivedValues {
 public:
  DerivedValues() = default;
  DerivedValues(const DerivedValues&) {}
  DerivedValues& operator=(const DerivedValues&) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.clear();
    return *this;
  }
  DerivedValues(DerivedValues&& o) noexcept : slots_(std::move(o.slots_)) {}
  DerivedValues& operator=(DerivedValues&& o) noexcept {
    slots_ = std::move(o.slots_);
    return *this;
  }
  template <typename T, typename Make>
  const T& Get(Make&& make) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& s = slots_[std::type_index(typeid(T))];
      if (!s) s = std::make_shared<Slot>();
      slot = s;
    }
    std::call_once(slot->once, [&] { slot->value = std::shared_ptr<T>(new T(make())); });
    return *static_cast<const T*>(slot->value.get());
  }

 private:
  struct Slot {
    std::once_flag once;
    std::shared_ptr<void> value;
  };
  std::mutex mu_;
  std::unordered_map<std::type_index, std::shared_ptr<Slot>> slots_;
};

struct RankLinks {
  int32_t rank = 0;
  std::shared_ptr<const KernelNames> kernel_names;  // shared by the trace's ranks (never null once built)
  std::vector<DeviceWork> work;     // grouped by stream (track), in time order inside each
  std::vector<std::pair<int64_t, int32_t>> by_end;  // (end, index in `work`), sorted
  std::vector<HostCall> calls;      // grouped by thread, in time order inside each
  std::vector<std::pair<int64_t, int32_t>> call_by_correlation;  // sorted
  std::vector<std::pair<int64_t, const profiler::Event*>> op_by_external;  // CPU ops, sorted
  std::vector<int32_t> allocator_calls;  // indices of allocator calls, by thread then time
  std::vector<int32_t> blocking_calls;   // blocking calls, by thread then time
  size_t event_edges = 0;                // device work tied to another stream's by a sync record
  std::vector<ThreadWait> thread_waits;  // by track, then start
  // Each host thread's outermost busy intervals [start, end), merged, in time order.
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> busy_spans;
  // Where a span's events are, so that a pass over a span skips what lies wholly outside it (the
  // replay's graphs cover a few steps and gaps of a long trace). Per block of kSpanBlock
  // consecutive `work`: the earliest of its starts and launches and the latest of its ends and
  // launches; per host thread, per block of kSpanBlock of its events: the latest end.
  static constexpr size_t kSpanBlock = 64;
  std::vector<std::pair<int64_t, int64_t>> work_blocks;
  std::unordered_map<uint32_t, std::vector<int64_t>> thread_block_ends;
  // Whether `work` from i (a block's first) on, for the block, lies wholly outside [lo, hi]: each
  // starts and was launched after hi, or ended and was launched before lo.
  bool WorkBlockOutside(size_t i, int64_t lo, int64_t hi) const {
    if (i % kSpanBlock != 0 || i / kSpanBlock >= work_blocks.size()) return false;
    const auto& [first, last] = work_blocks[i / kSpanBlock];
    return first > hi || last < lo;
  }
  // Whether the host thread's events from k (a block's first) on, for the block, all ended before t.
  bool ThreadBlockEndsBefore(uint32_t track, size_t k, int64_t t) const {
    if (k % kSpanBlock != 0) return false;
    const auto it = thread_block_ends.find(track);
    return it != thread_block_ends.end() && k / kSpanBlock < it->second.size() && it->second[k / kSpanBlock] < t;
  }

  const HostCall* CallOf(const DeviceWork& w) const { return w.call >= 0 ? &calls[w.call] : nullptr; }
  const HostCall* CallByCorrelation(int64_t correlation) const;
  // The CPU op with this External id (the op that made a runtime call), nullptr when none.
  const profiler::Event* OpByExternalId(int64_t external_id) const;
  // The first device activity a call enqueued (the earliest of a graph launch's kernels).
  const DeviceWork* FirstWorkOf(const HostCall& c) const { return c.work >= 0 ? &work[c.work] : nullptr; }
  // The rank's typical launch latency: the median delay from a launch to its work where the stream
  // was idle (0: none seen). A pass over all the rank's work: Derived.
  int64_t TypicalLaunchLatency() const;
  // A value worked out from the rank's whole trace on first use, once, from any thread: every replay
  // graph of the rank (its steps', each gap's) and every transform planned on them share it. One
  // value per type T (a struct of its own per use); make() runs at most once for it.
  template <typename T, typename Make>
  const T& Derived(Make&& make) const {
    return derived_.Get<T>(std::forward<Make>(make));
  }
  // The same, for a value of the whole trace: one for all its ranks (LinkIndex shares it among them;
  // a RankLinks built alone has its own).
  template <typename T, typename Make>
  const T& TraceDerived(Make&& make) const {
    return trace_values ? trace_values->Get<T>(std::forward<Make>(make)) : derived_.Get<T>(std::forward<Make>(make));
  }
  std::shared_ptr<DerivedValues> trace_values;  // shared by the trace's ranks (LinkIndex sets it)

 private:
  mutable DerivedValues derived_;
};

class LinkIndex {
 public:
  // `threads`: how many ranks are built at once (0: the machine's CPUs; one rank uses one).
  explicit LinkIndex(const profiler::Trace& trace, size_t threads = 1);
  // A copy's ranks share values of their own (TraceDerived), made again for it.
  LinkIndex(const LinkIndex& o);
  LinkIndex& operator=(const LinkIndex& o);
  LinkIndex(LinkIndex&&) noexcept = default;
  LinkIndex& operator=(LinkIndex&&) noexcept = default;
  // nullptr for a rank the trace does not hold.
  const RankLinks* Rank(int32_t rank) const;
  const std::vector<RankLinks>& ranks() const { return ranks_; }

 private:
  std::vector<RankLinks> ranks_;
};

// Device work left waiting longer than this with its stream free and its launch call begun waited
// for something else (HTA's kernel-wait threshold: launch latency and back-to-back gaps stay under
// it; critical_path.cc, and the replay's inferred stream waits).
inline constexpr int64_t kDependencyGapNs = 30'000;
// The work on another stream of the same device that device work `i` (RankLinks::work) waited for,
// inferred by time where no sync record says (its waits_on < 0): `i` started more than
// kDependencyGapNs after both its stream's previous work ended and its launch call began, and that
// work, begun before `i`, ended last at or before `i` started and after both. -1: none. The critical
// path and the replay read this one inference.
int32_t InferredStreamWait(const RankLinks& l, int32_t i);

// The loop's thread of a rank: the one holding a range that is the first window (ProfilerStep#N,
// our step marks), else the one busiest inside the windows (in the whole trace without windows).
uint32_t LoopThread(const profiler::Trace& trace, const RankLinks& l, const std::vector<std::pair<int64_t, int64_t>>& windows);

}  // namespace trainrx::analyzers
