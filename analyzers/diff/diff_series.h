// Per-step figures of one side of a diff (private to analyzers/diff*.cc): every operator's self
// time, every kernel's time, every rank's collectives, the time outside ops, and each operator's
// recorded input shapes, each as a value per steady step, so that the diff can tell a row's change
// from the step-to-step variation of that row (diff.cc's noise rule).
//
// Steps are StepModel::steps (all ranks, in the model's order); an event counts in the step of
// its rank whose window holds its start (warm-up and evaluation do not count, as in the op table).
// Without steps the whole trace is one "step" (figures are totals, and the diff says so).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

using Series = std::vector<double>;  // one value per step (ns, or calls)
using NamedSeries = std::map<std::string, Series, std::less<>>;

// The most frequent input signature of one op name (anywhere in the trace), e.g. dims
// "[[16,3,16,16],[32,3,3,3],[]]" and types "[float,float,]" seen 40 times.
struct InputSignature {
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::string> types;
  int64_t count = 0;
};

struct SideSeries {
  size_t steps = 0;                          // values per series (at least 1)
  Series wall;                               // step wall time
  NamedSeries op_self;     // op name -> self time per step
  NamedSeries op_calls;    // op name -> calls per step
  NamedSeries op_total;    // op name -> inclusive time (not nested in its own name)
  NamedSeries kernels;     // GPU kernel name -> time per step
  Series outside;                            // wall - the summed op self time of the step
  // (rank, collective name) -> its time in each of that rank's steps (GPU communication kernels,
  // Gloo's CPU ranges; analyzers/collectives.h).
  std::map<std::pair<int32_t, std::string>, Series> collectives;
  std::map<std::string, InputSignature> inputs;  // op name -> its most frequent recorded inputs (whole trace)
  // op name -> the nn.Modules it ran in (ScopeIndex, "nn.Module: ..." ranges: the innermost
  // enclosing one) -> its calls there (whole trace: the collector's hook records module ranges
  // in the first 20 calls of a model only). Ops outside any module range are not counted.
  std::map<std::string, std::map<std::string, int64_t>, std::less<>> op_modules;
};

// The modules an op ran in, most calls first (ties: by name), at most `max`; empty when none.
std::vector<std::string> TopModules(const SideSeries& side, const std::string& op, size_t max = 3);

SideSeries BuildSideSeries(const profiler::Trace& trace, const StepModel& steps);

// "[16,3,16,16]" for {16,3,16,16}.
std::string DimsText(const std::vector<int64_t>& dims);

}  // namespace trainrx::analyzers
