// optim.zero_grad: gradients zeroed (aten::zero_ / aten::fill_) inside Optimizer.zero_grad#...
// instead of set to None (PyTorch < 2.0 default; C++ zero_grad(false)).
//
// optim.single_tensor: an Optimizer.step#... range whose ops are one per parameter (torch.optim's
// _single_tensor_<name> loop: `for p in params: p.add_(...)`) with no multi-tensor op
// (aten::_foreach_*) and no fused one (aten::_fused_adamw_, ...) inside. TorchTidy's
// OptimizerSingleTensorPattern matches the Python frame name only; we count the ops, because what
// foreach removes is per-op cost, and on CPU that cost is small: the helper's measurement on these
// machines, SGD 22.3 vs 22.5 us per step (no gain), AdamW 207 -> 154 us. So the rule needs the
// optimizer to be a real share of the step and an estimated saving above a floor:
//   parameters  P = ops in the step / period of the op-name sequence (SGD: add_ x P, period 1;
//               AdamW: add_ lerp_ mul_ ... per parameter, period ~10), else the fewest
//               occurrences of any op name when the sequence is not periodic;
//   saving      the larger of foreach's and fused's (a bound): foreach runs each distinct op once
//               over all parameters, (ops - ops/P) x per-op overhead, the overhead being the 10th
//               percentile of those ops' durations (the cheapest calls, on the smallest parameters:
//               dispatch and launch, hardly any math), the Python loop not counted; fused=True (Adam,
//               AdamW, SGD, Adagrad) does each parameter's N ops in one pass with no Python loop: at
//               most the optimizer's time x (1 - 1/N). On the CPU fused is the one that pays: torch
//               2.13 here, AdamW over 0.8-85 M parameters, fused 5-9x faster than the loop, foreach
//               0.2-1.25x (slower below ~10 M parameters). The what-if predicts it (fused_optimizer).
// A step that runs its closure (Lightning, SAM) counts only what follows its last backward pass
// (the closure's forward and backward are no optimizer's ops); LBFGS and SparseAdam have no
// multi-tensor step to switch to (pytorch/examples' time_sequence_prediction: LBFGS's 20 closure
// calls a step read as "438 744 ops for ~20 parameters").
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "families.h"
#include "intervals.h"
#include "ops.h"
#include "optimizer_loop.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

namespace {

bool IsMultiTensorOp(std::string_view n) {
  return StartsWith(n, "aten::_foreach_") || StartsWith(n, "aten::_fused_");
}
bool IsCompiledRegion(std::string_view n) {
  return StartsWith(n, "Torch-Compiled Region") || n == "CompiledFunction" || StartsWith(n, "## Call CompiledFxGraph");
}

// The five ops an optimizer step runs most, per step: "40 x aten::add_ per optimizer step".
std::vector<std::string> MostCalledOps(const std::map<std::string, int64_t>& op_names, int64_t steps) {
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [n, c] : op_names) by_count.push_back({-c, n});
  std::sort(by_count.begin(), by_count.end());
  std::vector<std::string> out;
  for (size_t k = 0; k < by_count.size() && k < 5; ++k)
    out.push_back(fmt::format("{:.0f} x {} per optimizer step", -by_count[k].first / static_cast<double>(steps), by_count[k].second));
  return out;
}

// The rank's optimizer steps inside its training steps, as their ops tell: each single-tensor
// loop's outermost ops (from its last backward pass on, for a closure step), its parameters and
// the update's range; the steps skipped (foreach or fused, compiled) counted.
struct OptimizerScan {
  int64_t single_steps = 0, multi_steps = 0, compiled_steps = 0, closure_steps = 0, ops = 0, saved_ops = 0;
  std::vector<std::pair<int64_t, int64_t>> optimizer_ranges;  // not yet clipped to the steps
  std::vector<int64_t> op_durs, params;
  std::map<std::string, int64_t> impls, op_names;
  std::string optimizer;  // "SGD" from "Optimizer.step#SGD.step"
  bool python_frames = false;
};
OptimizerScan ScanOptimizerSteps(const profiler::Trace& trace, int32_t rank, const StepWindows& in_steps) {
  OptimizerScan scan;
  auto& [single_steps, multi_steps, compiled_steps, closure_steps, ops, saved_ops, optimizer_ranges, op_durs, params, impls,
         op_names, optimizer, python_frames] = scan;
  std::optional<std::vector<Interval>> backward;  // made at the first step that needs it
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
    const auto events = trace.TrackEvents(ti);
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& r = events[i];
      const std::string_view rname = trace.Name(r);
      if (r.kind == EventKind::kCpuOp || !StartsWith(rname, "Optimizer.step#") || !in_steps.Contains(r.ts_ns)) continue;
      // An optimizer torch.optim has no foreach or fused step for (LBFGS): nothing to switch to.
      if (!HasMultiTensorStep(OptimizerOfStepRange(rname))) continue;
      const size_t end = SubtreeEnd(events, i);
      // A closure step: only what runs after its last backward pass is the optimizer's (the update).
      if (!backward) backward = BackwardRanges(trace, rank);
      const int64_t own_from = OwnWorkStart(r, *backward);
      if (own_from > r.ts_ns) ++closure_steps;
      bool multi = false, compiled = false;
      std::string impl;
      for (size_t j = i + 1; j < end; ++j) {
        const std::string_view n = trace.Name(events[j]);
        if (events[j].kind == EventKind::kCpuOp && IsMultiTensorOp(n)) multi = true;
        if (IsCompiledRegion(n)) compiled = true;
        if (events[j].kind == EventKind::kPythonFunction) {
          python_frames = true;
          if (n.find("_multi_tensor_") != std::string_view::npos || n.find("_fused_") != std::string_view::npos) multi = true;
          if (const size_t at = n.find("_single_tensor_"); at != std::string_view::npos) impl = std::string(n.substr(at));
        }
      }
      if (multi) { ++multi_steps; continue; }
      if (compiled) { ++compiled_steps; continue; }
      std::vector<size_t> outer = OutermostOps(events, i + 1, end);
      std::erase_if(outer, [&](size_t k) { return events[k].ts_ns < own_from; });
      if (outer.size() < 2) continue;
      ++single_steps;
      if (!impl.empty()) ++impls[impl];
      if (optimizer.empty()) optimizer = std::string(OptimizerOfStepRange(rname));
      std::vector<profiler::StrId> names;
      for (size_t k : outer) {
        names.push_back(events[k].name);
        op_durs.push_back(events[k].dur_ns);
        ++op_names[std::string(trace.Name(events[k]))];
      }
      const int64_t p = ParametersOfLoop(names);
      params.push_back(p);
      ops += static_cast<int64_t>(outer.size());
      // A foreach step runs each per-parameter op once: ops / P of them remain.
      saved_ops += static_cast<int64_t>(outer.size()) - static_cast<int64_t>(outer.size()) / std::max<int64_t>(1, p);
      optimizer_ranges.push_back({own_from, r.end_ns()});
    }
  }
  return scan;
}

void SingleTensorStep(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const auto& trace = ctx.trace;
  const StepWindows in_steps(ctx.steps, rank);
  OptimizerScan scan = ScanOptimizerSteps(trace, rank, in_steps);
  auto& [single_steps, multi_steps, compiled_steps, closure_steps, ops, saved_ops, optimizer_ranges, op_durs, params, impls,
         op_names, optimizer, python_frames] = scan;
  if (single_steps == 0) return;
  // The optimizer's time inside the steps it is a share of (issue 34: whole Optimizer.step ranges
  // summed gave 12.7 % of the step where the phase table said 6.6 %), nested or repeated ranges once.
  std::vector<Interval> clipped;
  for (const auto& [s, e] : in_steps.Clip(std::move(optimizer_ranges))) clipped.push_back({s, e});
  const int64_t optimizer_ns = MergeIntervals(clipped);
  const StepBasis basis(ctx.steps, rank);
  if (!basis.has_steps()) return;  // both thresholds are shares of a step: no steps, no verdict
  const double share_pct = 100.0 * basis.Per(optimizer_ns) / basis.mean_step_ns();
  const double share_threshold = ctx.thresholds.Get("optim.single_tensor.optimizer_share_pct");
  if (share_pct < share_threshold) return;
  const int64_t overhead_ns = Quantile(op_durs, 0.10);
  const int64_t params_median = Quantile(params, 0.5);
  const double ops_per_step = static_cast<double>(ops) / static_cast<double>(single_steps);
  // foreach: each distinct op once over all parameters. fused (where torch.optim has it): one pass
  // per parameter does the work of its N ops, and the Python loop goes: at most the optimizer's
  // time less one op in N.
  const double ops_per_param = params_median > 0 ? ops_per_step / static_cast<double>(params_median) : 1.0;
  const int64_t foreach_ns = std::min<int64_t>(saved_ops * overhead_ns, optimizer_ns);
  const bool fused = HasFusedStep(optimizer) && ops_per_param >= 2;
  const int64_t fused_ns = fused ? static_cast<int64_t>(static_cast<double>(optimizer_ns) * (1.0 - 1.0 / ops_per_param)) : 0;
  const int64_t saving_total = std::max(foreach_ns, fused_ns);
  Finding f;
  f.id = "optim.single_tensor";
  f.rank = rank;
  SetSaving(f, basis, basis.Per(saving_total), basis.Per(optimizer_ns), "optimizer-step time");
  if (f.estimated_saving_pct < ctx.thresholds.Get("optim.single_tensor.min_saving_pct")) return;
  bool has_gpu = false;
  for (const auto& t : trace.tracks) has_gpu = has_gpu || (t.rank == rank && t.kind == TrackKind::kGpuStream && t.event_count > 0);
  // Medium from 5 % where the fix is sure to help: on a GPU, or a fused step (on a CPU it runs the
  // update 5-9x faster than the loop, docs/what-if.md; foreach there can be slower than the loop, so a
  // CPU optimizer without a fused step stays low). A CPU GAN whose Adam loop was 22 % of the step,
  // predicted 16.4 % [8.6, 21.8], read [low] first in its list.
  f.severity = (has_gpu || fused) && f.estimated_saving_pct >= 5 ? Severity::kMedium : Severity::kLow;
  f.confidence = !impls.empty() || params_median >= 2 ? Confidence::kHigh : Confidence::kMedium;
  f.title = fmt::format("{} step runs one op per parameter ({:.0f} ops for ~{} parameters), no foreach / fused",
                        optimizer.empty() ? std::string("Optimizer") : optimizer, ops_per_step, params_median);
  f.measured = share_pct;
  f.threshold = share_threshold;
  f.measured_unit = "% of step in single-tensor optimizer steps";
  f.evidence = {{"single_tensor_steps", single_steps},
                {"foreach_or_fused_steps", multi_steps},
                {"ops_per_optimizer_step", ops_per_step},
                {"parameters_estimate", params_median},
                {basis.NsKey("optimizer"), static_cast<int64_t>(basis.Per(optimizer_ns))},
                {"per_op_overhead_us", static_cast<double>(overhead_ns) / 1000.0},
                {basis.Key("ops_removed"), basis.Per(saved_ops)},
                {"implementation", impls.empty() ? std::string(python_frames ? "no _single_tensor_ frame" : "no Python frames in the trace")
                                                 : impls.begin()->first}};
  if (compiled_steps > 0) f.evidence.push_back({"compiled_steps_skipped", compiled_steps});
  if (closure_steps > 0) f.evidence.push_back({"closure_steps", closure_steps});  // counted from their last backward on
  f.examples = MostCalledOps(op_names, single_steps);
  if (fused_ns >= foreach_ns)
    f.examples.push_back(fmt::format("estimate (fused=True): the optimizer's {:.2f} ms a step less one op in {:.1f} per "
                                     "parameter (a fused step is one pass over each parameter, no Python loop)",
                                     basis.Per(optimizer_ns) / 1e6, ops_per_param));
  else
    f.examples.push_back(fmt::format("estimate (foreach): {:.0f} ops removed per step x {:.2f} us per op (10th percentile), at "
                                     "most the optimizer's own time; the Python loop it also removes is not counted",
                                     basis.Per(saved_ops), overhead_ns / 1000.0));
  SetFix(f, "", {{"optimizer", optimizer.empty() ? std::string("Adam") : optimizer}});
  out.findings.push_back(std::move(f));
}

void ZeroGrad(const AnalysisContext& ctx, Report& out) {
  const auto& trace = ctx.trace;
  int64_t zero_ops = 0, zero_ns = 0, ranges = 0;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    const StepWindows in_steps(ctx.steps, trace.tracks[ti].rank);  // per-step counts: only inside the steps
    const auto events = trace.TrackEvents(ti);
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& z = events[i];
      if (!StartsWith(trace.Name(z), "Optimizer.zero_grad#") || !in_steps.Contains(z.ts_ns)) continue;
      ++ranges;
      int64_t covered_until = INT64_MIN;  // count outermost zeroing ops only (zero_ calls fill_)
      for (size_t j = i + 1; j < events.size() && events[j].ts_ns < z.end_ns(); ++j) {
        const Event& e = events[j];
        if (e.kind != EventKind::kCpuOp || e.ts_ns < covered_until) continue;
        const std::string_view n = trace.Name(e);
        if (n == "aten::zero_" || n == "aten::fill_") {
          ++zero_ops;
          zero_ns += e.dur_ns;
          covered_until = e.end_ns();
        }
      }
    }
  }
  const StepBasis basis(ctx.steps);
  const double per_step = basis.Per(zero_ops);
  if (zero_ops == 0 || per_step < ctx.thresholds.Get("optim.zero_grad.min_ops")) return;
  Finding f;
  f.id = "optim.zero_grad";
  f.severity = Severity::kLow;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("zero_grad writes zeros into gradients ({:.0f} zeroing ops {})", per_step, basis.unit());
  f.measured = per_step;
  f.threshold = ctx.thresholds.Get("optim.zero_grad.min_ops");
  f.measured_unit = std::string("zeroing ops ") + basis.unit();
  f.evidence = {{"zero_grad_calls", ranges}, {"zeroing_ops", zero_ops}, {"zeroing_ns", zero_ns}};
  // Saves the memset kernels/ops; backward then writes instead of accumulating (not counted).
  SetSaving(f, basis, basis.Per(zero_ns), basis.Per(zero_ns), "zeroing time");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeOptim(const AnalysisContext& ctx, Report& out) {
  ZeroGrad(ctx, out);
  for (int32_t rank : ctx.trace.RankIds()) SingleTensorStep(ctx, rank, out);
}

}  // namespace trainrx::analyzers
