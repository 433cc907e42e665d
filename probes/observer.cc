// The RecordFunction observer, the torch-side config snapshot, and the C++ API. This is the only
// translation unit of probes/ that includes LibTorch headers (each costs ~20 s to compile on the
// 2-core machines): everything torch-free lives in collector.cc / session.cc.
//
// Builds against LibTorch 1.13 (Debian) and 2.x (pip wheels); version differences are guarded
// with TORCH_VERSION_* below.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/AutogradState.h>
#include <c10/core/GradMode.h>
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "collector.h"
#include "cupti_bridge.h"
#include "session.h"
#include "trainrx/probes/probes.h"
#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/env.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/memory_counters.h"

#if TRAINRX_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include <c10/core/CPUAllocator.h>
#include <pthread.h>

namespace trainrx::probes {
namespace {

struct ObserverState {
  std::mutex mu;  // registration only
  bool registered = false;
  at::CallbackHandle handle = 0;
  std::atomic<bool> capturing_inputs{false};
  int input_capture_steps = 3;
  // Step boundaries seen, by kind: a step's start (tp::MarkStep, ProfilerStep#) and its optimizer
  // step (Optimizer.step#). A loop may mark both (our C++ workloads do), so each kind counts steps
  // on its own: counted together, a step was two, and the shapes stopped after its first step.
  std::atomic<int> step_starts{0}, optimizer_steps{0};
  std::atomic<Rec*> current_step{nullptr};
  // The heap is sampled again at the first backward op after a boundary (issue 36): activations
  // are all alive then, so the step's peak is seen, not only what the step starts and ends with.
  std::atomic<bool> backward_sampled{true};
  // Outside the step window (before it opens, after it closes) the callback is registered for
  // user ranges only: ATen ops skip it, and the boundaries that open the window are still seen.
  bool user_only = false;
  // Benchmarks only (trainrx_probe_pause): the callback registered but disabled, so that one process
  // compares its steps with and without the observer (bench/record_interleaved.py).
  bool paused = false;
};
ObserverState& State() {
  static ObserverState* s = new ObserverState();  // never destroyed: callbacks may run at exit
  return *s;
}

// The session's collector, set by Start() once the session began (a session, once begun, stays
// active with the same collector): one load per op, where asking the session took its guarded
// static and two more loads.
std::atomic<Collector*> g_collector{nullptr};
Collector* ActiveCollector() noexcept { return g_collector.load(std::memory_order_acquire); }

// RAII for ThreadBuffer::busy (Stop() waits for it).
// The flag is set with a plain store, not a sequentially consistent one (an `xchg`, a locked
// instruction on every op): nothing here reads `recording` again after setting it, so the order
// bought nothing. A callback that read `recording` just before Assemble cleared it could always
// set the flag after Assemble looked; a plain store only keeps its `true` in this core's store
// buffer a few ns longer. What the wait does guarantee is unchanged: once Assemble sees the flag
// set, it sees, after the release store that clears it, everything the callback wrote.
struct BusyGuard {
  explicit BusyGuard(ThreadBuffer* b) : b_(b) { b_->busy.store(true, std::memory_order_relaxed); }
  ~BusyGuard() { b_->busy.store(false, std::memory_order_release); }
  ThreadBuffer* b_;
};

// Start and end of one RecordFunction are paired through a per-thread stack keyed by the
// RecordFunction's address, not through an ObserverContext: returning a context costs a heap
// allocation per op. An end whose start is not on top (ended on another thread, or out of
// order) is searched a few entries down; if not found, the range is closed at stop time and
// counted as unfinished.
// 24 bytes, written at every start and read at every end (the thread's buffer is the stack's).
enum OpenFlag : uint8_t {
  kProducer = 1,        // a conv/linear whose output we remember (input window only)
  kPushedExternal = 2,  // an external correlation id was pushed to CUPTI
  kClosesWindow = 4,    // the step window's last optimizer step: recording stops at its end
};
struct Open {
  const at::RecordFunction* fn;
  Rec* rec;
  uint8_t flags;
};
constexpr int kMaxOpen = 256;
struct OpenStack {
  Open items[kMaxOpen];
  int size = 0;
  // This thread's grad mode, read per op: c10's thread-local AutogradState, whose address is
  // fixed for the thread's life (set_tls_state assigns into it). Reading it through
  // c10::GradMode::is_enabled() cost a call into libc10 and a __tls_get_addr per op.
  const c10::AutogradState* autograd = nullptr;
  // This thread's buffer in the session's collector (the only one the observer records into),
  // once Collector::ThisThread() made it: every open range's record is in it.
  ThreadBuffer* buf = nullptr;
  bool tsc = false;  // buf's ticks are the TSC
};
// initial-exec TLS: a pointer only (the library is dlopen'ed, so it must fit glibc's small
// static-TLS surplus); avoids a __tls_get_addr call per access in this PIC library.
thread_local OpenStack* t_open_ptr __attribute__((tls_model("initial-exec"))) = nullptr;
OpenStack* OpenStackOfThread() noexcept {
  if (t_open_ptr != nullptr) return t_open_ptr;
  t_open_ptr = new (std::nothrow) OpenStack();  // one per thread, lives with the process
  if (t_open_ptr != nullptr) t_open_ptr->autograd = &c10::AutogradState::get_tls_state();
  return t_open_ptr;
}

bool StartsWith(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

bool IsProducer(const char* n) {
  return std::strcmp(n, "aten::conv1d") == 0 || std::strcmp(n, "aten::conv2d") == 0 ||
         std::strcmp(n, "aten::conv3d") == 0 || std::strcmp(n, "aten::linear") == 0;
}
// The bias add of LibTorch's C++ Linear (matmul, then `output += bias`) and of addmm: a 1-D
// tensor added along the last dimension.
bool IsBiasAdd(const char* n, c10::ArrayRef<const c10::IValue> in) {
  const bool add = std::strcmp(n, "aten::add_") == 0, addmm = std::strcmp(n, "aten::addmm") == 0;
  if (!add && !addmm) return false;
  const size_t bias = add ? 1 : 0, base = add ? 0 : 1;
  if (in.size() <= std::max(bias, base) || !in[bias].isTensor() || !in[base].isTensor()) return false;
  const at::Tensor& b = in[bias].toTensor();
  const at::Tensor& x = in[base].toTensor();
  return b.defined() && x.defined() && b.dim() == 1 && x.dim() >= 2 && (add ? x.size(-1) == b.size(0) : true);
}

// Ops whose FLOPs and bytes the analysis models from their input shapes (analyzers/cost/flops.h, issue
// 52): their inputs are recorded too (in the steps where inputs are captured at all). Elementwise
// ops are left out: many calls, little of a step's FLOPs.
bool IsCosted(const char* n) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::_scaled_mm",
      "aten::convolution_backward", "aten::cudnn_convolution_backward", "aten::miopen_convolution_backward",
      "aten::native_layer_norm_backward", "aten::native_batch_norm_backward", "aten::native_group_norm_backward",
      "aten::_fused_rms_norm", "aten::_fused_rms_norm_backward", "aten::rms_norm",
      "aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax", "aten::_softmax_backward_data",
      "aten::_log_softmax_backward_data", "aten::cross_entropy_loss", "aten::embedding", "aten::embedding_dense_backward",
      "aten::scaled_dot_product_attention", "aten::_efficient_attention_backward"};
  return kNames.count(n) > 0 || StartsWith(n, "aten::_scaled_dot_product_");
}

bool IsNorm(const char* n) {
  return std::strcmp(n, "aten::batch_norm") == 0 || std::strcmp(n, "aten::layer_norm") == 0 ||
         std::strcmp(n, "aten::group_norm") == 0 || std::strcmp(n, "aten::instance_norm") == 0;
}

// Tensor identity for dataflow: the TensorImpl plus its data pointer (an impl address reused for
// a new tensor would also need the same storage address to be confused).
struct TensorKey {
  const void* impl;
  const void* data;
  bool operator==(const TensorKey&) const = default;
};
struct TensorKeyHash {
  size_t operator()(const TensorKey& k) const noexcept {
    return std::hash<const void*>()(k.impl) * 31 + std::hash<const void*>()(k.data);
  }
};
thread_local std::unordered_map<TensorKey, uint64_t, TensorKeyHash> t_recent_outputs;

TensorKey KeyOf(const at::Tensor& t) {
  const void* data = nullptr;
  if (t.has_storage()) data = t.storage().data();
  return {t.unsafeGetTensorImpl(), data};
}

// A scalar or int-list argument's value as Kineto's "Concrete Inputs" writes it ("1", "[2, 2]",
// "True", "0.5"); "" for everything else, but for a 4-D (5-D) tensor laid out channels-last and not
// also contiguous: "channels_last" ("channels_last_3d"), the layout that model.channels_last reads
// (issue 60.4; torch.profiler writes "" for every tensor: there the layout is unknown).
std::string ConcreteOf(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.is_contiguous()) return "";
    if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) return "channels_last";
    if (t.dim() == 5 && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) return "channels_last_3d";
    return "";
  }
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isDouble()) return std::to_string(v.toDouble());
  if (v.isIntList()) {
    std::string s = "[";
    for (int64_t x : v.toIntList()) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
    return s + "]";
  }
  if (v.isBoolList()) {
    std::string s = "[";
    for (bool x : v.toBoolList()) s += std::string(s.size() > 1 ? ", " : "") + (x ? "True" : "False");
    return s + "]";
  }
  return "";
}

// Kineto's text forms: "Input Dims" [[32, 3, 8, 8], [16], []], "Input type" ["float", ""] and
// "Concrete Inputs" ["", "[2, 2]", "1"].
RecInputs DescribeInputs(c10::ArrayRef<const c10::IValue> inputs) {
  RecInputs out;
  out.dims = "[";
  out.types = "[";
  out.concrete = "[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) {
      out.dims += ", ";
      out.types += ", ";
      out.concrete += ", ";
    }
    const c10::IValue& v = inputs[i];
    out.concrete += "\"" + ConcreteOf(v) + "\"";
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      out.dims += "[";
      for (int64_t d = 0; d < t.dim(); ++d) {
        if (d) out.dims += ", ";
        out.dims += std::to_string(t.sizes()[d]);
      }
      out.dims += "]";
      out.types += "\"" + std::string(t.dtype().name()) + "\"";
    } else {
      out.dims += "[]";
      out.types += v.isNone() ? "\"\"" : "\"" + std::string(v.tagKind()) + "\"";
    }
  }
  out.dims += "]";
  out.types += "]";
  out.concrete += "]";
  return out;
}

void SnapshotConfig(ThreadBuffer* buf, int64_t ts) noexcept;
void MaybeStopInputCapture(BoundaryKind kind) noexcept;
void StopInputCaptureWithoutSteps() noexcept;
// Ops seen with inputs on this thread; past the bound with no step seen, input capture stops.
constexpr uint32_t kInputCaptureOpsWithoutSteps = 200'000;
thread_local uint32_t t_ops_with_inputs __attribute__((tls_model("initial-exec"))) = 0;
void AfterWindowChange(Collector& c, WindowAction action) noexcept;
// Closes the step window here (the end of its last optimizer step, or where that end cannot be seen).
void CloseWindowNow(Collector& c) noexcept {
  c.WindowClosed();
  AfterWindowChange(c, WindowAction::kCloseNow);
}

// The step boundary a user range marks, if any.
// The start-up hook's "take the boundary's samples now" range (trainrx_hook_marks.py).
constexpr char kSampleMark[] = "trainrx::sample";

bool BoundaryOf(const char* name, BoundaryKind* kind) {
  if (StartsWith(name, "Optimizer.step#")) *kind = BoundaryKind::kOptimizerStep;
  else if (StartsWith(name, "ProfilerStep#")) *kind = BoundaryKind::kStepStart;
  else return false;
  return true;
}

void SampleHeap(Collector& c, ThreadBuffer* buf, int64_t ts) noexcept;  // below

// record --memory-events (TRAINRX_MEMORY_EVENTS=1): every allocation and free of the CPU
// allocator, with its block address and size: the stream torch.profiler's profile_memory=True
// records, seen by wrapping the allocator (c10::SetCPUAllocator) rather than through c10's
// memory-reporting hook. That hook is the thread's PROFILER_STATE slot: a state of ours there makes
// torch.profiler refuse to start on that thread ("Profiler is already enabled on this thread"),
// and a user who runs torch.profiler under `record` must keep it. The wrapper passes every call
// through; it tracks a block only while recording, and only the allocator's common shape (the
// context is the data pointer, one deleter for all blocks: the default CPU allocator's), whose
// free it can see by putting its own deleter in the DataPtr. A free is written before the block
// goes back, so a reuse of its address is always later in the trace. CUDA's caching allocator is
// not wrapped (the CUDA marks give its figures at step ends).
bool MemoryEventsRequested() {
  static const bool on = [] {
    const char* v = std::getenv(trainrx::env::kMemoryEvents);
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// The tracked blocks' sizes (a free's size and the running total), sharded by address so that
// threads allocating at once rarely share a lock; locked across fork() (a DataLoader worker forked
// while another thread held a shard would otherwise wait forever on its first allocation).
class BlockTable {
 public:
  static constexpr size_t kShards = 16;
  void Add(void* p, size_t n) {
    Shard& s = ShardOf(p);
    std::lock_guard<std::mutex> lock(s.mu);
    s.sizes[p] = n;
  }
  size_t Remove(void* p) {  // 0: not tracked
    Shard& s = ShardOf(p);
    std::lock_guard<std::mutex> lock(s.mu);
    const auto it = s.sizes.find(p);
    if (it == s.sizes.end()) return 0;
    const size_t n = it->second;
    s.sizes.erase(it);
    return n;
  }
  void LockAll() {
    for (Shard& s : shards_) s.mu.lock();
  }
  void UnlockAll() {
    for (Shard& s : shards_) s.mu.unlock();
  }
  std::atomic<int64_t> total{0};  // bytes of the tracked blocks

 private:
  struct Shard {
    std::mutex mu;
    std::unordered_map<void*, size_t> sizes;
  };
  Shard& ShardOf(void* p) { return shards_[(reinterpret_cast<uintptr_t>(p) >> 6) % kShards]; }
  Shard shards_[kShards];
};
BlockTable& Blocks() {
  static BlockTable* t = new BlockTable();  // never destroyed: blocks are freed at exit
  return *t;
}
std::atomic<c10::DeleterFnPtr> g_inner_deleter{nullptr};

void ReportBlock(void* p, int64_t bytes, int64_t total) noexcept {
  Collector* c = ActiveCollector();
  if (c == nullptr || !c->recording()) return;
  ThreadBuffer* b = c->ThisThread();
  if (b == nullptr) return;
  BusyGuard busy(b);
  b->AppendMemory(c->NowTicks(), bytes, reinterpret_cast<uintptr_t>(p), static_cast<uint64_t>(std::max<int64_t>(0, total)), 0,
                  /*cpu*/ 0, -1);
}

void RecordingDelete(void* p) {
  if (p != nullptr) {
    if (const size_t n = Blocks().Remove(p)) {
      const int64_t total = Blocks().total.fetch_sub(static_cast<int64_t>(n)) - static_cast<int64_t>(n);
      ReportBlock(p, -static_cast<int64_t>(n), total);
    }
  }
  g_inner_deleter.load(std::memory_order_relaxed)(p);
}

#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 3 || TORCH_VERSION_MAJOR > 2
#define TRAINRX_ALLOCATE_CONST
#else
#define TRAINRX_ALLOCATE_CONST const
#endif
class RecordingCpuAllocator final : public c10::Allocator {
 public:
  explicit RecordingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) TRAINRX_ALLOCATE_CONST override {
    c10::DataPtr p = inner_->allocate(n);
    const Collector* c = ActiveCollector();
    if (n == 0 || p.get() == nullptr || c == nullptr || !c->recording()) return p;
    const c10::DeleterFnPtr inner = g_inner_deleter.load(std::memory_order_relaxed);
    if (p.get() != p.get_context() || !p.compare_exchange_deleter(inner, &RecordingDelete)) return p;
    Blocks().Add(p.get(), n);
    const int64_t total = Blocks().total.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    ReportBlock(p.get(), static_cast<int64_t>(n), total);
    return p;
  }
  // raw_allocate() hands out allocate()'s block without its DataPtr; raw_deallocate() must then see its free.
  c10::DeleterFnPtr raw_deleter() const override { return &RecordingDelete; }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }
#endif

 private:
  c10::Allocator* inner_;
};

// Puts the wrapper in front of the CPU allocator once (at Start, when asked). False, with the
// reason on stderr, when the allocator is not of the shape the wrapper can follow.
bool InstallMemoryEvents() {
  static bool installed = false;
  if (installed) return true;
  c10::Allocator* inner = c10::GetCPUAllocator();
  if (inner == nullptr) return false;
  c10::DataPtr sample = inner->allocate(64);
  if (sample.get() == nullptr || sample.get() != sample.get_context() || sample.get_deleter() == nullptr ||
      inner->raw_deleter() != sample.get_deleter()) {
    ProcessSession::Warn("--memory-events: the CPU allocator in use is not one trainrx can follow; no allocation events");
    return false;
  }
  g_inner_deleter.store(sample.get_deleter());
  static auto* wrapper = new RecordingCpuAllocator(inner);  // never destroyed: blocks keep its deleter
  pthread_atfork([] { Blocks().LockAll(); }, [] { Blocks().UnlockAll(); }, [] { Blocks().UnlockAll(); });
  c10::SetCPUAllocator(wrapper, /*priority=*/UINT8_MAX);
  installed = true;
  return true;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  Collector* c = ActiveCollector();
  if (c == nullptr) return nullptr;
  const at::RecordScope scope = fn.scope();
  // Not recording: only a user range can be the boundary that opens the step window.
  if (!c->recording() && scope != at::RecordScope::USER_SCOPE) return nullptr;
  try {
    const char* name = fn.name();
    if (name == nullptr) return nullptr;
    BoundaryKind boundary = BoundaryKind::kStepStart;
    const bool is_boundary = scope == at::RecordScope::USER_SCOPE && BoundaryOf(name, &boundary);
    bool closes_window = false;
    if (is_boundary && c->window().options().bounded()) {
      const WindowAction action = c->OnStepBoundary(boundary);
      AfterWindowChange(*c, action);
      closes_window = action == WindowAction::kCloseAtEnd;
    }
    if (!c->recording()) return nullptr;
    OpenStack* const open = OpenStackOfThread();
    ThreadBuffer* b = open != nullptr && open->buf != nullptr ? open->buf : c->ThisThread();
    if (b == nullptr) {
      if (closes_window) CloseWindowNow(*c);  // the closing boundary cannot be recorded: close at its start
      return nullptr;
    }
    if (open != nullptr && open->buf != b) {
      open->buf = b;
      open->tsc = b->tick_source() == TickSource::kTsc;
    }
    BusyGuard busy(b);
    // The engine's per-node range ("autograd::engine::evaluate_function: XBackward0") is told by
    // two characters ("au": none of torch's operator namespaces starts so; a user's op that does
    // only takes the content cache below, and the heap test spells the prefix out). The choice only
    // routes the name's lookup: both caches verify the characters.
    const bool engine_name = scope == at::RecordScope::FUNCTION && name[0] == 'a' && name[1] == 'u';
    if (engine_name && !State().backward_sampled.load(std::memory_order_relaxed) &&
        StartsWith(name, "autograd::engine::evaluate_function") && !State().backward_sampled.exchange(true))
      SampleHeap(*c, b, NowNs());
    // Python's record_function enters through an op of its own; the range itself follows.
    if (name[0] == 'p' && StartsWith(name, "profiler::")) return nullptr;
    // The start-up hook's sampling point in a loop with no boundary of its own (parameters updated
    // by hand, no DataLoader: issue 81.4): the boundary's samples (configuration, heap, CPU wait),
    // no record.
    if (scope == at::RecordScope::USER_SCOPE && name[0] == 't' && std::strcmp(name, kSampleMark) == 0) {
      SnapshotConfig(b, NowNs());
      return nullptr;
    }
    Rec* r = b->Append();
    if (r == nullptr) {
      if (closes_window) CloseWindowNow(*c);  // past the event cap: its end would never be seen
      return nullptr;
    }
    bool producer = false;
    if (scope == at::RecordScope::USER_SCOPE) {
      r->kind = RecKind::kUser;
      r->name = b->InternDynamic(name);
      // Step boundaries of a Python loop (no code change): the optimizer step and the loader.
      if (is_boundary || StartsWith(name, "enumerate(DataLoader)#")) {
        SnapshotConfig(b, NowNs());
        if (is_boundary) MaybeStopInputCapture(boundary);
      }
    } else {
      r->kind = RecKind::kOp;
      // An operator's name is its schema's, at one address for the run: the pointer-keyed cache.
      // A name LibTorch makes per call lives in the RecordFunction itself, at an address that
      // changes (or is reused by another name): the autograd engine's "autograd::engine::
      // evaluate_function: XBackward0", once per node (147 of a transformer block step's ~970
      // records, each missing the pointer cache and evicting an operator's slot there: ~400
      // instructions apiece). Those go straight to the content cache.
      r->name = engine_name ? b->InternDynamic(name) : b->InternStatic(name);
      // Grad mode only: the drain writes its changes as trainrx.grad_enabled; nothing read the
      // inference-mode flag this used to take too (a second call into libc10 per op).
      const bool grad = open != nullptr ? open->autograd->get_grad_mode() : c10::GradMode::is_enabled();
      r->flags = grad ? kGradEnabled : 0;
      // A program whose steps we never see (manual updates instead of torch.optim, an inference
      // loop, LibTorch without tp::MarkStep) would box every op's inputs for the whole run.
      if (fn.needsInputs() && ++t_ops_with_inputs == kInputCaptureOpsWithoutSteps) StopInputCaptureWithoutSteps();
      if (fn.needsInputs() && name[0] == 'a') {
        const bool norm = IsNorm(name);
        const auto inputs = fn.inputs();
        producer = IsProducer(name) || IsBiasAdd(name, inputs);
        if (norm || producer || IsCosted(name)) {
          r->aux = b->AddInputs(DescribeInputs(inputs));
          if (norm && !inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().defined()) {
            auto it = t_recent_outputs.find(KeyOf(inputs[0].toTensor()));
            if (it != t_recent_outputs.end()) {
              b->AddEdge(it->second, b->IndexOf(r));
              t_recent_outputs.erase(it);
            }
          }
        }
      }
    }
    bool pushed = false;
    if (CuptiBridge::Active()) {
      r->external_id = b->NextExternalId();
      pushed = CuptiBridge::PushExternalId(r->external_id);
    }
    if (open && open->size < kMaxOpen) {
      open->items[open->size++] = {&fn, r,
                                   static_cast<uint8_t>((producer ? kProducer : 0) | (pushed ? kPushedExternal : 0) |
                                                        (closes_window ? kClosesWindow : 0))};
    } else if (closes_window) {
      CloseWindowNow(*c);  // its end cannot be seen: the window closes at its start
    }
    r->start_ticks = c->NowTicks();  // last: our own work above is not charged to the op
    return nullptr;
  } catch (...) {
    return nullptr;  // never let an exception reach the observed program
  }
}

// A producer's output, remembered for the dataflow edge to the norm that reads it. Out of line:
// OnEnd stays a small function that saves no registers.
__attribute__((noinline)) void RememberOutput(const at::RecordFunction& fn, const ThreadBuffer& buf, const Rec* rec) noexcept {
  try {
    const auto& outs = fn.outputs();
    if (!outs.empty() && outs[0].isTensor() && outs[0].toTensor().defined()) {
      if (t_recent_outputs.size() > 4096) t_recent_outputs.clear();  // bounded
      t_recent_outputs[KeyOf(outs[0].toTensor())] = buf.IndexOf(rec);
    }
  } catch (...) {
  }
}

__attribute__((noinline)) void AfterOpenEnd(const at::RecordFunction& fn, const OpenStack& st, const Open& open) noexcept {
  if (open.flags & kPushedExternal) CuptiBridge::PopExternalId();
  if (open.flags & kClosesWindow) {
    if (Collector* c = ActiveCollector()) CloseWindowNow(*c);
  }
  if (open.flags & kProducer) RememberOutput(fn, *st.buf, open.rec);
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  // First, so that the callbacks' work after it is not the op's; a collector whose ticks are not
  // the TSC reads its clock below instead (the TSC read is wasted there, one instruction).
  const int64_t tsc = ReadTsc();
  if (t_open_ptr == nullptr) return;
  OpenStack& st = *t_open_ptr;
  int i = st.size - 1;
  for (int depth = 0; i >= 0 && depth < 4 && st.items[i].fn != &fn; --i, ++depth) {
  }
  if (i < 0 || st.items[i].fn != &fn) return;
  const Open open = st.items[i];
  for (int j = i; j + 1 < st.size; ++j) st.items[j] = st.items[j + 1];
  --st.size;
  EndRecord(open.rec, st.tsc ? tsc : NowNs());
  if (open.flags != 0) AfterOpenEnd(fn, st, open);
}

std::unique_ptr<at::ObserverContext> OnStartNoop(const at::RecordFunction&) { return nullptr; }
void OnEndNoop(const at::RecordFunction&, at::ObserverContext*) {}

at::CallbackHandle Register(bool with_inputs, bool user_only = false) {
  // TRAINRX_PROBE_FLOOR=1 (benchmarks only): a callback that records nothing, to measure what
  // LibTorch's RecordFunction machinery itself costs per op.
  static const bool floor = std::getenv("TRAINRX_PROBE_FLOOR") != nullptr;
  auto cb = floor ? at::RecordFunctionCallback(&OnStartNoop, &OnEndNoop) : at::RecordFunctionCallback(&OnStart, &OnEnd);
  // The floor never sees a step boundary, so it would box inputs for the whole run: it boxes none.
  if (with_inputs && !user_only && !floor) cb.needsInputs(true).needsOutputs(true);
  // Only the two scopes a training step's analysis reads (ops, with the autograd engine's per-node
  // ranges, and user ranges; not the autograd nodes' own BACKWARD_FUNCTION ranges, TorchScript's
  // function calls, mobile's interpreter, the static runtime, custom classes or kernel dtype tags):
  // LibTorch rebuilds every scope's callback list whenever a thread's RecordFunction state is set
  // (the autograd engine does it for every node it runs), and a scope without the callback costs
  // that rebuild no allocation (callgrind, a transformer block's step: +0.53 M instructions over
  // plain for 162 such rebuilds with all eleven scopes, +0.28 M with four; TorchScript's scope
  // alone was 54 k of it). A node's own range ("AddmmBackward0") lies inside the engine's
  // "autograd::engine::evaluate_function: AddmmBackward0" (FUNCTION), which names the same node and
  // is what the analyzers read (phases, steps, recomputation); observing it cost a second record and
  // a scope rebuild per node. The ops a TorchScript function runs are recorded (FUNCTION); its own
  // call's range is not, and no analysis reads it (TorchScript is deprecated).
  if (user_only) {
    cb.scopes({at::RecordScope::USER_SCOPE});
  } else {
    cb.scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE});
  }
  return at::addGlobalCallback(std::move(cb));
}

// After the step window opened or closed: the callback follows (user ranges only while not
// recording), and the close is said once, on stderr (rank 0 or a process without a rank).
void AfterWindowChange(Collector& c, WindowAction action) noexcept {
  if (action == WindowAction::kNone) return;
  ObserverState& st = State();
  try {
    std::lock_guard<std::mutex> lock(st.mu);
    const bool user_only = !c.recording();
    if (st.registered && st.user_only != user_only) {
      // Safe inside a callback: a running RecordFunction holds its own copy of the callback list.
      at::removeCallback(st.handle);
      st.handle = Register(st.capturing_inputs.load(), user_only);
      st.user_only = user_only;
      if (st.paused) at::disableCallback(st.handle);
    }
  } catch (...) {
  }
  if (action != WindowAction::kCloseNow || ProcessSession::Get().rank() > 0) return;
  const StepWindowOptions& w = c.window().options();
  ProcessSession::Warn("recorded steps " + std::to_string(w.skip + 1) + "-" + std::to_string(w.skip + w.steps) +
                       " (TRAINRX_STEPS=" + std::to_string(w.steps) +
                       "); the rest of the run is not recorded. trainrx record --steps N (or --steps all) records more");
}

// After `input_capture_steps` optimizer steps, swap to the callback without inputs: boxing every
// op's inputs and outputs is the costliest part of observing, and the model's structure (which
// op feeds which) is the same every step.
void StopInputCapture() noexcept {
  ObserverState& st = State();
  try {
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.capturing_inputs.exchange(false) || !st.registered || st.user_only) return;
    // Safe inside a callback: a running RecordFunction holds its own copy of the callback list.
    at::removeCallback(st.handle);
    st.handle = Register(false);
    if (st.paused) at::disableCallback(st.handle);
  } catch (...) {
  }
}

void MaybeStopInputCapture(BoundaryKind kind) noexcept {
  ObserverState& st = State();
  // Steps done: optimizer steps are ends (the Nth ends N steps), step starts are starts (the Nth
  // begins step N, so N - 1 are done).
  const int done = kind == BoundaryKind::kOptimizerStep ? st.optimizer_steps.fetch_add(1) + 1
                                                         : st.step_starts.fetch_add(1);
  if (done >= st.input_capture_steps && st.capturing_inputs.load()) StopInputCapture();
}

// No step boundary in this thread's first kInputCaptureOpsWithoutSteps ops with inputs: the
// structure those ops showed is what the steps would have shown; stop boxing inputs.
void StopInputCaptureWithoutSteps() noexcept {
  ObserverState& st = State();
  if (st.step_starts.load() == 0 && st.optimizer_steps.load() == 0 && st.capturing_inputs.load()) StopInputCapture();
}

bool AutocastEnabled() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return at::autocast::is_autocast_enabled(at::kCUDA) || at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_enabled() || at::autocast::is_cpu_enabled();
#endif
}

// The process heap at a step boundary (issue 36): what malloc holds, in arenas and in mmapped
// chunks (CPU tensors above glibc's mmap threshold are the latter). A tensor kept across steps
// shows as growth of this figure at step starts (memory.growth); a per-step peak needs the
// allocation events, which this sample does not see. glibc's mallinfo2 walks the arenas' free
// lists: microseconds on a training process's heap, taken once per boundary.
void SampleHeap(Collector& c, ThreadBuffer* buf, int64_t ts) noexcept {
  // The allocator's own events give the CPU's figures then; heap samples in the same series would
  // mix two measures (the heap holds more than tensors).
  if (MemoryEventsRequested() || c.Flushing()) return;
  const int64_t heap = profiler::HeapInUseBytes();
  if (heap < 0) return;
  // Never destroyed: the exit handler (OnFinish) samples after static destructors have run, and a
  // function-local std::string made on the first boundary is destroyed before that handler (it was
  // constructed after std::atexit registered it). Reading it there put freed heap bytes into the
  // counter's name (issue 49.1: "trainrx.config." + raw bytes in every short run).
  static const std::string& kKey = *new std::string(profiler::MemoryCounterName(profiler::MemoryWhat::kAllocated, "cpu"));
  // The collector's own records are not in it: their chunks are mapped outside malloc
  // (collector.cc MapChunk), or the recording would read as memory growth (the lm workload's
  // heap grew 165 kB a step, a chunk of records, when they came from malloc). The journal's
  // buffers are in it, and left out (Collector::OwnHeapBytes).
  c.Sample(buf, kKey, std::max(0.0, static_cast<double>(heap) - static_cast<double>(c.OwnHeapBytes())), ts);
}

// How long the program's threads waited for a CPU, and who else used the CPUs (issue 60.5,
// profiler/cpu_wait.h): cumulative figures, sampled at step boundaries at most every 50 ms (measured
// on a 2-core VM: 19 us a read with one thread, 72 us with twelve, 24 us when it rescans /proc for
// children: 0.04-0.14 % of a run at that pace), and always at the run's end. The analyzers take
// differences over the steps.
void SampleCpuWait(Collector& c, ThreadBuffer* buf, int64_t ts, bool always) noexcept {
  constexpr int64_t kEveryNs = 50'000'000;
  static std::atomic<int64_t> last{0};
  int64_t before = last.load(std::memory_order_relaxed);
  // Between boundaries on two threads at once, one samples.
  if (!always && (ts - before < kEveryNs || !last.compare_exchange_strong(before, ts))) return;
  if (always) last.store(ts, std::memory_order_relaxed);
  const profiler::CpuWaitSample s = profiler::ReadCpuWait(ProcessSession::Get().fork_children());
  if (!s.ok) return;
  using W = profiler::CpuWaitWhat;
  // Never destroyed, as SampleHeap's key.
  static const std::string* const kKeys = new std::string[6]{
      profiler::CpuWaitCounterName(W::kRun),         profiler::CpuWaitCounterName(W::kWait),
      profiler::CpuWaitCounterName(W::kInvoluntary), profiler::CpuWaitCounterName(W::kChildrenRun),
      profiler::CpuWaitCounterName(W::kCpusBusy),    profiler::CpuWaitCounterName(W::kCpus)};
  const double values[6] = {static_cast<double>(s.run_ns),          static_cast<double>(s.wait_ns),
                            static_cast<double>(s.involuntary),     static_cast<double>(s.children_run_ns),
                            static_cast<double>(s.cpus_busy_ns),    static_cast<double>(s.cpus)};
  c.Sample(buf, kKeys, values, std::size(values), ts);
}

void SnapshotConfig(ThreadBuffer* buf, int64_t ts) noexcept {
  Collector* c = ActiveCollector();
  if (c == nullptr) return;
  SampleCpuWait(*c, buf, ts, false);
  try {
    auto& ctx = at::globalContext();
    // Never destroyed, as SampleHeap's key; one call, one lock for the snapshot.
    static const std::string* const kKeys =
        new std::string[10]{"anomaly_mode",     "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms",
                            "intra_op_threads", "interop_threads", "autocast",            "other_profiler",
                            "launch_blocking",  "fork_children"};
    const char* lb = std::getenv("CUDA_LAUNCH_BLOCKING");
    const double values[10] = {
        torch::autograd::AnomalyMode::is_enabled() ? 1.0 : 0.0,
        ctx.benchmarkCuDNN() ? 1.0 : 0.0,
        ctx.deterministicCuDNN() ? 1.0 : 0.0,
        ctx.deterministicAlgorithms() ? 1.0 : 0.0,
        static_cast<double>(at::get_num_threads()),
        static_cast<double>(at::get_num_interop_threads()),
        AutocastEnabled() ? 1.0 : 0.0,
        // Another profiler (torch.profiler, autograd.profiler, emit_nvtx) registers thread-local
        // RecordFunction callbacks; ours is global.
        at::hasThreadLocalCallbacks() ? 1.0 : 0.0,
        lb && std::strcmp(lb, "1") == 0 ? 1.0 : 0.0,
        static_cast<double>(ProcessSession::Get().fork_children()),
    };
    c->Sample(buf, kKeys, values, std::size(values), ts);
    SampleHeap(*c, buf, ts);
    State().backward_sampled.store(false, std::memory_order_relaxed);
  } catch (...) {
  }
}

// What a CPU process can hold before an allocation fails, and why: the lowest of its RLIMIT_DATA /
// RLIMIT_AS ("memory cap": `trainrx record --memory-cap`, `ulimit -v`, the stand-in for a device's
// memory), its cgroup's memory.max, and the machine's memory. The capacity of the "cpu" device in
// the report (issue 36); 0 when none can be read.
std::pair<uint64_t, const char*> CpuMemoryCapacity() {
  std::pair<uint64_t, const char*> best{0, ""};
  const auto consider = [&](uint64_t bytes, const char* source) {
    if (bytes > 0 && (best.first == 0 || bytes < best.first)) best = {bytes, source};
  };
  for (int resource : {RLIMIT_DATA, RLIMIT_AS}) {
    struct rlimit lim {};
    if (getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) consider(lim.rlim_cur, "memory cap");
  }
  if (FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1) consider(v, "cgroup");
    std::fclose(f);
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) consider(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page), "system memory");
  return best;
}

void OnFinish(ProcessSession& s) {
  Collector& c = s.collector();
  SampleCpuWait(c, c.ThisThread(), NowNs(), true);
  SnapshotConfig(c.ThisThread(), NowNs());
  if (Rec* step = State().current_step.exchange(nullptr)) {
    EndRecord(step, c.NowTicks());
  }
  CuptiBridge::Collect(c);
  try {
    c.SetStatic("torch_version", profiler::JsonWriter::Quote(TORCH_VERSION));
    c.SetStatic("intra_op_threads", std::to_string(at::get_num_threads()));
    c.SetStatic("anomaly_mode", torch::autograd::AnomalyMode::is_enabled() ? "1" : "0");
    if (const auto [bytes, source] = CpuMemoryCapacity(); bytes > 0) {
      c.SetStatic("memory_capacity_bytes", std::to_string(bytes));
      c.SetStatic("memory_capacity_source", profiler::JsonWriter::Quote(source));
    }
  } catch (...) {
  }
}

Rec* AppendUser(const char* name) noexcept {
  Collector* c = ActiveCollector();
  if (c == nullptr) return nullptr;
  ThreadBuffer* b = c->ThisThread();
  if (b == nullptr) return nullptr;
  BusyGuard busy(b);
  Rec* r = b->Append();
  if (r == nullptr) return nullptr;
  r->kind = RecKind::kUser;
  r->name = b->InternDynamic(name);
  r->start_ticks = c->NowTicks();
  return r;
}

void EndRec(Rec* r) noexcept {
  if (Collector* c = ActiveCollector(); r && c) EndRecord(r, c->NowTicks());
}

// Removes the observer's callback if registered; the caller holds st.mu.
void UnregisterLocked(ObserverState& st) {
  if (!st.registered) return;
  at::removeCallback(st.handle);
  st.registered = false;
  st.paused = false;  // a later registration starts enabled
}

// In a forked child: drop the global callback, so RecordFunction goes back to its no-observer fast
// path (a forked DataLoader worker would otherwise pay ~0.2-0.5 us per op for nothing). Only the
// forking thread survives a fork; our mutex could be held only by a thread that no longer exists,
// so try_lock, and leave the callback (recording is off anyway) rather than block.
void OnForkChild() {
  ObserverState& st = State();
  if (!st.mu.try_lock()) return;
  try {
    UnregisterLocked(st);
  } catch (...) {
  }
  st.mu.unlock();
}

}  // namespace

bool Start(const StartOptions& options) {
  ObserverState& st = State();
  try {
    SessionConfig config;
    config.output = options.output;
    config.collector.max_events = options.max_events;
    if (!ProcessSession::Get().Begin(config)) return false;
    g_collector.store(&ProcessSession::Get().collector(), std::memory_order_release);
    ProcessSession::Get().SetFinishHook(&OnFinish);
    ProcessSession::Get().SetForkChildHook(&OnForkChild);
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.registered) {
      st.input_capture_steps = options.input_capture_steps;
      const bool capture = options.input_capture_steps > 0;
      st.capturing_inputs.store(capture);
      st.user_only = !ProcessSession::Get().collector().recording();  // steps to skip first
      st.handle = Register(capture, st.user_only);
      st.registered = true;
      ProcessSession::Get().collector().SetStatic("probe_torch_version", profiler::JsonWriter::Quote(TORCH_VERSION));
      if (MemoryEventsRequested())
        ProcessSession::Get().collector().SetStatic("memory_events", InstallMemoryEvents() ? "\"cpu allocator\"" : "\"unavailable\"");
      CuptiBridge::Start(ProcessSession::Get());
    }
    return true;
  } catch (const std::exception& e) {
    ProcessSession::Warn(std::string("could not start the observer: ") + e.what());
    return false;
  }
}

std::string Stop() {
  ObserverState& st = State();
  std::string path = ProcessSession::Get().active() ? ProcessSession::Get().Finish("stop") : "";
  try {
    std::lock_guard<std::mutex> lock(st.mu);
    UnregisterLocked(st);
  } catch (...) {
  }
  return path;
}

void SetEnabled(bool enabled) {
  ObserverState& st = State();
  Collector* c = ActiveCollector();
  if (c == nullptr) return;
  try {
    std::lock_guard<std::mutex> lock(st.mu);
    if (enabled && !st.registered) {
      st.handle = Register(st.capturing_inputs.load());
      st.registered = true;
      st.user_only = false;
    } else if (!enabled) {
      UnregisterLocked(st);
    }
    c->SetRecording(enabled);
  } catch (...) {
  }
}

bool Recording() {
  Collector* c = ActiveCollector();
  return c != nullptr && c->recording();
}

const char* BuiltTorchVersion() { return TORCH_VERSION; }

void MarkStep(int64_t step) {
  Collector* c = ActiveCollector();
  if (c && c->window().options().bounded()) {
    const WindowAction action = c->OnStepBoundary(BoundaryKind::kStepStart);
    AfterWindowChange(*c, action);
  }
  if (c == nullptr || !c->recording()) {
    EndRec(State().current_step.exchange(nullptr));  // paused, or past the window: the last step ends here
    return;
  }
  const std::string name = "trainrx::step#" + std::to_string(step);
  Rec* next = AppendUser(name.c_str());
  EndRec(State().current_step.exchange(next));
  SnapshotConfig(c->ThisThread(), NowNs());
  MaybeStopInputCapture(BoundaryKind::kStepStart);
}

void EndStep() { EndRec(State().current_step.exchange(nullptr)); }

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kData: return "trainrx::data";
    case Phase::kForward: return "trainrx::forward";
    case Phase::kBackward: return "trainrx::backward";
    case Phase::kOptimizer: return "trainrx::optimizer";
    case Phase::kEval: return "trainrx::eval";
  }
  return "trainrx::phase";
}

ScopedPhase::ScopedPhase(Phase phase) noexcept {
  rec_ = AppendUser(PhaseName(phase));
#if TRAINRX_WITH_NVTX
  nvtxRangePushA(PhaseName(phase));
  nvtx_ = true;
#endif
}

ScopedPhase::~ScopedPhase() {
  EndRec(static_cast<Rec*>(rec_));
#if TRAINRX_WITH_NVTX
  if (nvtx_) nvtxRangePop();
#endif
}

void SetConfig(const std::string& key, double value) {
  Collector* c = ActiveCollector();
  if (c == nullptr) return;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  c->SetStatic(key, buf);
}

void SetConfigText(const std::string& key, const std::string& value) {
  Collector* c = ActiveCollector();
  if (c == nullptr) return;
  try {
    c->SetStatic(key, profiler::JsonWriter::Quote(value));
  } catch (...) {
  }
}

// The observer's callback disabled (`paused`) or enabled again; false when none is registered.
bool PauseObserver(bool paused) noexcept {
  ObserverState& st = State();
  try {
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.registered) return false;
    if (paused != st.paused) paused ? at::disableCallback(st.handle) : at::reenableCallback(st.handle);
    st.paused = paused;
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace trainrx::probes

// Benchmarks only (bench/record_interleaved.py): the observer taken out (`paused` 1) and put back (0)
// between two steps of the process it records, so that one process compares its steps with and
// without it; what the steps with it paused do is not recorded (the trace has a gap). Returns 0, or
// 1 when no observer is registered. The probe is loaded RTLD_LOCAL: reach it by its path (ctypes with
// RTLD_NOLOAD).
extern "C" __attribute__((visibility("default"))) int trainrx_probe_pause(int paused) {
  return trainrx::probes::PauseObserver(paused != 0) ? 0 : 1;
}

extern "C" __attribute__((visibility("default"))) int trainrx_probe_attach(void) {
  using trainrx::probes::ProcessSession;
  if (!trainrx::probes::Start()) return 1;
  ProcessSession& s = ProcessSession::Get();
  ProcessSession::Info(std::string("recording (libtorch ") + TORCH_VERSION + ") -> " + s.output_path());
  return 0;
}

// A number for the trace's "trainrx" block from Python (the start-up hook's CPU peak, measured at
// exit: issue 60, a mark after the step window closed was lost, and a run longer than the window had
// no MFU). The block is written with the trace, whatever the window. Returns 0 when set, 1 when no
// session records this process.
extern "C" __attribute__((visibility("default"))) int trainrx_probe_set_config(const char* key, double value) {
  if (key == nullptr || *key == '\0' || trainrx::probes::ActiveCollector() == nullptr) return 1;
  try {
    trainrx::probes::SetConfig(key, value);
  } catch (...) {
    return 1;
  }
  return 0;
}

// Called by the preload shim just before the process sends itself a terminating SIGINT: what CPython
// does after an uncaught KeyboardInterrupt (Ctrl-C), having reset SIGINT to its default first, so
// neither the program's handler nor exit() runs and the trace would be lost. The trace is written,
// marked incomplete with end_reason "SIGINT (KeyboardInterrupt)". A forked child writes nothing.
extern "C" __attribute__((visibility("default"))) void trainrx_probe_interrupted(void) {
  using trainrx::probes::ProcessSession;
  ProcessSession& s = ProcessSession::Get();
  if (s.active()) s.Finish("SIGINT (KeyboardInterrupt)");
}

// In-process recording from Python (python/trainrx/recording.py, `with trainrx.record(path):`): the
// probe loaded with ctypes into an interpreter that has imported torch, no LD_PRELOAD. Start
// registers the observer and begins the process's session writing `output`; Stop writes the trace
// and returns its path in `path` (NUL-terminated, cut at `capacity`). One session per process: the
// session's exit and signal handlers stay with the first (a second start after a stop returns 2,
// as does a start in a process `trainrx record` already observes). Returns 0 on success, 1 when the
// observer could not start, 2 when this process is or was already recorded.
extern "C" __attribute__((visibility("default"))) int trainrx_probe_start_in_process(const char* output) {
  using trainrx::probes::ProcessSession;
  if (ProcessSession::Get().active()) return 2;  // recording now, or recorded once (active stays set)
  trainrx::probes::StartOptions options;
  if (output && *output) options.output = output;
  return trainrx::probes::Start(options) ? 0 : 1;
}

extern "C" __attribute__((visibility("default"))) int trainrx_probe_stop_in_process(char* path, size_t capacity) {
  const std::string written = trainrx::probes::Stop();
  if (path && capacity > 0) {
    const size_t n = std::min(capacity - 1, written.size());
    std::memcpy(path, written.data(), n);
    path[n] = '\0';
  }
  return written.empty() ? 1 : 0;
}
