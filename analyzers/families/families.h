// Entry points of the analyzer families (one per file in families/), collected by registry.cc, and
// the passes that run after them over their findings.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "per_step.h"

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
void AnalyzeMachine(const AnalysisContext& ctx, Report& out);      // machine.cc
void AnalyzeLayout(const AnalysisContext& ctx, Report& out);       // layout.cc
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
// dist.data_parallel on one rank (dataparallel.cc; called by AnalyzeDist).
void AnalyzeDataParallel(const AnalysisContext& ctx, int32_t rank, Report& out);

}  // namespace trainrx::analyzers
