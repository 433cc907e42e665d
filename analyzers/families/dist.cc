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

#include "collectives.h"
#include "config_view.h"
#include "trainrx/analyzers/cross_rank.h"
#include "families.h"
#include "intervals.h"
#include "rank_phases.h"
#include "runtime_names.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

// Whether the CPUs of a rank's machine are all taken by the compute threads of its local ranks
// and one communication thread each (local ranks x (intra-op threads + 1) > CPUs allowed, from
// our collector's block; false when the trace does not say).
bool SideHasNoFreeCore(const RankSide& side) { return NoFreeCore(side.cpu_count, side.intra_op_threads, side.local_ranks); }

// What a rank communicates and computes: its collectives (GPU communication kernels when it has
// any, else Gloo's CPU ranges) and the compute that can hide them (the other kernels on its GPU
// streams; or its CPU ops, less c10d's own and those inside a Gloo range).
struct RankComm {
  bool gpu = false;
  bool no_free_core = false;  // SideHasNoFreeCore of its machine
  std::vector<Collective> coll;
  std::vector<Interval> comm, compute;  // merged
};
RankComm CommOf(const Trace& trace, int32_t rank, const RankSide& side) {
  RankComm rc;
  rc.gpu = !side.gpu.empty();
  rc.no_free_core = SideHasNoFreeCore(side);
  rc.coll = side.Compared();
  if (rc.coll.empty()) return rc;
  for (const auto& c : rc.coll) rc.comm.push_back({c.ts_ns, c.ts_ns + c.dur_ns});
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || (t.kind == TrackKind::kGpuStream) != rc.gpu) continue;
    // On the CPU, the ops a Gloo range holds (its copies and reductions) are the collective's own.
    std::vector<Interval> gloo_here;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.dur_ns <= 0) continue;
      const std::string_view n = trace.Name(e);
      if (!rc.gpu && StartsWith(n, "gloo:")) {
        gloo_here.push_back({e.ts_ns, e.end_ns()});
        continue;
      }
      const bool compute = rc.gpu ? e.kind == EventKind::kKernel && !IsCommKernel(n)
                                  : e.kind == EventKind::kCpuOp && !StartsWith(n, "c10d::");
      const bool inside_gloo = !gloo_here.empty() && e.ts_ns < gloo_here.back().second;  // events are in start order
      if (compute && !inside_gloo) rc.compute.push_back({e.ts_ns, e.end_ns()});
    }
  }
  MergeIntervals(rc.comm);
  MergeIntervals(rc.compute);
  return rc;
}

// The summed length of disjoint intervals.
int64_t LengthOf(const std::vector<Interval>& v) {
  int64_t t = 0;
  for (const auto& [s, e] : v) t += e - s;
  return t;
}

// The part of `comm` (merged) that no compute covers.
int64_t ExposedOf(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  int64_t exposed = 0;
  for (const auto& [s, e] : comm) exposed += (e - s) - CoveredWithin(compute, s, e);
  return exposed;
}

// What marks a rank's micro-steps, from one pass over its CPU threads:
// - forward_starts: one per forward pass (nested ones dropped): DDP's
//   "DistributedDataParallel.forward" ranges, FSDP's "FullyShardedDataParallel.forward" (one per
//   wrapped unit, nested in the root's), FSDP2's (fully_shard) "FSDP::root_pre_forward" at the
//   start of the root's forward, or our workloads' "trainrx::forward" phases;
// - sync_ranges: FSDP2's gradient-sync work ("FSDP::post_backward_reduce (i)": copy-in, the
//   reduce-scatter or all-reduce launch, copy-out), which no_sync (set_requires_gradient_sync)
//   replaces with a local accumulation; sorted by start.
struct MicroStepMarks {
  std::vector<int64_t> forward_starts;
  std::vector<Interval> sync_ranges;
};
MicroStepMarks MicroStepMarksOf(const Trace& trace, int32_t rank) {
  std::vector<Interval> fw;
  MicroStepMarks m;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].rank != rank || trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    for (const Event& e : trace.TrackEvents(ti)) {
      const std::string_view n = trace.Name(e);
      if (n == "DistributedDataParallel.forward" || n == "FullyShardedDataParallel.forward" || n == "FSDP::root_pre_forward" ||
          n == "trainrx::forward")
        fw.push_back({e.ts_ns, e.end_ns()});
      else if (e.dur_ns > 0 && StartsWith(n, "FSDP::post_backward_reduce"))
        m.sync_ranges.push_back({e.ts_ns, e.end_ns()});
    }
  }
  std::sort(fw.begin(), fw.end());
  std::sort(m.sync_ranges.begin(), m.sync_ranges.end());
  int64_t covered_to = INT64_MIN;
  for (const auto& [s, e] : fw) {
    if (s < covered_to) continue;
    m.forward_starts.push_back(s);
    covered_to = e;
  }
  return m;
}

// dist.comm_overlap for Gloo: collectives with no compute beside them above the threshold share
// of the steps' time.
void RuleGlooOverlap(const AnalysisContext& ctx, int32_t rank, const RankComm& rc, const StepBasis& basis,
                     const StepWindows& windows, Report& out) {
  const std::vector<Interval> comm_in = windows.Clip(rc.comm), compute_in = windows.Clip(rc.compute);
  const int64_t comm_ns = LengthOf(comm_in);
  const int64_t exposed_ns = ExposedOf(comm_in, compute_in);
  const double step_total = basis.mean_step_ns() * static_cast<double>(basis.steps());
  if (!(!rc.gpu && comm_ns > 0)) return;
  const double exposed_pct = 100.0 * static_cast<double>(exposed_ns) / step_total;
  if (!(exposed_pct > ctx.thresholds.Get("dist.comm_overlap.exposed_pct"))) return;
  const double hidden_pct = 100.0 * static_cast<double>(comm_ns - exposed_ns) / static_cast<double>(comm_ns);
  Finding f;
  f.id = "dist.comm_overlap";
  f.rank = rank;
  f.confidence = Confidence::kHigh;
  f.measured = exposed_pct;
  f.threshold = ctx.thresholds.Get("dist.comm_overlap.exposed_pct");
  f.measured_unit = "% of step time";
  f.evidence = {{"collectives", std::string("Gloo CPU ranges (gloo:*)")},
                {basis.NsKey("comm"), static_cast<int64_t>(basis.Per(static_cast<double>(comm_ns)))},
                {basis.NsKey("exposed_comm"), static_cast<int64_t>(basis.Per(static_cast<double>(exposed_ns)))},
                {"comm_overlap_pct", hidden_pct},
                {"compute", std::string("CPU ops outside Gloo ranges")}};
  if (rc.no_free_core) {
    // Gloo runs a collective on CPU threads of its own: it can overlap the rank's compute only on a
    // core that the compute threads of the machine's ranks leave free. Without one (local ranks x
    // (intra-op threads + 1) above the CPUs allowed, from our collector's block), overlap cannot
    // hide it (smaller buckets only move it onto cores the compute needs): what helps is
    // communicating less often, or fewer ranks on the machine. All of its time is what that saves
    // at most (as dist.no_sync counts it there). The DDP tutorial on two CPU ranks of a 2-core
    // machine (issue 59): half of each 3.1 ms step waited for gloo:all_reduce, and no finding said so.
    f.title = fmt::format("Communication takes {:.1f}% of the step on rank {} (Gloo collectives with no compute beside "
                          "them), and the machine has no core free to overlap it",
                          exposed_pct, rank);
    f.evidence.push_back({"cpu_contention", std::string("no free core on its machine: overlap cannot hide Gloo's work")});
    SetSaving(f, basis, basis.Per(static_cast<double>(comm_ns)), basis.Per(static_cast<double>(comm_ns)),
              "Gloo collectives' time (no free core: all of it is the cores' time)");
    f.severity = SeverityForSaving(f);
    SetFix(f, "gloo_contended");
    out.findings.push_back(std::move(f));
    return;
  }
  f.title = fmt::format("Communication not hidden behind compute: Gloo collectives run with no compute beside them "
                        "for {:.1f}% of the step time on rank {} ({:.1f}% of their time overlaps compute)",
                        exposed_pct, rank, hidden_pct);
  const int64_t room = std::max<int64_t>(0, LengthOf(compute_in) - (comm_ns - exposed_ns));
  SetSaving(f, basis, basis.Per(static_cast<double>(std::min(exposed_ns, room))), basis.Per(static_cast<double>(exposed_ns)),
            "exposed communication that compute not yet overlapping it could hide");
  f.severity = SeverityForSaving(f);
  SetFix(f, "gloo");
  out.findings.push_back(std::move(f));
}

// The gradient reductions launched before the last micro-step of a rank's accumulation steps
// (steps of 2 or more micro-steps), and FSDP's sync work there.
struct EarlyCollectives {
  int64_t accum_steps = 0, synced_steps = 0, early = 0, micro = 0;
  std::vector<Interval> early_comm, early_sync;
};

EarlyCollectives EarlyCollectivesOf(const AnalysisContext& ctx, int32_t rank, const RankComm& rc) {
  EarlyCollectives r;
  const MicroStepMarks marks = MicroStepMarksOf(ctx.trace, rank);
  const std::vector<int64_t>& fw = marks.forward_starts;
  const std::vector<Interval>& sync_ranges = marks.sync_ranges;
  for (const auto& st : ctx.steps.steps) {
    if (st.rank != rank) continue;
    const int64_t end = st.start_ns + st.wall_ns;
    auto lo = std::lower_bound(fw.begin(), fw.end(), st.start_ns), hi = std::lower_bound(fw.begin(), fw.end(), end);
    const int64_t k = hi - lo;
    if (k < 2) continue;
    ++r.accum_steps;
    r.micro += k;
    const int64_t last_start = *(hi - 1);
    int64_t here = 0;
    // rc.coll is in start order: only the collectives from the first forward to the last one.
    auto c = std::lower_bound(rc.coll.begin(), rc.coll.end(), *lo,
                              [](const Collective& x, int64_t ts) { return x.ts_ns < ts; });
    for (; c != rc.coll.end() && c->ts_ns < last_start; ++c) {
      if (!IsGradientReduction(c->name)) continue;  // DDP's per-forward buffer broadcast
      ++here;
      r.early_comm.push_back({c->ts_ns, c->ts_ns + c->dur_ns});
    }
    for (auto s = std::lower_bound(sync_ranges.begin(), sync_ranges.end(), Interval{*lo, INT64_MIN});
         s != sync_ranges.end() && s->first < last_start; ++s)
      r.early_sync.push_back(*s);
    r.early += here;
    r.synced_steps += here > 0;
  }
  return r;
}

// dist.no_sync: with gradient accumulation, DDP all-reduces on every backward unless the
// micro-steps before the last run under no_sync(). Seen as gradient reductions (all-reduce,
// reduce-scatter) inside the micro-steps before the last one of a step (a micro-step runs from
// one forward's start to the next's). Other collectives do not count: DDP broadcasts its
// buffers (BatchNorm statistics) at every forward, no_sync or not.
void RuleNoSync(const AnalysisContext& ctx, int32_t rank, const RankComm& rc, const StepBasis& basis, Report& out) {
  EarlyCollectives e = EarlyCollectivesOf(ctx, rank, rc);
  const int64_t accum_steps = e.accum_steps, synced_steps = e.synced_steps, early = e.early, micro = e.micro;
  if (accum_steps < 2 || synced_steps * 2 < accum_steps) return;
  // What no_sync removes: the early collectives where no compute hides them (on a machine with
  // no free core, Gloo's run on the cores the compute needs: all of their time), and the
  // framework's own sync work on the training thread (FSDP's post-backward reduce), which runs
  // in line with the backward.
  std::vector<Interval> all_early = e.early_comm;
  all_early.insert(all_early.end(), e.early_sync.begin(), e.early_sync.end());
  const int64_t sync_ns = MergeIntervals(e.early_sync);
  const int64_t early_ns = MergeIntervals(e.early_comm);
  const int64_t early_all_ns = MergeIntervals(all_early);
  const bool contended = !rc.gpu && rc.no_free_core;
  const int64_t comm_cost = contended ? early_ns : ExposedOf(e.early_comm, rc.compute);
  const int64_t early_exposed = std::min(early_all_ns, comm_cost + sync_ns);
  const double per_step_exposed = static_cast<double>(early_exposed) / static_cast<double>(accum_steps);
  const double pct = 100.0 * per_step_exposed / basis.mean_step_ns();
  Finding f;
  f.id = "dist.no_sync";
  f.rank = rank;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("Gradients all-reduced on every micro-step: {} of {} accumulation steps on rank {} launch {:.1f} "
                        "collectives per step before their last micro-step ({:.1f} micro-steps per step)",
                        synced_steps, accum_steps, rank, static_cast<double>(early) / static_cast<double>(accum_steps),
                        static_cast<double>(micro) / static_cast<double>(accum_steps));
  f.measured = static_cast<double>(early) / static_cast<double>(accum_steps);
  f.threshold = 0;
  f.measured_unit = "collectives per step before the last micro-step";
  f.evidence = {{"accumulation_steps", accum_steps},
                {"steps_with_early_collectives", synced_steps},
                {"micro_steps_per_step", static_cast<double>(micro) / static_cast<double>(accum_steps)},
                {"early_comm_per_step_ns", static_cast<int64_t>(static_cast<double>(early_ns) / static_cast<double>(accum_steps))},
                {"early_exposed_comm_per_step_ns", static_cast<int64_t>(per_step_exposed)},
                {"exposed_pct_of_step", pct},
                {"collectives", std::string(rc.gpu ? "GPU communication kernels" : "Gloo CPU ranges")},
                {"collectives_counted", std::string(contended ? "all their time (no free core on its machine)" : "the part no compute hides")}};
  if (sync_ns > 0)
    f.evidence.push_back({"early_fsdp_reduce_per_step_ns", static_cast<int64_t>(static_cast<double>(sync_ns) / static_cast<double>(accum_steps))});
  // Without them, the gradients of the earlier micro-steps are summed locally and all-reduced
  // once: the exposed part of their collectives goes, the hidden part only frees the link.
  SetSaving(f, basis, basis.Per(static_cast<double>(early_exposed)), basis.Per(static_cast<double>(early_all_ns)),
            sync_ns > 0 ? "time of the collectives and FSDP's reduce work before the last micro-step"
                        : "time of the collectives launched before the last micro-step");
  f.severity = SeverityForSaving(f);
  if (f.severity == Severity::kInfo) f.severity = Severity::kLow;  // wasted bandwidth even when hidden
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// Gloo collectives not hidden behind compute (dist.comm_overlap for CPU collectives; the GPU
// case is judged in gpu.cc against the GPU's active span), and all-reduces on every micro-step
// of gradient accumulation (dist.no_sync). Both on the steady steps of one rank.
void AnalyzeRankComm(const AnalysisContext& ctx, int32_t rank, const RankComm& rc, Report& out) {
  if (rc.coll.empty()) return;
  const StepBasis basis(ctx.steps, rank);
  const StepWindows windows(ctx.steps, rank);
  if (!basis.has_steps()) return;  // both judge steps: without them there is nothing to compare to
  RuleGlooOverlap(ctx, rank, rc, basis, windows, out);
  RuleNoSync(ctx, rank, rc, basis, out);
}

}  // namespace

void AnalyzeDist(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  // Each rank's collectives, found once for the per-rank checks and the cross-rank ones.
  const std::vector<RankSide> sides = BuildRankSides(trace, &ctx.steps, ctx.unfinished, ctx.windows);
  for (const RankSide& side : sides) {
    AnalyzeRankComm(ctx, side.info.rank, CommOf(trace, side.info.rank, side), out);
    AnalyzeDataParallel(ctx, side.info.rank, out);
  }
  if (sides.size() >= 2) {
    AnalyzeStraggler(sides, ctx.thresholds, out);
    AnalyzeRankMismatch(sides, out);
  }
}

namespace {

// Who arrived last at the matched collectives: per rank, how often, and the others' median wait
// summed over those collectives; the straggler is the rank that made the others wait longest.
struct LastArrivals {
  std::map<int32_t, int64_t> last_count;
  std::map<int32_t, double> wait_caused;  // the others' median wait, summed over the collectives it was last at
  int32_t straggler = 0;
};

// The rank that arrived last at one matched collective: the one that waited least in it (its
// shortest instance); `waited` the others' median wait beyond it (<= 0: all arrived together).
size_t LastOf(const MatchedSet& set, double* waited) {
  size_t last_i = 0;
  for (size_t i = 0; i < set.size(); ++i)
    if (set[i]->dur_ns < set[last_i]->dur_ns) last_i = i;
  std::vector<double> waits;
  for (size_t i = 0; i < set.size(); ++i)
    if (i != last_i) waits.push_back(static_cast<double>(set[i]->dur_ns - set[last_i]->dur_ns));
  *waited = Median(waits);
  return last_i;
}

// The collectives the straggler compares: GPU ones where every rank has them, else Gloo's, matched
// by name and order inside the steady steps (every matched one when fewer than 4 are).
std::vector<MatchedSet> ComparedSets(const std::vector<RankSide>& sides, bool* gpu) {
  *gpu = ComparesGpuCollectives(sides);
  std::vector<const std::vector<Collective>*> lists;
  for (const auto& side : sides) lists.push_back(*gpu ? &side.gpu : &side.gloo);
  // Kept: the matched collectives inside the steady steps of every rank (the ranks' steps need
  // not start at the same collective). A trace of one or two steps has too few of
  // them: then every matched collective of the trace counts.
  std::vector<MatchedSet> matched_sets = MatchAcrossRanks(lists, true);
  if (matched_sets.size() < 4) matched_sets = MatchAcrossRanks(lists, false);
  return matched_sets;
}

LastArrivals LastArrivalsOf(const std::vector<MatchedSet>& matched_sets, const std::vector<int32_t>& ranks) {
  LastArrivals a;
  for (const auto& set : matched_sets) {
    double waited = 0;
    const int32_t last = ranks[LastOf(set, &waited)];
    if (waited <= 0) continue;  // all arrived together: nobody was last
    ++a.last_count[last];
    a.wait_caused[last] += waited;
  }
  a.straggler = ranks.front();
  for (int32_t r : ranks)
    if (a.wait_caused[r] > a.wait_caused[a.straggler]) a.straggler = r;
  return a;
}

// The cause we can see: the phase that takes longer on the straggler than on the median of the
// others (Gloo's collectives taken out of compute first: RankMeans).
struct StragglerCause {
  int index = 0;               // 0 data wait, 1 compute, 2 optimizer step, 3 other host work
  const char* name = "";
  double excess = 0;           // ns per step over the median of the others
  bool visible = false;        // the excess explains more than a quarter of the wait
};

// The side of rank r (the first with that rank).
const RankSide& SideOf(const std::vector<RankSide>& sides, const std::vector<int32_t>& ranks, int32_t r) {
  return sides[static_cast<size_t>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin())];
}

StragglerCause CauseOf(const std::vector<RankSide>& sides, const std::vector<int32_t>& ranks, int32_t s, bool gpu,
                       double wait_per_step) {
  const auto means = [&](int32_t r) { return RankMeans(SideOf(sides, ranks, r), !gpu); };
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
  StragglerCause c;
  c.index = static_cast<int>(cause - excess);
  c.name = cause->first;
  c.excess = cause->second;
  c.visible = cause->second > 0.25 * wait_per_step;
  return c;
}

// Whether the matched collectives show synchronous ranks by their times: among the sets whose
// instances started at visibly different times (> 50 us apart), at least 3 and at least 75 % end
// within a quarter of that spread (everyone left when the last arrived). Needs the ranks' clocks
// aligned (clocks.cc does that first); unaligned clocks fail it, and the steps decide.
bool EndTogether(const std::vector<MatchedSet>& sets) {
  size_t informative = 0, together = 0;
  for (const MatchedSet& set : sets) {
    int64_t s0 = INT64_MAX, s1 = INT64_MIN, e0 = INT64_MAX, e1 = INT64_MIN;
    for (const Collective* c : set) {
      s0 = std::min(s0, c->ts_ns), s1 = std::max(s1, c->ts_ns);
      e0 = std::min(e0, c->end_ns()), e1 = std::max(e1, c->end_ns());
    }
    if (s1 - s0 <= 50'000) continue;
    ++informative;
    together += 4 * (e1 - e0) <= s1 - s0 ? 1 : 0;
  }
  return informative >= 3 && 4 * together >= 3 * informative;
}

// What AnalyzeStraggler found, for the finding.
struct Straggler {
  int32_t rank = 0;
  bool gpu = false;
  size_t matched = 0;
  double share = 0, wait_per_step = 0, wait_pct = 0;
  StragglerCause cause;
  const RankSide* slow = nullptr;
  const RankSide* peer = nullptr;  // another rank, for the input shapes
  bool uneven = false, no_free_core = false, contention = false;
  bool ends_together = false;  // lockstep shown by the collectives' end times (else by the steps)
};

// dist.straggler's finding: who, how much the others wait, the visible cause and the fix for it.
Finding StragglerFinding(const Straggler& st, LastArrivals& a, const std::vector<int32_t>& ranks,
                         const StepBasis& basis, const Thresholds& thresholds) {
  const int32_t s = st.rank;
  const StragglerCause& cause = st.cause;
  const bool visible = cause.visible;
  Finding f;
  f.id = "dist.straggler";
  f.rank = s;
  f.severity = st.wait_pct >= 20 ? Severity::kHigh : Severity::kMedium;
  f.confidence = st.contention ? Confidence::kLow : st.matched >= 10 ? Confidence::kHigh : Confidence::kMedium;
  const std::string waited = fmt::format("Rank {} is a straggler: it arrived last at {} of {} collectives and the others wait "
                                         "{:.2f} ms {} for it ({:.0f}% of {})",
                                         s, a.last_count[s], st.matched, st.wait_per_step / 1e6, basis.unit(), st.wait_pct,
                                         basis.has_steps() ? "the step" : "the time the collectives span");
  f.title = visible ? fmt::format("{}; its {} takes {:.2f} ms longer per step than the median rank", waited, cause.name,
                                  cause.excess / 1e6)
          : basis.has_steps() ? waited + "; its steps' phases do not show why (a slower device or host?)"
                              : waited + "; the trace has no steps to show why";
  if (st.uneven)
    f.title += fmt::format(", and it trains on other inputs than the others ({} vs {}): see dist.rank_mismatch",
                           st.slow->input_shape, st.peer->input_shape);
  if (st.contention) {
    f.title += fmt::format("; but its machine has no free core ({:.0f} local ranks x ({:.0f} intra-op threads + 1 for "
                           "communication) > {:.0f} CPUs), so CPU contention can make any rank late: check that first",
                           st.slow->local_ranks, st.slow->intra_op_threads, st.slow->cpu_count);
  }
  f.measured = st.wait_pct;
  f.threshold = thresholds.Get("dist.straggler.wait_pct");
  f.measured_unit = basis.has_steps() ? "% of step" : "% of the collectives' span";
  f.evidence = {{"collectives_matched", static_cast<int64_t>(st.matched)},
                {"collectives", std::string(st.gpu ? "GPU communication kernels" : "Gloo CPU ranges")},
                {"last_at_pct", st.share},
                {basis.NsKey("others_wait"), static_cast<int64_t>(st.wait_per_step)},
                {"cause", std::string(visible ? cause.name : "not visible in the phases")},
                {basis.NsKey("cause_excess"), static_cast<int64_t>(cause.excess)},
                {"method", std::string(st.ends_together
                                           ? "collective durations compared across ranks; lockstep shown by their instances "
                                             "ending together"
                                           : "collective durations compared across ranks (start times and clocks not used)")},
                {"cpu_contention", std::string(st.no_free_core ? "no free core on its machine" : "not seen")}};
  for (int32_t r : ranks)
    f.examples.push_back(fmt::format("rank {}: arrived last at {} of {} collectives; the others waited {:.2f} ms for it in all",
                                     r, a.last_count[r], st.matched, a.wait_caused[r] / 1e6));
  SetSaving(f, basis, st.wait_per_step, st.wait_per_step, "time the other ranks wait for it in collectives");
  SetFix(f, !visible ? "not_visible" : cause.index == 0 ? "data" : cause.index == 1 ? "compute" : "other",
         {{"rank", int64_t{s}}});
  if (st.contention) f.fix_python = FormatFix(f.id, "contention").python + f.fix_python;
  return f;
}

}  // namespace

void AnalyzeStraggler(const std::vector<RankSide>& sides, const Thresholds& thresholds, Report& out) {
  if (sides.size() < 2) return;
  std::vector<int32_t> ranks;
  for (const auto& side : sides) ranks.push_back(side.info.rank);
  StepModel all_steps;
  for (const auto& side : sides) all_steps.steps.insert(all_steps.steps.end(), side.steps.begin(), side.steps.end());
  auto side_of = [&](int32_t r) -> const RankSide& { return SideOf(sides, ranks, r); };
  Straggler st;
  const std::vector<MatchedSet> matched_sets = ComparedSets(sides, &st.gpu);
  st.matched = matched_sets.size();
  if (st.matched < 4) return;
  // The reading assumes lockstep ranks (synchronous collectives: each rank waits in them for the
  // last). Shown either by the collectives themselves, whose instances end together where their
  // starts differ (on aligned clocks), or by the steps: ranks whose median steps differ by more
  // than 10 % are not in lockstep (pipeline stages, traces of different runs), and their
  // durations prove nothing. On a trace of one step the step times differ by the very wait the
  // straggler causes (the late rank starts last), so the collectives' ends decide there.
  st.ends_together = EndTogether(matched_sets);
  if (!st.ends_together) {
    std::vector<double> medians;
    for (int32_t r : ranks) {
      std::vector<double> walls;
      for (const auto& step : side_of(r).steps) walls.push_back(static_cast<double>(step.wall_ns));
      if (walls.empty()) return;
      medians.push_back(Median(walls));
    }
    if (*std::max_element(medians.begin(), medians.end()) > 1.1 * *std::min_element(medians.begin(), medians.end())) return;
  }

  LastArrivals arrivals = LastArrivalsOf(matched_sets, ranks);
  const int32_t s = st.rank = arrivals.straggler;
  const StepBasis basis(all_steps, s);
  st.share = 100.0 * static_cast<double>(arrivals.last_count[s]) / static_cast<double>(st.matched);
  st.wait_per_step = basis.Per(arrivals.wait_caused[s]);
  // Without steps, the wait is weighed against the time the matched collectives span (first start
  // to last end, over the ranks): the window the others could have waited in.
  double window = basis.mean_step_ns();
  if (!basis.has_steps()) {
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (const MatchedSet& set : matched_sets)
      for (const Collective* c : set) a = std::min(a, c->ts_ns), b = std::max(b, c->end_ns());
    window = static_cast<double>(b - a);
  }
  if (window <= 0) return;
  st.wait_pct = 100.0 * st.wait_per_step / window;
  // Arriving last by chance happens to every rank (1 / ranks of the time); a straggler is last at
  // most collectives, at least 1.5 times as often as chance (75 % of them with 2 ranks), and makes
  // the others wait a part of the step worth fixing.
  const double min_share = std::max(thresholds.Get("dist.straggler.last_pct"), 150.0 / static_cast<double>(ranks.size()));
  if (st.share < min_share || st.wait_pct < thresholds.Get("dist.straggler.wait_pct")) return;
  st.cause = CauseOf(sides, ranks, s, st.gpu, st.wait_per_step);

  // Its inputs differ from the one shape all the other ranks have: the work itself is uneven
  // (dist.rank_mismatch says how), a cause seen in the trace.
  st.slow = &side_of(s);
  st.peer = &side_of(s == ranks.front() ? ranks[1] : ranks.front());
  const RankSide& slow = *st.slow;
  const RankSide& peer = *st.peer;
  bool uneven = st.cause.visible && slow.HasFixedInputShape() && peer.HasFixedInputShape() && slow.input_shape != peer.input_shape;
  for (const auto& side : sides)
    if (side.info.rank != s) uneven = uneven && side.HasFixedInputShape() && side.input_shape == peer.input_shape;
  st.uneven = uneven;
  // Ranks sharing CPUs with none free: the scheduler alone can make a rank late (measured here:
  // a clean 2-rank run on 2 cores had one rank 26 % late). Said first, with the fix for it,
  // unless uneven inputs already explain the lateness.
  st.no_free_core = SideHasNoFreeCore(slow);
  st.contention = st.no_free_core && !uneven;
  out.findings.push_back(StragglerFinding(st, arrivals, ranks, basis, thresholds));
}

std::vector<MatchedCollectiveRow> MatchedCollectives(const std::vector<RankSide>& sides) {
  std::vector<MatchedCollectiveRow> rows;
  if (sides.size() < 2) return rows;
  bool gpu = false;
  const std::vector<MatchedSet> sets = ComparedSets(sides, &gpu);
  for (size_t k = 0; k < sets.size(); ++k) {
    double waited = 0;
    const size_t last = LastOf(sets[k], &waited);
    for (size_t i = 0; i < sets[k].size(); ++i) {
      const Collective& c = *sets[k][i];
      const bool is_last = i == last && waited > 0;
      rows.push_back({static_cast<int64_t>(k), sides[i].info.rank, c.name, c.ts_ns, c.dur_ns, c.in_steps, is_last,
                      is_last ? waited : 0.0});
    }
  }
  return rows;
}

}  // namespace trainrx::analyzers
