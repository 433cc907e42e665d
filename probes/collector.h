// trainrx::probes collector core — the torch-free half of the in-process collector.
//
// Who calls it: the RecordFunction observer (probes/observer.cc, the only torch TU), the C++ API
// (same TU), the CUPTI backend (GPU records arrive through AddGpuRecords), and the unit tests
// (which drive it directly, without LibTorch).
//
// Threading and cost rules (the observed training must never notice us):
//  * Every thread appends to its own ThreadBuffer: no lock on the hot path. A buffer is a fixed
//    array of chunk pointers (chunks never move), so a reader at stop time never sees a
//    reallocation. The only shared write per record is nothing; per chunk, one atomic add on the
//    global budget.
//  * Memory is bounded: max_events records per process (TRAINRX_MAX_EVENTS). Past the budget,
//    records are dropped and counted; the trace says how many.
//  * Every entry point is noexcept; allocation failure drops the record.
//  * Stop() flips `recording` off, then waits (bounded, 200 ms) for each buffer's `busy` flag to
//    clear before reading side tables, so a daemon thread still inside a callback cannot race
//    with the writer.
#pragma once

#include <atomic>
#include <deque>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tick_clock.h"
#include "trainrx/profiler/gpu_records.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::probes {

enum class RecKind : uint8_t {
  kOp,        // ATen op or the autograd engine's per-node range (RecordScope::FUNCTION)
  kUser,      // record_function ranges, Python's DataLoader / Optimizer ranges, our markers
  // An allocation or free reported by c10's allocators (record --memory-events): two records,
  // appended together by ThreadBuffer::AppendMemory, the totals first:
  //   kMemoryTotals  start_ticks = block address, external_id = total allocated, name | aux << 32 =
  //                  total reserved; end_ticks = 1 (finished)
  //   kMemory        start_ticks = end_ticks = time, external_id = bytes (< 0: a free),
  //                  name = device type << 16 | device index (c10's numbering)
  // They reuse the 40-byte record rather than widening every op's record for a rarer event.
  kMemoryTotals,
  kMemory,
};
enum RecFlag : uint8_t {
  kGradEnabled = 1,  // GradMode was on when the op started
};

// One recorded range. 40 bytes; end_ticks is 0 until the end callback writes it, last and with
// release order (EndRecord), so a thread that reads a non-zero end_ticks with acquire order (the
// journal's flusher, while recording goes on) sees every other field written. Times are ticks of
// the owning collector's TickSource (tick_clock.h), turned into ns when drained.
struct Rec {
  int64_t start_ticks = 0;
  int64_t end_ticks = 0;
  int64_t external_id = 0;  // correlation with GPU activity (0: none)
  uint32_t name = 0;        // id in the owning ThreadBuffer's name table
  uint32_t aux = UINT32_MAX;  // index into ThreadBuffer::inputs
  RecKind kind = RecKind::kOp;
  uint8_t flags = 0;
};

// Operator inputs captured during the input window, already in Kineto's text form.
struct RecInputs {
  std::string dims;   // "[[32, 3, 8, 8], [16, 3, 3, 3], [16], []]"
  std::string types;  // "[\"float\", \"float\", \"float\", \"\"]"
  // Kineto's "Concrete Inputs": the scalar and int-list arguments' values, "" for the rest
  // ("[\"\", \"\", \"\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"1\"]"); empty: none recorded.
  std::string concrete;
};

// Exact dataflow seen by the observer: the output of record `from` is an input of record `to`
// (both on this thread), e.g. conv2d -> batch_norm.
struct DataflowEdge {
  uint64_t from = 0;
  uint64_t to = 0;
};

// Marks a record finished (the owner thread, once): see Rec.
inline void EndRecord(Rec* r, int64_t end_ticks) noexcept {
  std::atomic_ref<int64_t>(r->end_ticks).store(end_ticks, std::memory_order_release);
}

class Collector;

class ThreadBuffer {
 public:
  static constexpr uint32_t kChunkRecs = 4096;  // 160 KB per chunk
  static constexpr uint32_t kMaxChunks = 4096;  // chunk pointer array never grows

  ThreadBuffer(Collector* owner, uint32_t index, int64_t tid);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Appends a record and returns it, or nullptr (counted as dropped) past the budget. Inline: a
  // record in the current chunk is a pointer bump (the observer calls it for every op).
  Rec* Append() noexcept {
    if (in_chunk_ == kChunkRecs) return AppendInNewChunk();
    Rec* r = tail_ + in_chunk_++;  // fresh: made default when its chunk was mapped, handed out once
    // Publish after the caller filled it: the caller writes fields, then size_ moves. Readers only
    // look after Stop(), which waits for `busy`, so a relaxed increment plus that handshake is enough.
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // one writer: the owner
    return r;
  }
  // Appends one allocator event (see RecKind::kMemory); false (counted as dropped) past the budget.
  bool AppendMemory(int64_t ts_ticks, int64_t bytes, uint64_t addr, uint64_t total_allocated, uint64_t total_reserved,
                    int device_type, int device_index) noexcept;
  Rec& At(uint64_t i) { return chunks_[i / kChunkRecs][i % kChunkRecs]; }
  const Rec& At(uint64_t i) const { return chunks_[i / kChunkRecs][i % kChunkRecs]; }
  uint64_t size() const { return size_.load(std::memory_order_acquire); }
  uint64_t IndexOf(const Rec* r) const;  // UINT64_MAX if not ours

  // Name interning. Static names (ATen schema names) are keyed by pointer, verified by content
  // so that a reused buffer never yields a wrong name; dynamic names by content.
  uint32_t InternStatic(const char* name) noexcept {
    if (name == nullptr) return 0;
    // A small cache in front of the map: most ops hit it (a loop runs few distinct ops).
    const StaticCacheEntry* set = &static_cache_[2 * StaticSet(name)];
    if (set[0].ptr == name && std::strcmp(set[0].text, name) == 0) return set[0].id;
    if (set[1].ptr == name && std::strcmp(set[1].text, name) == 0) return set[1].id;
    return InternStaticMiss(name);
  }
  uint32_t InternDynamic(std::string_view name) noexcept;
  uint32_t AddInputs(RecInputs in) noexcept;
  void AddEdge(uint64_t from, uint64_t to) noexcept;

  int64_t tid() const { return tid_; }
  uint32_t index() const { return index_; }
  TickSource tick_source() const { return tick_source_; }  // the owner's, for a caller without it
  uint64_t dropped() const { return dropped_; }
  int64_t NextExternalId() noexcept { return (static_cast<int64_t>(index_ + 1) << 40) | ++ext_seq_; }

  // Set while a start callback runs; Stop() waits for it to clear before reading side tables.
  std::atomic<bool> busy{false};

  // The side tables (names, inputs, edges) grow on the owner thread under side_mu(); another
  // thread (the journal's flusher, the assembler) reads them holding it. The owner's own reads
  // take no lock (only it writes).
  std::mutex& side_mu() const { return side_mu_; }
  const std::deque<std::string>& names() const { return names_; }
  const std::deque<RecInputs>& inputs() const { return inputs_; }
  const std::vector<DataflowEdge>& edges() const { return edges_; }

 private:
  Collector* owner_;
  uint32_t index_;
  int64_t tid_;
  TickSource tick_source_;
  Rec* chunks_[kMaxChunks] = {};  // mapped (collector.cc MapChunk), unmapped by the destructor
  uint32_t chunk_count_ = 0;
  uint32_t in_chunk_ = kChunkRecs;  // records used in the last chunk
  Rec* tail_ = nullptr;             // the last chunk
  Rec* AppendInNewChunk() noexcept;
  std::atomic<uint64_t> size_{0};
  uint64_t dropped_ = 0;
  int64_t ext_seq_ = 0;
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, uint32_t> by_content_;
  std::unordered_map<const char*, uint32_t> by_pointer_;
  // Both caches are two-way: a name's pointer (or characters) picks a set of two entries, the
  // newer first. Direct-mapped, a transformer block's ~120 operator names collided in 256 slots
  // (schema names sit at heap addresses a few pages apart): up to ~150 misses a step by the heap's
  // layout, each ~400 instructions through the maps; with two ways and a multiplicative hash ~5
  // a step remain.
  static constexpr size_t kCacheSets = 256;
  static size_t StaticSet(const char* name) noexcept {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ull) >> 56) & (kCacheSets - 1);
  }
  struct StaticCacheEntry {
    const char* ptr = nullptr;
    uint32_t id = 0;
    const char* text = nullptr;  // names_[id]'s characters (a deque's rows never move)
  };
  StaticCacheEntry static_cache_[2 * kCacheSets];
  // In front of the content map, keyed by a hash of the characters: names made afresh for every
  // call (autograd's "evaluate_function: MmBackward0" and the node's own "MmBackward0", each a
  // std::string its RecordFunction owns) come here ~2 per node run (callgrind: about 100
  // instructions less a node than the map's lookup).
  struct ContentCacheEntry {
    const char* text = nullptr;  // names_[id]'s characters
    size_t len = 0;
    uint32_t id = 0;
  };
  ContentCacheEntry content_cache_[2 * kCacheSets];
  uint32_t InternStaticMiss(const char* name) noexcept;  // fills the cache slot
  uint32_t InternStaticSlow(const char* name) noexcept;
  mutable std::mutex side_mu_;
  std::deque<RecInputs> inputs_;  // a deque: a drain keeps rows' addresses (they never move)
  std::vector<DataflowEdge> edges_;
};

// Which steps of the run are recorded, like torch.profiler's schedule(wait, active):
// `skip` steps run unrecorded, then `steps` are recorded (-1: every step to the end), then the
// run goes on unrecorded. `trainrx record --skip K --steps N` (TRAINRX_SKIP_STEPS,
// TRAINRX_STEPS). A process with no step boundaries records everything (the event cap bounds it).
struct StepWindowOptions {
  int64_t skip = 0;
  int64_t steps = -1;
  bool bounded() const { return skip > 0 || steps >= 0; }
};

// A range that marks steps. The first kind seen in a process is the one counted.
enum class BoundaryKind : uint8_t {
  kOptimizerStep,  // "Optimizer.step#...": its end ends a step (steps run from one to the next)
  kStepStart,      // "ProfilerStep#N" or a trainrx::step# marker (MarkStep): it starts a step
};
enum class WindowAction : uint8_t {
  kNone,
  kOpen,        // start recording now; the boundary range is the window's first record
  kCloseAtEnd,  // record this boundary range, stop recording when it ends (WindowClosed)
  kCloseNow,    // stop recording before this boundary: the step it starts is not recorded
};

// The window's state machine: torch-free, any thread (boundaries are rare: a lock).
//
// With boundaries at optimizer steps, recording opens at the start of optimizer step `skip`
// (its end is where step skip+1 starts, so the trace infers all `steps` steps) and closes at the
// end of optimizer step skip+steps (steps+1 from the start: the first step, before any optimizer
// step, is not inferred). With step-start markers, it opens at the start of step
// skip+1 and closes at the start of step skip+steps+1.
class StepWindow {
 public:
  explicit StepWindow(StepWindowOptions options = {});
  const StepWindowOptions& options() const { return options_; }
  bool starts_open() const { return options_.skip <= 0; }

  WindowAction OnBoundary(BoundaryKind kind, int64_t now_ns) noexcept;
  void MarkClosed(int64_t now_ns) noexcept;

  struct State {
    bool opened = false, closed = false;
    int64_t open_ns = 0;   // 0 with starts_open(): from the start of the session
    int64_t close_ns = 0;  // 0 while open
    int64_t boundaries = 0;  // of the counted kind, in the whole run
    int kind = -1;           // BoundaryKind counted; -1: none seen
    // Whether an event at `ts_ns` falls inside the window as it stands.
    bool Covers(int64_t ts_ns) const { return opened && ts_ns >= open_ns && (!closed || ts_ns <= close_ns); }
  };
  State state() const;
  // Whether an event at `ts_ns` falls inside what was recorded (always true when unbounded).
  bool Covers(int64_t ts_ns) const;

 private:
  StepWindowOptions options_;
  mutable std::mutex mu_;
  State state_;
};

struct CollectorOptions {
  uint64_t max_events = 4'000'000;  // about 160 MB of records at most
  StepWindowOptions window;
  // What Rec times are (tick_clock.h): the session passes DetectTickSource(); kRealtime (ns) by
  // default, so that tests write ns.
  TickSource ticks = TickSource::kRealtime;
};

// Where a drain got to: which records of each buffer were emitted, which were still open, and
// the side tables' positions. One per consumer (the journal; Assemble uses a fresh one).
struct DrainCursor {
  struct Buffer {
    uint64_t next = 0;               // records below this were seen
    std::vector<uint64_t> open;      // ... except these, unfinished when seen
    std::vector<const std::string*> names;  // the buffer's names seen so far (stable addresses)
    std::vector<const RecInputs*> inputs;   // its input rows seen so far
    size_t edges = 0;                // edges below this were looked at
    std::vector<DataflowEdge> pending_edges;  // an end still open
    int last_grad = -1;
    bool named = false;              // thread name emitted
  };
  std::vector<Buffer> buffers;
  size_t samples = 0;
  size_t gpu_records = 0;
  size_t gpu_external = 0;
  std::unordered_map<int64_t, int64_t> external_ids;  // GPU correlation -> op's external id, seen so far
  bool gpu_devices = false;  // device properties emitted
  int64_t next_flow_id = 1;
  uint64_t unfinished = 0;  // final drain: ranges closed at stop time
};

// A configuration value change seen at a step boundary ("trainrx.config.anomaly_mode" = 1).
struct ConfigSample {
  int64_t ts_ns = 0;
  uint32_t buffer = 0;  // thread that took the snapshot
  std::string key;
  double value = 0;
};

class Collector {
 public:
  explicit Collector(CollectorOptions options = {});

  // The calling thread's buffer (created and registered on first use), or nullptr when not
  // recording or out of memory.
  ThreadBuffer* ThisThread() noexcept;

  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // The time a Rec holds (options.ticks): the TSC, or NowNs().
  int64_t NowTicks() const noexcept { return ReadTicks(options_.ticks); }
  TickSource tick_source() const { return options_.ticks; }
  void SetRecording(bool on) { recording_.store(on, std::memory_order_seq_cst); }

  // Budget shared by all threads; one atomic add per chunk.
  bool ReserveChunk() noexcept;
  // A record dropped: the first drop's time is kept (the trace says how much of the run it holds).
  void NoteDrop() noexcept {
    if (first_drop_ns_.load(std::memory_order_relaxed) != 0) return;
    int64_t none = 0;
    first_drop_ns_.compare_exchange_strong(none, NowNs(), std::memory_order_relaxed);
  }
  // Heap bytes the journal's flusher holds (its reusable fragment and frame buffer, journal.cc):
  // the heap samples at step boundaries (observer.cc SampleHeap) leave them out. A flusher starved
  // of CPU (SCHED_IDLE on busy cores) drains more at each flush, and its buffers grew with the run:
  // nanoGPT on 2 cores read as a leak of 554 kB a step that the unobserved run does not have (flat
  // at 141.8 MB over 200 steps). The record chunks are mapped outside malloc (MapChunk).
  void SetJournalBytes(uint64_t bytes) noexcept { journal_bytes_.store(bytes, std::memory_order_relaxed); }
  // A journal flush is building its buffers (not yet in SetJournalBytes): heap samples wait.
  void SetFlushing(bool on) noexcept { flushing_.store(on, std::memory_order_relaxed); }
  bool Flushing() const noexcept { return flushing_.load(std::memory_order_relaxed); }
  // What the heap samples leave out of malloc's figure: the journal's buffers and the config samples.
  uint64_t OwnHeapBytes() const noexcept {
    return journal_bytes_.load(std::memory_order_relaxed) + sample_bytes_.load(std::memory_order_relaxed);
  }

  // Config: `static_config` is written once into the trace's "trainrx" block (JSON values);
  // Sample() records a numeric value over time and stores a counter only when it changes.
  void SetStatic(const std::string& key, std::string json_value);
  void Sample(ThreadBuffer* buf, const std::string& key, double value, int64_t ts_ns) noexcept;
  // n samples at one instant, under one lock (a step boundary's config snapshot, a CPU reading).
  void Sample(ThreadBuffer* buf, const std::string* keys, const double* values, size_t n, int64_t ts_ns) noexcept;
  std::string Static(const std::string& key) const;

  // The step window (record --steps). OnStepBoundary applies kOpen / kCloseNow to recording;
  // the caller applies kCloseAtEnd by calling WindowClosed when the boundary range ends.
  const StepWindow& window() const { return window_; }
  WindowAction OnStepBoundary(BoundaryKind kind) noexcept;
  void WindowClosed() noexcept;

  // GPU activity converted by the CUPTI backend, as CUPTI hands its buffers back during the run
  // (any thread; takes a lock, off the hot path). With a bounded step window, only what the
  // window covers is kept: runtime and driver calls made inside it and the device activity they
  // launched (by correlation id); the rest is counted as outside the window (not a loss), as
  // soon as that is certain, so a long run does not hold its GPU records until it ends. At most
  // options.max_events records (and as many correlations) are held; the rest are counted as
  // gpu_records_over_cap (a loss). After Assemble, nothing more is kept.
  void AddGpuRecords(profiler::GpuRecords records) noexcept;
  size_t GpuRecordsHeld() const;  // kept + undecided (tests, memory)
  void CountGpuDropped(uint64_t n) noexcept { gpu_dropped_ += n; }

  // Stops recording, waits (bounded) for callbacks in flight, and assembles the model: one rank,
  // one CPU track per thread, GPU tracks from AddGpuRecords, counters for config changes and grad
  // mode, flows for dataflow edges, collector losses in trace.stats. `stop_ns` closes ranges that
  // never ended (marked in stats as "unfinished_ranges").
  profiler::Trace Assemble(int32_t rank, int64_t stop_ns);

  // While recording goes on (any one thread at a time; takes mu_ briefly): appends to `trace`
  // what finished since `cursor` (records, their inputs and dataflow, config samples, GPU
  // records), and moves the cursor. Ranges still open are emitted by a later drain. `final`
  // (Assemble, after Stop) emits open ranges too, closed at `stop_ns`.
  void Drain(profiler::Trace& trace, int32_t rank, DrainCursor& cursor, bool final = false, int64_t stop_ns = 0);
  // The static config as set so far (the journal's header).
  std::vector<std::pair<std::string, std::string>> StaticConfig() const;

  uint64_t TotalDropped() const;
  uint64_t TotalRecords() const;
  size_t ThreadCount() const;

 private:
  CollectorOptions options_;
  uint64_t generation_;
  std::atomic<bool> recording_{false};
  std::atomic<uint64_t> chunks_reserved_{0};
  std::atomic<int64_t> first_drop_ns_{0};  // when a record was first dropped (NowNs); 0: never
  std::atomic<uint64_t> journal_bytes_{0};
  std::atomic<uint64_t> sample_bytes_{0};
  std::atomic<bool> flushing_{false};  // samples_ and their keys' heap bytes (under mu_ when written)
  uint64_t sample_key_bytes_ = 0;
  std::atomic<uint64_t> gpu_dropped_{0};
  StepWindow window_;
  mutable std::mutex mu_;  // guards everything below
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  std::vector<std::pair<std::string, std::string>> static_config_;
  std::vector<ConfigSample> samples_;
  std::unordered_map<std::string, double> last_sample_;
  TickMap tick_map_;  // a pair from the start, one more from every drain
  profiler::GpuRecords gpu_;
  uint64_t gpu_outside_window_ = 0;
  uint64_t gpu_over_cap_ = 0;
  bool assembled_ = false;
  std::unordered_set<int64_t> window_correlations_;  // CPU-side GPU calls made inside the window
  // Device work whose launching call has not arrived yet (window opened, work ended after that).
  std::vector<profiler::GpuRecord> pending_gpu_;
  // Moves pending records whose call was made inside the window to gpu_; `final`: the rest are
  // outside it. Caller holds mu_.
  void ResolvePendingGpu(bool final);
};

}  // namespace trainrx::probes
