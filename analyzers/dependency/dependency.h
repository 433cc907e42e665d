// Entry points of dependency/: the critical path over the dependency model (links.h) and the
// what-if replay, collected by registry.cc.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "per_step.h"

namespace trainrx::analyzers {

// The critical path of each rank's steps (critical_path.cc) over the dependency model (links.h), and
// the path of given windows of one rank.
struct RankLinks;
std::vector<CriticalPath> BuildCriticalPaths(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps);
CriticalPath PathOfWindows(const profiler::Trace& trace, const RankLinks& links,
                           const std::vector<std::pair<int64_t, int64_t>>& windows);
// Each finding whose catalog entry names a transform gets its predicted saving (Finding::predicted)
// from the what-if replay of its rank's dependency graph (dependency/what_if.cc), and every finding
// whose fix has a transform (its own, or its variant's bound) its estimated saving bounded by that
// replay's most generous end: one graph for both.
class LinkIndex;
// Also the what-ifs of Metrics: every finding's fix together, and `what_if` (transform names) together.
// Each rank's graph covers `replayed_steps` steps (ReplayedSteps).
void PredictSavings(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps,
                    const std::vector<std::string>& what_if, Report& report, size_t threads,
                    size_t replayed_steps);

}  // namespace trainrx::analyzers
