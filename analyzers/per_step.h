// The per-step helpers every analysis uses (per_step.cc), and the module table (op_table.cc): the
// bottom floor of analyzers/ (docs/architecture.md), beside the step model, the scope indexes and
// the links.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainrx::analyzers {

// The module table of Metrics (op_table.cc).
NameTable BuildModuleTable(const profiler::Trace& trace, const StepModel& steps, const ScopeIndex& modules,
                           int64_t top_n);

// The steps a rank's figures are formed over (rank -1: all ranks). With steps, counts and times
// are means per step and a saving is a share of the mean step; without, they are totals over the
// trace and there is no step to take a share of: nothing may then say "per step" (issue 12 saw
// "2.0 per step" and "85.8 % of the step" on traces with no steps).
class StepBasis {
 public:
  explicit StepBasis(const StepModel& steps, int32_t rank = -1);
  int64_t steps() const { return steps_; }  // 0: no steps
  bool has_steps() const { return steps_ > 0; }
  double mean_step_ns() const { return mean_step_ns_; }  // 0 without steps
  double Per(double total) const { return steps_ > 0 ? total / static_cast<double>(steps_) : total; }
  // "per step" / "in the trace", for titles and units: "3.0 syncs per step", "12 syncs in the trace".
  const char* unit() const { return steps_ > 0 ? "per step" : "in the trace"; }
  // Evidence keys for a figure formed by Per(): "<base>_per_step_mean" (a mean over steps, next to
  // the median step the report shows) or "<base>_total"; NsKey keeps the "_ns" suffix last.
  std::string Key(std::string_view base) const;
  std::string NsKey(std::string_view base) const;

 private:
  int64_t steps_ = 0;
  double mean_step_ns_ = 0;
};

// Sets f's estimated saving to `saving_ns`, of which `bound_ns` is the measured time the fix
// would remove, described by `bound` ("GPU idle time"); both already formed by basis.Per(). The
// saving is kept in [0, bound], the bound at most the mean step; its share of the step is 0
// without steps. Every analyzer that claims a saving goes through here.
void SetSaving(Finding& f, const StepBasis& basis, double saving_ns, double bound_ns, std::string bound);

// Severity from the estimated saving, for rules whose cost is the saving itself: >= 20 % of the
// step high, >= 5 % medium, >= 0.5 % low, below that (or no steps to judge by) info.
Severity SeverityForSaving(const Finding& f);

// Indices of the tracks of one rank and kind (e.g. the CPU threads of rank 0), in track order.
std::vector<uint32_t> TracksOf(const profiler::Trace& trace, int32_t rank, profiler::TrackKind kind);

// The detected steps of one rank as time windows. A count divided by StepCount() must only count
// events inside them: work before the first step (torch.compile tracing, warm-up), between steps
// or after the last (evaluation, the final print) is not per-step work. Without steps every time
// is inside (the whole trace is the one "step" StepCount() divides by).
class StepWindows {
 public:
  StepWindows(const StepModel& steps, int32_t rank);
  bool Contains(int64_t ts_ns) const;
  // The step (0-based, in time order) whose window holds ts_ns; -1 when none does.
  int64_t Index(int64_t ts_ns) const;
  // The parts of `intervals` inside the steps, so that a per-step figure sums over the same steps
  // its denominator counts (StepBasis): not the warm-up, not the time before the first step or
  // after the last. Without steps the intervals are returned as they are (figures are then trace
  // totals). E.g. windows [10, 20), [30, 40) and interval [15, 35) -> [15, 20), [30, 35).
  std::vector<std::pair<int64_t, int64_t>> Clip(std::vector<std::pair<int64_t, int64_t>> intervals) const;
  size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }

 private:
  std::vector<std::pair<int64_t, int64_t>> windows_;  // sorted [start, end)
};

}  // namespace trainrx::analyzers
