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

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

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
  std::vector<int8_t> named(tr.strings.size(), -1);
  bool any_step = false;
  for (const auto& f : frames) {
    int8_t& v = named[f.op->name];
    if (v < 0) v = static_cast<int8_t>((is_step(tr.Name(*f.op)) ? 2 : 0) | (PhaseOf(tr.Name(*f.op)) == kBackward ? 1 : 0));
    if (v & 1) backward.push_back({f.op->ts_ns, f.op->end_ns()});
    any_step = any_step || (v & 2);
  }
  if (!any_step) return out;
  std::sort(backward.begin(), backward.end());
  for (size_t i = 0; i < frames.size(); ++i) {
    const int32_t parent = frames[i].parent;
    if (parent >= 0 && out[parent] != INT64_MAX) out[i] = out[parent];
    else if (named[frames[i].op->name] & 2) out[i] = OwnWorkStart(*frames[i].op, backward);
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
  const auto& windows = g.windows();
  const auto in_steps = [&](int64_t ts) {
    auto it = std::upper_bound(windows.begin(), windows.end(), std::make_pair(ts, INT64_MAX));
    return it != windows.begin() && ts < std::prev(it)->second;
  };
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
    const int at = in_steps(op.ts_ns) ? 0 : 1;
    if (StartsWith(name, "autograd::engine::evaluate_function")) ++nodes[at];
    if (!region[i] || op.kind != profiler::EventKind::kCpuOp || op.track != g.loop_thread()) continue;
    c.excess[i] = std::max<int64_t>(0, own.own[i] - c.typical);
    const bool view = IsViewOp(name);
    c.leaf[i] = !own.has_children[i] && !view;
    if (view) views.push_back(c.excess[i]);
    if (!c.leaf[i]) wrapper_excess[at] += static_cast<double>(c.excess[i]);
  }
  const double steps = static_cast<double>(std::max<size_t>(1, windows.size()));
  c.nodes_per_step = static_cast<double>(nodes[0]) / steps;
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
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
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
    p.levels.push_back(std::move(e));
  }
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
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
    for (size_t i : own) e.ScaleBy(i, static_cast<float>(std::min(1.0, ops_kept[k] / n)));
    p.levels.push_back(std::move(e));
  }
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
  // Convolutions (the norms' usual producers; a Linear's bias before a norm is rarer and its ops
  // are not told apart from the classifier's here).
  const auto is_layer = [](std::string_view n) {
    return n == "aten::conv1d" || n == "aten::conv2d" || n == "aten::conv3d" || n == "aten::convolution" ||
           n == "aten::_convolution";
  };
  std::map<std::string_view, std::pair<int64_t, int64_t>> calls;  // op name -> (calls with shapes, with a bias)
  std::map<std::string_view, double> pass_share;                   // op name -> the bias passes' share of the layer
  bool linear = false;                                             // the rank runs Linear layers
  for (uint32_t ti : CpuThreadTracks(tr, g.links().rank)) {
    for (const Event& e : tr.TrackEvents(ti)) {
      if (e.kind != profiler::EventKind::kCpuOp) continue;
      const std::string_view n = tr.Name(e);
      linear = linear || n == "aten::linear";
      if (e.aux == profiler::kNoAux || !is_layer(n)) continue;
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
  // The replayed steps' outermost layer calls, and how many of them had a bias (by their op's share).
  double layer_calls = 0, biased = 0;
  const auto& windows = g.windows();
  const auto in_steps = [&](int64_t ts) {
    auto it = std::upper_bound(windows.begin(), windows.end(), std::make_pair(ts, INT64_MAX));
    return it != windows.begin() && ts < std::prev(it)->second;
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    const Event& e = *frames[i].op;
    const std::string_view n = tr.Name(e);
    if (e.kind != profiler::EventKind::kCpuOp || !is_layer(n) || !in_steps(e.ts_ns)) continue;
    if (frames[i].parent >= 0 && is_layer(tr.Name(*frames[frames[i].parent].op))) continue;  // the outermost layer op
    ++layer_calls;
    if (const auto c = calls.find(n); c != calls.end() && c->second.first > 0)
      biased += static_cast<double>(c->second.second) / static_cast<double>(c->second.first);
  }
  if (layer_calls == 0) {
    // The norms' biased producers are then Linear layers (Linear before BatchNorm1d: Lightning's GAN
    // generator), whose bias is added inside aten::addmm, one op with the multiply: the trace does not
    // split its cost, and "0.0 %" would claim it is nothing.
    if (linear)
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
  const OwnTimes& own = cost.own;
  // The excess of each frame's subtree (frames are made in call order: children after parents).
  std::vector<double> subtree(frames.size(), 0.0);
  for (size_t i = frames.size(); i-- > 0;) {
    subtree[i] += static_cast<double>(cost.excess[i]);
    if (frames[i].parent >= 0) subtree[frames[i].parent] += subtree[i];
  }
  const double nodes[3] = {1.0, 0.5, 1.5};
  for (int k = 0; k < 3; ++k) {
    Edits e(g.tasks().size());
    // Per frame: the share of its time the bias passes take (the layer and what runs inside it), and
    // the part of its excess that was the bias's node (the layer's node cost spread over its
    // subtree's excess).
    std::vector<double> share(frames.size(), 0.0), node_share(frames.size(), 0.0);
    for (size_t i = 0; i < frames.size(); ++i) {
      const std::string_view n = tr.Name(*frames[i].op);
      const int32_t parent = frames[i].parent;
      const auto c = calls.find(n);
      const bool outermost = !(parent >= 0 && is_layer(tr.Name(*frames[parent].op)));
      if (c != calls.end() && c->second.second > 0 && outermost && frames[i].op->kind == profiler::EventKind::kCpuOp) {
        const double with_bias = static_cast<double>(c->second.second) / static_cast<double>(c->second.first);
        share[i] = with_bias * pass_share[n];
        node_share[i] = subtree[i] > 0 ? std::min(1.0, with_bias * nodes[k] * cost.per_node_ns / subtree[i]) : 0.0;
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
    p.levels.push_back(std::move(e));
  }
  p.assumptions = fmt::format(
      "{:.0f} calls of biased convolutions in the replayed steps (which have a bias: from the recorded shapes); each call loses one recorded node's cost (the bias's gradient "
      "accumulator: {:.3f} ms, half to one and a half of it) and the bias's elementwise pass and its gradient's "
      "reduction (one element per output each, against the layer's multiply-adds per output); the bias parameters' "
      "optimizer updates are not counted",
      biased, cost.per_node_ns / 1e6);
  return p;
}

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
      {"profiler_off", &ProfilerOff},
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
    // Chunks of about equal lanes, in order, a multiple of the threads; a walk's lanes hold two
    // times per group of every graph it walks, so a chunk stays within kWalkTimes of them (one
    // fresh 10 MB buffer faulted in cost more than the walk saved). A prediction's lanes stay in
    // one walk.
    constexpr size_t kWalkTimes = size_t{1} << 18;  // 2 MB a buffer
    size_t lanes = 0, graph_groups = 0;
    for (const Pending* p : list) lanes += p->count;
    for (const RankGraph* g : list.front()->Graphs()) graph_groups += g->groups();
    const size_t most = std::max<size_t>(1, kWalkTimes / std::max<size_t>(1, graph_groups));
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
std::map<int32_t, double> BuildGraphs(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps, size_t threads,
                                      size_t replayed_steps, std::map<int32_t, std::unique_ptr<RankGraph>>& graphs) {
  std::map<int32_t, double> means;
  {
    std::vector<std::function<void()>> tasks;
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
  std::vector<std::unique_ptr<RankGraph>> graphs;  // the longest gaps, one graph each
};
std::optional<BetweenSteps> FindBetweenSteps(const profiler::Trace& trace, const LinkIndex& links, const StepModel& steps,
                                             int32_t rank) {
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
  for (const auto& gap : gaps) out.graphs.push_back(std::make_unique<RankGraph>(trace, *links.Rank(rank), std::vector{gap}));
  return out;
}

// A prediction over the steps (`p`, replayed) made over the steps and the gaps between them
// together; unchanged where the fix has no number for the gaps.
void AddBetweenSteps(const BetweenSteps& b, const std::vector<std::string>& names, Prediction& p) {
  double share[3] = {0, 0, 0}, replayed_ns = 0;  // the gaps' saved share at the point, low and high
  for (const auto& g : b.graphs) {
    const double len = static_cast<double>(g->windows().front().second - g->windows().front().first);
    const WhatIfResult r = PredictWhatIf(*g, names, len);
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

// A planned prediction's result, finished where it was replayed.
WhatIfResult Finished(Pending& p) {
  if (p.replay) FinishPrediction(p);
  return std::move(p.out);
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
  // What to replay: each (rank, transform) the findings name, once (findings sharing a fix share its
  // replay); then the graphs of those ranks and the replays, each on the threads there are.
  std::map<std::pair<int32_t, std::string>, WhatIfResult> done;
  std::map<int32_t, std::unique_ptr<RankGraph>> graphs;
  for (const Finding& f : report.findings) {
    const CatalogEntry* entry = FindCatalogEntry(f.id);
    if (entry == nullptr || entry->transform[0] == '\0' || !FindTransform(entry->transform)) continue;
    const int32_t rank = rank_of(f.rank);
    if (links.Rank(rank) == nullptr) continue;
    done.emplace(std::make_pair(rank, std::string(entry->transform)), WhatIfResult{});
    graphs.emplace(rank, nullptr);
  }
  const int32_t asked_rank = rank_of(-1);
  if (!what_if.empty() && links.Rank(asked_rank) != nullptr) {
    graphs.emplace(asked_rank, nullptr);
    for (const std::string& n : what_if) done.emplace(std::make_pair(asked_rank, n), WhatIfResult{});
  }
  // A set of ranks: every rank's graph, so that a rank's collectives can wait for the others'.
  if (!graphs.empty() && links.ranks().size() > 1)
    for (const RankLinks& l : links.ranks()) graphs.emplace(l.rank, nullptr);
  const std::map<int32_t, double> means = BuildGraphs(trace, links, steps, threads, replayed_steps, graphs);
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
  {
    std::vector<Pending*> every;
    for (auto& [key, p] : pending) every.push_back(p.get());
    every.push_back(all_findings.get());
    every.push_back(asked.get());
    ReplayPending(every, threads);
  }
  for (auto& [key, p] : pending) done[key] = Finished(*p);
  WhatIfResult all_result = all_findings ? Finished(*all_findings) : WhatIfResult{};
  WhatIfResult together = asked ? Finished(*asked) : WhatIfResult{};
  // Work between the steps (a rank alone: a coupled set's gaps are its collectives' business):
  // every prediction over the span a trial times, the findings', each asked fix's and the combined.
  if (coupled == nullptr) {
    std::map<int32_t, std::optional<BetweenSteps>> between;
    const auto add_between = [&](int32_t rank, const std::vector<std::string>& names, WhatIfResult& result) {
      if (!result.ok) return;
      auto it = between.find(rank);
      if (it == between.end()) it = between.emplace(rank, FindBetweenSteps(trace, links, steps, rank)).first;
      if (it->second) AddBetweenSteps(*it->second, names, result.prediction);
    };
    for (auto& [key, result] : done) add_between(key.first, {key.second}, result);
    if (all_findings) add_between(all_rank, all_findings->names, all_result);
    if (asked) add_between(asked_rank, asked->names, together);
  }
  // Each transform's interval at its measured coverage where its rows allow (dependency/calibration.h).
  for (auto& [key, result] : done)
    if (result.ok) Calibrate(result.prediction);
  if (all_result.ok) Calibrate(all_result.prediction);
  if (together.ok) Calibrate(together.prediction);
  std::map<std::pair<int32_t, std::string>, Prediction> replayed;  // before the report's rule: findings follow them
  for (auto& [key, result] : done) {
    if (result.ok) replayed[key] = result.prediction;
    NotPredictableWhereTooWide(result);
  }
  for (Finding& f : report.findings) {
    const CatalogEntry* entry = FindCatalogEntry(f.id);
    if (entry == nullptr) continue;
    const auto it = done.find({rank_of(f.rank), std::string(entry->transform)});
    if (it == done.end() || it->second.prediction.method.empty()) continue;
    f.predicted = it->second.prediction;
    if (const auto r = replayed.find(it->first); r != replayed.end()) FollowPrediction(f, r->second);
  }
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
