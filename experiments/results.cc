#include "trainrx/experiments/results.h"

#include <cmath>

#include "trainrx/experiments/launcher.h"

namespace trainrx::experiments {

bool MemoryComparison::Notable() const {
  if (!measured) return false;
  const bool growth_changed = growth.significant && std::abs(growth.diff) >= kMemoryGrowthFloor;
  const bool peak_changed = peak.significant && peak.median_a > 0 && 100 * std::abs(peak.diff) >= kMemoryPeakFloorPct * peak.median_a;
  return growth_changed || peak_changed;
}

MemoryComparison CompareMemory(const Arm& a, const Arm& b, uint64_t seed) {
  MemoryComparison m;
  const auto complete = [](const Arm& arm) {
    return arm.memory_growth.size() >= 2 && arm.memory_growth.size() == arm.trial_ms.size() &&
           arm.memory_peak.size() == arm.memory_growth.size();
  };
  if (!complete(a) || !complete(b)) return m;
  stats::CompareOptions o;
  o.seed = seed;
  m.measured = true;
  m.growth = stats::CompareDifference(a.memory_growth, b.memory_growth, o);
  m.peak = stats::CompareDifference(a.memory_peak, b.memory_peak, o);
  return m;
}

void AddTrialMemory(Arm& arm, const TrialResult& r) {
  // Trials already counted in trial_ms before this one: memory for each of them, or none at all.
  const bool all_before = arm.memory_growth.size() + 1 == arm.trial_ms.size();
  if (!r.has_memory || !all_before) {
    arm.memory_growth.clear(), arm.memory_peak.clear();
    return;
  }
  arm.memory_growth.push_back(r.memory_growth);
  arm.memory_peak.push_back(r.memory_peak);
}

}  // namespace trainrx::experiments
