// Entry points of the analyzer families (one per file), collected by registry.cc.
#pragma once

#include "trainrx/analyzers/analysis.h"

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

// Number of steps to divide per-trace counts by (>= 1), for a rank or all ranks (-1).
double StepCount(const StepModel& steps, int32_t rank = -1);
// Mean step wall time in ns (0 when no steps).
double MeanStepNs(const StepModel& steps, int32_t rank = -1);

// The detected steps of one rank as time windows. A count divided by StepCount() must only count
// events inside them: work before the first step (torch.compile tracing, warm-up), between steps
// or after the last (evaluation, the final print) is not per-step work. Without steps every time
// is inside (the whole trace is the one "step" StepCount() divides by).
class StepWindows {
 public:
  StepWindows(const StepModel& steps, int32_t rank);
  bool Contains(int64_t ts_ns) const;
  bool empty() const { return windows_.empty(); }

 private:
  std::vector<std::pair<int64_t, int64_t>> windows_;  // sorted [start, end)
};

}  // namespace trainrx::analyzers
