// The operator and kernel tables of Metrics (PyTorch profiler's key_averages(), HTA's kernel
// breakdown, the TensorBoard plugin's operator view): where users look first.
//
// Operators (EventKind::kCpuOp), grouped by name over all ranks and threads:
//   count     occurrences
//   total     inclusive time: sum of dur over the occurrences not nested in an op of the same name
//             on their thread (recursion counts once, so total <= the thread's time)
//   self      per occurrence dur - sum(dur of its direct child ops on the same thread), at least 0;
//             the nesting comes from each track's order after Trace::Finalize (ts asc, dur desc:
//             an enclosing range comes before what it encloses). Only CPU ops nest: a user
//             annotation between two ops is transparent, and runtime calls (cudaLaunchKernel)
//             stay in the self time of the op that made them.
//   mean      sum of dur over all occurrences / count
//   share     total / basis: the summed step wall time (steps), else the summed trace span
// Kernels (EventKind::kKernel): count, total = self = sum of dur, mean, share of the summed
// kernel time of the table. Worked example: ops A [0,100) and B [10,40) on one thread, A [0,50)
// on another -> A: count 2, total 150, self 120; B: count 1, total 30, self 30.
#include <algorithm>
#include <set>
#include <map>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "per_step.h"
#include "scopes.h"
#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::StrId;
using profiler::Trace;

struct Acc {
  int64_t count = 0, total_ns = 0, self_ns = 0, dur_ns = 0;
};

// Which events count: with steps, those starting inside a step of their rank (ranks without
// steps are left out); without, all.
class Scope {
 public:
  Scope(const Trace& trace, const StepModel& steps) : with_steps_(!steps.steps.empty()) {
    for (int32_t rank : trace.RankIds()) windows_.emplace(rank, StepWindows(steps, rank));
  }
  bool Counts(int32_t rank, int64_t ts_ns) const {
    if (!with_steps_) return true;
    auto it = windows_.find(rank);
    return it != windows_.end() && !it->second.empty() && it->second.Contains(ts_ns);
  }

 private:
  bool with_steps_;
  std::unordered_map<int32_t, StepWindows> windows_;
};

// Sorts by `key` (highest first, then name), keeps top_n rows and folds the rest into `other`.
template <typename Map, typename Key>
void Fold(const Trace& trace, const Map& by_name, int64_t top_n, const char* what, Key key, NameTable& t) {
  // Kernels do not nest (total = self): their totals add up; op totals nest across names.
  t.other_has_total = std::string_view(what) == "kernels";
  auto row = [&](const auto& name, const Acc& a) {
    NameRow r;
    if constexpr (std::is_same_v<std::decay_t<decltype(name)>, StrId>) r.name = std::string(trace.strings.Get(name));
    else r.name = std::string(name);
    r.count = a.count;
    r.total_ns = a.total_ns;
    r.self_ns = a.self_ns;
    r.mean_ns = a.count > 0 ? static_cast<double>(a.dur_ns) / static_cast<double>(a.count) : 0.0;
    return r;
  };
  std::vector<NameRow> rows;
  rows.reserve(by_name.size());
  for (const auto& [name, a] : by_name) rows.push_back(row(name, a));
  std::sort(rows.begin(), rows.end(), [&](const NameRow& a, const NameRow& b) {
    if (key(a) != key(b)) return key(a) > key(b);
    return a.name < b.name;
  });
  t.names = static_cast<int64_t>(rows.size());
  auto share = [&](int64_t ns) { return t.basis_ns > 0 ? static_cast<double>(ns) / static_cast<double>(t.basis_ns) : 0.0; };
  double other_dur = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    NameRow& r = rows[i];
    r.share = share(r.total_ns);
    r.self_share = share(r.self_ns);
    if (static_cast<int64_t>(i) < top_n) continue;
    ++t.other_names;
    t.other.count += r.count;
    t.other.total_ns += r.total_ns;
    t.other.self_ns += r.self_ns;
    other_dur += r.mean_ns * static_cast<double>(r.count);
  }
  if (t.other_names > 0) {
    t.other.name = "other (" + std::to_string(t.other_names) + " " + what + ")";
    t.other.self_share = share(t.other.self_ns);
    if (t.other_has_total) {
      t.other.mean_ns = t.other.count > 0 ? other_dur / static_cast<double>(t.other.count) : 0.0;
      t.other.share = share(t.other.total_ns);
    } else {
      t.other.total_ns = 0;
    }
    rows.resize(static_cast<size_t>(std::max<int64_t>(top_n, 0)));
  }
  t.rows = std::move(rows);
}

// Steps over the ranks the tables take events from, and their summed wall time.
void StepBasisOf(const StepModel& steps, NameTable& t) {
  for (const auto& s : steps.steps) {
    ++t.steps;
    t.basis_ns += s.wall_ns;
  }
}

// Ops and modules: shares of the summed step time, or without steps of the summed trace span.
void HostBasisOf(const Trace& trace, const StepModel& steps, NameTable& t) {
  if (!steps.steps.empty()) {
    t.basis = "step time";
    StepBasisOf(steps, t);
  } else {
    t.basis = "trace span";
    std::unordered_map<int32_t, std::pair<int64_t, int64_t>> span;  // rank -> [first start, last end)
    for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
      for (const Event& e : trace.TrackEvents(ti)) {
        auto [it, fresh] = span.try_emplace(trace.tracks[ti].rank, e.ts_ns, e.end_ns());
        it->second.first = std::min(it->second.first, e.ts_ns);
        it->second.second = std::max(it->second.second, e.end_ns());
      }
    }
    for (const auto& [rank, s] : span) t.basis_ns += s.second - s.first;
  }
}

}  // namespace

NameTable BuildOpTable(const Trace& trace, const StepModel& steps, int64_t top_n) {
  NameTable t;
  const Scope scope(trace, steps);
  HostBasisOf(trace, steps, t);
  std::unordered_map<StrId, Acc> by_name;
  struct Open {
    const Event* e;
    int64_t child_ns;
  };
  std::vector<Open> stack;
  std::unordered_map<StrId, int> depth;  // open ops per name on this thread (recursion)
  auto close = [&]() {
    const Open& o = stack.back();
    by_name[o.e->name].self_ns += std::max<int64_t>(0, o.e->dur_ns - o.child_ns);
    --depth[o.e->name];
    stack.pop_back();
  };
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const int32_t rank = trace.tracks[ti].rank;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kCpuOp || !scope.Counts(rank, e.ts_ns)) continue;
      // Close what ended before e, and what e sticks out of (a malformed overlap: e is no child).
      while (!stack.empty() && !(e.ts_ns < stack.back().e->end_ns() && e.end_ns() <= stack.back().e->end_ns())) close();
      if (!stack.empty()) stack.back().child_ns += e.dur_ns;
      Acc& a = by_name[e.name];
      ++a.count;
      a.dur_ns += e.dur_ns;
      if (depth[e.name]++ == 0) a.total_ns += e.dur_ns;
      stack.push_back({&e, 0});
    }
    while (!stack.empty()) close();
  }
  Fold(trace, by_name, top_n, "ops", [](const NameRow& r) { return r.self_ns; }, t);
  return t;
}

NameTable BuildKernelTable(const Trace& trace, const StepModel& steps, int64_t top_n) {
  NameTable t;
  t.basis = "kernel time";
  StepBasisOf(steps, t);
  t.basis_ns = 0;
  const Scope scope(trace, steps);
  std::unordered_map<StrId, Acc> by_name;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const int32_t rank = trace.tracks[ti].rank;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kKernel || !scope.Counts(rank, e.ts_ns)) continue;
      Acc& a = by_name[e.name];
      ++a.count;
      a.dur_ns += e.dur_ns;
      a.total_ns += e.dur_ns;
      a.self_ns += e.dur_ns;
      t.basis_ns += e.dur_ns;
    }
  }
  Fold(trace, by_name, top_n, "kernels", [](const NameRow& r) { return r.total_ns; }, t);
  return t;
}

NameTable BuildModuleTable(const Trace& trace, const StepModel& steps, const ScopeIndex& modules, int64_t top_n) {
  NameTable t;
  if (modules.empty()) return t;
  const Scope scope(trace, steps);
  HostBasisOf(trace, steps, t);
  std::unordered_map<std::string_view, Acc> by_name;
  // Module ranges cover only the first calls of the model (the start-up hook removes its hooks
  // after them): shares are of the steps that have a module range, not of every step (issue 34:
  // "GPT 7.7 % of step" while forward was 32.5 %).
  std::map<int32_t, StepWindows> windows;
  std::set<std::pair<int32_t, int64_t>> covered;  // (rank, step index) with a module range
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const int32_t rank = trace.tracks[ti].rank;
    const auto& ranges = modules.RangesOf(ti);
    std::vector<int64_t> child_ns(ranges.size(), 0);
    for (size_t k = 0; k < ranges.size(); ++k)
      if (ranges[k].parent >= 0) child_ns[static_cast<size_t>(ranges[k].parent)] += ranges[k].end - ranges[k].ts;
    for (size_t k = 0; k < ranges.size(); ++k) {
      const auto& r = ranges[k];
      if (!scope.Counts(rank, r.ts)) continue;
      if (!steps.steps.empty()) {
        auto it = windows.find(rank);
        if (it == windows.end()) it = windows.emplace(rank, StepWindows(steps, rank)).first;
        if (const int64_t k = it->second.Index(r.ts); k >= 0) covered.insert({rank, k});
      }
      Acc& a = by_name[r.name];
      ++a.count;
      a.dur_ns += r.end - r.ts;
      a.total_ns += r.end - r.ts;  // a module's path names one module: no recursion to fold
      a.self_ns += std::max<int64_t>(0, r.end - r.ts - child_ns[k]);
    }
  }
  if (!covered.empty()) {
    // The covered steps' wall time: each rank's steps in time order, as StepWindows numbers them.
    std::map<int32_t, std::vector<const StepRow*>> by_rank;
    for (const StepRow& row : steps.steps) by_rank[row.rank].push_back(&row);
    t.basis_ns = 0;
    t.steps = 0;
    for (auto& [rank, rows] : by_rank) {
      std::sort(rows.begin(), rows.end(), [](const StepRow* a, const StepRow* b) { return a->start_ns < b->start_ns; });
      for (size_t k = 0; k < rows.size(); ++k) {
        if (!covered.count({rank, static_cast<int64_t>(k)})) continue;
        t.basis_ns += rows[k]->wall_ns;
        ++t.steps;
      }
    }
  }
  Fold(trace, by_name, top_n, "modules", [](const NameRow& r) { return r.total_ns; }, t);
  return t;
}

}  // namespace trainrx::analyzers
