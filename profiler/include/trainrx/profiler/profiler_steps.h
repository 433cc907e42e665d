// ProfilerStep#N ranges for traces that have none, so that tools that look for torch.profiler's
// step ranges (HTA's iteration analyses, TraceLens, Perfetto queries) find our steps.
#pragma once

#include <string>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

struct StepSpan {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t track = 0;  // the thread of the optimizer step that ends it
};

// Steps inferred from repeated Optimizer.step#... ranges (CPU ops, annotations or Python frames
// on the CPU threads of `rank`): step k runs from the end of optimizer step k-1 to the end of
// optimizer step k. Empty with fewer than two optimizer steps. The one inference rule, used by the
// analyzer (analyzers/steps.cc) and by AddProfilerSteps; works before and after Finalize().
// A fixed cycle of optimizer steps on each batch (a GAN: the discriminator's step, then the
// generator's, on one DataLoader fetch): the cycle is the step. The spans that hold one
// loader fetch ("enumerate(DataLoader)#...") come every k >= 2 spans, the spans between hold none
// and none holds two: the spans are merged k at a time from each one that holds a fetch, a partial
// cycle at either end left out, and *cycle (optional) is set to k (else 1). No fetches, gradient
// accumulation's k fetches a step, or any irregular pattern keeps one step per optimizer step.
std::vector<StepSpan> StepsFromOptimizer(const Trace& trace, int32_t rank, int* cycle = nullptr);

// "inferred from Optimizer.step", with the cycle said where there is one ("..., 2 optimizer steps
// and one loader fetch an iteration: the iteration is the step").
std::string OptimizerStepsSource(int cycle);

// Steps inferred from backward passes, for scripts that update their parameters without
// torch.optim (`p.data.add_(p.grad, alpha=-lr)`: "No training steps found" on such a
// script, shares over tokenizing, evaluation and saving). A backward pass is a maximal run of
// autograd's "autograd::engine::evaluate_function: ..." ops (top level on their thread) with no
// other top-level op of the forward thread (the one with the most such ops) starting between
// them; step k runs from the end of backward pass k-1 to the end of pass k, so the parameter update
// after a pass starts the next step. Evaluation has no backward and makes no step boundary. Two
// backward passes per iteration (a GAN) count as two steps. Empty with fewer than two passes. Use
// only where StepsFromOptimizer finds none (gradient accumulation runs several passes per
// optimizer step). Works before and after Finalize().
std::vector<StepSpan> StepsFromBackward(const Trace& trace, int32_t rank);

// Adds a "ProfilerStep#N" user annotation for each step of `rank` when the trace has no
// ProfilerStep# range: one per "trainrx::step#N" marker (same span, same thread), else one per
// step StepsFromOptimizer() infers.
// Inferred steps are numbered from `first` (a recording that skipped steps keeps the run's
// numbers). Call before Trace::Finalize(). Returns how the steps were found ("trainrx step
// markers", "inferred from Optimizer.step") or "" when none were added.
std::string AddProfilerSteps(Trace& trace, int32_t rank, int64_t first = 1);

}  // namespace trainrx::profiler
