// How the families form per-step figures and savings (per_step.h): the step windows of a rank,
// the step basis (means per step, or totals without steps) and the one saving setter.
#include <algorithm>
#include <cmath>

#include "per_step.h"

namespace trainrx::analyzers {

std::vector<uint32_t> TracksOf(const profiler::Trace& trace, int32_t rank, profiler::TrackKind kind) {
  std::vector<uint32_t> out;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti)
    if (trace.tracks[ti].rank == rank && trace.tracks[ti].kind == kind) out.push_back(ti);
  return out;
}

StepWindows::StepWindows(const StepModel& steps, int32_t rank) {
  for (const auto& s : steps.steps)
    if (s.rank == rank) windows_.push_back({std::max(s.start_ns, s.trained_from_ns), s.start_ns + s.wall_ns});
  std::sort(windows_.begin(), windows_.end());
}

bool StepWindows::Contains(int64_t ts_ns) const { return windows_.empty() || Index(ts_ns) >= 0; }

int64_t StepWindows::Index(int64_t ts_ns) const {
  // Analyzers ask event by event along a track, in time order: the answer is mostly the window of
  // the last question on this thread, or the next one. The hint is only tried, never trusted: it
  // is taken when it is exactly what the search below would return (the last window starting at
  // or before ts_ns, and holding it), so it cannot go stale across objects or threads. Without a
  // hit, the binary search (most of this function's cost on a 1.4 M-event trace).
  thread_local size_t hint = 0;
  for (size_t k = hint; k < hint + 2 && k < windows_.size(); ++k) {
    if (windows_[k].first <= ts_ns && ts_ns < windows_[k].second && (k + 1 == windows_.size() || windows_[k + 1].first > ts_ns)) {
      hint = k;
      return static_cast<int64_t>(k);
    }
  }
  auto it = std::upper_bound(windows_.begin(), windows_.end(), std::make_pair(ts_ns, INT64_MAX));
  if (it == windows_.begin() || ts_ns >= std::prev(it)->second) return -1;
  hint = static_cast<size_t>(std::prev(it) - windows_.begin());
  return static_cast<int64_t>(hint);
}

std::vector<std::pair<int64_t, int64_t>> StepWindows::Clip(std::vector<std::pair<int64_t, int64_t>> intervals) const {
  if (windows_.empty()) return intervals;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [s, e] : intervals) {
    // Windows that may overlap [s, e): from the last one starting at or before s.
    auto it = std::upper_bound(windows_.begin(), windows_.end(), std::make_pair(s, INT64_MAX));
    if (it != windows_.begin()) --it;
    for (; it != windows_.end() && it->first < e; ++it) {
      const int64_t lo = std::max(s, it->first), hi = std::min(e, it->second);
      if (hi > lo) out.push_back({lo, hi});
    }
  }
  return out;
}

StepBasis::StepBasis(const StepModel& steps, int32_t rank) {
  double total = 0;
  for (const auto& s : steps.steps) {
    if (rank >= 0 && s.rank != rank) continue;
    total += static_cast<double>(s.wall_ns);
    ++steps_;
  }
  mean_step_ns_ = steps_ > 0 ? total / static_cast<double>(steps_) : 0.0;
}

std::string StepBasis::Key(std::string_view base) const {
  return std::string(base) + (steps_ > 0 ? "_per_step_mean" : "_total");
}

std::string StepBasis::NsKey(std::string_view base) const { return Key(base) + "_ns"; }

void SetSaving(Finding& f, const StepBasis& basis, double saving_ns, double bound_ns, std::string bound) {
  if (!std::isfinite(bound_ns) || bound_ns < 0) bound_ns = 0;
  if (basis.has_steps()) bound_ns = std::min(bound_ns, basis.mean_step_ns());
  if (!std::isfinite(saving_ns) || saving_ns < 0) saving_ns = 0;
  saving_ns = std::min(saving_ns, bound_ns);
  f.steps = basis.steps();
  f.saving_bound_ns = static_cast<int64_t>(bound_ns);
  f.saving_bound = std::move(bound);
  f.estimated_saving_ns = static_cast<int64_t>(saving_ns);
  f.estimated_saving_pct = basis.has_steps() && basis.mean_step_ns() > 0 ? 100.0 * saving_ns / basis.mean_step_ns() : 0.0;
}

Severity SeverityForSaving(const Finding& f) {
  if (f.steps == 0) return f.estimated_saving_ns > 0 ? Severity::kLow : Severity::kInfo;
  if (f.estimated_saving_pct >= 20) return Severity::kHigh;
  if (f.estimated_saving_pct >= 5) return Severity::kMedium;
  if (f.estimated_saving_pct >= 0.5) return Severity::kLow;
  return Severity::kInfo;
}

}  // namespace trainrx::analyzers
