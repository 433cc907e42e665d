// The what-if's engine (dependency/what_if.h): the transforms' table, their levels planned once per
// graph (PlanCache), the replays batched as lanes of shared walks, each prediction finished with its
// interval, and PredictSavings, which gives every finding its prediction. The transforms themselves:
// host_transforms.cc, gpu_transforms.cc, dist_transforms.cc.
#include "dependency/what_if.h"
#include "dependency/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <string_view>
#include <functional>

#include "config_view.h"
#include "dependency.h"
#include "ops.h"
#include "optimizer_loop.h"
#include "phases.h"
#include "runtime_names.h"
#include "scopes.h"
#include "shapes.h"
#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/metrics.h"
#include "trainrx/profiler/parallel.h"

namespace trainrx::analyzers {

using profiler::Event;
using Kind = RankGraph::Kind;

namespace {

// Every transform by name: the host ones (host_transforms.cc), the device's (gpu_transforms.cc,
// dist_transforms.cc).
struct Named {
  const char* name;
  TransformFn fn;
  ParamTransformFn with_args = nullptr;  // where it takes parameters
  std::vector<std::string_view> keys = {};  // their names
};
const std::vector<Named>& Transforms() {
  static const std::vector<Named> k = {
      {"anomaly_off", &AnomalyOff},           {"unblock_syncs", &UnblockSyncs},     {"caching_allocator", &CachingAllocator},
      {"zero_grad_none", &ZeroGradNone},      {"loader_workers", nullptr, &LoaderWorkers, {"workers"}},
      {"foreach_optimizer", &ForeachOptimizer},
      {"fused_optimizer", &FusedOptimizer},
      {"cudnn_benchmark", &CudnnBenchmark},   {"eval_no_grad", &EvalNoGrad},        {"drop_bias", &DropBias},
      {"profiler_off", &ProfilerOff},         {"host_free", &HostFree},
      {"tf32", &Tf32},                        {"pinned_copies", &PinnedCopies},     {"cuda_graphs", &CudaGraphs},
      {"amp_bf16", &AmpBf16},                 {"compile_fusion", &CompileFusion}, {"comm_overlap", &CommOverlap},
  };
  return k;
}

// The mean of a vector.
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

bool OptimizersOwn(const RankGraph& g, int32_t f) {
  const auto& frames = g.frames();
  for (; f >= 0; f = frames[static_cast<size_t>(f)].parent) {
    const profiler::Event& op = *frames[static_cast<size_t>(f)].op;
    if (const std::string_view site = CallSiteText(g.trace(), op); !site.empty() && IsUserFrame(site)) return false;
    if (g.trace().Name(op).starts_with("Optimizer.step#")) return true;
  }
  return false;
}

TransformPlan NoSaving(const RankGraph& g, std::string why) {
  TransformPlan p;
  p.levels.emplace_back(g.tasks().size());
  p.assumptions = std::move(why);
  return p;
}

std::vector<std::pair<int64_t, int64_t>> ReplayedSteps(std::vector<std::pair<int64_t, int64_t>> windows, size_t count) {
  std::sort(windows.begin(), windows.end());
  count = std::max<size_t>(1, count);
  if (windows.size() <= count) return windows;
  const size_t first = (windows.size() - count) / 2;
  return {windows.begin() + static_cast<std::ptrdiff_t>(first), windows.begin() + static_cast<std::ptrdiff_t>(first + count)};
}

Transform FindTransform(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  for (const Named& n : Transforms()) {
    if (name != n.name) continue;
    Transform t{n.fn, n.with_args, {}};
    if (colon == std::string_view::npos) return t;
    if (n.with_args == nullptr) return {};
    std::string_view rest = spec.substr(colon + 1);
    while (!rest.empty()) {  // "key=value,key=value"
      const size_t comma = rest.find(',');
      const std::string_view kv = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      const size_t eq = kv.find('=');
      if (eq == std::string_view::npos) return {};
      const std::string_view key = kv.substr(0, eq);
      const std::string value(kv.substr(eq + 1));
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() ||
          std::find(n.keys.begin(), n.keys.end(), key) == n.keys.end())
        return {};
      t.args[std::string(key)] = v;
    }
    return t;
  }
  return {};
}

double CatalogDefault(std::string_view transform, std::string_view key, double fallback) {
  for (const CatalogEntry& e : Catalog()) {
    const std::string_view token = e.outside_token;
    if (transform != e.transform || !token.starts_with(key) || token.size() <= key.size() || token[key.size()] != '=')
      continue;
    const std::string value(token.substr(key.size() + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (!value.empty() && end == value.c_str() + value.size()) return v;
  }
  return fallback;
}

std::vector<std::string> TransformNames() {
  std::vector<std::string> out;
  for (const Named& n : Transforms()) out.push_back(n.name);
  return out;
}

namespace {

// The levels a replay walks: one plan's own, or several plans' edits combined level by level (a
// plan with one level uses it at every level; scales multiply, unblocks add up).
class Levels {
 public:
  Levels() = default;
  Levels(const RankGraph& g, const std::vector<const TransformPlan*>& plans) {
    if (plans.size() == 1) {
      one_ = &plans.front()->levels;
      return;
    }
    size_t distinct = 1;
    for (const TransformPlan* plan : plans) distinct = std::max(distinct, plan->levels.size());
    combined_.assign(distinct, Edits(g.tasks().size()));
    for (const TransformPlan* plan : plans)
      for (size_t k = 0; k < distinct; ++k) {
        const Edits& e = plan->levels[std::min(k, plan->levels.size() - 1)];
        Edits& c = combined_[k];
        e.EachEdited([&](size_t i) {
          if (e.scales() != nullptr) c.ScaleBy(i, e.scale(i));
          if (e.unblocked(i)) c.Unblock(i);
          if (e.added_ns(i) != 0) c.Add(i, e.added_ns(i));
        });
      }
  }
  const std::vector<Edits>& get() const { return one_ != nullptr ? *one_ : combined_; }

 private:
  const std::vector<Edits>* one_ = nullptr;
  std::vector<Edits> combined_;
};

// The plans of `names` on g (names without a transform left out): the cache's where it made them,
// else made here and kept in `own`.
std::vector<const TransformPlan*> PlansOf(const RankGraph& g, const std::vector<std::string>& names, const PlanCache* cache,
                                          std::deque<TransformPlan>& own) {
  std::vector<const TransformPlan*> out;
  for (const std::string& n : names) {
    if (const TransformPlan* p = cache != nullptr ? cache->Find(g, n) : nullptr; p != nullptr) {
      out.push_back(p);
    } else if (const Transform t = FindTransform(n); t) {
      own.push_back(t(g));
      out.push_back(&own.back());
    }
  }
  return out;
}

// The same transforms on another rank of the set (the fix is in the code every rank runs): its
// levels only (its own floors and words are the predicted rank's to say); no edits where none
// applies there.
struct PeerPlans {
  std::deque<TransformPlan> own;
  Levels levels;
  Edits none;
};
void PeerLevels(const RankGraph& g, const std::vector<std::string>& names, const PlanCache* cache, PeerPlans& out) {
  std::vector<const TransformPlan*> plans;
  for (const TransformPlan* plan : PlansOf(g, names, cache, out.own))
    if (plan->not_predictable.empty() && plan->applies()) plans.push_back(plan);
  if (!plans.empty()) out.levels = Levels(g, plans);
}

}  // namespace

void PlanCache::Fill(std::vector<std::pair<const RankGraph*, std::string>> keys, size_t threads,
                     std::vector<std::function<void()>> beside) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  keys.erase(std::remove_if(keys.begin(), keys.end(),
                            [&](const auto& k) { return !FindTransform(k.second) || plans_.count(k) != 0; }),
             keys.end());
  std::vector<TransformPlan> made(keys.size());
  std::vector<std::function<void()>> tasks = std::move(beside);
  for (size_t i = 0; i < keys.size(); ++i) tasks.push_back([&, i] { made[i] = FindTransform(keys[i].second)(*keys[i].first); });
  profiler::RunTasks(tasks, threads);
  for (size_t i = 0; i < keys.size(); ++i) plans_.emplace(std::move(keys[i]), std::move(made[i]));
}

const TransformPlan* PlanCache::Find(const RankGraph& g, const std::string& transform) const {
  const auto it = plans_.find({&g, transform});
  return it == plans_.end() ? nullptr : &it->second;
}

const std::vector<ReplayResult>& RankSet::Unchanged() const {
  std::call_once(once_, [this] {
    const Edits none;
    const std::vector<std::vector<const Edits*>> lanes(graphs.size(), {&none});
    for (std::vector<ReplayResult>& r : ReplayJoint(graphs, lanes, coupling, &broken_unchanged_)) unchanged_.push_back(std::move(r[0]));
  });
  return unchanged_;
}

namespace {

// The transforms' plans on the predicted graph, with what bounds the step after them: per level,
// the fixes' own pace (floor), the CPU time moved off the loop and the CPUs the loop keeps busy.
struct Planned {
  std::deque<TransformPlan> own;
  Levels levels;
  std::vector<double> floors = std::vector<double>(3, 0.0), moved = std::vector<double>(3, 0.0),
                      loop_cores = std::vector<double>(3, 1.0);
  double cores = 0;
  std::string assumptions, not_predictable;
  bool any = false;
};
void PlanAll(const RankGraph& g, const std::vector<std::string>& names, const PlanCache* cache, Planned& out) {
  std::vector<const TransformPlan*> plans;
  for (const TransformPlan* plan : PlansOf(g, names, cache, out.own)) {
    if (!plan->not_predictable.empty()) {
      out.not_predictable = plan->not_predictable;
      return;
    }
    if (!plan->applies()) continue;
    out.assumptions += (out.assumptions.empty() ? "" : "; ") + plan->assumptions;
    for (size_t k = 0; k < 3; ++k) {
      const auto at = [k](const std::vector<double>& v) { return v[std::min(k, v.size() - 1)]; };
      if (!plan->floor_ns.empty()) out.floors[k] = std::max(out.floors[k], at(plan->floor_ns));
      if (!plan->moved_cpu_ns.empty()) {
        out.moved[k] += at(plan->moved_cpu_ns);
        out.loop_cores[k] = std::max(out.loop_cores[k], at(plan->loop_cores));
      }
    }
    out.cores = std::max(out.cores, plan->cores);
    plans.push_back(plan);
  }
  out.any = !plans.empty();
  if (out.any) out.levels = Levels(g, plans);
}

// Each level's saving (% of the base mean) from its replay and the CPUs the moved work shares with
// the step. What the loop leaves idle beside it takes the moved work for free; the rest (the
// excess) takes CPUs the loop's threads need. Shared fluidly (an ideal scheduler, threads that do
// not wait for each other) the excess costs the step its share over the CPUs (the high end). The
// loop's intra-op threads work in lockstep, though (OpenMP's parallel regions end in a barrier): a
// worker on one of their CPUs holds all of them up, so at the point and the low end the excess
// costs it in the proportion of the CPUs the loop keeps busy (all of it where the loop fills every
// CPU; its share where the loop is one thread). Measured on 2-core VMs: train_gpu.py
// --costly-data, workers 0 -> 2 saved 3.5 % where the fluid share said 11-39 %; pytorch/examples
// imagenet (2 intra-op threads filling both CPUs) was 8.6 % slower [0.1, 19].
struct Savings {
  double level[3] = {0, 0, 0};
  double spread = 0;  // the steps' spread of the point's saving: a 95 % interval of its mean
  bool cpu_bound_low = false;
};
Savings SavingsOf(const Planned& plan, const std::vector<ReplayResult>& replayed, const ReplayResult& base) {
  Savings out;
  double held_ns = 0;  // the point's excess CPU time that holds up the loop, a step
  std::vector<double> per_step;  // the point's saving per step, as a share of the base mean
  for (size_t k = 0; k < 3; ++k) {
    // Levels past the plans' own reuse the last replay (floors may still differ).
    const ReplayResult& r = replayed[std::min(k, replayed.size() - 1)];
    double after = r.mean_ns;
    if (plan.cores > 0 && plan.moved[k] > 0) {
      const double idle = std::max(0.0, plan.cores - plan.loop_cores[k]) * r.mean_ns;
      const double excess = std::max(0.0, plan.moved[k] - idle);
      const double held = k == 2 ? 1.0 / plan.cores : std::clamp(plan.loop_cores[k], 1.0, plan.cores) / plan.cores;
      after += excess * held;
      if (k == 0) held_ns = excess * held;
      if (k == 1 && excess > 0) out.cpu_bound_low = true;
    }
    after = std::max(after, plan.floors[k]);
    out.level[k] = 100.0 * (base.mean_ns - after) / base.mean_ns;
    if (k == 0)
      for (size_t s = 0; s < r.step_ns.size(); ++s)
        per_step.push_back(
            100.0 * (static_cast<double>(base.step_ns[s]) - std::max(static_cast<double>(r.step_ns[s]) + held_ns, plan.floors[0])) /
            base.mean_ns);
  }
  if (per_step.size() >= 2) {
    const double m = Mean(per_step);
    double ss = 0;
    for (double x : per_step) ss += (x - m) * (x - m);
    out.spread = 1.96 * std::sqrt(ss / static_cast<double>(per_step.size() - 1) / static_cast<double>(per_step.size()));
  }
  return out;
}

}  // namespace

namespace {

// A prediction between its plan and its replay: planned first (which may already say "not
// predictable" or nothing at all), replayed with others that walk the same graphs (lanes of one
// walk), then finished (the savings and their words).
struct Pending {
  const RankGraph* g = nullptr;
  std::vector<std::string> names;
  double measured_mean_ns = 0;
  const RankSet* set = nullptr;
  size_t self = SIZE_MAX;  // the graph's place in the set whose collectives couple (SIZE_MAX: alone)
  WhatIfResult out;
  Planned plan;
  std::vector<PeerPlans> peers;  // joint: the fix on every other rank of the set
  size_t count = 0;              // lanes: the levels replayed
  bool replay = false;           // planned and to be replayed (a number will be made)
  std::vector<ReplayResult> replayed;
  size_t broken = 0;
  std::vector<const RankGraph*> alone;
  bool joint() const { return self != SIZE_MAX; }
  const std::vector<const RankGraph*>& Graphs() const { return joint() ? set->graphs : alone; }
  // Rank q's edits in lane k (a plan with fewer levels repeats its last).
  const Edits* Lane(size_t q, size_t k) const {
    const std::vector<Edits>& lv = !joint() || q == self ? plan.levels.get() : peers[q].levels.get();
    return lv.empty() ? &peers[q].none : &lv[std::min(k, lv.size() - 1)];
  }
  const ReplayResult& Base() const { return joint() ? set->Unchanged()[self] : g->Unchanged(); }
};

void PlanPrediction(Pending& pending, const PlanCache* cache, size_t threads) {
  const RankGraph& g = *pending.g;
  Prediction& p = pending.out.prediction;
  pending.alone = {&g};
  for (const std::string& n : pending.names) p.transform += (p.transform.empty() ? "" : "+") + n;
  if (g.windows().empty() || pending.measured_mean_ns <= 0) return;
  PlanAll(g, pending.names, cache, pending.plan);
  if (!pending.plan.not_predictable.empty()) {
    p.method = "not predictable";
    p.assumptions = pending.plan.not_predictable;
    return;
  }
  if (!pending.plan.any) {
    // A transform that found nothing to change and did not say why (it says "no saving" with its
    // reason when it knows there is none): never an empty answer.
    p.method = "not predictable";
    p.assumptions = "the fix found nothing in the replayed steps to change, and this trace does not say whether the "
                    "steps it would change are elsewhere";
    return;
  }
  p.assumptions = pending.plan.assumptions;
  // Several ranks whose collectives couple: every rank replayed with the fix, together.
  const RankSet* set = pending.set;
  if (set != nullptr && !set->coupling.empty())
    for (size_t q = 0; q < set->graphs.size(); ++q)
      if (set->graphs[q] == &g) pending.self = q;
  pending.count = pending.plan.levels.get().size();
  if (pending.joint()) {
    // Each other rank's levels (several plans combined: on the threads there are).
    pending.peers.resize(set->graphs.size());
    std::vector<std::function<void()>> peers;
    for (size_t q = 0; q < set->graphs.size(); ++q)
      if (q != pending.self)
        peers.push_back([&pending, set, cache, q] { PeerLevels(*set->graphs[q], pending.names, cache, pending.peers[q]); });
    profiler::RunTasks(peers, pending.names.size() > 1 ? threads : 1);
    for (size_t q = 0; q < set->graphs.size(); ++q)
      if (q != pending.self) pending.count = std::max(pending.count, pending.peers[q].levels.get().size());
  }
  pending.replay = pending.Base().mean_ns > 0;
}

// Predictions that walk the same graphs (one set, or one rank alone), replayed in one walk.
void ReplayTogether(const std::vector<Pending*>& batch) {
  static const Coupling kAlone;
  const Pending& first = *batch.front();
  const std::vector<const RankGraph*>& graphs = first.Graphs();
  std::vector<std::vector<const Edits*>> lanes(graphs.size());
  std::vector<size_t> wanted;
  for (const Pending* p : batch)
    for (size_t k = 0; k < p->count; ++k) {
      for (size_t q = 0; q < graphs.size(); ++q) lanes[q].push_back(p->Lane(q, k));
      wanted.push_back(p->joint() ? p->self : 0);
    }
  size_t broken = 0;
  std::vector<std::vector<ReplayResult>> results =
      ReplayJoint(graphs, lanes, first.joint() ? first.set->coupling : kAlone, &broken, wanted);
  size_t lane = 0;
  for (Pending* p : batch) {
    std::vector<ReplayResult>& mine = results[p->joint() ? p->self : 0];
    for (size_t k = 0; k < p->count; ++k) p->replayed.push_back(std::move(mine[lane++]));
    p->broken = broken;  // where the ranks' orders contradict is the same in every lane
  }
}

void FinishPrediction(Pending& pending) {
  Prediction& p = pending.out.prediction;
  const ReplayResult& base = pending.Base();
  const Savings saving = SavingsOf(pending.plan, pending.replayed, base);
  p.method = "replay";
  // The replay's own error: the loop's steps replayed unchanged against the measured ones. Where the
  // device ran behind the loop (it took longer a step than the loop's steps, with no sync to hold the
  // loop back), the pace is the device's, before and after: said in the assumptions.
  double host_mean = 0;
  for (int64_t s : base.step_ns) host_mean += static_cast<double>(s);
  host_mean /= static_cast<double>(std::max<size_t>(1, base.step_ns.size()));
  const double measured_mean_ns = pending.measured_mean_ns;
  p.replay_error_pct = 100.0 * (host_mean - measured_mean_ns) / measured_mean_ns;
  if (base.mean_ns > 1.02 * host_mean)
    p.assumptions += fmt::format("; the device ran behind the loop ({:.1f} ms a step against the loop's {:.1f} ms): the "
                                 "step's pace is the device's, before and after",
                                 base.mean_ns / 1e6, host_mean / 1e6);
  if (pending.joint()) {
    const RankSet* set = pending.set;
    p.assumptions += fmt::format("; the fix applied on all {} ranks, replayed together: each of the {} collectives matched "
                                 "across them ends when its last rank arrives, plus its transfer (its shortest measured "
                                 "time)",
                                 set->graphs.size(), set->coupling.transfer.size());
    if (const size_t b = std::max(pending.broken, set->broken_unchanged()); b > 0)
      p.assumptions += fmt::format(" ({} collective{} replayed as measured: the ranks' orders contradict there)", b, b == 1 ? "" : "s");
  }
  if (saving.cpu_bound_low)
    p.assumptions += "; the CPUs bind: the moved work beyond what the loop leaves idle holds up the loop's lockstep "
                     "threads in proportion to the CPUs they fill (OpenMP's barrier waits for a preempted sibling; "
                     "shared fluidly over the CPUs at the high end): 2-core VMs measured 3.5 % where the fluid share "
                     "said 11-39 %, and 8.6 % slower for a loop whose threads filled both CPUs";
  const double err = std::abs(p.replay_error_pct);
  const double* v = saving.level;
  p.saving_pct = v[0];
  p.low_pct = std::min({v[0], v[1], v[2]}) - saving.spread - err;
  p.high_pct = std::min(100.0, std::max({v[0], v[1], v[2]}) + saving.spread + err);
  p.step_ns_before = static_cast<int64_t>(std::max(measured_mean_ns, base.mean_ns));
  p.step_ns_after = static_cast<int64_t>(static_cast<double>(p.step_ns_before) * (1.0 - v[0] / 100.0));
  pending.out.ok = true;
}

// The planned predictions (nullptr and those with nothing to replay skipped) replayed: those that
// walk the same graphs (a set; a rank alone) share walks, as many as there are threads.
void ReplayPending(const std::vector<Pending*>& every, size_t threads) {
  std::map<const void*, std::vector<Pending*>> walks;  // per set or lone graph: its predictions
  for (Pending* p : every)
    if (p != nullptr && p->replay) walks[p->joint() ? static_cast<const void*>(p->set) : p->g].push_back(p);
  const size_t chunks = std::max<size_t>(1, threads == 0 ? profiler::UsableCpus() : threads);
  std::vector<std::vector<Pending*>> batches;
  for (auto& [key, list] : walks) {
    // Chunks of about equal lanes, in order, a multiple of the threads. A walk reads every graph it
    // walks whatever its lanes, and its lanes hold two times per group of each: a walk takes as
    // many lanes as keep those times within kWalkTimes, or within the graphs' own bytes shared by
    // the walks at once, whichever is more (the buffers never outgrow the graphs). Fewer read the
    // graphs again for each walk (a 256-rank set's 23 lanes one a walk: 1.3 GB read, 0.6 ms a
    // rank); more fault in buffers larger than the walk saves (one fresh 10 MB buffer for a graph of
    // a few hundred kB). A prediction's lanes stay in one walk.
    constexpr size_t kWalkTimes = size_t{1} << 18;  // 2 MB a buffer
    size_t lanes = 0, graph_groups = 0, graph_bytes = 0;
    for (const Pending* p : list) lanes += p->count;
    for (const RankGraph* g : list.front()->Graphs()) graph_groups += g->groups(), graph_bytes += g->walked_bytes();
    const size_t times = std::max(kWalkTimes, graph_bytes / (2 * sizeof(int64_t)) / chunks);
    const size_t most = std::max<size_t>(1, times / std::max<size_t>(1, graph_groups));
    const size_t walks_needed = (lanes + most - 1) / most;
    const size_t count = (walks_needed + chunks - 1) / chunks * chunks;
    const size_t per = (lanes + count - 1) / count;
    batches.emplace_back();
    size_t in = 0;
    for (Pending* p : list) {
      if (in >= per && !batches.back().empty()) {
        batches.emplace_back();
        in = 0;
      }
      batches.back().push_back(p);
      in += p->count;
    }
  }
  std::vector<std::function<void()>> tasks;
  for (const auto& batch : batches) tasks.push_back([&batch] { ReplayTogether(batch); });
  profiler::RunTasks(tasks, threads);
}

}  // namespace

// An interval wider than kWidestInterval points is no prediction a user can act on (a loader fix on a
// 2-core machine: -9.7 to +48.4 %, measured -19 %): the report says "not predictable", with the
// replay's range and why in the assumptions. (PredictWhatIf itself keeps the replay's numbers.)
void NotPredictableWhereTooWide(WhatIfResult& r) {
  Prediction& p = r.prediction;
  if (!r.ok || p.high_pct - p.low_pct <= kWidestInterval) return;
  const bool cpus = p.assumptions.find("the CPUs bind") != std::string::npos;
  p.assumptions = fmt::format(
      "the replay's range is {:.1f} % to {:.1f} % of the step (point {:.1f} %), wider than {:.0f} points: {}; {}", p.low_pct,
      p.high_pct, p.saving_pct, kWidestInterval,
      cpus ? "the moved work competes with the loop's threads for this machine's CPUs, and how much it holds them up "
             "is not in the trace"
           : "its one uncertain assumption moves the step that much",
      p.assumptions);
  p.method = "not predictable";
  p.saving_pct = p.low_pct = p.high_pct = 0;
  p.step_ns_after = p.step_ns_before;
  r.ok = false;
}

// A finding follows its own prediction (issue 79.6): where the replay predicts the fix makes the
// step slower (its point; also where the interval is too wide to be a prediction), the finding is
// not ranked high nor told to apply it: low severity, and its fix says that the replay predicts a
// loss here (a loader fix on a machine whose CPUs the loop fills).
void FollowPrediction(Finding& f, const Prediction& replayed) {
  const Prediction& p = replayed;
  if (p.method != "replay" || p.saving_pct >= 0) return;
  f.severity = std::min(f.severity, Severity::kLow);
  const std::string why = fmt::format(
      "The replay predicts this fix makes the step slower here ({:.1f} % [{:.1f}, {:.1f}] of the step: {}); do not "
      "apply it without measuring it (`trainrx fix`). ",
      p.saving_pct, p.low_pct, p.high_pct,
      p.high_pct < 0 ? "slower at every level of its assumption" : "slower at its point, a gain only at its high end");
  if (!f.fix_python.empty()) f.fix_python = why + f.fix_python;
  if (!f.fix_cpp.empty()) f.fix_cpp = why + f.fix_cpp;
}

WhatIfResult PredictWhatIf(const RankGraph& g, const std::vector<std::string>& names, double measured_mean_ns, const RankSet* set,
                           const PlanCache* cache) {
  Pending pending;
  pending.g = &g;
  pending.names = names;
  pending.measured_mean_ns = measured_mean_ns;
  pending.set = set;
  PlanPrediction(pending, cache, 1);
  if (pending.replay) {
    ReplayTogether({&pending});
    FinishPrediction(pending);
  }
  return std::move(pending.out);
}

std::vector<std::string> WhatIfNames() { return TransformNames(); }

StatusOr<std::string> ResolveWhatIf(const std::string& name) {
  const auto refuse = [&](std::string why) { return Status::Error(fmt::format("--what-if {}: {}", name, why)); };
  // A fix as its catalog token, with a value of one's own: "workers=4" -> "loader_workers:workers=4".
  if (const size_t eq = name.find('='); eq != std::string::npos && name.find(':') == std::string::npos) {
    const std::string key = name.substr(0, eq), value = name.substr(eq + 1);
    if (key == "amp")
      return value == "bf16" ? StatusOr<std::string>(std::string("amp_bf16"))
                             : refuse("the replay predicts autocast to bf16 only (amp=bf16): fp16's loss scaling "
                                      "(GradScaler's checks and skipped steps) is not in the transform");
    if (key == "bucket_cap_mb")
      return refuse("comm_overlap predicts DDP's all-reduce overlapped with backward, not a bucket size: how the "
                    "buckets split depends on the parameters' order and sizes, which a trace does not hold; ask "
                    "--what-if comm_overlap, and measure sizes with `trainrx sweep`");
    for (const Named& n : Transforms())
      if (std::find(n.keys.begin(), n.keys.end(), key) != n.keys.end()) {
        std::string spec = fmt::format("{}:{}", n.name, name);
        const Transform t = FindTransform(spec);
        if (!t) return refuse(fmt::format("{} takes a number: {}=N", n.name, key));
        if (key == "workers" && (t.args.at(key) < 1 || t.args.at(key) != std::floor(t.args.at(key))))
          return refuse("workers=N needs a whole number of worker processes, 1 or more (0 is the run without them)");
        return spec;
      }
  }
  if (FindTransform(name)) return name;
  if (const CatalogEntry* e = FindCatalogEntry(name); e != nullptr && *e->transform) return std::string(e->transform);
  std::string known, params;
  for (const Named& n : Transforms()) {
    known += fmt::format("{}{}", known.empty() ? "" : ", ", n.name);
    for (std::string_view k : n.keys) params += fmt::format("{}{}=N ({})", params.empty() ? "" : ", ", k, n.name);
  }
  return refuse(fmt::format("not a fix the replay knows; known: {}; with a parameter: {}, amp=bf16 (or the id of a "
                            "finding whose fix has one, e.g. input.workers)",
                            known, params));
}

namespace {

// Each rank's graph over its replayed steps (on the threads there are); returns each rank's mean
// measured step.
// `beside`: more graphs to build on the same threads (the gaps between a lone rank's steps).
std::map<int32_t, double> BuildGraphs(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps, size_t threads,
                                      size_t replayed_steps, std::map<int32_t, std::unique_ptr<RankGraph>>& graphs,
                                      std::vector<std::function<void()>> beside = {}) {
  std::map<int32_t, double> means;
  {
    std::vector<std::function<void()>> tasks = std::move(beside);
    for (auto& [rank, graph] : graphs)
      tasks.push_back([&, rank = rank, &graph = graph] {
        std::vector<std::pair<int64_t, int64_t>> windows;
        for (const StepRow& row : steps.steps)
          if (row.rank == rank) windows.push_back({row.start_ns, row.start_ns + row.wall_ns});
        windows = ReplayedSteps(std::move(windows), replayed_steps);
        graph = std::make_unique<RankGraph>(trace, *links.Rank(rank), std::move(windows));
      });
    profiler::RunTasks(tasks, threads);
  }
  for (auto& [rank, graph] : graphs) {
    double sum = 0;
    for (const auto& [a, b] : graph->windows()) sum += static_cast<double>(b - a);
    means[rank] = graph->windows().empty() ? 0 : sum / static_cast<double>(graph->windows().size());
  }
  return means;
}

// The plans PredictSavings' predictions ask for, (rank, transform) (a coupled set's on every rank),
// made with the unchanged replays beside them on the threads there are.
void PlanBeside(const std::map<int32_t, std::unique_ptr<RankGraph>>& graphs, const RankSet* coupled,
                const std::vector<std::pair<int32_t, std::string>>& wanted, size_t threads, PlanCache& cache) {
  std::vector<std::pair<const RankGraph*, std::string>> keys;
  for (const auto& [rank, name] : wanted) {
    if (coupled != nullptr)
      for (const RankGraph* g : coupled->graphs) keys.emplace_back(g, name);
    else if (graphs.count(rank) != 0)
      keys.emplace_back(graphs.at(rank).get(), name);
  }
  std::vector<std::function<void()>> unchanged;
  if (coupled != nullptr) unchanged.push_back([coupled] { coupled->Unchanged(); });
  else
    for (const auto& [rank, graph] : graphs) unchanged.push_back([g = graph.get()] { g->Unchanged(); });
  cache.Fill(std::move(keys), threads, std::move(unchanged));
}

// "All findings": every finding's transform that will have a number, once, in the findings' order,
// on the rank of the first of them (-1: none).
template <typename RankOf>
std::pair<std::vector<std::string>, int32_t> AllFindings(
    const Report& report, const std::map<std::pair<int32_t, std::string>, std::unique_ptr<Pending>>& pending, RankOf rank_of) {
  std::vector<std::string> all;
  int32_t all_rank = -1;
  for (const Finding& f : report.findings) {
    const CatalogEntry* entry = FindCatalogEntry(f.id);
    if (entry == nullptr) continue;
    const auto it = pending.find({rank_of(f.rank), std::string(entry->transform)});
    if (it == pending.end() || !it->second->replay) continue;
    if (all_rank < 0) all_rank = it->first.first;
    if (it->first.first == all_rank && std::find(all.begin(), all.end(), entry->transform) == all.end())
      all.push_back(entry->transform);
  }
  return {all, all_rank};
}

// The work between a rank's steps (an evaluation every N steps, logging, checkpoints: where the
// loop's step ranges leave gaps), which a trial's time a step includes (its clock runs from one
// step's start to the next's) and the replayed steps do not. Where those gaps hold at least
// kBetweenStepsShare of the rank's run, a prediction replays the longest kBetweenStepsGaps of them
// apart (each its own graph), takes the share of gap time each level saves there to all the gaps,
// and states its saving over the steps and the gaps together: the span the rerun measures.
constexpr double kBetweenStepsShare = 0.02;
constexpr size_t kBetweenStepsGaps = 4;
struct BetweenSteps {
  double steps_ns = 0, gaps_ns = 0;  // the rank's steps' and gaps' total time
  size_t steps = 0, gaps = 0;
  std::vector<std::pair<int64_t, int64_t>> longest;  // the longest gaps
  std::vector<std::unique_ptr<RankGraph>> graphs;      // one graph each (GapGraphTasks)
};
// The gaps of `rank` (their graphs not yet built: GapGraphTasks); nullopt where they hold too little.
std::optional<BetweenSteps> FindBetweenSteps(const LinkIndex& links, const StepModel& steps, int32_t rank) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (const StepRow& row : steps.steps)
    if (row.rank == rank) windows.push_back({row.start_ns, row.start_ns + row.wall_ns});
  std::sort(windows.begin(), windows.end());
  if (windows.size() < 2 || links.Rank(rank) == nullptr) return std::nullopt;
  BetweenSteps out;
  std::vector<std::pair<int64_t, int64_t>> gaps;
  for (size_t i = 0; i < windows.size(); ++i) {
    out.steps_ns += static_cast<double>(windows[i].second - windows[i].first);
    if (i + 1 < windows.size() && windows[i + 1].first > windows[i].second) {
      gaps.push_back({windows[i].second, windows[i + 1].first});
      out.gaps_ns += static_cast<double>(windows[i + 1].first - windows[i].second);
    }
  }
  out.steps = windows.size();
  out.gaps = gaps.size();
  if (out.gaps_ns < kBetweenStepsShare * (out.steps_ns + out.gaps_ns)) return std::nullopt;
  std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.second - a.first > b.second - b.first; });
  gaps.resize(std::min(gaps.size(), kBetweenStepsGaps));
  out.longest = std::move(gaps);
  return out;
}

// The tasks that build each gap's graph (run them on the threads there are).
std::vector<std::function<void()>> GapGraphTasks(const profiler::Trace& trace, const RankLinks& links, BetweenSteps& b) {
  b.graphs.resize(b.longest.size());
  std::vector<std::function<void()>> tasks;
  for (size_t k = 0; k < b.longest.size(); ++k)
    tasks.push_back([&trace, &links, &b, k] { b.graphs[k] = std::make_unique<RankGraph>(trace, links, std::vector{b.longest[k]}); });
  return tasks;
}

// A prediction over the steps (`p`, replayed) made over the steps and the gaps between them
// together; unchanged where the fix has no number for the gaps.
void AddBetweenSteps(const BetweenSteps& b, const std::vector<std::string>& names, Prediction& p, size_t threads) {
  double share[3] = {0, 0, 0}, replayed_ns = 0;  // the gaps' saved share at the point, low and high
  std::vector<WhatIfResult> results(b.graphs.size());  // each gap replayed on the threads there are, summed in order
  const auto length = [&](size_t k) { return static_cast<double>(b.longest[k].second - b.longest[k].first); };
  {
    std::vector<std::function<void()>> tasks;
    for (size_t k = 0; k < b.graphs.size(); ++k)
      tasks.push_back([&, k] { results[k] = PredictWhatIf(*b.graphs[k], names, length(k)); });
    profiler::RunTasks(tasks, threads);
  }
  for (size_t k = 0; k < b.graphs.size(); ++k) {
    const double len = length(k);
    const WhatIfResult& r = results[k];
    if (!r.ok) continue;
    share[0] += len * r.prediction.saving_pct / 100.0;
    share[1] += len * r.prediction.low_pct / 100.0;
    share[2] += len * r.prediction.high_pct / 100.0;
    replayed_ns += len;
  }
  if (replayed_ns <= 0) return;
  for (double& x : share) x /= replayed_ns;
  const double total = b.steps_ns + b.gaps_ns;
  const auto combined = [&](double step_pct, double gap_share) {
    return 100.0 * (step_pct / 100.0 * b.steps_ns + gap_share * b.gaps_ns) / total;
  };
  p.assumptions += fmt::format(
      "; over the span a trial times, from one step's start to the next's ({:.2f} ms a step): the steps ({:.2f} ms) "
      "and the {} gaps between them ({:.1f} % of the run: work the loop does between steps, e.g. an evaluation), the "
      "fix replayed over the longest {} gaps too, saving {:.1f} % [{:.1f}, {:.1f}] of the gaps' time",
      total / static_cast<double>(b.steps) / 1e6, b.steps_ns / static_cast<double>(b.steps) / 1e6, b.gaps,
      100.0 * b.gaps_ns / total, b.graphs.size(), 100.0 * share[0], 100.0 * share[1], 100.0 * share[2]);
  p.saving_pct = combined(p.saving_pct, share[0]);
  p.low_pct = combined(p.low_pct, share[1]);
  p.high_pct = std::min(100.0, combined(p.high_pct, share[2]));
  p.step_ns_before = static_cast<int64_t>(total / static_cast<double>(b.steps));
  p.step_ns_after = static_cast<int64_t>(static_cast<double>(p.step_ns_before) * (1.0 - p.saving_pct / 100.0));
}

// Work between the steps (a rank alone: a coupled set's gaps are its collectives' business): each
// rank's gaps (BetweenSteps) found, and their graphs built, once.
class GapsOfRanks {
 public:
  GapsOfRanks(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps, size_t threads)
      : trace_(trace), links_(links), steps_(steps), threads_(threads) {}
  // A lone rank replays uncoupled: with threads to spare its gaps' graphs are built beside its own
  // (the tasks to run with `graphs`' builds).
  std::vector<std::function<void()>> Beside(const std::map<int32_t, std::unique_ptr<RankGraph>>& graphs) {
    if (graphs.size() != 1 || threads_ == 1) return {};
    const int32_t rank = graphs.begin()->first;
    auto& b = between_.emplace(rank, FindBetweenSteps(links_, steps_, rank)).first->second;
    return b ? GapGraphTasks(trace_, *links_.Rank(rank), *b) : std::vector<std::function<void()>>{};
  }
  // `result`, a prediction over `rank`'s steps, made over its steps and its gaps (AddBetweenSteps).
  void Add(int32_t rank, const std::vector<std::string>& names, WhatIfResult& result) {
    if (!result.ok) return;
    auto it = between_.find(rank);
    if (it == between_.end()) {
      it = between_.emplace(rank, FindBetweenSteps(links_, steps_, rank)).first;
      if (it->second) profiler::RunTasks(GapGraphTasks(trace_, *links_.Rank(rank), *it->second), threads_);
    }
    if (it->second) AddBetweenSteps(*it->second, names, result.prediction, threads_);
  }

 private:
  const profiler::Trace& trace_;
  const LinkIndex& links_;
  const StepModel& steps_;
  size_t threads_;
  std::map<int32_t, std::optional<BetweenSteps>> between_;
};

// A planned prediction's result, finished where it was replayed.
WhatIfResult Finished(Pending& p) {
  if (p.replay) FinishPrediction(p);
  return std::move(p.out);
}

// A finding's saving within what the replay of its fix's transform (BoundTransform) says the fix
// saves at most: the high end of that replay's interval (its most generous level, the steps' spread
// and the replay's own error, calibrated where the transform's measured rows allow). The bound is
// evidence (`replay_bound_ns`, of the replay's mean step); one the estimate is over replaces it, and
// the bound's words say so after the measured time, which stays (`saving_bound_ns`: "at most the
// 1.13 ms of blocked time ...; the replay of unblock_syncs bounds the saving to 0.23 ms a step"). A
// finding without steps (a trace total) is left as it is.
void BoundByReplay(Finding& f, const Prediction& p) {
  if (f.steps == 0 || f.estimated_saving_pct <= 0) return;
  const double bound_pct = std::clamp(p.high_pct, 0.0, 100.0);
  f.evidence.push_back({"replay_bound_ns", std::llround(bound_pct / 100.0 * static_cast<double>(p.step_ns_before))});
  if (f.estimated_saving_pct <= bound_pct) return;
  f.estimated_saving_ns = std::llround(static_cast<double>(f.estimated_saving_ns) * bound_pct / f.estimated_saving_pct);
  f.estimated_saving_pct = bound_pct;
  f.saving_bound += fmt::format("; the replay of {} bounds the saving to {:.2f} ms a step", p.transform,
                                static_cast<double>(f.estimated_saving_ns) / 1e6);
}

// What to replay: each (rank, transform) the findings name (BoundTransform: their own, or their
// variant's bound), once (findings sharing a fix share its replay), and each asked fix on
// `asked_rank`; the graphs of those ranks (in a set, every rank's, so that a rank's collectives can
// wait for the others'), not yet built.
template <typename RankOf>
void WhatToReplay(const LinkIndex& links, const Report& report, const std::vector<std::string>& what_if, int32_t asked_rank,
                  RankOf rank_of, std::map<std::pair<int32_t, std::string>, WhatIfResult>& done,
                  std::map<int32_t, std::unique_ptr<RankGraph>>& graphs) {
  for (const Finding& f : report.findings) {
    const std::string_view transform = BoundTransform(f);
    if (transform.empty() || !FindTransform(transform)) continue;
    const int32_t rank = rank_of(f.rank);
    if (links.Rank(rank) == nullptr) continue;
    done.emplace(std::make_pair(rank, std::string(transform)), WhatIfResult{});
    graphs.emplace(rank, nullptr);
  }
  if (!what_if.empty() && links.Rank(asked_rank) != nullptr) {
    graphs.emplace(asked_rank, nullptr);
    for (const std::string& n : what_if) done.emplace(std::make_pair(asked_rank, n), WhatIfResult{});
  }
  if (!graphs.empty() && links.ranks().size() > 1)
    for (const RankLinks& l : links.ranks()) graphs.emplace(l.rank, nullptr);
}

// Each finding its fix's prediction and its saving's bound, from the one replay of its transform
// (`done`, by rank and transform; `rank_of` its rank's replayed graph). Every prediction then
// follows the report's rule (NotPredictableWhereTooWide); a finding follows its replay as made.
template <typename RankOf>
void GiveFindings(std::map<std::pair<int32_t, std::string>, WhatIfResult>& done, RankOf rank_of, Report& report) {
  std::map<std::pair<int32_t, std::string>, Prediction> replayed;  // before the report's rule
  for (auto& [key, result] : done) {
    if (result.ok) replayed[key] = result.prediction;
    NotPredictableWhereTooWide(result);
  }
  for (Finding& f : report.findings) {
    const std::pair<int32_t, std::string> key(rank_of(f.rank), BoundTransform(f));
    const auto r = replayed.find(key);
    if (r != replayed.end()) BoundByReplay(f, r->second);
    const CatalogEntry* entry = FindCatalogEntry(f.id);
    if (entry == nullptr || entry->transform[0] == '\0') continue;  // a bound only (gpu.idle's variants)
    const auto it = done.find(key);
    if (it == done.end() || it->second.prediction.method.empty()) continue;
    f.predicted = it->second.prediction;
    if (r != replayed.end()) FollowPrediction(f, r->second);
  }
}

// A prediction into the report's what-if table ("all findings", "asked", "asked together"); one
// without a number says why.
void AddWhatIf(const char* label, int32_t rank, std::vector<std::string> names, WhatIfResult r, bool has_steps,
               Report& report) {
  if (r.prediction.method.empty()) {
    r.prediction.method = "not predictable";
    r.prediction.assumptions = !has_steps ? "no steps in this rank's trace: nothing to replay a step of"
                                          : "none of these fixes applies to this trace";
  }
  report.metrics.what_if.push_back({rank, label, std::move(names), std::move(r.prediction)});
}

}  // namespace

void PredictSavings(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps,
                    const std::vector<std::string>& what_if, Report& report, size_t threads, size_t replayed_steps) {
  const auto rank_of = [&](int32_t rank) {
    if (rank >= 0 || links.ranks().empty()) return rank;
    for (const StepRow& row : steps.steps) return row.rank;  // the first rank with steps
    return links.ranks().front().rank;
  };
  // What to replay, then the graphs of those ranks and the replays, each on the threads there are.
  std::map<std::pair<int32_t, std::string>, WhatIfResult> done;
  std::map<int32_t, std::unique_ptr<RankGraph>> graphs;
  const int32_t asked_rank = rank_of(-1);
  WhatToReplay(links, report, what_if, asked_rank, rank_of, done, graphs);
  GapsOfRanks gaps(trace, links, steps, threads);
  const std::map<int32_t, double> means = BuildGraphs(trace, links, steps, threads, replayed_steps, graphs, gaps.Beside(graphs));
  // The ranks with steps, coupled by their matched collectives (none matched: each rank alone).
  RankSet set;
  for (auto& [rank, graph] : graphs)
    if (!graph->windows().empty()) set.graphs.push_back(graph.get());
  if (set.graphs.size() >= 2) set.coupling = CoupleCollectives(set.graphs);
  const RankSet* coupled = set.coupling.empty() ? nullptr : &set;
  // Each transform planned once on each graph it runs on (a set's on every rank), and beside the
  // plans the unchanged replays, once, before the predictions share them: the set's together where
  // it couples (each rank's own is then never read), else each rank's.
  std::vector<std::pair<int32_t, std::string>> wanted;
  for (const auto& [key, result] : done) wanted.push_back(key);
  PlanCache cache;
  PlanBeside(graphs, coupled, wanted, threads, cache);
  // Every prediction planned, then replayed together where they walk the same graphs, then finished.
  const auto plan = [&](int32_t rank, std::vector<std::string> names) {
    auto p = std::make_unique<Pending>();
    p->g = graphs.at(rank).get();
    p->names = std::move(names);
    p->measured_mean_ns = means.at(rank);
    p->set = coupled;
    PlanPrediction(*p, &cache, threads);
    return p;
  };
  std::map<std::pair<int32_t, std::string>, std::unique_ptr<Pending>> pending;
  for (const auto& [key, unused] : done) pending[key] = plan(key.first, {key.second});
  const auto [all, all_rank] = AllFindings(report, pending, rank_of);
  std::unique_ptr<Pending> all_findings, asked;
  if (all.size() >= 2 && graphs.count(all_rank) != 0) all_findings = plan(all_rank, all);
  const bool any_asked = !what_if.empty() && graphs.count(asked_rank) != 0;
  if (any_asked && what_if.size() >= 2) asked = plan(asked_rank, what_if);
  std::vector<Pending*> every;
  for (auto& [key, p] : pending) every.push_back(p.get());
  every.insert(every.end(), {all_findings.get(), asked.get()});
  ReplayPending(every, threads);
  for (auto& [key, p] : pending) done[key] = Finished(*p);
  WhatIfResult all_result = all_findings ? Finished(*all_findings) : WhatIfResult{};
  WhatIfResult together = asked ? Finished(*asked) : WhatIfResult{};
  // Every prediction over the span a trial times (the steps and the work between them), the
  // findings', each asked fix's and the combined.
  if (coupled == nullptr) {
    for (auto& [key, result] : done) gaps.Add(key.first, {key.second}, result);
    if (all_findings) gaps.Add(all_rank, all_findings->names, all_result);
    if (asked) gaps.Add(asked_rank, asked->names, together);
  }
  // Each transform's interval at its measured coverage where its rows allow (dependency/calibration.h).
  for (auto& [key, result] : done)
    if (result.ok) Calibrate(result.prediction);
  if (all_result.ok) Calibrate(all_result.prediction);
  if (together.ok) Calibrate(together.prediction);
  GiveFindings(done, rank_of, report);
  const auto has_steps = [&](int32_t rank) { return graphs.count(rank) != 0 && !graphs.at(rank)->windows().empty(); };
  if (all_findings) {
    NotPredictableWhereTooWide(all_result);
    AddWhatIf("all findings", all_rank, all_findings->names, std::move(all_result), has_steps(all_rank), report);
  }
  // Each asked fix alone (`analyze --what-if`, `fix --also`: a row measures one fix), then together.
  if (any_asked)
    for (const std::string& n : what_if)
      if (const auto it = done.find({asked_rank, n}); it != done.end())
        AddWhatIf("asked", asked_rank, {n}, it->second, has_steps(asked_rank), report);
  if (asked) {
    NotPredictableWhereTooWide(together);
    AddWhatIf("asked together", asked_rank, asked->names, std::move(together), has_steps(asked_rank), report);
  }
}

}  // namespace trainrx::analyzers
