// python.loop_indexing: a Python loop that indexes a tensor element by element
// (`for i in range(n): x[i].mul_(g[i])`) where one vectorized op would do: each iteration pays
// the interpreter and the op dispatch (and on a GPU a kernel launch) for a sliver of work.
// TorchTidy: ForLoopIndexingPattern (aten::select, then the same ops, repeated >= 10 times).
//
// Signal, on one thread's outermost CPU ops (ops.h): an aten::select starts a unit that ends at
// the next aten::select; the unit's op names repeat back to back at least
// `python.loop_indexing.min_repeats` times. Ops inside `enumerate(DataLoader)#...` ranges are left
// out: a map-style Dataset is indexed once per sample by the loader itself (x[i], y[i]), which is
// the DataLoader's design, not the user's loop (input.* rules cover loading).
//
// Saving: (ops in the run - ops in one unit) x per-op overhead, the 10th percentile of the run's
// op durations (aten::select is a view: its time is dispatch, not math), at most the run's time;
// the Python loop around the ops is not counted.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "families.h"
#include "intervals.h"
#include "ops.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

constexpr size_t kMaxUnit = 16;  // ops per iteration considered (TorchTidy: unbounded)

}  // namespace

namespace {

// The loops found on one rank: how many, their iterations, ops and time, the saving, and each
// loop body's text ("3 x [aten::select, aten::mul_]") with its count.
struct IndexingLoops {
  int64_t runs = 0, iterations = 0, run_ops = 0, run_ns = 0, saving_ns = 0;
  std::map<std::string, int64_t> units;
};

void FlagLoopIndexing(const AnalysisContext& ctx, int32_t rank, const IndexingLoops& loops, int64_t min_repeats, Report& out) {
  const auto& [runs, iterations, run_ops, run_ns, saving_ns, units] = loops;
  const StepBasis basis(ctx.steps, rank);
  Finding f;
  f.id = "python.loop_indexing";
  f.rank = rank;
  f.severity = Severity::kLow;
  f.confidence = Confidence::kMedium;
  f.title = fmt::format("A Python loop indexes tensors element by element ({:.1f} loops {}, {:.0f} iterations each)",
                        basis.Per(runs), basis.unit(), static_cast<double>(iterations) / static_cast<double>(runs));
  f.measured = static_cast<double>(iterations) / static_cast<double>(runs);
  f.threshold = static_cast<double>(min_repeats);
  f.measured_unit = "iterations per loop";
  f.evidence = {{"loops", runs}, {"iterations", iterations}, {"ops", run_ops}, {"loop_ns", run_ns}};
  for (const auto& [u, c] : units) f.examples.push_back(fmt::format("{:.1f} x {}: {}", basis.Per(c), basis.unit(), u));
  SetSaving(f, basis, basis.Per(saving_ns), basis.Per(run_ns), "indexing-loop time");
  f.examples.push_back("estimate: ops beyond one iteration x per-op overhead (10th percentile of their durations), "
                       "at most the loop's time; the interpreter's share of the loop is not counted");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzePython(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  const profiler::StrId select = trace.strings.Find("aten::select");
  if (select == profiler::kNoStr) return;
  const auto min_repeats = static_cast<int64_t>(ctx.thresholds.Get("python.loop_indexing.min_repeats"));
  for (int32_t rank : trace.RankIds()) {
    IndexingLoops loops;
    auto& [runs, iterations, run_ops, run_ns, saving_ns, units] = loops;
    const StepWindows in_steps(ctx.steps, rank);
    // Step starts of this rank: a loop does not run across a step boundary.
    std::vector<int64_t> step_starts;
    for (const auto& st : ctx.steps.steps)
      if (st.rank == rank) step_starts.push_back(st.start_ns);
    std::sort(step_starts.begin(), step_starts.end());
    const auto step_of = [&](int64_t ts) { return std::upper_bound(step_starts.begin(), step_starts.end(), ts) - step_starts.begin(); };
    for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
      const auto events = trace.TrackEvents(ti);
      // Loader ranges on this thread (sorted: they do not overlap one another).
      std::vector<Interval> loader;
      for (const Event& e : events)
        if (e.kind != EventKind::kCpuOp && StartsWith(trace.Name(e), "enumerate(DataLoader)#")) loader.push_back({e.ts_ns, e.end_ns()});
      MergeIntervals(loader);
      std::vector<size_t> outer;
      for (size_t i : OutermostOps(events, 0, events.size()))
        if (CoveredWithin(loader, events[i].ts_ns, events[i].ts_ns + 1) == 0) outer.push_back(i);
      // Names, with a break wherever loader ops were dropped between two kept ops.
      const auto name_at = [&](size_t k) { return events[outer[k]].name; };
      const auto same_unit = [&](size_t a, size_t b, size_t len) {
        for (size_t x = 0; x < len; ++x)
          if (name_at(a + x) != name_at(b + x)) return false;
        // The repeat must follow in the same step, with no loader range in between.
        const int64_t from = events[outer[a]].ts_ns, to = events[outer[b + len - 1]].ts_ns;
        return step_of(from) == step_of(to) && CoveredWithin(loader, from, events[outer[b + len - 1]].end_ns()) == 0;
      };
      size_t k = 0;
      while (k < outer.size()) {
        if (name_at(k) != select || !in_steps.Contains(events[outer[k]].ts_ns)) { ++k; continue; }
        size_t next = k + 1;
        while (next < outer.size() && next - k <= kMaxUnit && name_at(next) != select) ++next;
        if (next >= outer.size() || next - k > kMaxUnit) { ++k; continue; }
        const size_t len = next - k;
        size_t reps = 1;
        while (k + (reps + 1) * len <= outer.size() && same_unit(k, k + reps * len, len)) ++reps;
        if (static_cast<int64_t>(reps) < min_repeats) { ++k; continue; }
        const size_t n_ops = reps * len;
        std::vector<int64_t> durs;
        for (size_t x = k; x < k + n_ops; ++x) durs.push_back(events[outer[x]].dur_ns);
        const int64_t overhead = Quantile(durs, 0.10);
        const int64_t wall = events[outer[k + n_ops - 1]].end_ns() - events[outer[k]].ts_ns;
        ++runs;
        iterations += static_cast<int64_t>(reps);
        run_ops += static_cast<int64_t>(n_ops);
        run_ns += wall;
        saving_ns += std::min<int64_t>(static_cast<int64_t>(n_ops - len) * overhead, wall);
        std::string unit;
        for (size_t x = k; x < k + len; ++x) unit += (x > k ? ", " : "") + std::string(trace.Name(events[outer[x]]));
        ++units[fmt::format("{} x [{}]", reps, unit)];
        k += n_ops;
      }
    }
    if (runs > 0) FlagLoopIndexing(ctx, rank, loops, min_repeats, out);
  }
}

}  // namespace trainrx::analyzers
