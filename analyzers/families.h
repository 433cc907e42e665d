// Entry points of the analyzer families (one per file), collected by registry.cc.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainrx::analyzers {

void AnalyzeGpu(const AnalysisContext& ctx, Report& out);     // gpu.cc
void AnalyzeInput(const AnalysisContext& ctx, Report& out);   // input.cc
void AnalyzeSync(const AnalysisContext& ctx, Report& out);    // sync.cc
void AnalyzeOptim(const AnalysisContext& ctx, Report& out);   // optim.cc
void AnalyzeModel(const AnalysisContext& ctx, Report& out);   // model.cc
void AnalyzeConfig(const AnalysisContext& ctx, Report& out);  // config.cc
void AnalyzeEval(const AnalysisContext& ctx, Report& out);    // eval.cc
void AnalyzePrecision(const AnalysisContext& ctx, Report& out);  // precision.cc
void AnalyzeTensor(const AnalysisContext& ctx, Report& out);     // tensor.cc
void AnalyzePython(const AnalysisContext& ctx, Report& out);     // python.cc
void AnalyzeDist(const AnalysisContext& ctx, Report& out);       // dist.cc
void AnalyzeMemory(const AnalysisContext& ctx, Report& out);     // memory.cc
void AnalyzeCompile(const AnalysisContext& ctx, Report& out);    // compile.cc
void AnalyzeStepTimes(const AnalysisContext& ctx, Report& out);  // step_time.cc
void AnalyzeUtilization(const AnalysisContext& ctx, Report& out);  // utilization.cc
void AnalyzeMachine(const AnalysisContext& ctx, Report& out);      // machine.cc
void AnalyzeLayout(const AnalysisContext& ctx, Report& out);       // layout.cc
// After the families: MFU beside the findings that explain a low one, and the achieved rate of fp32
// matmuls beside precision.fp32_matmul (utilization.cc).
void AddUtilizationEvidence(Report& report);
// batch.small (memory.cc): after the families, from their findings and the memory figures.
void FlagBatchSmall(const AnalysisContext& ctx, Report& report);
// The memory figures alone (peak, growth per step, capacity) per (rank, device), no finding: what
// Measure() gives a trial (memory.cc).
std::vector<DeviceMemory> MemoryFigures(const profiler::Trace& trace, const StepModel& steps, const Thresholds& thresholds);
// compile.not_compiled / compile.reduce_overhead (compile.cc): after the families, from gpu.launch_bound.
void FlagCompileForLaunches(const AnalysisContext& ctx, Report& report);
void FlagCompileForFusion(const AnalysisContext& ctx, Report& report);  // after FlagCompileForLaunches
// steps.slow (step_time.cc) where the device ran behind the loop on that rank (CriticalPath::
// DeviceBehind): the loop's slow steps are it waiting for the device's queue (an H200 ResNet with no
// sync in the loop: 2 of 18 steps 16x the median, "62 % saving"), not a stall; the Steps section says
// the device's pace is the throughput.
void DropSlowStepsBehindDevice(Report& report);
// The critical path of each rank's steps (critical_path.cc) over the dependency model (links.h), and
// the path of given windows of one rank.
struct RankLinks;
std::vector<CriticalPath> BuildCriticalPaths(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps);
CriticalPath PathOfWindows(const profiler::Trace& trace, const RankLinks& links,
                           const std::vector<std::pair<int64_t, int64_t>>& windows);
// Every finding's estimated saving bounded by the path time of the classes its fix removes (after
// the families; the rank's path must exist).
void BoundSavingsByPath(Report& report);
// Each finding whose catalog entry names a transform gets its predicted saving (Finding::predicted)
// from the what-if replay of its rank's dependency graph (dependency/what_if.cc).
class LinkIndex;
// Also the what-ifs of Metrics: every finding's fix together, and `what_if` (transform names) together.
// Each rank's graph covers `replayed_steps` steps (ReplayedSteps).
void PredictSavings(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps,
                    const std::vector<std::string>& what_if, Report& report, size_t threads,
                    size_t replayed_steps);
// dist.data_parallel on one rank (dataparallel.cc; called by AnalyzeDist).
void AnalyzeDataParallel(const AnalysisContext& ctx, int32_t rank, Report& out);

// The module table of Metrics (op_table.cc).
NameTable BuildModuleTable(const profiler::Trace& trace, const StepModel& steps, const ScopeIndex& modules,
                           int64_t top_n);

// The steps a rank's figures are formed over (rank -1: all ranks). With steps, counts and times
// are means per step and a saving is a share of the mean step; without, they are totals over the
// trace and there is no step to take a share of: nothing may then say "per step" (issue 12 saw
// "2.0 per step" and "85.8 % of the step" on traces with no steps).
class StepBasis {
 public:
  explicit StepBasis(const StepModel& steps, int32_t rank = -1);
  int64_t steps() const { return steps_; }  // 0: no steps
  bool has_steps() const { return steps_ > 0; }
  double mean_step_ns() const { return mean_step_ns_; }  // 0 without steps
  double Per(double total) const { return steps_ > 0 ? total / static_cast<double>(steps_) : total; }
  // "per step" / "in the trace", for titles and units: "3.0 syncs per step", "12 syncs in the trace".
  const char* unit() const { return steps_ > 0 ? "per step" : "in the trace"; }
  // Evidence keys for a figure formed by Per(): "<base>_per_step_mean" (a mean over steps, next to
  // the median step the report shows) or "<base>_total"; NsKey keeps the "_ns" suffix last.
  std::string Key(std::string_view base) const;
  std::string NsKey(std::string_view base) const;

 private:
  int64_t steps_ = 0;
  double mean_step_ns_ = 0;
};

// Sets f's estimated saving to `saving_ns`, of which `bound_ns` is the measured time the fix
// would remove, described by `bound` ("GPU idle time"); both already formed by basis.Per(). The
// saving is kept in [0, bound], the bound at most the mean step; its share of the step is 0
// without steps. Every analyzer that claims a saving goes through here.
void SetSaving(Finding& f, const StepBasis& basis, double saving_ns, double bound_ns, std::string bound);

// Severity from the estimated saving, for rules whose cost is the saving itself: >= 20 % of the
// step high, >= 5 % medium, >= 0.5 % low, below that (or no steps to judge by) info.
Severity SeverityForSaving(const Finding& f);

// Indices of the tracks of one rank and kind (e.g. the CPU threads of rank 0), in track order.
std::vector<uint32_t> TracksOf(const profiler::Trace& trace, int32_t rank, profiler::TrackKind kind);

// The detected steps of one rank as time windows. A count divided by StepCount() must only count
// events inside them: work before the first step (torch.compile tracing, warm-up), between steps
// or after the last (evaluation, the final print) is not per-step work. Without steps every time
// is inside (the whole trace is the one "step" StepCount() divides by).
class StepWindows {
 public:
  StepWindows(const StepModel& steps, int32_t rank);
  bool Contains(int64_t ts_ns) const;
  // The step (0-based, in time order) whose window holds ts_ns; -1 when none does.
  int64_t Index(int64_t ts_ns) const;
  // The parts of `intervals` inside the steps, so that a per-step figure sums over the same steps
  // its denominator counts (StepBasis): not the warm-up, not the time before the first step or
  // after the last. Without steps the intervals are returned as they are (figures are then trace
  // totals). E.g. windows [10, 20), [30, 40) and interval [15, 35) -> [15, 20), [30, 35).
  std::vector<std::pair<int64_t, int64_t>> Clip(std::vector<std::pair<int64_t, int64_t>> intervals) const;
  size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }

 private:
  std::vector<std::pair<int64_t, int64_t>> windows_;  // sorted [start, end)
};

}  // namespace trainrx::analyzers
