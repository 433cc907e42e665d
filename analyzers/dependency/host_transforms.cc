// The host transforms of the what-if (dependency/what_if.h): the fixes that change what the host
// does (anomaly mode off, evaluation under no_grad, syncs unblocked, the caching allocator,
// zero_grad(set_to_none), loader workers, foreach and fused optimizers, cudnn.benchmark, the
// profiler off, a bias before batch norm dropped), each beside its helpers and its assumptions.
// what_if.cc is the engine that plans and replays them (and holds the table of every transform);
// the device's transforms are gpu_transforms.cc and dist_transforms.cc.
#include "dependency/what_if.h"

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

// The tasks whose frame (a host slice's op, device work's launching call) is in `mask`.
std::vector<size_t> TasksUnder(const RankGraph& g, const std::vector<uint8_t>& mask) {
  std::vector<size_t> out;
  const auto& tasks = g.tasks();
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].frame >= 0 && mask[tasks[i].frame]) out.push_back(i);
  return out;
}
void ScaleTasks(const std::vector<size_t>& tasks, double scale, Edits& e) {
  for (size_t i : tasks) e.ScaleBy(i, static_cast<float>(scale));
}

// Per frame under an optimizer step (`is_step` of a range's name): where that step's own work
// starts (OwnWorkStart: a closure's forward and backward come first, Lightning, SAM); INT64_MAX
// for a frame under none. A task under a step is the optimizer's when it starts there or later.
template <typename IsStep>
std::vector<int64_t> OwnStepFrom(const RankGraph& g, IsStep is_step) {
  const auto& frames = g.frames();
  const auto& tr = g.trace();
  std::vector<int64_t> out(frames.size(), INT64_MAX);
  std::vector<Interval> backward;  // the graph's backward ranges, every thread's
  ByName named(tr, [&is_step](std::string_view n) {
    return static_cast<uint8_t>((is_step(n) ? 2 : 0) | (PhaseOf(n) == kBackward ? 1 : 0));
  });
  bool any_step = false;
  for (const auto& f : frames) {
    const uint8_t v = named(*f.op);
    if (v & 1) backward.push_back({f.op->ts_ns, f.op->end_ns()});
    any_step = any_step || (v & 2);
  }
  if (!any_step) return out;
  std::sort(backward.begin(), backward.end());
  for (size_t i = 0; i < frames.size(); ++i) {
    const int32_t parent = frames[i].parent;
    if (parent >= 0 && out[parent] != INT64_MAX) out[i] = out[parent];
    else if (named(*frames[i].op) & 2) out[i] = OwnWorkStart(*frames[i].op, backward);
  }
  return out;
}

// The share of the measured step a set of tasks takes on the loop's thread (for assumptions' text).
int64_t LoopTimeOf(const RankGraph& g, const std::vector<uint8_t>& mask) {
  int64_t ns = 0;
  for (const auto& t : g.tasks())
    if (t.track == g.loop_thread() && t.frame >= 0 && mask[t.frame]) ns += t.dur;
  return ns;
}

// ---- the transforms ----

// Each frame's own time (the host slices of its op alone) and whether other ops ran inside it.
struct OwnTimes {
  std::vector<int64_t> own;
  std::vector<uint8_t> has_children;
  explicit OwnTimes(const RankGraph& g) : own(g.frames().size(), 0), has_children(g.frames().size(), 0) {
    for (const auto& t : g.tasks())
      if (t.kind != Kind::kDevice && t.frame >= 0) own[t.frame] += t.dur;
    for (const auto& f : g.frames())
      if (f.parent >= 0) has_children[f.parent] = 1;
  }
};

bool IsViewOp(std::string_view n) {
  static constexpr std::string_view kViews[] = {"aten::view", "aten::t", "aten::reshape", "aten::_reshape_alias", "aten::expand",
                                                "aten::transpose", "aten::permute", "aten::select", "aten::slice", "aten::unsqueeze",
                                                "aten::squeeze", "aten::flatten", "aten::as_strided", "aten::alias", "aten::detach",
                                                "aten::unflatten", "aten::split", "aten::chunk", "aten::narrow", "aten::numpy_T"};
  return std::find(std::begin(kViews), std::end(kViews), n) != std::end(kViews);
}

// An op's usual own time where it records no autograd node: the median own time of the ops run in
// backward (grad mode is off there), else of every op; at least 1 us.
int64_t TypicalOwnTime(const RankGraph& g, const OwnTimes& own) {
  const auto backward = g.FramesInPhase(kBackward);
  std::vector<int64_t> in_backward, all;
  const auto& frames = g.frames();
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].op->kind != profiler::EventKind::kCpuOp || own.own[i] <= 0) continue;
    (backward[i] ? in_backward : all).push_back(own.own[i]);
  }
  return std::max<int64_t>(1000, Quantile(in_backward.size() >= 20 ? in_backward : all, 0.5));
}

// What recording an autograd node costs the forward, from the trace: the forward's ops' own time
// beyond the usual own time of an op, in the ops whose work runs in other ops (wrappers with
// children) or that do no work (views), over the nodes backward then evaluates (each recorded node
// is evaluated once: autograd::engine::evaluate_function ranges, AccumulateGrad included), in the
// steps. Without backward nodes in the steps, the median view's excess (a view records one node).
struct NodeCost {
  explicit NodeCost(const RankGraph& g) : own(g) {}
  OwnTimes own;               // each frame's own time (measured once, shared by the transforms)
  int64_t typical = 0;        // the usual own time of an op
  double per_node_ns = 0;     // a recorded node's cost
  double nodes_per_step = 0;  // backward's evaluated nodes a step
  std::vector<int64_t> excess;  // per frame: own time beyond the usual (the loop's forward ops)
  std::vector<uint8_t> leaf;    // per frame: a leaf op that is not a view (its own time is its work)
};
NodeCost NodeCostOf(const RankGraph& g, const std::vector<uint8_t>& region) {
  NodeCost c(g);
  const OwnTimes& own = c.own;
  c.typical = TypicalOwnTime(g, own);
  const auto& frames = g.frames();
  const auto& tr = g.trace();
  c.excess.assign(frames.size(), 0);
  c.leaf.assign(frames.size(), 0);
  // In the windows, and outside them (the lead-in and the tail: where the windows are the gaps
  // between steps, BetweenSteps' graphs, the training steps around them are outside).
  double wrapper_excess[2] = {0, 0};
  int64_t nodes[2] = {0, 0};
  std::vector<int64_t> views;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Event& op = *frames[i].op;
    const std::string_view name = tr.Name(op);
    const int at = g.InWindows(op.ts_ns) ? 0 : 1;
    if (StartsWith(name, "autograd::engine::evaluate_function")) ++nodes[at];
    if (!region[i] || op.kind != profiler::EventKind::kCpuOp || op.track != g.loop_thread()) continue;
    c.excess[i] = std::max<int64_t>(0, own.own[i] - c.typical);
    const bool view = IsViewOp(name);
    c.leaf[i] = !own.has_children[i] && !view;
    if (view) views.push_back(c.excess[i]);
    if (!c.leaf[i]) wrapper_excess[at] += static_cast<double>(c.excess[i]);
  }
  c.nodes_per_step = static_cast<double>(nodes[0]) / g.steps();
  // Without backward nodes in the windows (an evaluation between steps), the steps around them.
  c.per_node_ns = nodes[0] > 0   ? wrapper_excess[0] / static_cast<double>(nodes[0])
                  : nodes[1] > 0 ? wrapper_excess[1] / static_cast<double>(nodes[1])
                                 : static_cast<double>(Quantile(views, 0.5));
  return c;
}

// The forward ops of `region` stop paying for recorded nodes: wrappers and views keep only the usual
// own time of an op (at the low end 25 % of their excess stays), a leaf op loses one node's cost
// (none at the low end, two at the high end), never more than its excess; an op under one that
// recorded the node keeps its time.
std::vector<Edits> NodeOverheadEdits(const RankGraph& g, const NodeCost& c) {
  const OwnTimes& own = c.own;
  // An op under one that recorded the node (an ancestor with an excess of half a node or more) runs
  // below autograd and records none: it keeps its time (mkldnn_convolution under convolution). An
  // ancestor with no excess recorded none (a range enclosing the forward, where a node costs 0).
  const auto& frames = g.frames();
  std::vector<uint8_t> under_node(frames.size(), 0);
  for (size_t i = 0; i < frames.size(); ++i) {
    const int32_t p = frames[i].parent;
    under_node[i] = p >= 0 && (under_node[p] || (c.excess[p] > 0 && static_cast<double>(c.excess[p]) >= 0.5 * c.per_node_ns)) ? 1 : 0;
  }
  const double wrapper_share[3] = {1.0, 0.75, 1.0};
  const double leaf_nodes[3] = {1.0, 0.0, 2.0};
  std::vector<Edits> out;
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
    for (size_t i = 0; i < g.tasks().size(); ++i) {
      const auto& t = g.tasks()[i];
      if (t.kind == Kind::kDevice || t.frame < 0 || c.excess[t.frame] == 0) continue;
      const double excess = static_cast<double>(c.excess[t.frame]);
      const double removed = under_node[t.frame] ? 0.0
                             : !c.leaf[t.frame]  ? wrapper_share[k] * excess
                                                 : std::min(excess, leaf_nodes[k] * c.per_node_ns);
      e.Scale(i, static_cast<float>(1.0 - removed / static_cast<double>(own.own[t.frame])));
    }
    out.push_back(std::move(e));
  }
  return out;
}

// The loop's ops outside backward, the optimizer and data loading: the forward (and evaluation).
std::vector<uint8_t> ForwardRegion(const RankGraph& g) {
  std::vector<uint8_t> out = g.FramesUnder([&](std::string_view n) {
    const int phase = PhaseOf(n);
    return phase == kBackward || phase == kOptimizer || phase == kData;
  });
  for (uint8_t& x : out) x = !x;
  return out;
}

}  // namespace

// debug.anomaly_detection: anomaly mode's two costs go. In backward, the NaN checks it runs on every
// node's outputs (aten::isnan / ne, any / _is_any_true, item); in forward, the stack it captures for
// every node the forward records (NodeOverheadEdits).
TransformPlan AnomalyOff(const RankGraph& g) {
  const auto backward = g.FramesInPhase(kBackward);
  const auto check = g.FramesUnder([&](std::string_view n) {
    return n == "aten::isnan" || n == "aten::ne" || n == "aten::any" || n == "aten::_is_any_true" || n == "aten::item";
  });
  std::vector<uint8_t> checks(check.size()), forward = ForwardRegion(g);
  const auto& frames = g.frames();
  for (size_t i = 0; i < frames.size(); ++i) {
    checks[i] = check[i] && (backward[i] || frames[i].op->track != g.loop_thread());
  }
  // Only where anomaly mode was on: its NaN checks ran in backward, or the recorded config says so
  // (asked with --what-if on a trace without it, nothing to save).
  const bool checked = std::any_of(checks.begin(), checks.end(), [](uint8_t x) { return x != 0; });
  if (!checked && ConfigView(g.trace(), g.links().rank).Max("anomaly_mode").value_or(0) <= 0)
    return NoSaving(g, "anomaly mode is not on in this trace (no NaN checks in backward, no anomaly_mode in the recorded "
                      "configuration): nothing to save");
  const NodeCost cost = NodeCostOf(g, forward);
  TransformPlan p;
  p.levels = NodeOverheadEdits(g, cost);
  const std::vector<size_t> checking = TasksUnder(g, checks);
  for (Edits& e : p.levels) ScaleTasks(checking, 0.0, e);
  p.assumptions = fmt::format(
      "the NaN checks anomaly mode adds in backward (isnan / ne, any, item per node output) go, and so does the stack it "
      "captures for every node the forward records ({:.0f} nodes a step, {:.2f} ms each: the forward's own time beyond an "
      "op's usual {:.1f} us over backward's nodes): wrappers and views keep the usual own time (25 % of the excess stays "
      "at the low end), an op that computes in its own time loses one node's cost (none to two)",
      cost.nodes_per_step, cost.per_node_ns / 1e6, static_cast<double>(cost.typical) / 1e3);
  return p;
}

// eval.grad_enabled: evaluation under torch.no_grad() records no autograd nodes (NodeOverheadEdits
// over the trainrx::eval ranges).
TransformPlan EvalNoGrad(const RankGraph& g) {
  const auto eval = g.FramesUnder([&](std::string_view n) { return StartsWith(n, "trainrx::eval"); });
  TransformPlan p;
  if (LoopTimeOf(g, eval) == 0) {
    // Marked elsewhere in the rank's trace (between the steps, where a loop evaluates every N steps):
    // none in these steps; the prediction replays the work between steps apart (BetweenSteps).
    const auto& tr = g.trace();
    for (uint32_t ti : CpuThreadTracks(tr, g.links().rank))
      for (const Event& e : tr.TrackEvents(ti))
        if (StartsWith(tr.Name(e), "trainrx::eval")) return NoSaving(g, "no evaluation in these steps: nothing to save in them");
    p.not_predictable = "the evaluation is not marked in this trace (trainrx::eval ranges): its ops cannot be told from training's";
    return p;
  }
  NodeCost cost = NodeCostOf(g, ForwardRegion(g));  // the training forward's node cost
  const NodeCost in_eval = NodeCostOf(g, eval);
  cost.excess = in_eval.excess;
  cost.leaf = in_eval.leaf;
  p.levels = NodeOverheadEdits(g, cost);
  p.assumptions = fmt::format(
      "evaluation under no_grad records no autograd nodes: its wrappers and views keep only the usual own time of an op "
      "({:.1f} us), an op that computes in its own time loses one node's cost ({:.3f} ms, the training forward's; none "
      "to two); the activations it no longer keeps are not counted",
      static_cast<double>(cost.typical) / 1e3, cost.per_node_ns / 1e6);
  return p;
}

// sync.host_device / sync.blocking_copy: the host no longer waits at scalar reads and explicit
// synchronizations (the read moved out of the step, or made every N steps).
TransformPlan UnblockSyncs(const RankGraph& g) {
  const auto reads = g.FramesUnder([](std::string_view n) { return IsScalarReadOrSync(n); });
  // An optimizer's own reads (LBFGS's line search) stay: moving a read out is the user's fix, and
  // those are torch's.
  TransformPlan p;
  Edits e(g.tasks().size());
  size_t n = 0, kept = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.kind != Kind::kWaitDevice || t.frame < 0 || !reads[t.frame]) continue;
    if (OptimizersOwn(g, t.frame)) {
      ++kept;
      continue;
    }
    e.Unblock(i);
    ++n;
  }
  if (n == 0 && kept > 0)
    return NoSaving(g, fmt::format("the only waits for the device under a scalar read are the optimizer's own ({} inside "
                                   "its step: its reads, not the loop's to move): nothing to save",
                                   kept));
  if (n == 0)
    return NoSaving(g, "no wait for the device under a scalar read or synchronization in this trace (on a CPU a read "
                      "waits for nothing): nothing to save");
  p.levels.push_back(std::move(e));
  p.assumptions = "the host stops waiting at scalar reads and synchronizations (the read leaves the step); the "
                  "device work stays";
  if (kept > 0)
    p.assumptions += fmt::format("; the optimizer's own {} waits inside its step stay (its reads, not the loop's to move)", kept);
  return p;
}

// gpu.allocator: device allocations and frees served from the caching allocator's cache.
TransformPlan CachingAllocator(const RankGraph& g) {
  const auto alloc = g.FramesUnder([&](std::string_view n) { return IsAllocatorCall(n); });
  TransformPlan p;
  if (std::none_of(alloc.begin(), alloc.end(), [](uint8_t x) { return x; }))
    return NoSaving(g, "no device allocator call in this trace: nothing to save");
  Edits e(g.tasks().size());
  ScaleTasks(TasksUnder(g, alloc), 0.0, e);
  p.levels.push_back(std::move(e));
  p.assumptions = "every device allocation and free is served from the caching allocator's cache (no runtime call, "
                  "no wait for the device), on every thread";
  return p;
}

// The host free: every host task of every thread takes no time (the ops, the framework and Python
// between them); waits still wait for what releases them and device work keeps its durations and
// its streams' order. The step left is the device-bound one: the most any host-side fix saves
// (gpu.idle's host-starved gaps are bounded by it; `--what-if host_free` asks it).
TransformPlan HostFree(const RankGraph& g) {
  Edits e(g.tasks().size());
  size_t host = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const Kind k = g.tasks()[i].kind;
    if (k != Kind::kHost && k != Kind::kBetweenOps) continue;
    e.Scale(i, 0.0f);
    ++host;
  }
  if (host == 0) return NoSaving(g, "no host work in the replayed steps: nothing to save");
  TransformPlan p;
  p.levels.push_back(std::move(e));
  p.assumptions = "the host takes no time (every op, the framework and Python between them, on every thread): the "
                  "device-bound step, the most a host-side fix can save; syncs still wait for the device";
  return p;
}

// optim.zero_grad: the zeroing ops in zero_grad go (gradients set to None).
TransformPlan ZeroGradNone(const RankGraph& g) {
  const auto zeroing = g.FramesUnder([&](std::string_view n) {
    return n == "aten::zero_" || n == "aten::fill_";
  });
  const auto in_zero_grad = g.FramesUnder([&](std::string_view n) {
    return StartsWith(n, "Optimizer.zero_grad#") || n.find("zero_grad") != std::string_view::npos;
  });
  std::vector<uint8_t> mask(zeroing.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = zeroing[i] && in_zero_grad[i];
  TransformPlan p;
  if (LoopTimeOf(g, mask) == 0) return NoSaving(g, "no zeroing op inside zero_grad on the loop's thread: nothing to save");
  Edits e(g.tasks().size());
  ScaleTasks(TasksUnder(g, mask), 0.0, e);
  p.levels.push_back(std::move(e));
  p.assumptions = "zero_grad's zeroing ops go; backward's first write to each gradient costs what its add did";
  return p;
}

namespace {

// The batches the loop's thread fetched in the replayed steps: each outermost data-loading frame on
// it, with the first task of its own time (where a received batch's cost goes) and the tensors its
// collate stacked (default_collate's aten::stack, one per tensor field; not the stacks inside them).
struct Fetches {
  std::vector<size_t> first_task;
  std::vector<int64_t> tensors;
  std::vector<uint8_t> crosses;  // a Python DataLoader's batch: its workers are processes
};
Fetches FetchesOf(const RankGraph& g, const std::vector<uint8_t>& data) {
  const auto& frames = g.frames();
  const auto& tr = g.trace();
  // Per data frame: its outermost data frame (parents come first) and whether a stack encloses it;
  // per outermost data frame: its collate's outermost stacks.
  std::vector<int32_t> fetch_of(frames.size(), -1), stacks(frames.size(), 0);
  std::vector<uint8_t> under_stack(frames.size(), 0);
  std::vector<int32_t> roots;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (!data[i]) continue;
    const int32_t parent = frames[i].parent;
    const bool stack = tr.Name(*frames[i].op) == "aten::stack";
    const bool nested = parent >= 0 && data[parent];
    fetch_of[i] = nested ? fetch_of[parent] : static_cast<int32_t>(i);
    if (!nested) roots.push_back(static_cast<int32_t>(i));
    if (stack && !(nested && under_stack[parent])) ++stacks[fetch_of[i]];
    under_stack[i] = stack || (nested && under_stack[parent]);
  }
  std::vector<int64_t> first(frames.size(), -1);
  for (size_t t = 0; t < g.tasks().size(); ++t) {
    const auto& task = g.tasks()[t];
    if (task.track == g.loop_thread() && task.frame >= 0 && fetch_of[task.frame] == task.frame && first[task.frame] < 0)
      first[task.frame] = static_cast<int64_t>(t);
  }
  Fetches out;
  for (int32_t r : roots) {
    if (first[r] < 0) continue;  // not on the loop's thread (a worker's own ranges)
    out.first_task.push_back(static_cast<size_t>(first[r]));
    out.tensors.push_back(stacks[r]);
    // LibTorch's data loader (trainrx::data) hands batches from worker threads of the same process:
    // nothing crosses processes.
    out.crosses.push_back(StartsWith(tr.Name(*frames[r].op), "enumerate(DataLoader)"));
  }
  return out;
}

// The CPUs the loop keeps busy outside its loading, from the process's CPU time our collector
// sampled over the graph's steps (CpuLoadOfRank): (CPUs busy x step - loading's one thread) /
// (step - loading), within [1, cores]; -1 where the trace has no such samples.
double MeasuredLoopCpus(const RankGraph& g, double loading_ns, double cores) {
  StepModel m;
  double step = 0;
  for (const auto& [a, b] : g.windows()) {
    StepRow row;
    row.rank = g.links().rank;
    row.start_ns = a;
    row.wall_ns = b - a;
    m.steps.push_back(row);
    step += static_cast<double>(b - a);
  }
  if (m.steps.empty()) return -1;
  step /= static_cast<double>(m.steps.size());
  const auto load = CpuLoadOfRank(g.trace(), m, g.links().rank);
  if (!load || step <= loading_ns) return -1;
  return std::clamp((load->load.OwnCpus() * step - loading_ns) / (step - loading_ns), 1.0, cores);
}

TransformPlan NotPredictable(const RankGraph&, const char* why) {
  TransformPlan p;
  p.not_predictable = why;
  return p;
}

// Whether the loop's loading in the steps already comes from workers, as input.cc's rules judge it:
// our collector's block names LibTorch loader workers, or more of the replayed steps spend their
// loading time mostly in fetches from a Python DataLoader's worker processes than mostly in the loop.
bool LoadingHasWorkers(const RankGraph& g, const std::vector<uint8_t>& data) {
  if (ConfigView(g.trace(), g.links().rank).Static("workers").value_or(0) > 0) return true;
  std::vector<std::pair<int64_t, int64_t>> per_step(g.windows().size());  // (from workers, in the loop) ns
  // Per data frame: whether its outermost data frame is a fetch from worker processes (parents come first).
  const auto& frames = g.frames();
  std::vector<uint8_t> from_workers(frames.size(), 0);
  for (size_t f = 0; f < frames.size(); ++f) {
    if (!data[f]) continue;
    const int32_t parent = frames[f].parent;
    from_workers[f] = parent >= 0 && data[parent] ? from_workers[parent] : IsWorkerLoaderRange(g.trace().Name(*frames[f].op));
  }
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const RankGraph::Task& t = g.tasks()[i];
    const int32_t step = g.StepOf(static_cast<int32_t>(i));
    if (t.track != g.loop_thread() || t.frame < 0 || !data[t.frame] || step < 0) continue;
    auto& [workers, loop] = per_step[static_cast<size_t>(step)];
    (from_workers[t.frame] ? workers : loop) += t.dur;
  }
  int64_t votes = 0;
  for (const auto& [workers, loop] : per_step) votes += workers > loop ? 1 : workers < loop ? -1 : 0;
  return votes > 0;
}

}  // namespace

// input.workers / input.dataloader_bound: the loading moves to worker processes that run beside
// the step.
TransformPlan LoaderWorkers(const RankGraph& g, const TransformArgs& args) {
  // How many workers: asked (--what-if workers=4), else the catalog's fix (workers=2).
  const auto asked = args.find("workers");
  const double n = asked != args.end() ? asked->second : CatalogDefault("loader_workers", "workers", 2);
  const auto data = g.FramesInPhase(kData);
  TransformPlan p;
  const int64_t fetch = LoopTimeOf(g, data);
  if (g.windows().empty()) return p;
  if (fetch == 0)
    return NoSaving(g, "no data loading on the loop's thread in the steps (no enumerate(DataLoader) or trainrx::data "
                      "range): nothing the workers would take off it");
  if (LoadingHasWorkers(g, data))
    return NotPredictable(g, "the loader already has workers: the loop's data wait is for them (and for each batch to "
                             "cross processes), and whether more or fewer would help depends on work the trace does not "
                             "hold (the workers' processes are not recorded) and on the CPUs free beside the step: "
                             "measure it (trainrx sweep --grid workers=0,1,2,4)");
  const double per_step = static_cast<double>(fetch) / static_cast<double>(g.windows().size());
  // Point: 10 % of the fetch stays on the loop's thread (receiving the batch); low: 30 %; high: none.
  // The workers' pace bounds the step from below: n workers, each taking the fetch's time per batch;
  // at the low end, half of them do (at least one: they share the CPUs with the step).
  const double stays[3] = {0.10, 0.30, 0.0};
  const double workers[3] = {n, std::max(1.0, n / 2), n};
  // And a batch from a worker process crosses processes: each tensor as a shared-memory file
  // descriptor sent, received, mapped and rebuilt, paid by the worker and again by the loop's thread
  // per batch, whatever the batch's size. The trace of a run without workers cannot tell that cost:
  // measured on this project's 2-core VM 0.25-0.45 ms a tensor (pytorch/examples' DDP tutorial
  // loader, docs/what-if.md), tens of us on bare metal. Point 150 us a tensor, low end 500 us, high
  // end 20 us; the tensors of a batch are its collate's stacks (2 when the trace shows none).
  const double per_tensor_ns[3] = {150e3, 500e3, 20e3};
  const std::vector<size_t> loading = TasksUnder(g, data);
  Fetches fetches = FetchesOf(g, data);
  const bool crossing = std::find(fetches.crosses.begin(), fetches.crosses.end(), 1) != fetches.crosses.end();
  std::vector<int64_t> counted = fetches.tensors;
  const int64_t tensors_median = Quantile(counted, 0.5);
  const double batches_per_step = static_cast<double>(fetches.first_task.size()) / static_cast<double>(g.windows().size());
  // The machine's CPUs and the loop's threads, from our collector's block: the workers compete with
  // the step for them. How many the loop keeps busy the trace does not say (its ops' kernels use the
  // intra-op threads, its Python and framework time one): half way at the point, all of them at the
  // low end, one at the high end.
  // Ranks on the same host (LOCAL_WORLD_SIZE) take the same fix: each gets its own workers, so this
  // rank's share of the CPUs is the machine's over the local ranks (pytorch/examples' DDP tutorial on
  // 2 Gloo ranks and 2 CPUs, 2 workers each: predicted -2.8 % [-23.8, 5.7] on the machine's 2 CPUs,
  // measured 2.07x slower, issue 79.3).
  const ConfigView config(g.trace(), g.links().rank);
  const double local_ranks = config.LocalRanks();
  const double cores = config.Static("cpu_count").value_or(0) / local_ranks;
  const double busy = std::max(1.0, std::min(std::max(1.0, config.Static("intra_op_threads").value_or(1)), cores));
  // Where our collector sampled the process's CPU time over the steps, how many CPUs the loop keeps
  // busy is measured: the run's, less loading's one thread, over the rest of the step.
  const double measured = cores > 0 ? MeasuredLoopCpus(g, per_step, cores) : -1;
  const double loop_cores[3] = {measured > 0 ? measured : (1.0 + busy) / 2.0, std::max(measured, busy), 1.0};
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
    ScaleTasks(loading, stays[k], e);
    double ipc_step = 0;  // per step, on each side
    for (size_t b = 0; b < fetches.first_task.size(); ++b) {
      if (!fetches.crosses[b]) continue;
      const double ns = per_tensor_ns[k] * static_cast<double>(fetches.tensors[b] > 0 ? fetches.tensors[b] : 2);
      e.Add(fetches.first_task[b], static_cast<int64_t>(ns));
      ipc_step += ns;
    }
    ipc_step /= static_cast<double>(g.windows().size());
    p.levels.push_back(std::move(e));
    p.floor_ns.push_back((per_step + ipc_step) / workers[k]);
    p.moved_cpu_ns.push_back(per_step * (1.0 - stays[k]) + ipc_step);
    p.loop_cores.push_back(loop_cores[k]);
  }
  p.cores = cores;
  p.assumptions = fmt::format(
      "loading ({:.1f} ms a step on the loop's thread) moves to {:g} worker{} beside the step; 10 % of it (30-0 %) stays "
      "on the loop's thread to receive the batch{}; the step cannot be shorter than the workers' pace ((fetch{}) / "
      "workers, {:g} at the low end){}",
      per_step / 1e6, n, n == 1 ? "" : "s",
      crossing ? fmt::format(", and each batch ({:.1f} a step, {} tensor{}{}) costs both sides 0.15 ms a tensor to cross "
                             "processes (0.5-0.02 ms: the trace cannot tell; measured 0.25-0.45 ms on a 2-core VM)",
                             batches_per_step, tensors_median > 0 ? tensors_median : 2, tensors_median == 1 ? "" : "s",
                             tensors_median > 0 ? " stacked by its collate" : ", assumed: the trace shows no collate stacks")
               : " (worker threads of the same process: nothing crosses processes)",
      crossing ? " + crossing" : "", workers[1],
      cores > 0 ? fmt::format(", nor than {} take to run the step's work beside the workers' "
                              "(the loop keeps {:.1f} busy{}: {:.1f} at the low end, 1 at the high end)",
                              local_ranks > 1 ? fmt::format("this rank's share of the machine's CPUs, {:.1f} ({:.0f} ranks on the "
                                                            "host, each with its own workers),",
                                                            cores, local_ranks)
                                              : fmt::format("the machine's {:.0f} CPUs", cores),
                              loop_cores[0], measured > 0 ? ", measured from its process's CPU time in the steps" : "",
                              loop_cores[1])
                : "; the workers' CPU is assumed free (the trace does not say how many CPUs the machine had)");
  return p;
}

// optim.single_tensor: the per-parameter loop collapses into multi-tensor (foreach) ops.
TransformPlan ForeachOptimizer(const RankGraph& g) {
  TransformPlan p;
  if (g.links().work.empty()) {  // a CPU-only rank
    p.not_predictable = "torch's foreach ops on the CPU run each tensor through a generic path: measured here (torch 2.13, "
                        "AdamW) 0.2-1.25x the loop's speed depending on the parameters' sizes, slower below ~10 M "
                        "parameters; fused=True is the CPU's fix (fused_optimizer)";
    return p;
  }
  // Per frame: where the optimizer step it is under does its own work (a closure's forward and
  // backward are not the optimizer's); INT64_MAX: under none.
  const auto own_from = OwnStepFrom(g, [](std::string_view n) { return StartsWith(n, "Optimizer.step#") || StartsWith(n, "trainrx::optimizer"); });
  const auto step = [&](int32_t f) { return own_from[static_cast<size_t>(f)] != INT64_MAX; };
  // The ops of the step's own work (frames under it that are ops, not the step itself), their durations.
  std::vector<int64_t> durs;
  const auto& frames = g.frames();
  for (size_t i = 0; i < frames.size(); ++i)
    if (step(static_cast<int32_t>(i)) && frames[i].parent >= 0 && step(frames[i].parent) &&
        frames[i].op->kind == profiler::EventKind::kCpuOp && frames[i].op->ts_ns >= own_from[i])
      durs.push_back(frames[i].op->dur_ns);
  if (durs.size() < 8) return p;
  const int64_t overhead = Quantile(durs, 0.1);  // a small op's whole cost: dispatch, no work
  // Point: the loop's own (Python) time in the step drops by 80 % and each op's fixed cost is paid
  // once per group; low: 50 % and no op cost saved; high: all of it.
  const double python_keep[3] = {0.2, 0.5, 0.0};
  const double op_cost_saved[3] = {1.0, 0.0, 1.0};
  AddLevels(p, g, [&](int k, Edits& e) {
    for (size_t i = 0; i < g.tasks().size(); ++i) {
      const auto& t = g.tasks()[i];
      if (t.frame < 0 || !step(t.frame) || t.ts < own_from[static_cast<size_t>(t.frame)] || t.kind == Kind::kDevice) continue;
      const Event& op = *frames[t.frame].op;
      const bool own_step_time = !(frames[t.frame].parent >= 0 && step(frames[t.frame].parent));
      if (own_step_time) {
        e.Scale(i, static_cast<float>(python_keep[k]));
      } else if (op.kind == profiler::EventKind::kCpuOp && t.ts == op.ts_ns && op_cost_saved[k] > 0) {
        e.Add(i, -static_cast<int64_t>(op_cost_saved[k] * static_cast<double>(std::min(overhead, t.dur))));
      }
    }
  });
  p.assumptions = fmt::format(
      "the optimizer step's per-parameter loop becomes one multi-tensor op per update: its own (Python) time drops by 80 % "
      "(50-100 %) and each op's fixed cost ({:.1f} us, the step's 10th-percentile op) is paid once per group",
      static_cast<double>(overhead) / 1e3);
  return p;
}

// optim.single_tensor's fix, fused=True: torch.optim's fused step (Adam, AdamW, SGD, Adagrad) does
// a parameter's update in one pass where the loop ran N ops on it (AdamW: ~10), and has no Python
// loop. Every task under the optimizer step (its Python, its ops, their kernels) is scaled to the
// cost of c of the loop's N ops per parameter: a fused pass reads the parameter, its gradient and its
// states once and writes three of them back (~7 arrays) where each of the loop's ops moves 2-3.
// Point c = 2, low (least saving) 4, high 1.
TransformPlan FusedOptimizer(const RankGraph& g) {
  const auto& tr = g.trace();
  const auto& frames = g.frames();
  TransformPlan p;
  // Each step range's outermost ops (Python frames between them and the range are passed over), in
  // order: the loop's op sequence.
  std::map<int32_t, std::vector<profiler::StrId>> loops;
  std::string optimizer;
  bool has_fused = true;
  // Where each step's own work starts (a closure's forward and backward come first).
  const auto own_from = OwnStepFrom(g, [](std::string_view name) { return !OptimizerOfStepRange(name).empty(); });
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].op->kind != profiler::EventKind::kCpuOp || frames[i].op->ts_ns < own_from[i]) continue;
    int32_t a = frames[i].parent;
    while (a >= 0 && frames[a].op->kind != profiler::EventKind::kCpuOp && OptimizerOfStepRange(tr.Name(*frames[a].op)).empty())
      a = frames[a].parent;
    if (a < 0 || frames[a].op->kind == profiler::EventKind::kCpuOp) continue;  // nested in an op, or in no step
    const std::string_view opt = OptimizerOfStepRange(tr.Name(*frames[a].op));
    if (optimizer.empty()) optimizer = std::string(opt);
    has_fused = has_fused && HasFusedStep(opt);
    loops[a].push_back(frames[i].op->name);
  }
  if (loops.empty()) return NoSaving(g, "no per-parameter optimizer step (Optimizer.step#... with ops) in the replayed steps");
  if (!has_fused)
    return NotPredictable(g, "this optimizer has no fused step in torch.optim (only Adam, AdamW, SGD and Adagrad have one; "
                             "LibTorch's C++ optimizers none)");
  std::vector<int64_t> per_param;  // ops per parameter, x1000, per step
  for (const auto& [frame, names] : loops)
    if (const int64_t params = ParametersOfLoop(names); params > 0)
      per_param.push_back(static_cast<int64_t>(1000.0 * static_cast<double>(names.size()) / static_cast<double>(params)));
  const double n = static_cast<double>(Quantile(per_param, 0.5)) / 1000.0;
  if (n < 2) return NoSaving(g, fmt::format("the {} step runs {:.1f} op per parameter: a fused pass has nothing to merge", optimizer, n));
  // The steps' own tasks (from where each step's own work starts): their Python, ops and kernels.
  // (Device work by its launch: its frame is the launching call's.)
  std::vector<size_t> own;
  int64_t loop_ns = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const RankGraph::Task& t = g.tasks()[i];
    const int64_t from = t.frame >= 0 ? own_from[static_cast<size_t>(t.frame)] : INT64_MAX;
    if (from == INT64_MAX) continue;
    if ((t.kind == Kind::kDevice ? frames[static_cast<size_t>(t.frame)].op->ts_ns : t.ts) < from) continue;
    own.push_back(i);
    if (t.track == g.loop_thread() && t.kind != Kind::kDevice) loop_ns += t.dur;
  }
  const double ops_kept[3] = {2.0, 4.0, 1.0};
  AddLevels(p, g, [&](int k, Edits& e) {
    for (size_t i : own) e.ScaleBy(i, static_cast<float>(std::min(1.0, ops_kept[k] / n)));
  });
  p.assumptions = fmt::format(
      "{}(..., fused=True): the optimizer step ({:.2f} ms a step on the loop's thread: its Python loop, {:.1f} ops per "
      "parameter and their kernels) takes what 2 of those ops take per parameter (4 at the low end, 1 at the high end): "
      "one pass reads each parameter, its gradient and its states once",
      optimizer, static_cast<double>(loop_ns) / static_cast<double>(g.windows().size()) / 1e6, n);
  return p;
}

TransformPlan CudnnBenchmark(const RankGraph& g) {
  return NotPredictable(g, "what the autotuner finds depends on the kernels cuDNN has for these shapes on this device; "
                           "the trace holds only the ones it ran");
}

TransformPlan ProfilerOff(const RankGraph& g) {
  return NotPredictable(g, "what the other profiler costs each op is inside the ops' times, with nothing to tell it apart");
}

namespace {

// Convolutions (the norms' usual producers; a Linear's bias before a norm is rarer and its ops are
// not told apart from the classifier's here).
bool IsConvLayer(std::string_view n) {
  return n == "aten::conv1d" || n == "aten::conv2d" || n == "aten::conv3d" || n == "aten::convolution" ||
         n == "aten::_convolution";
}
// A rank's convolution calls with recorded shapes, wherever in its trace: per op name, the calls
// with shapes and those with a bias, and the bias passes' share of the layer's work; whether the
// rank runs Linear layers.
struct BiasedLayers {
  std::map<std::string_view, std::pair<int64_t, int64_t>> calls;  // op name -> (calls with shapes, with a bias)
  std::map<std::string_view, double> pass_share;                   // op name -> the bias passes' share of the layer
  bool linear = false;
};
BiasedLayers BiasedLayersOf(const profiler::Trace& tr, int32_t rank) {
  BiasedLayers out;
  auto& [calls, pass_share, linear] = out;
  for (uint32_t ti : CpuThreadTracks(tr, rank)) {
    for (const Event& e : tr.TrackEvents(ti)) {
      if (e.kind != profiler::EventKind::kCpuOp) continue;
      const std::string_view n = tr.Name(e);
      linear = linear || n == "aten::linear";
      if (e.aux == profiler::kNoAux || !IsConvLayer(n)) continue;
      const auto dims = OpDims(tr, e);
      if (!dims || dims->size() < 3) continue;
      const size_t bias = 2, weight = 1;
      auto& [shaped, with_bias] = calls[n];
      ++shaped;
      if ((*dims)[bias].size() != 1 || (*dims)[weight].size() < 2) continue;
      int64_t macs = 1;
      for (size_t d = 1; d < (*dims)[weight].size(); ++d) macs *= std::max<int64_t>(1, (*dims)[weight][d]);
      ++with_bias;
      pass_share[n] = std::min(1.0, 2.0 / static_cast<double>(macs));
    }
  }
  return out;
}

// drop_bias at one level: `nodes` of the recorded node cost (the bias's gradient accumulator) a
// biased call loses, with the bias's own passes. Per frame: the share of its time the bias passes
// take (the layer and what runs inside it), and the part of its excess that was the bias's node (the
// layer's node cost spread over its subtree's excess).
Edits DropBiasLevel(const RankGraph& g, const BiasedLayers& layers, const NodeCost& cost, const std::vector<double>& subtree,
                    double nodes) {
  const auto& tr = g.trace();
  const auto& frames = g.frames();
  const OwnTimes& own = cost.own;
  Edits e(g.tasks().size());
  std::vector<double> share(frames.size(), 0.0), node_share(frames.size(), 0.0);
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::string_view n = tr.Name(*frames[i].op);
    const int32_t parent = frames[i].parent;
    const auto c = layers.calls.find(n);
    const bool outermost = !(parent >= 0 && IsConvLayer(tr.Name(*frames[parent].op)));
    if (c != layers.calls.end() && c->second.second > 0 && outermost && frames[i].op->kind == profiler::EventKind::kCpuOp) {
      const double with_bias = static_cast<double>(c->second.second) / static_cast<double>(c->second.first);
      share[i] = with_bias * layers.pass_share.at(n);
      node_share[i] = subtree[i] > 0 ? std::min(1.0, with_bias * nodes * cost.per_node_ns / subtree[i]) : 0.0;
    } else if (parent >= 0) {
      share[i] = share[parent];
      node_share[i] = node_share[parent];
    }
  }
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.frame < 0) continue;
    double scale = 1.0 - share[t.frame];
    if (t.kind != Kind::kDevice && node_share[t.frame] > 0 && own.own[t.frame] > 0)
      scale -= node_share[t.frame] * static_cast<double>(cost.excess[t.frame]) / static_cast<double>(own.own[t.frame]);
    e.Scale(i, static_cast<float>(std::max(0.0, scale)));
  }
  return e;
}

}  // namespace

// model.bias_before_norm: the biases the norms cancel go. Each is a parameter: the forward records
// its gradient's accumulator (an AccumulateGrad node) every step, so each call of a biased layer
// loses one node's cost (NodeCostOf; tiny unless recording is costly, as in anomaly mode), and the
// bias's elementwise pass in forward and its reduction in backward: one element per output each,
// against the layer's multiply-adds per output (Cin x kernel). Which calls have a bias is known from
// the recorded shapes, wherever in the rank's trace they were recorded (our collector records them
// in the first steps, which are seldom the replayed ones): each call of the layer's op in the
// replayed steps gets the share of its shaped calls that had one.
TransformPlan DropBias(const RankGraph& g) {
  const auto& tr = g.trace();
  TransformPlan p;
  const auto& frames = g.frames();
  const BiasedLayers layers = BiasedLayersOf(tr, g.links().rank);
  const auto& calls = layers.calls;
  // The replayed steps' outermost layer calls, and how many of them had a bias (by their op's share).
  double layer_calls = 0, biased = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Event& e = *frames[i].op;
    const std::string_view n = tr.Name(e);
    if (e.kind != profiler::EventKind::kCpuOp || !IsConvLayer(n) || !g.InWindows(e.ts_ns)) continue;
    if (frames[i].parent >= 0 && IsConvLayer(tr.Name(*frames[frames[i].parent].op))) continue;  // the outermost layer op
    ++layer_calls;
    if (const auto c = calls.find(n); c != calls.end() && c->second.first > 0)
      biased += static_cast<double>(c->second.second) / static_cast<double>(c->second.first);
  }
  if (layer_calls == 0) {
    // The norms' biased producers are then Linear layers (Linear before BatchNorm1d: Lightning's GAN
    // generator), whose bias is added inside aten::addmm, one op with the multiply: the trace does not
    // split its cost, and "0.0 %" would claim it is nothing.
    if (layers.linear)
      return NotPredictable(g, "no convolution in the replayed steps: the biases before the norms are Linear layers', "
                               "added inside aten::addmm with the multiply, whose time the trace does not split; measure "
                               "it (trainrx fix --cmd, or bias=False by hand)");
    return NoSaving(g, "no convolution in the replayed steps: nothing to save");
  }
  if (calls.empty()) {
    p.not_predictable = "no convolution's input shapes are recorded in this trace (record_shapes off): which layers "
                        "have a bias cannot be told";
    return p;
  }
  if (biased == 0) return NoSaving(g, "no recorded convolution has a bias: nothing to save");
  const NodeCost cost = NodeCostOf(g, ForwardRegion(g));
  // The excess of each frame's subtree (frames are made in call order: children after parents).
  std::vector<double> subtree(frames.size(), 0.0);
  for (size_t i = frames.size(); i-- > 0;) {
    subtree[i] += static_cast<double>(cost.excess[i]);
    if (frames[i].parent >= 0) subtree[frames[i].parent] += subtree[i];
  }
  for (const double n : {1.0, 0.5, 1.5}) p.levels.push_back(DropBiasLevel(g, layers, cost, subtree, n));
  p.assumptions = fmt::format(
      "{:.0f} calls of biased convolutions in the replayed steps (which have a bias: from the recorded shapes); each call loses one recorded node's cost (the bias's gradient "
      "accumulator: {:.3f} ms, half to one and a half of it) and the bias's elementwise pass and its gradient's "
      "reduction (one element per output each, against the layer's multiply-adds per output); the bias parameters' "
      "optimizer updates are not counted",
      biased, cost.per_node_ns / 1e6);
  return p;
}

}  // namespace trainrx::analyzers
