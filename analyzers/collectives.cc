// Collectives of a rank and their matching across ranks (see collectives.h).
#include "collectives.h"

#include <algorithm>
#include <optional>

#include "families.h"
#include "intervals.h"
#include "runtime_names.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

std::vector<Collective> CollectivesOf(const profiler::Trace& trace, int32_t rank, const StepModel* steps, bool gpu) {
  std::optional<StepWindows> in_steps;
  if (steps) in_steps.emplace(*steps, rank);
  std::vector<Collective> out;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || (t.kind == TrackKind::kGpuStream) != gpu) continue;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.dur_ns <= 0) continue;
      const std::string_view n = trace.Name(e);
      const bool is = gpu ? e.kind == EventKind::kKernel && IsCommKernel(n)
                          : (e.kind == EventKind::kUserAnnotation || e.kind == EventKind::kCpuOp) && StartsWith(n, "gloo:");
      if (is) out.push_back({e.ts_ns, e.dur_ns, e.name, in_steps && !in_steps->empty() && in_steps->Contains(e.ts_ns)});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Collective& a, const Collective& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

bool HasGpuCollectives(const profiler::Trace& trace, int32_t rank) {
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || t.kind != TrackKind::kGpuStream) continue;
    for (const Event& e : trace.TrackEvents(ti))
      if (e.kind == EventKind::kKernel && e.dur_ns > 0 && IsCommKernel(trace.Name(e))) return true;
  }
  return false;
}

std::vector<MatchedSet> MatchAcrossRanks(const std::vector<int32_t>& ranks,
                                         const std::map<int32_t, std::vector<Collective>>& coll, bool steady_only) {
  std::vector<MatchedSet> out;
  if (ranks.empty()) return out;
  // name -> rank -> its collectives of that name, in time order
  std::map<profiler::StrId, std::map<int32_t, std::vector<const Collective*>>> by_name;
  for (int32_t r : ranks) {
    auto it = coll.find(r);
    if (it == coll.end()) return out;
    for (const auto& c : it->second) by_name[c.name][r].push_back(&c);
  }
  for (const auto& [name, per_rank] : by_name) {
    if (per_rank.size() != ranks.size()) continue;
    const size_t n = per_rank.begin()->second.size();
    bool same_count = true;
    for (const auto& [r, list] : per_rank) same_count = same_count && list.size() == n;
    if (!same_count) continue;
    for (size_t k = 0; k < n; ++k) {
      MatchedSet set;
      bool inside = true;
      for (int32_t r : ranks) {
        set.push_back(per_rank.at(r)[k]);
        inside = inside && set.back()->in_steps;
      }
      if (inside || !steady_only) out.push_back(std::move(set));
    }
  }
  std::sort(out.begin(), out.end(), [](const MatchedSet& a, const MatchedSet& b) { return a[0]->ts_ns < b[0]->ts_ns; });
  return out;
}

}  // namespace trainrx::analyzers
