// Entry points of cost/: utilization (MFU) and the evidence beside the findings that explain a low
// one, collected by registry.cc.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "per_step.h"

namespace trainrx::analyzers {

void AnalyzeUtilization(const AnalysisContext& ctx, Report& out);  // utilization.cc
// After the families: MFU beside the findings that explain a low one, and the achieved rate of fp32
// matmuls beside precision.fp32_matmul (utilization.cc).
void AddUtilizationEvidence(Report& report);

}  // namespace trainrx::analyzers
