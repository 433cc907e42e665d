// The analyzer registry, thresholds, and the Analyze() driver.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>

#include "cost/cost.h"
#include "dependency/dependency.h"
#include "families/families.h"
#include "links.h"
#include "scopes.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/cross_rank.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/thread_counters.h"

namespace trainrx::analyzers {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kLow: return "low";
    case Severity::kMedium: return "medium";
    case Severity::kHigh: return "high";
  }
  return "info";
}

const char* ConfidenceName(Confidence c) {
  switch (c) {
    case Confidence::kLow: return "low";
    case Confidence::kMedium: return "medium";
    case Confidence::kHigh: return "high";
  }
  return "low";
}

Thresholds::Thresholds() {
  values_ = {
      {"gpu.idle.idle_pct", {20.0, "flag when the device is idle more than this % of its active span"}},
      {"utilization.peak_tflops", {0.0, "the device's dense peak TFLOP/s for MFU (0: from the datasheet table for the device and dtype, or the CPU's measured matmul rate)"}},
      {"utilization.peak_gbps", {0.0, "the device's memory bandwidth in GB/s for the roofline (0: from the datasheet table)"}},
      {"what_if.steps", {16.0, "steps of each rank the what-if replays to predict the fixes' savings, from the middle of the run (docs/what-if.md); 0: no predictions"}},
      {"gpu.idle.kernel_wait_us", {30.0, "gap below which idle between kernels counts as kernel wait (HTA: 30)"}},
      {"gpu.idle.hta_time", {1.0, "1: GPU breakdowns round ns-resolution times to whole µs as HTA does (start up, end down), to match HTA; 0: exact ns"}},
      {"dist.straggler.wait_pct", {5.0, "flag a rank the others wait for at collectives when their wait is at least this % of its step"}},
      {"dist.straggler.last_pct", {50.0, "and when it arrives last at this % of the matched collectives (and at least 1.5 x the 1/ranks of chance)"}},
      {"dist.comm_overlap.exposed_pct", {10.0, "flag when collectives run with no compute beside them this % of the GPU's active span (Gloo: of the step time)"}},
      {"gpu.allocator.share_pct", {5.0, "flag cudaMalloc/cudaFree (hipMalloc/hipFree) calls taking at least this % of the step (of the GPU's active span without steps)"}},
      {"gpu.launch_bound.short_kernel_pct", {50.0, "flag when this % of kernels run shorter than their launch call"}},
      {"gpu.launch_bound.runtime_cutoff_us", {50.0, "launch calls longer than this are outliers (HTA: 50)"}},
      {"gpu.launch_bound.delay_cutoff_us", {100.0, "launch delays longer than this are outliers (HTA: 100)"}},
      {"input.dataloader_bound.share_pct", {5.0, "flag when data wait exceeds this % of the step (TensorBoard plugin: 5)"}},
      {"input.workers.max_per_cpu", {1.0, "flag configured workers above this many per available CPU"}},
      {"input.pin_memory.min_copies", {1.0, "flag when at least this many pageable HtoD copies are seen"}},
      {"sync.host_device.per_step", {1.0, "flag when host-device syncs per step reach this"}},
      {"sync.blocking_copy.min_bytes", {65536.0, "synchronous HtoD cudaMemcpy above this size is flagged (nsys: 64 KB)"}},
      {"optim.zero_grad.min_ops", {1.0, "flag when this many zeroing ops per step run inside zero_grad"}},
      {"optim.single_tensor.optimizer_share_pct", {5.0, "flag per-parameter optimizer steps only when they take at least this % of the step"}},
      {"optim.single_tensor.min_saving_pct", {0.5, "and only when the estimated saving (per-parameter ops removed x per-op overhead) reaches this % of the step (CPU SGD: ~0)"}},
      {"precision.fp32_matmul.kernel_share_pct", {5.0, "flag when FP32 (non-TF32) GEMM/conv kernels on an sm_80+ GPU take at least this % of kernel time"}},
      {"precision.matmul_alignment.min_per_step", {1.0, "flag when this many bf16/fp16 GEMMs per step have M, K or N not a multiple of 8"}},
      {"tensor.cpu_then_copy.min_per_step", {1.0, "flag when this many host-filled tensors per step are copied right away"}},
      {"python.loop_indexing.min_repeats", {10.0, "flag a select-led op sequence repeated back to back at least this many times (TorchTidy: 10)"}},
      {"debug.anomaly_detection.steps_pct", {0.0, "flag when anomaly mode is on in more than this % of steps"}},
      {"debug.profiler.steps_pct", {0.0, "flag when another profiler is active in more than this % of steps"}},
      {"report.top_n", {15.0, "rows in the operator and kernel tables; the rest is summed in one 'other' row"}},
      {"steps.slow.ratio", {3.0, "a steady step is slow above this many times the rank's median step (the warm-up's own test, for steps after it)"}},
      {"steps.slow.min_excess_pct", {5.0, "flag slow steps when their time above the median is at least this % of the steps' time"}},
      {"steps.slow.min_steps", {8.0, "with at least this many steady steps on the rank"}},
      {"memory.growth.min_increase_pct", {80.0, "flag allocated memory at step starts rising in at least this % of step-to-step changes (a one-off jump, e.g. optimizer state made at the first step, is not growth)"}},
      {"memory.growth.max_p", {0.01, "and a rising trend over the steps' order at this one-sided level (Mann-Kendall): a few noisy steps are not a trend"}},
      {"memory.growth.min_rise_pct", {10.0, "and the rise over the recording (slope x steps) at least this % of what was allocated at the first step, or the device full within memory.growth.max_steps_to_full steps"}},
      {"memory.growth.max_steps_to_full", {1000000.0, "the capacity (the device's, or a declared one) full within this many more steps at the measured rate: a leak that ends a run"}},
      {"memory.growth.min_steps", {4.0, "over at least this many steps with a sample before their start"}},
      {"memory.capacity_bytes", {0.0, "memory of a device whose trace states none (a CPU run: the stand-in for a device's capacity, as sweep --memory-cap); 0: unknown"}},
      {"memory.fragmentation.min_waste_pct", {30.0, "flag when at least this % of reserved memory is not allocated at reserved's peak"}},
      {"memory.fragmentation.min_reserved_pct", {80.0, "and reserved reaches at least this % of the device's capacity (a cache on a device with room is not a problem)"}},
      {"memory.fragmentation.min_retries", {1.0, "or flag when the CUDA caching allocator retried at least this many allocations (the start-up hook's figures)"}},
      {"compile.graph_break.min_regions_per_step", {2.0, "flag graph breaks when the median step runs at least this many compiled regions (or the start-up hook saw a break there)"}},
      {"compile.recompiles.min_recompiles", {2.0, "flag recompiles when a function is compiled again at least this many times, or once inside the steady steps"}},
      {"compile.time.min_pct", {10.0, "flag compile time when it is at least this % of the recorded time"}},
      {"compile.fusable_path.min_pct",
       {20.0, "flag an uncompiled model when kernels torch.compile regenerates hold at least this % of the median step's critical path"}},
      {"memory.empty_cache.min_step_pct", {50.0, "flag torch.cuda.empty_cache() (or reserved memory given back) in at least this % of the steps"}},
      {"batch.small.max_peak_pct", {50.0, "flag a small batch when the median step's peak is at most this % of the device's capacity"}},
      {"batch.small.min_factor", {2.0, "and at least this many times the batch's samples fit"}},
      {"batch.small.usable_pct", {90.0, "% of the capacity counted as usable when estimating how many samples fit"}},
      {"model.channels_last.share_pct", {25.0, "flag an NCHW convolutional model (our collector's layouts) when its convolutions, pooling and batch norms take at least this % of the step (CPU-only ranks)"}},
      {"machine.busy.wait_pct", {profiler::kBusyWaitPct, "flag when the program's threads waited for a CPU at least this % of the time they were ready to run (Linux schedstat over the steady steps; a quiet 2-core machine whose CPUs the program fills: 2-5 %)"}},
      {"threads.oversubscribed.ratio", {1.5, "flag when intra-op threads x local ranks exceed this many per CPU (loader workers: when more than the CPUs)"}},
  };
}

double Thresholds::Get(const std::string& key) const {
  auto it = values_.find(key);
  // An exception rather than abort(): tests can assert on it, and uncaught it still ends the
  // program with its message (libstdc++'s terminate handler prints what()).
  if (it == values_.end()) {
    throw std::logic_error("Thresholds::Get: unknown threshold '" + key +
                           "' (a typo in an analyzer, or a key not registered in Thresholds::Thresholds(), "
                           "analyzers/registry.cc)");
  }
  return it->second.first;
}

Status Thresholds::Set(const std::string& key, double value) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    std::string known;
    for (const auto& [k, v] : values_) known += "\n  " + k;
    return Status::Error("unknown threshold '" + key + "'; known thresholds:" + known);
  }
  it->second.first = value;
  return {};
}

Status Thresholds::Parse(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) return Status::Error("--threshold expects id.key=value, got '" + assignment + "'");
  const std::string value_text = assignment.substr(eq + 1);
  char* end = nullptr;
  const double v = std::strtod(value_text.c_str(), &end);
  if (value_text.empty() || end != value_text.c_str() + value_text.size())
    return Status::Error("--threshold " + assignment + ": '" + value_text + "' is not a number");
  return Set(assignment.substr(0, eq), v);
}

const std::vector<AnalyzerInfo>& Registry() {
  static const std::vector<AnalyzerInfo> kRegistry = {
      {"gpu", &AnalyzeGpu},
      {"input", &AnalyzeInput},
      {"sync", &AnalyzeSync},
      {"optim", &AnalyzeOptim},
      {"model", &AnalyzeModel},
      {"config", &AnalyzeConfig},
      {"eval", &AnalyzeEval},
      {"precision", &AnalyzePrecision},
      {"tensor", &AnalyzeTensor},
      {"python", &AnalyzePython},
      {"dist", &AnalyzeDist},
      {"memory", &AnalyzeMemory},
      {"compile", &AnalyzeCompile},
      {"steps", &AnalyzeStepTimes},
      {"utilization", &AnalyzeUtilization},
      {"machine", &AnalyzeMachine},
      {"layout", &AnalyzeLayout},
  };
  return kRegistry;
}

namespace {

using profiler::ThreadCpuNs;
using profiler::ThreadInstructions;

// Runs `fn` as stage `name` into `slot` (nullptr: untimed).
template <typename Fn>
void Timed(StageTime* slot, const char* name, Fn&& fn) {
  if (slot == nullptr) {
    fn();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t c0 = ThreadCpuNs(), i0 = ThreadInstructions();
  fn();
  slot->name = name;
  slot->cpu_ns = ThreadCpuNs() - c0;
  if (const int64_t i1 = ThreadInstructions(); i0 >= 0 && i1 >= 0) slot->instructions = i1 - i0;
  slot->wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Report Analyze(const profiler::Trace& trace, const Thresholds& thresholds, size_t threads, const std::vector<std::string>& what_if) {
  return Analyze(trace, thresholds, threads, what_if, nullptr);
}

namespace {

// The step model without the steps past a recording loss (Analyze's and Measure's).
StepModel StepsWithinRecording(const profiler::Trace& trace, size_t threads, StepDetail detail, std::vector<RecordingLoss>& losses) {
  StepModel steps = BuildStepModel(trace, threads, detail);
  losses = FindRecordingLosses(trace);
  LeaveOutStepsPastLosses(steps, losses);
  return steps;
}

}  // namespace

Measurement Measure(const profiler::Trace& trace, const Thresholds& thresholds) {
  Measurement m;
  m.steps = StepsWithinRecording(trace, 1, StepDetail::kBoundaries, m.losses);
  m.memory = MemoryFigures(trace, m.steps, thresholds);
  for (int32_t rank : trace.RankIds())
    if (auto load = CpuLoadOfRank(trace, m.steps, rank)) m.cpu_load.push_back(std::move(*load));
  return m;
}

Report Analyze(const profiler::Trace& trace, const Thresholds& thresholds, size_t threads,
               const std::vector<std::string>& what_if, std::vector<StageTime>* stages) {
  Report report;
  // Per stage a slot of its own (stages run on several threads), in the order they start: the
  // indexes and tables (8), the families, then the 3 stages after them (`late`).
  const auto& registry = Registry();
  std::vector<StageTime> slots(stages != nullptr ? 8 + registry.size() + 3 : 0);
  const auto slot = [&](size_t i) { return stages != nullptr ? &slots[i] : nullptr; };
  const auto late = [&](size_t k) { return slot(8 + registry.size() + k); };
  const auto top_n = static_cast<int64_t>(std::max(0.0, thresholds.Get("report.top_n")));
  const StepModel& steps = report.metrics.steps;
  std::optional<ScopeIndex> modules, annotations;
  std::optional<LinkIndex> links;
  // A stage as a task: `fn` run and timed in its slot.
  const auto stage = [&](size_t k, const char* name, auto fn) {
    return std::function<void()>([at = slot(k), name, fn] { Timed(at, name, fn); });
  };
  // Both cores (profiler::RunTasks), each task into its own slot, merged in registry order: the
  // same report for any thread count. First the step model beside the scope indexes (they do not
  // need it), then the tables and the families together.
  profiler::RunTasks({stage(0, "steps",
                            [&] {
                              report.metrics.steps =
                                  StepsWithinRecording(trace, threads, StepDetail::kFull, report.metrics.losses);
                              report.metrics.unfinished = FindUnfinishedRanks(trace, report.metrics.steps);
                              report.metrics.windows = FindRecordedWindows(trace);
                            }),
                      stage(1, "module index", [&] { modules.emplace(trace, ScopeIndex::What::kModules); }),
                      stage(2, "annotation index", [&] { annotations.emplace(trace, ScopeIndex::What::kAnnotations); }),
                      stage(3, "links", [&] { links.emplace(trace, threads); })},
                     threads);
  const AnalysisContext ctx{trace, steps, thresholds, *modules, *annotations, report.metrics.unfinished, report.metrics.windows,
                              *links};
  std::vector<Report> parts(registry.size());
  std::vector<std::function<void()>> tasks;
  tasks.push_back(stage(4, "op table", [&] { report.metrics.op_table = BuildOpTable(trace, steps, top_n); }));
  tasks.push_back(stage(5, "kernel table", [&] { report.metrics.kernel_table = BuildKernelTable(trace, steps, top_n); }));
  tasks.push_back(stage(6, "module table", [&] {
    report.metrics.module_table = BuildModuleTable(trace, steps, *modules, top_n);
  }));
  tasks.push_back(stage(7, "critical path", [&] {
    report.metrics.critical_paths = BuildCriticalPaths(trace, *links, steps);
  }));
  for (size_t i = 0; i < registry.size(); ++i)
    tasks.push_back(stage(8 + i, registry[i].family, [&, i] { registry[i].fn(ctx, parts[i]); }));
  profiler::RunTasks(tasks, threads);
  for (Report& part : parts) {
    std::move(part.findings.begin(), part.findings.end(), std::back_inserter(report.findings));
    std::move(part.metrics.temporal.begin(), part.metrics.temporal.end(), std::back_inserter(report.metrics.temporal));
    std::move(part.metrics.launch.begin(), part.metrics.launch.end(), std::back_inserter(report.metrics.launch));
    std::move(part.metrics.memory.begin(), part.metrics.memory.end(), std::back_inserter(report.metrics.memory));
    std::move(part.metrics.compile.begin(), part.metrics.compile.end(), std::back_inserter(report.metrics.compile));
    std::move(part.metrics.utilization.begin(), part.metrics.utilization.end(), std::back_inserter(report.metrics.utilization));
    std::move(part.metrics.cpu_load.begin(), part.metrics.cpu_load.end(), std::back_inserter(report.metrics.cpu_load));
  }
  Timed(late(0), "post-passes", [&] {
    FlagBatchSmall(ctx, report);  // reads the families' findings (gpu.idle, gpu.launch_bound) and memory figures
    FlagCompileForLaunches(ctx, report);  // reads gpu.launch_bound and the compile figures
    FlagCompileForFusion(ctx, report);    // reads the critical paths, the compile figures and the above
    DropSlowStepsBehindDevice(report);    // reads the critical paths' device pace
    // Several ranks: a claim found on each is shown once, naming them (as rank by rank), before the
    // replay: only the rank shown is replayed (the 8-rank DLRM set: 73 replays of 8 ranks' graphs
    // before, for predictions of which one rank's were kept).
    if (trace.ranks.size() > 1) report.findings = FoldFindings(std::move(report.findings), trace.ranks.size());
  });
  if (const double n = thresholds.Get("what_if.steps"); n >= 1)
    Timed(late(1), "what-if", [&] {  // each fix's transform replayed, every saving bounded by it (dependency/what_if.cc)
      PredictSavings(trace, *links, steps, what_if, report, threads, static_cast<size_t>(n));
    });
  Timed(late(2), "utilization evidence, sort", [&] {
    AddUtilizationEvidence(report);  // MFU beside the causes of a low one
    SortFindings(report.findings);
  });
  if (stages != nullptr)
    for (StageTime& t : slots)
      if (!t.name.empty()) stages->push_back(std::move(t));
  return report;
}

void SortFindings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.RankingPct() != b.RankingPct()) return a.RankingPct() > b.RankingPct();
    if (a.estimated_saving_ns != b.estimated_saving_ns) return a.estimated_saving_ns > b.estimated_saving_ns;  // no steps
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
}

}  // namespace trainrx::analyzers
