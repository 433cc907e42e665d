// A single-tensor optimizer step as a loop over parameters (private to analyzers/): shared by the
// optim.single_tensor rule (optim.cc) and the what-if's optimizer transforms (dependency/what_if.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

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
