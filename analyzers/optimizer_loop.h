// A single-tensor optimizer step as a loop over parameters (private to analyzers/): shared by the
// optim.single_tensor rule (optim.cc) and the what-if's optimizer transforms (dependency/what_if.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "intervals.h"
#include "ops.h"
#include "phases.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// The rank's backward ranges on every CPU thread (autograd's device threads included), sorted: an
// optimizer step that holds some runs its closure (Lightning, SAM, LBFGS), whose forward and
// backward are not the optimizer's work.
inline std::vector<Interval> BackwardRanges(const profiler::Trace& trace, int32_t rank) {
  std::vector<Interval> out;
  std::vector<int8_t> backward(trace.strings.size(), -1);  // per name: asked once
  for (uint32_t ti : CpuThreadTracks(trace, rank)) {
    for (const profiler::Event& e : trace.TrackEvents(ti)) {
      if (e.dur_ns <= 0 || e.kind == profiler::EventKind::kPythonFunction || e.name >= backward.size()) continue;
      int8_t& b = backward[e.name];
      if (b < 0) b = PhaseOf(trace.Name(e)) == kBackward ? 1 : 0;
      if (b) out.push_back({e.ts_ns, e.end_ns()});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Where an optimizer step's own work starts: the end of the last backward range that starts inside
// it (its closure's), else its start. Only what runs from there on is the optimizer's (the update).
inline int64_t OwnWorkStart(const profiler::Event& step, const std::vector<Interval>& backward) {
  int64_t from = step.ts_ns;
  for (auto it = std::lower_bound(backward.begin(), backward.end(), Interval{step.ts_ns, INT64_MIN});
       it != backward.end() && it->first < step.end_ns(); ++it)
    from = std::max(from, std::min(it->second, step.end_ns()));
  return from;
}

// "AdamW" from "Optimizer.step#AdamW.step" (torch.optim's range); "" for any other name.
inline std::string_view OptimizerOfStepRange(std::string_view range) {
  constexpr std::string_view kPrefix = "Optimizer.step#";
  if (range.substr(0, kPrefix.size()) != kPrefix) return {};
  const std::string_view rest = range.substr(kPrefix.size());
  return rest.substr(0, rest.find('.'));
}

// Whether torch.optim has a fused step for this optimizer (fused=True: Adam, AdamW, SGD, Adagrad; on
// CUDA since torch 2.0-2.2, on the CPU since 2.4). LibTorch's C++ optimizers have none.
inline bool HasFusedStep(std::string_view optimizer) {
  return optimizer == "Adam" || optimizer == "AdamW" || optimizer == "SGD" || optimizer == "Adagrad";
}

// Whether torch.optim has a multi-tensor (foreach) or fused step for this optimizer: every one but
// LBFGS (one flat vector, its closure called again and again) and SparseAdam (sparse gradients);
// an unknown name (a custom optimizer) is given the benefit of the doubt.
inline bool HasMultiTensorStep(std::string_view optimizer) { return optimizer != "LBFGS" && optimizer != "SparseAdam"; }

// Parameters updated by one single-tensor step whose outermost op names are `names` (in order):
// the times the sequence repeats with its smallest period (SGD: add_ x P, period 1; AdamW: add_
// lerp_ mul_ ... per parameter, period ~10), else the fewest occurrences of any name when the
// sequence is not periodic (a parameter without a gradient skipped, a first step's state set-up).
inline int64_t ParametersOfLoop(const std::vector<profiler::StrId>& names) {
  if (names.empty()) return 0;
  for (size_t p = 1; p <= names.size() / 2; ++p) {
    if (names.size() % p != 0) continue;
    bool ok = true;
    for (size_t i = p; i < names.size() && ok; ++i) ok = names[i] == names[i - p];
    if (ok) return static_cast<int64_t>(names.size() / p);
  }
  std::map<profiler::StrId, int64_t> counts;
  for (profiler::StrId n : names) ++counts[n];
  int64_t fewest = INT64_MAX;
  for (const auto& [n, c] : counts) fewest = std::min(fewest, c);
  return fewest;
}

}  // namespace trainrx::analyzers
