// ProfilerStep#N ranges for traces that have none, so that tools that look for torch.profiler's
// step ranges (HTA's iteration analyses, TraceLens, Perfetto queries) find our steps.
#pragma once

#include <string>

#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

// Adds a "ProfilerStep#N" user annotation for each step of `rank` when the trace has no
// ProfilerStep# range: one per "trainrx::step#N" marker (same span, same thread), else one per
// repeated Optimizer.step#... range (step k from the end of optimizer step k-1 to the end of
// optimizer step k, on the optimizer's thread: the analyzer's inference rule, analyzers/steps.cc).
// Call before Trace::Finalize(). Returns how the steps were found ("trainrx step markers",
// "inferred from Optimizer.step") or "" when none were added.
std::string AddProfilerSteps(Trace& trace, int32_t rank);

}  // namespace trainrx::profiler
