// The what-if: each fix of the catalog as a transform of the dependency graph (replay.h), replayed
// to predict the fix's saving with an interval (issue 59; docs/what-if.md).
//
// A transform names the tasks the fix removes, shortens or stops waiting, from the trace alone, at
// up to three levels of its one uncertain assumption (the point, and the ends that bound the
// interval), and says its assumptions in plain words. Where the trace cannot tell what a fix would
// find (what cudnn.benchmark picks), it says "not predictable from this trace" instead of a number.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dependency/replay.h"
#include "trainrx/analyzers/finding.h"

namespace trainrx::analyzers {

struct TransformPlan {
  std::vector<Edits> levels;      // [point, low, high] (or one: no spread of its own)
  std::vector<double> floor_ns;   // per level: a mean step the fix cannot go below (0: none)
  // Work the fix moves off the loop onto other threads or processes of the same machine (loader
  // workers): per level, its CPU time a step and the cores the loop itself keeps busy; with `cores`
  // known (0: not), the step cannot be shorter than (step x loop cores + moved work) / cores.
  std::vector<double> moved_cpu_ns;
  std::vector<double> loop_cores;
  double cores = 0;
  std::string assumptions;
  std::string not_predictable;    // non-empty: why there is no number
  bool applies() const { return !levels.empty(); }
};
using TransformFn = TransformPlan (*)(const RankGraph& graph);
// A transform's parameters, numbers by name ("workers" -> 4), as asked ("loader_workers:workers=4").
using TransformArgs = std::map<std::string, double, std::less<>>;
using ParamTransformFn = TransformPlan (*)(const RankGraph& graph, const TransformArgs& args);
// A transform as asked: its function and its parameters (those not asked take the catalog's
// defaults). False where the name has no transform or a parameter it does not take.
struct Transform {
  TransformFn fn = nullptr;
  ParamTransformFn with_args = nullptr;
  TransformArgs args;
  explicit operator bool() const { return fn != nullptr || with_args != nullptr; }
  TransformPlan operator()(const RankGraph& graph) const { return with_args != nullptr ? with_args(graph, args) : fn(graph); }
};
// A plan's three levels [point, low, high], each made by edit(k, e) on fresh edits of the graph.
template <typename Edit>
void AddLevels(TransformPlan& p, const RankGraph& g, Edit&& edit) {
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
    edit(k, e);
    p.levels.push_back(std::move(e));
  }
}
// A fix with nothing to change in this trace: a prediction of no saving, saying why.
TransformPlan NoSaving(const RankGraph& graph, std::string why);
// Whether a host frame is an optimizer's own (LBFGS's line search reading the device): an
// Optimizer.step# range encloses it before any user call site does (a closure's
// `print(loss.item())` has its line inside the step: the user's). sync.host_device alike.
bool OptimizersOwn(const RankGraph& graph, int32_t frame);
// The host transforms (host_transforms.cc), by the finding whose fix each replays: anomaly mode
// off (debug.anomaly_detection), evaluation under no_grad (eval.no_grad), syncs unblocked
// (sync.host_device), the caching allocator kept (gpu.allocator), zero_grad(set_to_none=True),
// DataLoader workers (input.workers: `workers`, the catalog's 2 by default), foreach and fused
// optimizers, cudnn.benchmark (not predictable from a trace), the profiler off, a bias before
// batch norm dropped (model.bias_before_norm).
TransformPlan AnomalyOff(const RankGraph& graph);
TransformPlan EvalNoGrad(const RankGraph& graph);
TransformPlan UnblockSyncs(const RankGraph& graph);
TransformPlan CachingAllocator(const RankGraph& graph);
TransformPlan ZeroGradNone(const RankGraph& graph);
TransformPlan LoaderWorkers(const RankGraph& graph, const TransformArgs& args);
TransformPlan ForeachOptimizer(const RankGraph& graph);
TransformPlan FusedOptimizer(const RankGraph& graph);
TransformPlan CudnnBenchmark(const RankGraph& graph);
TransformPlan ProfilerOff(const RankGraph& graph);
TransformPlan DropBias(const RankGraph& graph);
// No finding's fix: the host taking no time (the device-bound step), the bound of gpu.idle's
// host-starved gaps (the catalog's variant `bound`).
TransformPlan HostFree(const RankGraph& graph);
// The GPU transforms (gpu_transforms.cc): TF32 for FP32 GEMM / convolution kernels, pinned memory
// for pageable host-to-device copies, CUDA graphs for launch-bound steps, autocast to bf16 (asked
// for with --what-if only: no finding's fix).
TransformPlan Tf32(const RankGraph& graph);
TransformPlan PinnedCopies(const RankGraph& graph);
TransformPlan CudaGraphs(const RankGraph& graph);
TransformPlan AmpBf16(const RankGraph& graph);
TransformPlan CompileFusion(const RankGraph& graph);
// dist_transforms.cc: DDP's all-reduce overlapped with backward (dist.comm_overlap).
TransformPlan CommOverlap(const RankGraph& graph);

// A prediction whose interval is wider than this (points of the step) is "not predictable" (issue
// 79: +-25 points).
inline constexpr double kWidestInterval = 50.0;

struct WhatIfResult {
  Prediction prediction;
  bool ok = false;  // a number was predicted
};
// What the report claims of a replayed prediction (PredictSavings applies both; PredictWhatIf keeps
// the replay's numbers): an interval wider than kWidestInterval points becomes "not predictable",
// with the replay's range and why in its assumptions (issue 79.3).
void NotPredictableWhereTooWide(WhatIfResult& r);
// A finding whose replayed prediction (`replayed`, before NotPredictableWhereTooWide) is a loss (its
// point below 0) is low severity and its fix says so, not "apply it" (issue 79.6).
void FollowPrediction(Finding& f, const Prediction& replayed);

// A transform by its name, with parameters after a colon ("loader_workers:workers=4"); false for a
// name no transform has, or a parameter it does not take or that is not a number.
Transform FindTransform(std::string_view name);
// The catalog's default of a transform's parameter (the fix its findings name, "workers=2": the one
// owner of each default), or `fallback` where no entry gives one.
double CatalogDefault(std::string_view transform, std::string_view key, double fallback);
// Every transform's name (docs and tests hold the catalog to them).
std::vector<std::string> TransformNames();

// The steps a rank's replay covers: all of them up to `count` (the threshold what_if.steps, 16 by
// default), else that many consecutive steps from the middle of the run (steady state; a prediction
// is a mean over steps, and the graph's cost stays bounded however long the trace). Sorted.
inline constexpr size_t kReplayedSteps = 16;
std::vector<std::pair<int64_t, int64_t>> ReplayedSteps(std::vector<std::pair<int64_t, int64_t>> windows,
                                                       size_t count = kReplayedSteps);

// The ranks of a set whose collectives couple (replay.h Coupling): a prediction for one of them
// applies the fix on every rank and replays them together.
struct RankSet {
  std::vector<const RankGraph*> graphs;
  Coupling coupling;
  // The set replayed unchanged, together (made once).
  const std::vector<ReplayResult>& Unchanged() const;
  size_t broken_unchanged() const { return broken_unchanged_; }

 private:
  mutable std::once_flag once_;
  mutable std::vector<ReplayResult> unchanged_;
  mutable size_t broken_unchanged_ = 0;
};
// Transforms' plans made once per (graph, transform) for every prediction that asks: a set's
// predictions each plan the fix on every rank, and "all findings" plans them all again.
// Filled before the predictions run (on the threads there are, with the tasks `beside`: the
// unchanged replays), read-only while they do.
class PlanCache {
 public:
  void Fill(std::vector<std::pair<const RankGraph*, std::string>> keys, size_t threads,
            std::vector<std::function<void()>> beside = {});
  // nullptr: not made here (the caller plans it itself).
  const TransformPlan* Find(const RankGraph& graph, const std::string& transform) const;

 private:
  std::map<std::pair<const RankGraph*, std::string>, TransformPlan> plans_;
};
// One rank's prediction of `transforms` applied together (their edits combined: scales multiply,
// unblocks add up, floors take the largest). The unchanged replay's error is part of the interval.
// With `set` holding this graph and coupled collectives, every rank of the set gets the fix and
// they are replayed together.
WhatIfResult PredictWhatIf(const RankGraph& graph, const std::vector<std::string>& transforms, double measured_mean_ns,
                           const RankSet* set = nullptr, const PlanCache* cache = nullptr);

}  // namespace trainrx::analyzers
