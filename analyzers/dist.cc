// dist.straggler: the rank the others wait for at their collectives.
//
// In synchronous data parallelism every rank's all-reduce ends at the same moment, so a
// collective lasts longest on the ranks that arrived first: its duration on a rank is that rank's
// wait plus the transfer. The rank with the shortest duration of a collective arrived last; the
// others' extra duration is the time they waited for it (HTA's get_potential_stragglers and
// Nsight Systems' nccl_straggler read the same signal). Only durations are compared, never start
// times, so clocks that differ between hosts change nothing.
//
// Collectives: GPU communication kernels (nccl*/rccl*), else the CPU ranges of Gloo collectives
// ("gloo:all_reduce", ...), which last until the data arrived. They are matched across ranks by
// their order inside the steady steps, as long as their names agree.
//
// Ranks not in lockstep (median steps more than 10 % apart) are not judged.
// The finding names the rank, how often it arrived last, the others' wait per step (the saving
// bound: with that rank as fast as the others, they would not wait), and the cause we can see:
// the phase of its steps that takes longer than on the median rank.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "families.h"
#include "intervals.h"
#include "runtime_names.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

struct Collective {
  int64_t ts_ns, dur_ns;
  profiler::StrId name;
  bool in_steps;
};

// A rank's collectives in time order, each marked whether it starts inside the rank's steady
// steps: GPU communication kernels when `gpu`, else Gloo's CPU ranges.
std::vector<Collective> CollectivesOf(const Trace& trace, int32_t rank, const StepModel& steps, bool gpu) {
  const StepWindows in_steps(steps, rank);
  std::vector<Collective> out;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || (t.kind == TrackKind::kGpuStream) != gpu) continue;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.dur_ns <= 0) continue;
      const std::string_view n = trace.Name(e);
      const bool is = gpu ? e.kind == EventKind::kKernel && IsCommKernel(n)
                          : (e.kind == EventKind::kUserAnnotation || e.kind == EventKind::kCpuOp) && StartsWith(n, "gloo:");
      if (is) out.push_back({e.ts_ns, e.dur_ns, e.name, !in_steps.empty() && in_steps.Contains(e.ts_ns)});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Collective& a, const Collective& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Mean per step of each phase on a rank: data wait, compute (forward + backward, or GPU kernel
// time on GPU ranks), optimizer, other.
struct PhaseMeans {
  double data = 0, compute = 0, optimizer = 0, other = 0;
};
PhaseMeans MeansOf(const StepModel& steps, int32_t rank) {
  PhaseMeans m;
  int64_t n = 0;
  for (const auto& s : steps.steps) {
    if (s.rank != rank) continue;
    ++n;
    m.data += static_cast<double>(s.data_wait_ns);
    m.compute += static_cast<double>(s.forward_ns + s.backward_ns);
    m.optimizer += static_cast<double>(s.optimizer_ns);
    m.other += static_cast<double>(s.other_ns);
  }
  if (n > 0) m.data /= n, m.compute /= n, m.optimizer /= n, m.other /= n;
  return m;
}

}  // namespace

void AnalyzeDist(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  const std::vector<int32_t> ranks = trace.RankIds();
  if (ranks.size() < 2) return;
  // GPU collectives when every rank has some, else Gloo's.
  std::map<int32_t, std::vector<Collective>> coll;
  bool gpu = true;
  for (int32_t r : ranks) {
    coll[r] = CollectivesOf(trace, r, ctx.steps, true);
    gpu = gpu && !coll[r].empty();
  }
  if (!gpu)
    for (int32_t r : ranks) coll[r] = CollectivesOf(trace, r, ctx.steps, false);
  // The k-th collective of a name is the same collective on every rank (each rank issues them in
  // the same order), when every rank has as many of that name; the steps of the ranks need not
  // start at the same collective. Kept: those inside the steady steps of every rank.
  std::map<profiler::StrId, std::map<int32_t, std::vector<const Collective*>>> by_name;
  for (int32_t r : ranks)
    for (const auto& c : coll[r]) by_name[c.name][r].push_back(&c);
  std::vector<std::vector<const Collective*>> matched_sets;  // one per matched collective: by rank order
  for (const auto& [name, per_rank] : by_name) {
    if (per_rank.size() != ranks.size()) continue;
    const size_t n = per_rank.begin()->second.size();
    bool same_count = true;
    for (const auto& [r, list] : per_rank) same_count = same_count && list.size() == n;
    if (!same_count) continue;
    for (size_t k = 0; k < n; ++k) {
      std::vector<const Collective*> set;
      bool inside = true;
      for (int32_t r : ranks) {
        set.push_back(per_rank.at(r)[k]);
        inside = inside && set.back()->in_steps;
      }
      if (inside) matched_sets.push_back(std::move(set));
    }
  }
  const size_t matched = matched_sets.size();
  if (matched < 4) return;
  // The reading assumes lockstep ranks (synchronous data parallelism: every rank's step takes as
  // long, as each waits for the others). Ranks whose median steps differ by more than 10 % are not
  // in lockstep (pipeline stages, traces of different runs), and their durations prove nothing.
  std::vector<double> medians;
  for (int32_t r : ranks) {
    std::vector<double> walls;
    for (const auto& st : ctx.steps.steps)
      if (st.rank == r) walls.push_back(static_cast<double>(st.wall_ns));
    if (walls.empty()) return;
    medians.push_back(Median(walls));
  }
  if (*std::max_element(medians.begin(), medians.end()) > 1.1 * *std::min_element(medians.begin(), medians.end())) return;

  std::map<int32_t, int64_t> last_count;
  std::map<int32_t, double> wait_caused;  // the others' median wait, summed over the collectives it was last at
  for (const auto& set : matched_sets) {
    size_t last_i = 0;
    for (size_t i = 0; i < set.size(); ++i)
      if (set[i]->dur_ns < set[last_i]->dur_ns) last_i = i;
    const int32_t last = ranks[last_i];
    std::vector<double> waits;
    for (size_t i = 0; i < set.size(); ++i)
      if (i != last_i) waits.push_back(static_cast<double>(set[i]->dur_ns - set[last_i]->dur_ns));
    const double waited = Median(waits);
    if (waited <= 0) continue;  // all arrived together: nobody was last
    ++last_count[last];
    wait_caused[last] += waited;
  }
  int32_t s = ranks.front();
  for (int32_t r : ranks)
    if (wait_caused[r] > wait_caused[s]) s = r;

  const StepBasis basis(ctx.steps, s);
  if (!basis.has_steps()) return;
  const double share = 100.0 * static_cast<double>(last_count[s]) / static_cast<double>(matched);
  const double wait_per_step = basis.Per(wait_caused[s]);
  const double wait_pct = 100.0 * wait_per_step / basis.mean_step_ns();
  // Arriving last by chance happens to every rank (1 / ranks of the time); a straggler is last at
  // most collectives, at least 1.5 times as often as chance (75 % of them with 2 ranks), and makes
  // the others wait a part of the step worth fixing.
  const double min_share = std::max(ctx.thresholds.Get("dist.straggler.last_pct"), 150.0 / static_cast<double>(ranks.size()));
  if (share < min_share || wait_pct < ctx.thresholds.Get("dist.straggler.wait_pct")) return;

  // The cause we can see: the phase that takes longer on it than on the median of the others.
  // Gloo's collectives run on the CPU inside the step, where the phase model counts them as
  // forward or backward: their time (the others' wait included) is taken out of compute first.
  const auto means = [&](int32_t r) {
    PhaseMeans m = MeansOf(ctx.steps, r);
    if (!gpu) {
      double in_collectives = 0;
      for (const auto& c : coll[r])
        if (c.in_steps) in_collectives += static_cast<double>(c.dur_ns);
      m.compute -= StepBasis(ctx.steps, r).Per(in_collectives);
    }
    return m;
  };
  const PhaseMeans mine = means(s);
  std::vector<double> data, compute, optimizer, other;
  for (int32_t r : ranks) {
    if (r == s) continue;
    const PhaseMeans m = means(r);
    data.push_back(m.data), compute.push_back(m.compute), optimizer.push_back(m.optimizer), other.push_back(m.other);
  }
  const std::pair<const char*, double> excess[] = {{"data wait", mine.data - Median(data)},
                                                   {"compute (forward and backward)", mine.compute - Median(compute)},
                                                   {"optimizer step", mine.optimizer - Median(optimizer)},
                                                   {"other host work", mine.other - Median(other)}};
  const auto* cause = std::max_element(std::begin(excess), std::end(excess),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool visible = cause->second > 0.25 * wait_per_step;

  Finding f;
  f.id = "dist.straggler";
  f.rank = s;
  f.severity = wait_pct >= 20 ? Severity::kHigh : Severity::kMedium;
  f.confidence = matched >= 10 ? Confidence::kHigh : Confidence::kMedium;
  f.title = visible ? fmt::format("Rank {} is a straggler: the others wait {:.2f} ms per step for it ({:.0f}% of the step); "
                                  "its {} takes {:.2f} ms longer per step than the median rank",
                                  s, wait_per_step / 1e6, wait_pct, cause->first, cause->second / 1e6)
                    : fmt::format("Rank {} is a straggler: the others wait {:.2f} ms per step for it ({:.0f}% of the step); "
                                  "its steps' phases do not show why (a slower device or host?)",
                                  s, wait_per_step / 1e6, wait_pct);
  f.measured = wait_pct;
  f.threshold = ctx.thresholds.Get("dist.straggler.wait_pct");
  f.measured_unit = "% of step";
  f.evidence = {{"collectives_matched", static_cast<int64_t>(matched)},
                {"collectives", std::string(gpu ? "GPU communication kernels" : "Gloo CPU ranges")},
                {"last_at_pct", share},
                {basis.NsKey("others_wait"), static_cast<int64_t>(wait_per_step)},
                {"cause", std::string(visible ? cause->first : "not visible in the phases")},
                {"cause_excess_per_step_ns", static_cast<int64_t>(cause->second)},
                {"method", std::string("collective durations compared across ranks (start times and clocks not used)")}};
  for (int32_t r : ranks)
    f.examples.push_back(fmt::format("rank {}: arrived last at {} of {} collectives; the others waited {:.2f} ms for it in all",
                                     r, last_count[r], matched, wait_caused[r] / 1e6));
  SetSaving(f, basis, wait_per_step, wait_per_step, "time the other ranks wait for it in collectives");
  f.fix_python = std::string("Make rank ") + std::to_string(s) + "'s steps as fast as the others': " +
                 (!visible ? "check its GPU (clocks, thermal throttling, another process) and its host (CPU load, NUMA)"
                  : cause == &excess[0] ? "more DataLoader workers or faster storage for it, or balanced data shards"
                  : cause == &excess[1] ? "balance the work per rank (equal batch sizes, sequence lengths bucketed "
                                          "across ranks, an even model split), and check its device"
                                        : "find what else runs on its host (logging, checkpointing on rank 0 only: move "
                                          "it off the step or to a thread)");
  f.fix_cpp = "Give every rank the same work per step and the same resources; move rank-specific work (logging, "
              "checkpoints) off the training step.";
  out.findings.push_back(std::move(f));
}

}  // namespace trainrx::analyzers
