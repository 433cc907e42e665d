// Entry points of the analyzer families (one per file), collected by registry.cc.
#pragma once

#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

void AnalyzeGpu(const AnalysisContext& ctx, Report& out);     // gpu.cc
void AnalyzeInput(const AnalysisContext& ctx, Report& out);   // input.cc
void AnalyzeSync(const AnalysisContext& ctx, Report& out);    // sync.cc
void AnalyzeOptim(const AnalysisContext& ctx, Report& out);   // optim.cc
void AnalyzeModel(const AnalysisContext& ctx, Report& out);   // model.cc
void AnalyzeConfig(const AnalysisContext& ctx, Report& out);  // config.cc
void AnalyzeEval(const AnalysisContext& ctx, Report& out);    // eval.cc

// Number of steps to divide per-trace counts by (>= 1), for a rank or all ranks (-1).
double StepCount(const StepModel& steps, int32_t rank = -1);
// Mean step wall time in ns (0 when no steps).
double MeanStepNs(const StepModel& steps, int32_t rank = -1);

}  // namespace trainrx::analyzers
