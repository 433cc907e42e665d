// What the cross-rank analyses (dist.cc, rank_mismatch.cc) compare between ranks: medians and
// each rank's mean phases per step (private to analyzers/).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/rank_side.h"

namespace trainrx::analyzers {

// The median, the mean of the two middle values on an even count (0 for none).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Mean per step of each phase on a rank: data wait, compute (forward + backward), optimizer, other.
struct PhaseMeans {
  double data = 0, compute = 0, optimizer = 0, other = 0;
};
inline PhaseMeans MeansOf(const std::vector<StepRow>& rows) {
  PhaseMeans m;
  int64_t n = 0;
  for (const auto& s : rows) {
    ++n;
    m.data += static_cast<double>(s.data_wait_ns);
    m.compute += static_cast<double>(s.forward_ns + s.backward_ns);
    m.optimizer += static_cast<double>(s.optimizer_ns);
    m.other += static_cast<double>(s.other_ns);
  }
  if (n > 0) m.data /= n, m.compute /= n, m.optimizer /= n, m.other /= n;
  return m;
}

// The collectives the cross-rank analyses compare: GPU ones when every rank has some, else
// Gloo's (each side holds both).
inline bool ComparesGpuCollectives(const std::vector<RankSide>& sides) {
  for (const auto& side : sides)
    if (side.gpu.empty()) return false;
  return true;
}

// A rank's phases per steady step, its compute without its time inside Gloo collectives when
// those are the ones compared (they run on the CPU inside the step, where the phase model counts
// them as forward or backward: a rank that waits for another would look as slow as it).
inline PhaseMeans RankMeans(const RankSide& side, bool gloo) {
  PhaseMeans m = MeansOf(side.steps);
  if (gloo && !side.steps.empty()) {
    double in_collectives = 0;
    for (const auto& c : side.gloo)
      if (c.in_steps) in_collectives += static_cast<double>(c.dur_ns);
    m.compute -= in_collectives / static_cast<double>(side.steps.size());
  }
  return m;
}

// "0-3, 5, 9-10": ranks as sorted ranges.
inline std::string RankList(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace trainrx::analyzers
