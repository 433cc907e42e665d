// What a step feeds its model (private to analyzers/): per step, the first op in time that a
// predicate accepts and whose inputs were recorded (record_shapes, or our collector's first
// steps). One walk shared by the rank's input shape (cross_rank.cc: dist.rank_mismatch compares
// ranks' inputs) and the samples per step (batch.cc: sweeps rank by throughput).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "shapes.h"
#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

struct StepInput {
  const profiler::Event* op = nullptr;
  Dims dims;
};

// For each of `rows` (steps of `rank`), the first accepted op with recorded inputs that starts
// inside it; rows without one are left out. `accept(name, dims)` sees the op's name and its
// parsed input dims.
std::vector<StepInput> FirstInputPerStep(const profiler::Trace& trace, int32_t rank,
                                         const std::vector<const StepRow*>& rows,
                                         const std::function<bool(std::string_view, const Dims&)>& accept);

}  // namespace trainrx::analyzers
