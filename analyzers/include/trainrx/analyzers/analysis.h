// trainrx::analyzers — pure functions from a Trace to Findings and Metrics.
//
// Who calls it: the CLI (trainrx analyze), experiments (fix/ab/gate), tests. Analyzers never do
// I/O or printing (rendering is reports/'s job) and never know where a trace came from.
// Threading: Analyze() reads a finalized, immutable Trace; it may run concurrently on different
// traces, and runs its own tables and families on several threads (each family into its own
// Report, merged in registry order: a family may write findings, metrics.temporal, metrics.memory and
// metrics.launch, nothing else).
//
// Families, one per file, registered in registry.cc:
//   steps.cc     step detection and per-step phase breakdown (shared by the others)
//   gpu.cc       gpu.idle (HTA temporal + idle-time breakdown), gpu.launch_bound (HTA launch stats)
//   input.cc     input.dataloader_bound, input.workers, input.pin_memory
//   sync.cc      sync.host_device, sync.blocking_copy
//   optim.cc     optim.zero_grad, optim.single_tensor (per-parameter optimizer step, no foreach)
//   model.cc     model.bias_before_norm (exact dataflow from our collector, else shapes)
//   config.cc    debug.anomaly_detection, debug.profiler, debug.launch_blocking, cudnn.benchmark_off,
//                cudnn.deterministic_on, threads.oversubscribed (our collector's config snapshots)
//   eval.cc      eval.grad_enabled (grad mode per op, from our collector)
//   precision.cc precision.fp32_matmul (TF32 off on sm_80+), precision.matmul_alignment (16-bit
//                GEMM dims not a multiple of 8)
//   tensor.cc    tensor.cpu_then_copy (filled on the host, copied right away)
//   python.cc    python.loop_indexing (element-by-element tensor indexing in a Python loop)
//   memory.cc    memory.growth (allocated memory at step starts rising step after step),
//                memory.fragmentation (reserved far above allocated on a nearly full device),
//                memory.empty_cache (the allocator's cache emptied in most steps), batch.small (a
//                post-pass: an underused device with most of its memory free); the per-device
//                memory figures of Metrics
//   compile.cc   compile.graph_break, compile.recompiles, compile.time (torch.compile: the start-up
//                hook's marks and the compiled regions of the steps); the compile figures of Metrics
//   dist.cc      dist.straggler (the rank the others wait for at collectives), dist.no_sync, Gloo's
//                dist.comm_overlap (NCCL's is in gpu.cc); dataparallel.cc: dist.data_parallel;
//                collectives.cc: collectives and their cross-rank matching, shared with clocks.cc
//                (clock alignment of a set, applied before analysis)
// The last four families are TorchTidy's patterns (torch/profiler/_pattern_matcher.py) done on
// the trace model; bench/torchtidy_compare.py compares the two.
// Not a family: op_table.cc (the per-op and per-kernel tables of Metrics).
// Shared by all: per_step.cc (StepBasis: per-step means, or trace totals without steps;
// SetSaving: every saving bounded by the measured time it removes and by the step),
// runtime_names.h (CUDA and HIP runtime calls: launches, blocking calls, graph captures),
// run_end.cc (ranks whose recording did not finish).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

enum class Severity { kInfo, kLow, kMedium, kHigh };
enum class Confidence { kLow, kMedium, kHigh };
const char* SeverityName(Severity s);
const char* ConfidenceName(Confidence c);
// 1234567 -> "1.2 MB" (decimal units), for findings and reports alike.
std::string BytesText(double bytes);

struct EvidenceItem {
  std::string key;
  std::variant<int64_t, double, std::string> value;
};

struct Finding {
  std::string id;  // stable, as in TRICKS.md: "sync.host_device"
  Severity severity = Severity::kLow;
  Confidence confidence = Confidence::kMedium;
  std::string title;
  int32_t rank = -1;  // -1: whole trace
  // The measured value beside its threshold, e.g. share of step 0.33 vs 0.05.
  double measured = 0;
  double threshold = 0;
  std::string measured_unit;  // "% of step", "per step", ...
  std::vector<EvidenceItem> evidence;
  std::vector<std::string> examples;  // ops / steps / streams where it was seen
  // Estimated saving: an upper bound from the trace (`trainrx fix` measures the real one), per
  // step as a mean over `steps` steps; without steps (`steps` 0) a total over the trace, with no
  // share of a step. It never exceeds `saving_bound_ns`, the measured time the fix would remove
  // (`saving_bound` says what: "GPU idle time", "time blocked in syncs"), nor the mean step.
  double estimated_saving_pct = 0;  // of the mean step; 0 without steps
  int64_t estimated_saving_ns = 0;
  int64_t saving_bound_ns = 0;
  std::string saving_bound;
  int64_t steps = 0;  // steps the per-step figures are means over; 0: figures are trace totals
  std::string fix_python;
  std::string fix_cpp;
  std::string knob;  // reference-workload knob that fixes it ("workers=4"), empty if none
};

// Per-step timing, one row per detected step.
struct StepRow {
  int32_t rank = 0;
  std::string name;  // "ProfilerStep#5"
  int64_t start_ns = 0;
  int64_t wall_ns = 0;
  int64_t data_wait_ns = 0;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t optimizer_ns = 0;
  int64_t other_ns = 0;
  bool has_gpu = false;
  int64_t gpu_kernel_ns = 0;   // union of kernels in the step
  int64_t gpu_memcpy_ns = 0;   // union of memcpy + memset
  int64_t gpu_idle_ns = 0;     // wall - union of all GPU activity
  // Data wait while no GPU activity runs (GPU traces; else = data_wait_ns): loading that runs
  // while the GPU still finishes the previous step's kernels costs no throughput. The TensorBoard
  // plugin's DataLoader figure ranks kernels and memcpy above data the same way.
  int64_t data_exposed_ns = 0;
  // Forward and backward both running (on different threads: pipeline schedules such as
  // DualPipe). The phases are exclusive, backward wins: forward_ns leaves this time out.
  int64_t fwd_bwd_overlap_ns = 0;
};

struct StepModel {
  std::string source;  // "ProfilerStep", "trainrx step markers", "inferred from Optimizer.step", "none"
  std::vector<StepRow> steps;
  // Leading steps of a rank that took more than 3x its median step (cuDNN's autotuner, lazy CUDA
  // and allocator start-up, DataLoader workers starting: 6.1 s against a 17 ms median on an H100),
  // at most a quarter of the rank's steps, with 4 or more. They are left out of `steps`, so every
  // share, per-step figure and saving describes the steady state; the report lists them.
  std::vector<StepRow> warmup_steps;
  int64_t median_wall_ns = 0;
  // Share of the summed step time per phase (0..1).
  double data_exposed_share = 0;  // of data_exposed_ns
  double data_wait_share = 0, forward_share = 0, backward_share = 0, optimizer_share = 0, other_share = 0;
  double gpu_kernel_share = 0, gpu_memcpy_share = 0, gpu_idle_share = 0;
  double fwd_bwd_overlap_share = 0;  // of fwd_bwd_overlap_ns (a caveat on the forward share)
  // The data share that counts as a loader bottleneck (data_exposed: with the GPU idle, or the
  // whole wait on CPU-only ranks) without the quarter of the steps that waited longest (at least
  // one), with 3 or more steps (else the plain share). Stalls in a few steps (the first batch, a
  // worker spawn, the OS running another process for a time slice, a GC pause) are not a loader
  // that cannot keep up: on a loaded 2-core machine 3 of 11 steps of a clean script lost ~4 ms
  // each to preemption inside the loader. Waits in most steps still count.
  double data_share_without_worst = 0;
  std::vector<int32_t> data_worst_steps;  // indices into steps, longest wait first; empty below 3 steps
  bool has_gpu = false;
};

struct StreamIdle {
  int64_t stream = 0;
  int32_t device = 0;
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
};
struct TemporalBreakdown {
  int32_t rank = 0;
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
  // Least-squares slope of step_start over the steps that have one (bytes per step), and how many
  // of their step-to-step changes were increases.
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
  int64_t samples_per_step = 0;
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

// torch.compile as the trace shows it (compile.cc): the start-up hook's marks (compile ranges,
// graph breaks, recompiles) and the compiled regions ("Torch-Compiled Region: F/R") of the steps.
struct CompileSite {
  std::string where;     // the user's file:line ("train.py:33"); for a recompile the function's first line
  std::string function;  // recompiles: the function compiled again ("forward")
  std::string reason;    // dynamo's reason (graph break) or the guard that failed (recompile), one line
  int64_t count = 0;
};
struct CompileSummary {
  int32_t rank = 0;
  bool marks = false;              // the start-up hook's marks are in the trace (trainrx record)
  int64_t compiles = 0;            // compilations ("trainrx::compile" ranges)
  int64_t compile_ns = 0;          // their summed time
  int64_t compile_in_steps_ns = 0;  // of it, inside the steady steps
  int64_t recompiles = 0, recompiles_in_steps = 0;
  int64_t steps_with_regions = 0;   // steady steps with a compiled region
  double regions_per_step = 0;      // median compiled regions (outermost) per such step
  double eager_between_ns = 0;      // median per such step: time between consecutive regions of one thread
  std::vector<CompileSite> graph_breaks, recompile_sites;
};

struct Metrics {
  std::vector<UnfinishedRank> unfinished;  // empty: every rank's recording ended normally
  std::vector<RecordedWindow> windows;     // ranks recorded through a step window
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
};

struct Report {
  std::vector<Finding> findings;  // ranked by estimated saving, highest first
  Metrics metrics;
};

// Named, overridable thresholds ("input.dataloader_bound.share_pct" = 5).
class Thresholds {
 public:
  Thresholds();  // registers every analyzer's defaults
  // Keys come from analyzer code, so an unknown one is a programming error (a typo would otherwise
  // read as a zero threshold and silently flag, or hide, a finding): throws std::logic_error naming
  // the key. tests/analyzers/registry_test.cc checks every key the analyzers read is registered.
  double Get(const std::string& key) const;
  // Keys from users: returns false (with *error listing the known keys) for unknown keys.
  bool Set(const std::string& key, double value, std::string* error);
  // "key=value" form from the command line.
  bool Parse(const std::string& assignment, std::string* error);
  const std::map<std::string, std::pair<double, std::string>>& all() const { return values_; }

 private:
  std::map<std::string, std::pair<double, std::string>> values_;  // key -> (value, description)
};

// What an analyzer family gets: the trace, the shared step model, thresholds.
class ScopeIndex;  // private to analyzers/ (scopes.h): which module / annotation an op ran in
struct AnalysisContext {
  const profiler::Trace& trace;
  const StepModel& steps;
  const Thresholds& thresholds;
  const ScopeIndex& modules;
  const ScopeIndex& annotations;
  // Ranks whose recording did not end normally, and those recorded through a step window.
  const std::vector<UnfinishedRank>& unfinished;
  const std::vector<RecordedWindow>& windows;
};

using AnalyzerFn = void (*)(const AnalysisContext&, Report&);
struct AnalyzerInfo {
  const char* family;
  AnalyzerFn fn;
};
const std::vector<AnalyzerInfo>& Registry();
// Every finding id an analyzer can report (tests check the analyzers' source and the workloads'
// knob table against it).
const std::vector<std::string>& FindingIds();

// Steps first, then every registered family; findings sorted by estimated saving. The tables and
// families run on up to `threads` threads (0: one per usable CPU); the report is the same for any
// number.
Report Analyze(const profiler::Trace& trace, const Thresholds& thresholds = Thresholds(), size_t threads = 0);

// Ranks findings as the report lists them: by estimated saving (share of the step, then ns
// for traces without steps), then severity; stable.
void SortFindings(std::vector<Finding>& findings);

// Building blocks shared by the families (steps.cc).
// `threads` as in Analyze (0: every usable CPU); the model is the same for any count.
StepModel BuildStepModel(const profiler::Trace& trace, size_t threads = 0);
// The model's median, shares and worst data steps from its rows (steps, warm-up already split):
// the second half of BuildStepModel, also used on rows gathered from per-rank summaries.
void SummarizeStepRows(StepModel& model);
// The operator and kernel tables, top_n rows each plus the rest folded (op_table.cc).
NameTable BuildOpTable(const profiler::Trace& trace, const StepModel& steps, int64_t top_n);
NameTable BuildKernelTable(const profiler::Trace& trace, const StepModel& steps, int64_t top_n);
// The ranks whose recording did not finish (run_end.cc).
std::vector<UnfinishedRank> FindUnfinishedRanks(const profiler::Trace& trace, const StepModel& steps);
// Clock alignment of a multi-rank set (clocks.cc): each rank's offset to a reference rank from
// the ends of the collectives they share (a synchronous collective ends at the same moment on
// every rank), applied only when the data support it.
struct RankClock {
  int32_t rank = 0;
  int32_t reference = 0;  // the rank whose clock the others are put on
  std::string status;     // "reference", "shifted", "agrees", "same host", "not aligned"
  int64_t offset_ns = 0;  // estimated: this rank's clock minus the reference's
  int64_t shift_ns = 0;   // added to its times: -offset_ns when shifted, else 0
  int64_t matched = 0;    // collectives shared with the reference
  int64_t spread_ns = 0;  // median deviation of the end differences from offset_ns
  std::string why;        // one sentence for the report
  // The outcome into the rank's RankInfo::clock_* fields (the shift itself is not applied).
  void RecordIn(profiler::RankInfo& info) const;
};
// Empty for fewer than 2 ranks. Pure: reads a finalized trace.
std::vector<RankClock> EstimateRankClocks(const profiler::Trace& trace);
// Estimates, shifts the ranks that are to be shifted (Trace::ShiftRankTime) and records the
// outcome in each RankInfo (clock_*). Call after reading a set and before Analyze; the readers
// leave clocks as the files have them.
std::vector<RankClock> AlignRankClocks(profiler::Trace& trace);

// The step windows our collector recorded through (run_end.cc).
std::vector<RecordedWindow> FindRecordedWindows(const profiler::Trace& trace);

}  // namespace trainrx::analyzers
