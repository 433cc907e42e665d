// trainrx::analyzers metrics — the figures an analysis reports beside its findings (GPU time,
// launch statistics, unfinished ranks, step windows, operator / kernel / module tables, memory,
// torch.compile) and the Report that holds both (analysis.h).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "trainrx/analyzers/finding.h"
#include "trainrx/analyzers/steps.h"
#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

struct StreamIdle {
  int64_t stream = 0;
  int32_t device = 0;
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
};
// What each moment of device idle time waited for (analyzers/families/gpu.cc over the dependency
// model, links.h). Every gap in which no stream of the device ran is one of: host-starved (nothing
// queued: the next work had not been launched when the gap began; the part of it during which a
// host thread was in an allocator call is `allocator_ns`), or queued (the next work had been launched
// before the gap began and waited: on another stream's event, a collective, the device's own order;
// the part between two nodes of one CUDA/HIP graph is `graph_ns`). Sums to the breakdown's idle_ns.
struct QueuedWait {
  int64_t stream = 0;        // the stream whose launched work waited
  int64_t ns = 0;
  int64_t gaps = 0;
  int64_t after_stream = -1; // the stream whose work ended where most of that wait began
};
struct IdleCauses {
  int64_t host_starved_ns = 0;  // includes allocator_ns
  int64_t allocator_ns = 0;
  int64_t queued_ns = 0;        // includes graph_ns
  int64_t graph_ns = 0;
  std::vector<QueuedWait> queued_by_stream;  // largest first
};
struct TemporalBreakdown {
  int32_t rank = 0;
  IdleCauses idle_causes;
  int64_t kernel_time_ns = 0;  // first GPU activity start to last end (HTA "kernel_time")
  int64_t idle_ns = 0, compute_ns = 0, non_compute_ns = 0;
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;
  std::vector<StreamIdle> streams;
  std::string window;  // how HTA's "last ProfilerStep excluded" filter applied
  // Communication (NCCL/RCCL kernels, merged) and the part of it that overlaps compute kernels:
  // HTA's get_comm_comp_overlap is comm_overlap_pct (NaN without communication kernels).
  int64_t comm_ns = 0, comm_overlap_ns = 0;
  double comm_overlap_pct = std::numeric_limits<double>::quiet_NaN();
};
struct LaunchStats {
  int32_t rank = 0;
  int64_t kernels = 0;
  double mean_cpu_us = 0, mean_gpu_us = 0, mean_delay_us = 0;
  int64_t short_kernels = 0;       // GPU duration < launch (runtime) duration
  int64_t long_launches = 0;       // runtime > runtime_cutoff
  int64_t long_delays = 0;         // launch delay > delay_cutoff
};

// A rank whose recording did not end normally: our collector marked it "incomplete" (its
// "end_reason" a signal or a crash, not "exit" / "stop"). The trace holds only the start of the
// run; reports say so before anything else.
struct UnfinishedRank {
  int32_t rank = 0;
  std::string source;       // the file
  std::string end_reason;   // "SIGSEGV", "SIGTERM", ... ("unknown" when not given)
  int64_t recorded_ns = 0;  // recording start to its end (the collector's duration_ns, else the trace span)
  int64_t steps = 0;        // complete steps recorded
  int64_t open_ranges = 0;  // ranges still open at the end: the work in progress, cut
  int64_t behind_ns = -1;   // how much earlier its events end than the latest rank's; -1 without other ranks
};

// A rank recorded through a step window (`trainrx record --steps N --skip K`): the collector's
// "window_*" keys in the trace's "trainrx" block. Reports say which steps the trace holds.
struct RecordedWindow {
  int32_t rank = 0;
  int64_t skip = 0;            // steps run unrecorded before the window
  int64_t steps = -1;          // steps the window asked for; -1: to the end of the run
  std::string boundary;        // what marked steps: "Optimizer.step", "step markers", "none"
  int64_t run_boundaries = 0;  // step boundaries of that kind the process saw, recorded or not
  bool opened = false;         // false: the run had fewer steps than skip: nothing recorded
  bool closed = false;         // true: the run went on after the window, unrecorded
  int64_t gpu_records_outside = 0;  // GPU records left out (made outside the window)
};

// A rank whose collector dropped records (its cap, `TRAINRX_MAX_EVENTS`, reached; or CUPTI's
// buffers): the "trainrx" block's "dropped_records", "gpu_records_over_cap", "cupti_dropped_records",
// with the cap ("max_events") and when the first record was dropped ("first_dropped_ns") where
// the collector wrote them. Reports lead with it: every figure is about what was kept.
struct RecordingLoss {
  int32_t rank = 0;
  std::string source;            // the file
  int64_t dropped = 0;           // host records dropped (ops, ranges, samples)
  int64_t gpu_dropped = 0;       // GPU records past the cap or lost by CUPTI
  int64_t kept = 0;              // events of the rank read from the trace
  int64_t max_events = -1;       // the cap; -1: not written (an older collector)
  int64_t kept_ns = -1;          // from the recording's start to the first drop; -1: not known
  int64_t first_dropped_ns = -1; // when the first record was dropped (trace time); -1: not known
  int64_t steps_cut = 0;         // steps left out: they ran past the first drop (their records are partly missing)
  int64_t run_ns = -1;           // the recording's length (duration_ns); -1: not known
  int64_t run_steps = -1;        // the step boundaries the process saw (window_run_boundaries); -1: not known
  std::string boundary;          // what those boundaries were ("Optimizer.step", ...)
};

// One row of the operator or kernel table (op_table.cc): every event of one name, all ranks and
// threads merged. For the folded row, name is "other (K ops)" / "other (K kernels)".
struct NameRow {
  std::string name;        // full name (reports truncate it for text)
  int64_t count = 0;
  int64_t total_ns = 0;    // inclusive; an op nested in an op of its own name counts once
  int64_t self_ns = 0;     // ops: total minus direct child ops on the same thread; kernels: = total
  double mean_ns = 0;      // sum of durations / count
  double share = 0;        // total_ns / NameTable::basis_ns (0..1)
  double self_share = 0;   // self_ns / NameTable::basis_ns (0..1)
};

// The top operators (by self time) or GPU kernels (by total time), PyTorch profiler
// key_averages() / HTA kernel breakdown style. With steps only events starting inside a step of
// their rank count (warm-up and evaluation are not step work), ranks without steps are left out,
// and ops' shares are of the summed step wall time; without steps events of the whole trace
// count and shares are of the summed trace span of the ranks. Kernels' shares are of the summed
// kernel time of the table (HTA's kernel breakdown: sums to 100 %).
struct NameTable {
  std::vector<NameRow> rows;  // top N (threshold report.top_n), highest first
  NameRow other;              // the rest summed; other_names 0: none
  // Whether other's total_ns / mean_ns / share are given: not for ops, whose inclusive times
  // nest across names (aten::conv2d holds aten::convolution), so their sum would count the same
  // time many times; the op other row has count, self_ns and self_share only.
  bool other_has_total = true;
  int64_t other_names = 0;
  int64_t names = 0;          // distinct names in all
  int64_t basis_ns = 0;       // what shares are of
  std::string basis;          // "step time", "trace span", "kernel time"
  int64_t steps = 0;          // steps the events were taken from; 0: the whole trace
};

// Memory of one device of one rank (memory.cc), from the allocator samples the trace carries
// (profiler/memory_counters.h: torch.profiler's profile_memory events). Empty without samples.
struct DeviceMemory {
  int32_t rank = 0;
  std::string device;               // "cpu", "cuda:0"
  int64_t samples = 0;              // allocator events seen
  int64_t peak_allocated = 0;       // bytes, over the trace
  int64_t peak_reserved = 0;        // bytes, over the trace (0 on CPU: no caching allocator)
  int64_t capacity = 0;             // the device's total memory (deviceProperties); 0: unknown
  // Per steady step of the rank (metrics.steps.steps, in time order): allocated at the step's
  // start (the last sample before it; -1 when none came before) and the step's peak (-1: no sample).
  std::vector<int64_t> step_start, step_peak;
  int64_t median_step_peak = -1;    // over the steps with a peak
  // Theil-Sen slope of step_start over the steps that have one (bytes per step: the median of the
  // pairwise slopes, which a one-off jump does not move), and how many of their step-to-step
  // changes were increases.
  double growth_per_step = 0;
  int64_t growth_steps = 0, increases = 0;
  int64_t oom_events = 0, oom_request_bytes = 0;  // allocations that failed ("[OutOfMemory]")
  std::string oom_op;         // the innermost op running on the thread when the first one failed
  int64_t oom_ts_ns = -1;     // when the first failed
  // Where `capacity` came from: "deviceProperties" (Kineto's totalGlobalMem), "memory cap" (the
  // process's RLIMIT_DATA/RLIMIT_AS, e.g. `record --memory-cap`: the CPU stand-in for a device's
  // memory), "cgroup" or "system memory" (what our collector saw of a CPU process's machine), or
  // "--threshold memory.capacity_bytes"; empty when unknown.
  std::string capacity_source;
  // Reserved (the caching allocator's segments) at its peak, and what was allocated then: the rest
  // is cached or fragmented. -1 without reserved samples (CPU).
  int64_t allocated_at_peak_reserved = -1;
  // Reserved memory given back inside the steady steps (a fall of reserved between two samples:
  // torch.cuda.empty_cache(), or the allocator freeing its cache to retry a failed cudaMalloc).
  int64_t release_steps = 0;           // steps with at least one fall
  double released_bytes_per_step = 0;  // mean over the steady steps
  // Batch headroom (0 where unknown): samples per step (the recorded input shapes), memory per
  // sample (the median step's peak above its start: activations and what the step makes), and how
  // many samples a step could hold in `usable_pct` of the capacity with what is resident at its start.
  // Under gradient accumulation (micro_steps > 1) the batch is one micro-step's: what one forward
  // holds in memory at once, and what a larger micro-batch would raise.
  int64_t samples_per_step = 0;
  int micro_steps = 1;
  double bytes_per_sample = 0;
  int64_t fits_samples = 0;
  // Allocated samples inside the median steady step: a handful (trainrx record's heap samples at
  // the boundaries and at backward's start) means the step peak is a lower bound, and `fits_samples`
  // an upper one; allocation events (profile_memory) see the peak itself.
  int64_t median_step_samples = 0;
  // The CUDA caching allocator's retries while recorded (num_alloc_retries from the start-up hook's
  // marks; 0 where unknown): each a failed cudaMalloc, the cache freed and the request tried again.
  int64_t alloc_retries = 0;
};

// "batch 8", or under gradient accumulation "micro-batch 8 (4 a step)": the batch the headroom
// counts in (memory.cc).
std::string BatchLabel(const DeviceMemory& m);

// Growth of a per-step memory figure (memory.growth here; the heap at step ends of an experiment's
// trials): the least-squares slope over the steps that have a value (-1: none), how many have one,
// and how many step-to-step changes between them were increases.
struct StepGrowth {
  double per_step = 0;  // bytes per step; 0 with fewer than 2 values
  int64_t steps = 0, increases = 0;
};
StepGrowth GrowthOf(const std::vector<int64_t>& per_step);

// torch.compile as the trace shows it (compile.cc): the start-up hook's marks (compile ranges,
// graph breaks, recompiles) and the compiled regions ("Torch-Compiled Region: F/R") of the steps.
struct CompileSite {
  std::string where;     // the user's file:line ("train.py:33"); for a recompile the function's first line
  std::string function;  // recompiles: the function compiled again ("forward")
  std::string reason;    // dynamo's reason (graph break) or the guard that failed (recompile), one line
  int64_t count = 0;
  std::string frame;     // graph breaks: the compiled frame ("0" of compile id 0/0) whose compilation found it
};
struct CompileSummary {
  int32_t rank = 0;
  bool marks = false;              // the start-up hook's marks are in the trace (trainrx record)
  int64_t compiles = 0;            // compilations ("trainrx::compile" ranges)
  int64_t compile_ns = 0;          // their summed time
  int64_t compile_in_steps_ns = 0;  // of it, inside the steady steps
  int64_t recompiles = 0, recompiles_in_steps = 0;
  // Compile time inside the steady steps spent on recompiles (compile ids F/R with R >= 1), not on
  // the first compile of a frame first called there (F/0: a second function, evaluation).
  int64_t recompile_in_steps_ns = 0;
  int64_t first_compiles_in_steps = 0;  // F/0 compilations inside the steady steps
  int64_t breaks_in_steps = 0;          // graph breaks whose frame's compiled regions run in the steady steps
  int64_t steps_with_regions = 0;   // steady steps with a compiled region
  double regions_per_step = 0;      // median compiled regions (outermost) per such step
  double regions_per_call = 0;      // median regions inside one outermost region (1: no break in the call)
  double eager_between_ns = 0;      // median per such step: time between consecutive regions of one thread
  std::vector<CompileSite> graph_breaks, recompile_sites;
};

// The critical path of a rank's steps (analyzers/critical_path.cc): the chain of host
// work, launches, device work and waits that set each step's time, walked back from the step's end
// over the dependency model (a blocking call -> the device work that released it; device work -> the
// latest of its launch call, the previous work on its stream and, when both left it waiting, the work
// on another stream that ended last before it started). Every nanosecond of a step is on the path
// once, in one class.
enum class PathClass : uint8_t {
  kCpu,         // host work (ops, Python, data loading) that was not waiting for the device
  kLaunch,      // a launch call and the device's start latency after it
  kAllocator,   // cudaMalloc / cudaFree / hipFree ... on the host
  kSyncWait,    // a host call blocked on the device, until the device work it waited for ended
  kCompute,     // a kernel
  kComm,        // a communication kernel (NCCL / RCCL)
  kCopy,        // a copy or memset on the device
  kKernelGap,   // between two activities of one stream (device-side overhead)
  kDependency,  // launched work waiting on another stream's work (inferred by time without sync records)
  kOther,       // before the first event the walk can explain (work launched before the trace)
  kRankWait,    // a collective waiting for the last rank to arrive (named): its duration beyond the last's
};
inline constexpr int kPathClasses = 11;
const char* PathClassName(PathClass c);  // "cpu", "launch", "allocator", "sync_wait", "gpu_compute", ...
struct PathSegment {
  int64_t start_ns = 0, end_ns = 0;
  PathClass cls = PathClass::kCpu;
  std::string what;        // the call, kernel or stream it was ("cudaFree", "ncclKernel_...", "stream 7")
  int64_t slack_ns = -1;   // device work: how much shorter it could be before another dependency binds (-1: host)
};
struct PathItem {          // one name on the path, summed over the steps
  PathClass cls = PathClass::kCpu;
  std::string what;
  int64_t ns = 0;          // mean per step (total without steps)
};
struct CriticalPath {
  int32_t rank = 0;
  int64_t steps = 0;                 // steps walked (0: the whole trace as one window)
  int64_t mean_ns = 0;               // mean path length per step (= the mean step)
  std::array<int64_t, kPathClasses> class_ns{};  // mean per step by class
  std::vector<PathItem> top;         // the largest items, at most 12
  std::vector<PathSegment> segments; // the median step's path, in time order
  bool sync_records = false;         // cuda_sync records tied blocking calls; else inferred by time
  // Most device work has its launch call in the trace: the path can follow the host to the device.
  // Without (a trace with kernels but no runtime calls) the path sees the host only, and bounds nothing.
  bool linked = false;
  // The rank has device work. Without, the path is the loop's thread and the threads it waited for
  // (a collective backend's, a pin-memory thread): its classes are the host's only, and it bounds no
  // finding's saving (a Gloo collective on it is host time, not gpu_comm).
  bool device = true;
  std::string note;                  // what limits the answer ("no sync records: ...")
  // The device's pace: the median gap between consecutive steps' device ends (the last end of the
  // work launched inside each step), and the loop's beside it (the median gap between consecutive
  // steps' starts: a step's range may leave time out after it); 0 with fewer
  // than 3 steps that launched work. Where the device runs behind the loop (no sync holds the loop
  // back), the host's steps end long before their work: the device's pace is the run's throughput.
  int64_t device_pace_ns = 0;
  int64_t host_pace_ns = 0;
  // Of the steps with a next one (steps_compared), those whose device work still ran after the next
  // step's range ended (the device more than a step behind the loop). A loop that raced ahead for
  // its first steps and then waited for the device (a public HTA sample: host steps of 35, 72, then
  // 95.6 ms, each paced by the device) is not behind: most steps must be.
  int64_t steps_behind = 0, steps_compared = 0;
  bool DeviceBehind() const {
    return device_pace_ns > 0 && device_pace_ns > host_pace_ns + host_pace_ns / 10 && 2 * steps_behind > steps_compared;
  }
};

// How much of the hardware the steps use (utilization.cc): FLOPs and bytes of the ops
// whose recorded shapes a model covers (analyzers/cost/flops.h), their achieved throughput, and the
// model FLOPs utilization (MFU) of the step against the device's dense peak for the dtype used.
struct OpCostRow {
  std::string name;      // "aten::mm"
  std::string op_class;  // "matmul", "conv", "attention", "norm", "softmax", "loss", "elementwise", "embedding"
  std::string dtype;     // "bf16", "fp32", "tf32" (fp32 inputs on TF32 tensor-core kernels), ...
  double calls = 0;      // per costed step (total without steps)
  double flops = 0, bytes = 0;
  double time_ns = 0;    // its device kernels' time (GPU ranks), or its own time (CPU ranks)
  double tflops = 0, gbps = 0, intensity = 0;  // achieved; intensity in FLOPs per byte
  std::string bound;     // "compute" / "memory" against the roofline's ridge; "" without a peak
};
struct Utilization {
  int32_t rank = 0;
  std::string device;        // "NVIDIA H100 80GB HBM3", or "CPU"
  bool device_time = false;  // op times are their kernels' (else the ops' own CPU time)
  std::string dtype;         // the dtype of most model FLOPs ("bf16", "tf32", "fp32", ...)
  double peak_tflops = 0;    // dense peak for that dtype (0: unknown)
  double peak_gbps = 0;      // memory bandwidth (0: unknown)
  std::string peak_source;   // where the peak comes from (a datasheet, a measurement, the user)
  int64_t steps = 0;         // steady steps of the rank (0: none; figures are then totals)
  int64_t steps_costed = 0;  // of them, those whose ops had shapes (the per-step figures' basis)
  double model_flops = 0;    // per costed step: matmul + conv + attention (MFU's numerator)
  double other_flops = 0;    // norms, softmax, losses, elementwise (shown, not in MFU)
  // Matmul, conv and attention FLOPs of forward ops run again inside the backward (activation
  // checkpointing: torch.utils.checkpoint, reentrant or not), per costed step. Not model FLOPs;
  // model + recompute are the hardware FLOPs, and `hfu` their utilization (0: none recomputed).
  double recompute_flops = 0;
  double hfu = 0;
  double bytes = 0;
  // The rule of thumb beside it (dense transformers: 2 FLOPs a parameter a token forward, 4
  // backward): parameters trained a step (torch.profiler's AccumulateGrad shapes), tokens a step
  // (the largest embedding lookup) and 6 * N * tokens; 0 where the trace does not show both (our
  // collector records no AccumulateGrad shapes; a model without embeddings has no tokens).
  double params = 0, tokens = 0, six_n_tokens = 0;
  double step_ns = 0;        // median steady step
  double achieved_tflops = 0;  // model FLOPs over the step time
  double mfu = 0;            // achieved over the peak (0: no peak or no steps)
  // Costed ops can only miss FLOPs, never add them: where some of the steps' time is in ops no model
  // covers (below 95 % covered) or a convolution could not be costed, MFU is a lower bound.
  bool mfu_lower_bound = false;
  double costed_ns = 0, total_ns = 0;  // per costed step: time in costed ops, and all of it (kernels or CPU ops)
  double covered_share = 0;  // costed_ns / total_ns
  std::vector<OpCostRow> classes;  // one per op class, by time
  std::vector<OpCostRow> ops;      // one per (op, dtype), by time, the top 15
  std::string note;          // what limits the figures, in a sentence ("" when nothing does)
};

// A what-if of several fixes replayed together (analyzers/dependency/what_if.cc, docs/what-if.md):
// every fix the findings name ("all findings"), or the ones `analyze --what-if` asked for.
struct WhatIf {
  int32_t rank = 0;
  std::string label;                    // "all findings"; "asked" (one per asked fix); "asked together" (2+ asked)
  std::vector<std::string> transforms;  // the catalog's transform names, in the order applied
  Prediction prediction;
};

// What a rank's steps got of the CPUs (analyzers/families/machine.cc): how long its threads ran
// and waited for a CPU, and who else used the CPUs, from our collector's samples (Linux schedstat and
// /proc/stat, profiler/cpu_wait.h) nearest the steady steps' start and end.
struct RankCpuLoad {
  int32_t rank = 0;
  profiler::CpuLoad load;
  int64_t steps = 0;         // the steady steps the span holds
  double span_covered = 0;   // share of the steps' span between the two samples used
};

struct Metrics {
  std::vector<UnfinishedRank> unfinished;  // empty: every rank's recording ended normally
  std::vector<RecordedWindow> windows;     // ranks recorded through a step window
  std::vector<RecordingLoss> losses;       // ranks whose collector dropped records
  StepModel steps;
  std::vector<TemporalBreakdown> temporal;
  std::vector<LaunchStats> launch;
  NameTable op_table;      // empty rows: no CPU ops
  NameTable kernel_table;  // empty rows: no GPU kernels
  // Host time of each nn.Module's forward (the collector's Python hook, or with_stack traces):
  // total = the module's ranges, self = less its child modules. Empty rows: no module ranges.
  NameTable module_table;
  std::vector<DeviceMemory> memory;  // one per (rank, device) with allocator samples
  std::vector<CompileSummary> compile;  // one per rank with torch.compile in its trace
  std::vector<CriticalPath> critical_paths;  // one per rank with device work
  std::vector<Utilization> utilization;      // one per rank with costed ops
  std::vector<WhatIf> what_if;               // the first rank with steps: all findings' fixes, and those asked
  std::vector<RankCpuLoad> cpu_load;         // one per rank whose recording sampled the CPU wait
};

struct Report {
  std::vector<Finding> findings;  // ranked by estimated saving, highest first
  Metrics metrics;
};

// The operator and kernel tables, top_n rows each plus the rest folded (op_table.cc).
NameTable BuildOpTable(const profiler::Trace& trace, const StepModel& steps, int64_t top_n);
NameTable BuildKernelTable(const profiler::Trace& trace, const StepModel& steps, int64_t top_n);
// What `rank`'s steady steps got of the CPUs (machine.cc); nullopt when its recording has no CPU
// wait samples (other tools' traces, older recordings) or two samples cover under half its steps.
std::optional<RankCpuLoad> CpuLoadOfRank(const profiler::Trace& trace, const StepModel& steps, int32_t rank);

// The ranks whose recording did not finish (run_end.cc).
std::vector<UnfinishedRank> FindUnfinishedRanks(const profiler::Trace& trace, const StepModel& steps);

// The step windows our collector recorded through (run_end.cc).
std::vector<RecordedWindow> FindRecordedWindows(const profiler::Trace& trace);

// The ranks whose collector dropped records (run_end.cc).
std::vector<RecordingLoss> FindRecordingLosses(const profiler::Trace& trace);
// Leaves out of `steps` each step of such a rank that ended after its first dropped record (what
// ran in it is partly missing), counting them in the loss (run_end.cc).
void LeaveOutStepsPastLosses(StepModel& steps, std::vector<RecordingLoss>& losses);

}  // namespace trainrx::analyzers
