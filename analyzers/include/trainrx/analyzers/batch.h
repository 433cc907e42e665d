// trainrx::analyzers batch — how many samples a training step processes, read from the recorded
// input shapes (our collector records conv/linear/norm inputs for the first steps; torch.profiler's
// record_shapes=True records every op's). Used by `sweep --cmd` to rank cells by samples per second
// when the grid changes the batch (ranked by time per step, a sweep over batch 6/12/24
// named batch 6 best while batch 24 had 1.32x its throughput). Pure; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

struct BatchEstimate {
  int64_t samples = 0;     // samples per step
  std::string op;          // the op whose input gave it: "aten::conv2d"
  int steps = 0;           // steps that agreed on `samples` (of `steps_with_shapes`)
  int steps_with_shapes = 0;
  // Elements of one sample of that input (its dims after the batch dimension multiplied: 3*28*28 for
  // conv2d's [32, 3, 28, 28]); a sample takes at least this many bytes in the step. 0: unknown.
  int64_t sample_elements = 0;
  // Gradient accumulation: the backward passes a step's forwards of that input fed, and
  // the batch of one of them; `samples` is their sum (4 micro-batches of 8: samples 32,
  // micro_steps 4, micro_batch 8). One pass: micro_steps 1, micro_batch = samples.
  int micro_steps = 1;
  int64_t micro_batch = 0;
};

// For the lowest rank with steps: in each step (warm-up steps included: shapes are recorded in the
// first steps only), the training input: the ops that lead with the batch dimension and have
// recorded input dims (convolution, linear, normalization: the batch is dim 0 of input 0;
// embedding: dim 0 of its indices, input 1); of those named as the step's first (the model's
// entry), the last to start before the step's first backward: the forward the backward trains
// (minGPT's batch-1 text generation at iteration 0 comes first in its step and was
// read as the batch). A step of k micro-batches (gradient accumulation: a forward before each of
// its k backward passes) counts them all. The value most steps agree on (the last batch of an
// epoch may be smaller).
// nullopt without steps or without such an op: the caller must not guess.
//   steps 1-3: aten::conv2d [[32, 3, 28, 28], [8, 3, 3, 3], [8], ...] -> {32, "aten::conv2d", 3, 3}
//   4 x (aten::embedding [[50304, 768], [8, 1024]], backward) a step -> samples 32, micro_steps 4, micro_batch 8
std::optional<BatchEstimate> SamplesPerStep(const profiler::Trace& trace, const StepModel& steps);

// The tokens of one sample when the step's training input is token ids: the input an
// embedding looks up, [B, T] indices, has T tokens a sample (its sample_elements); 0 for any other
// input (an image's elements are not tokens) and for [B] indices (one id a sample is a lookup, not
// a sequence).
int64_t TokensPerSample(const BatchEstimate& batch);

}  // namespace trainrx::analyzers
