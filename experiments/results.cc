#include "trainrx/experiments/results.h"

#include <fmt/format.h>

#include <algorithm>
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

void AddTrialMeasures(Arm& arm, const TrialResult& r) {
  arm.cpu.push_back(r.cpu);
  // Trials already counted in trial_ms before this one: memory for each of them, or none at all.
  const bool all_before = arm.memory_growth.size() + 1 == arm.trial_ms.size();
  if (!r.has_memory || !all_before) {
    arm.memory_growth.clear(), arm.memory_peak.clear();
    return;
  }
  arm.memory_growth.push_back(r.memory_growth);
  arm.memory_peak.push_back(r.memory_peak);
}

MachineLoad SummarizeMachine(const std::vector<const Arm*>& arms) {
  std::vector<profiler::CpuLoad> trials;
  for (const Arm* arm : arms) trials.insert(trials.end(), arm->cpu.begin(), arm->cpu.end());
  return SummarizeTrials(trials);
}

MachineLoad SummarizeTrials(const std::vector<profiler::CpuLoad>& trials) {
  MachineLoad m;
  std::vector<double> waits, others, wanted;
  for (const profiler::CpuLoad& l : trials) {
    ++m.trials;
    if (!l.measured) continue;
    ++m.measured;
    const double pct = 100 * l.WaitShare();
    waits.push_back(pct);
    if (l.Starved()) ++m.starved;
    if (l.OtherCpus() >= 0) others.push_back(l.OtherCpus());
    wanted.push_back(l.OwnCpus() + l.WaitingThreads());
    m.cpus = std::max(m.cpus, l.cpus);
  }
  if (waits.empty()) return m;
  m.median_wait_pct = stats::Median(waits);
  m.max_wait_pct = *std::max_element(waits.begin(), waits.end());
  if (!others.empty()) m.median_other_cpus = stats::Median(others);
  m.median_wanted_cpus = stats::Median(wanted);
  return m;
}

std::string MachineNote(const MachineLoad& m) {
  if (!m.busy()) return "";
  // Who took the CPUs, as machine.busy says it: other programs (a tenth of the CPUs or more), or the
  // trials' own threads wanting more CPUs than there are.
  std::string others;
  if (profiler::OthersOnCpus(m.median_other_cpus, m.cpus))
    others = fmt::format("; other programs used {:.1f} of the {:.0f} CPUs (median)", m.median_other_cpus, m.cpus);
  if (m.cpus > 0 && m.median_wanted_cpus > m.cpus)
    others += fmt::format("; the trials' own threads wanted {:.1f} CPUs of the {:.0f} (median)", m.median_wanted_cpus, m.cpus);
  return fmt::format("busy machine: {} of {} trials waited for a CPU {:.0f} % or more of the time their threads were ready "
                     "to run, with other programs on the CPUs (median {:.1f} %, worst {:.1f} %){}. Their times hold that wait, and trials that differ by "
                     "scheduling can hide or fake a difference: time on a quiet machine (or pin the job: taskset, fewer "
                     "threads with torch.set_num_threads), or give it more trials",
                     m.starved, m.measured, profiler::kBusyWaitPct, m.median_wait_pct, m.max_wait_pct, others);
}

}  // namespace trainrx::experiments
