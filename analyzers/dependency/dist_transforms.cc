// The what-if's communication transform (issue 59; docs/what-if.md): dist.comm_overlap's fix, DDP's
// all-reduce overlapped with backward, as an edit of the rank's dependency graph (replay.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "config_view.h"
#include "dependency/what_if.h"
#include "intervals.h"
#include "ops.h"

namespace trainrx::analyzers {

using Kind = RankGraph::Kind;

namespace {

// Whether anything in the graph waits for a collective's end: a task other than a collective with an
// edge from one (a stream wait, the next op on its thread), or a wait it releases. Without it, the
// trace does not show what the step waits for, and a shorter collective changes nothing in replay.
bool SomethingWaitsFor(const RankGraph& g, const std::vector<uint8_t>& is_comm) {
  for (size_t j = 0; j < g.tasks().size(); ++j) {
    const RankGraph::Task& t = g.tasks()[j];
    if (is_comm[j]) continue;
    if (t.release >= 0 && is_comm[static_cast<size_t>(t.release)]) return true;
    for (int32_t k = 0; k < t.edge_count; ++k)
      if (is_comm[static_cast<size_t>(g.edges()[static_cast<size_t>(t.edge_begin + k)].from)]) return true;
  }
  return false;
}

// Per step, what could hide behind compute: the collectives' exposed time (with no compute beside
// them) and the compute not yet beside a collective (the room to hide it in).
struct Exposure {
  std::vector<int64_t> exposed_of;          // per collective (index in the list): its exposed time
  std::vector<int64_t> exposed, room;       // per step
  int64_t comm_ns = 0;                      // the collectives' time in the steps
};
Exposure ExposureOf(const RankGraph& g, const std::vector<int32_t>& comm, const std::vector<uint8_t>& is_comm, bool gpu) {
  const size_t steps = g.windows().size();
  // Compute: the other kernels (a GPU rank), or the CPU ops outside Gloo's and c10d's ranges.
  const auto comm_frames = g.FramesUnder([](std::string_view n) { return StartsWith(n, "gloo:") || StartsWith(n, "c10d::"); });
  std::vector<std::vector<Interval>> compute(steps);
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const RankGraph::Task& t = g.tasks()[i];
    const int32_t s = g.StepOf(static_cast<int32_t>(i));
    if (s < 0 || is_comm[i] || t.dur <= 0) continue;
    const bool counts = gpu ? t.kind == Kind::kDevice && t.work >= 0 &&
                                  g.links().work[static_cast<size_t>(t.work)].e->kind == profiler::EventKind::kKernel
                            : t.kind == Kind::kHost && t.frame >= 0 && !comm_frames[static_cast<size_t>(t.frame)];
    if (counts) compute[static_cast<size_t>(s)].push_back({t.ts, t.ts + t.dur});
  }
  Exposure x;
  x.exposed.assign(steps, 0);
  x.room.assign(steps, 0);
  std::vector<std::vector<Interval>> comm_in(steps);
  std::vector<int64_t> compute_ns(steps, 0);
  for (size_t s = 0; s < steps; ++s) compute_ns[s] = MergeIntervals(compute[s]);
  for (int32_t i : comm) {
    const RankGraph::Task& t = g.tasks()[static_cast<size_t>(i)];
    const auto s = static_cast<size_t>(g.StepOf(i));
    const int64_t exposed = t.dur - CoveredWithin(compute[s], t.ts, t.ts + t.dur);
    x.exposed_of.push_back(exposed);
    x.exposed[s] += exposed;
    x.comm_ns += t.dur;
    comm_in[s].push_back({t.ts, t.ts + t.dur});
  }
  for (size_t s = 0; s < steps; ++s) {
    MergeIntervals(comm_in[s]);
    int64_t beside = 0;
    for (const auto& [a, b] : comm_in[s]) beside += CoveredWithin(compute[s], a, b);
    x.room[s] = std::max<int64_t>(0, compute_ns[s] - beside);
  }
  return x;
}

}  // namespace

// dist.comm_overlap: DDP's gradient all-reduce overlapped with backward (smaller buckets, static
// graph): each step's collectives that ran with no compute beside them hide behind the step's
// compute that was not yet beside a collective, except the last bucket's, reduced after backward.
TransformPlan CommOverlap(const RankGraph& g) {
  // The collectives' tasks: communication kernels, and every slice of a Gloo range (its own time and
  // the copies and reductions inside it).
  std::vector<int32_t> comm;
  std::vector<uint8_t> is_comm(g.tasks().size(), 0);
  const auto gloo = g.FramesUnder([](std::string_view n) { return StartsWith(n, "gloo:"); });
  for (const auto& [e, i] : CollectiveTasks(g)) is_comm[static_cast<size_t>(i)] = 1;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const RankGraph::Task& t = g.tasks()[i];
    if (t.kind != Kind::kDevice && t.frame >= 0 && gloo[static_cast<size_t>(t.frame)]) is_comm[i] = 1;
    if (is_comm[i] && g.StepOf(static_cast<int32_t>(i)) >= 0 && t.dur > 0) comm.push_back(static_cast<int32_t>(i));
  }
  if (comm.empty()) return NoSaving(g, "no collective in the replayed steps: nothing to overlap");
  const bool gpu = g.tasks()[static_cast<size_t>(comm.front())].kind == Kind::kDevice;
  TransformPlan p;
  if (!gpu) {
    const ConfigView cfg(g.trace(), g.links().rank);
    if (NoFreeCore(cfg.Static("cpu_count").value_or(0), cfg.Max("intra_op_threads").value_or(0), cfg.LocalRanks())) {
      p.not_predictable =
          "Gloo's threads have no core free beside the ranks' compute threads on this machine: overlap only moves its "
          "work onto cores the compute needs; what helps is communicating less often (no_sync over k micro-steps saves "
          "up to (1 - 1/k) of the collectives' time) or fewer ranks, which this trace cannot replay";
      return p;
    }
  }
  if (!SomethingWaitsFor(g, is_comm)) {
    p.not_predictable = "nothing in this trace waits for the collectives (no stream-wait event, synchronize or thread "
                        "tied to their end): what hiding them saves cannot be replayed";
    return p;
  }
  const Exposure x = ExposureOf(g, comm, is_comm, gpu);
  // Per level: the share of what fits in the room that hides (three quarters: the last bucket, reduced
  // after backward ends, and the buckets' own launch order keep the rest exposed; half; all of it).
  const double hides[3] = {0.75, 0.5, 1.0};
  int64_t exposed_total = 0, hideable_total = 0;
  for (size_t s = 0; s < x.exposed.size(); ++s) {
    exposed_total += x.exposed[s];
    hideable_total += std::min(x.exposed[s], x.room[s]);
  }
  if (hideable_total <= 0)
    return NoSaving(g, x.comm_ns > 0 && exposed_total == 0
                           ? "the collectives already run beside compute: nothing left to hide"
                           : "no compute in the steps that is not already beside a collective: nothing to hide them behind");
  AddLevels(p, g, [&](int level, Edits& e) {
    const double h = hides[level];
    for (size_t k = 0; k < comm.size(); ++k) {
      const RankGraph::Task& t = g.tasks()[static_cast<size_t>(comm[k])];
      const auto s = static_cast<size_t>(g.StepOf(comm[k]));
      if (x.exposed[s] <= 0 || t.dur <= 0) continue;
      const double share = static_cast<double>(std::min(x.exposed[s], x.room[s])) / static_cast<double>(x.exposed[s]);
      const double hidden = h * share * static_cast<double>(x.exposed_of[k]);
      e.Scale(static_cast<size_t>(comm[k]), static_cast<float>(1.0 - hidden / static_cast<double>(t.dur)));
    }
  });
  const double steps = g.steps();
  p.assumptions = fmt::format(
      "DDP overlaps its all-reduce with backward (bucket_cap_mb smaller, gradient_as_bucket_view, static_graph): of "
      "the collectives' {:.2f} ms a step, {:.2f} ms ran with no {} beside them; they hide behind the step's {} not "
      "yet beside a collective ({:.2f} ms a step of it fits), three quarters at the point (half to all: the last "
      "bucket, reduced after backward ends, stays exposed); a collective's wait for a late rank is not its transfer and "
      "does not hide",
      static_cast<double>(x.comm_ns) / 1e6 / steps, static_cast<double>(exposed_total) / 1e6 / steps,
      gpu ? "kernel" : "CPU op", gpu ? "kernels" : "CPU ops", static_cast<double>(hideable_total) / 1e6 / steps);
  return p;
}

}  // namespace trainrx::analyzers
