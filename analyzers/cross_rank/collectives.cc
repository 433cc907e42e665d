// Collectives of a rank and their matching across ranks (see collectives.h).
#include "collectives.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "per_step.h"
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
      if (is) out.push_back({n, e.ts_ns, e.dur_ns, in_steps && !in_steps->empty() && in_steps->Contains(e.ts_ns)});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Collective& a, const Collective& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

std::vector<MatchedSet> MatchAcrossRanks(const std::vector<const std::vector<Collective>*>& lists, bool steady_only) {
  std::vector<MatchedSet> out;
  if (lists.empty()) return out;
  // name -> list -> its collectives of that name, in time order
  std::map<std::string_view, std::vector<std::vector<const Collective*>>> by_name;
  for (size_t i = 0; i < lists.size(); ++i)
    for (const auto& c : *lists[i]) {
      auto& per_list = by_name[c.name];
      per_list.resize(lists.size());
      per_list[i].push_back(&c);
    }
  for (const auto& [name, per_list] : by_name) {
    const size_t n = per_list.front().size();
    bool same_count = n > 0;
    for (const auto& list : per_list) same_count = same_count && list.size() == n;
    if (!same_count) continue;
    for (size_t k = 0; k < n; ++k) {
      MatchedSet set;
      bool inside = true;
      for (const auto& list : per_list) {
        set.push_back(list[k]);
        inside = inside && list[k]->in_steps;
      }
      if (inside || !steady_only) out.push_back(std::move(set));
    }
  }
  std::sort(out.begin(), out.end(), [](const MatchedSet& a, const MatchedSet& b) { return a[0]->ts_ns < b[0]->ts_ns; });
  return out;
}

}  // namespace trainrx::analyzers
