// dist.data_parallel: torch.nn.DataParallel, one process driving several GPUs.
//
// What it does at every step, and what the trace shows of it (PyTorch's torch/nn/parallel):
// - replicate(): the module copied to every device, its parameters broadcast from the first
//   (autograd Function "Broadcast", recorded under its class name by Function.apply; with
//   with_stack, the frame replicate.py(..): replicate, which also holds the Python copying);
// - scatter(): the batch split across devices ("Scatter"); parallel_apply(): one Python thread
//   per device runs its replica's forward (they share the GIL); gather(): the outputs copied to
//   the output device ("Gather");
// - backward: ReduceAddCoalesced sums every replica's gradients on the first device
//   ("BroadcastBackward" / "ReduceAddCoalesced" nodes), and the loss and optimizer run there.
// DistributedDataParallel does none of this per step: one process per GPU, gradients all-reduced
// in buckets while backward still runs (PyTorch's docs recommend it over DataParallel).
//
// Flagged on a rank whose steps hold the replication ops (Broadcast, and Scatter or Gather) in at
// least half of them; GPU kernels on 2+ devices confirm it when GPU activity was recorded (one
// device means DataParallel wrapping one GPU: no replication cost, not flagged). Measured per
// step: the wall time inside replication (the union of those ranges on every thread) and the
// first device's extra load (its kernel time above the median of the others'). Both are the
// estimated saving; the bound adds the first device's load.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "families.h"
#include "intervals.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

// Which replication step a range is; "" when none.
std::string_view ReplicationStep(EventKind kind, std::string_view n) {
  if (kind == EventKind::kPythonFunction) {
    if (n.find("torch/nn/parallel/replicate.py") != std::string_view::npos) return "replicate";
    if (n.find("torch/nn/parallel/scatter_gather.py") != std::string_view::npos) return "scatter/gather";
    return "";
  }
  if (kind != EventKind::kCpuOp && kind != EventKind::kUserAnnotation) return "";
  constexpr std::string_view kNode = "autograd::engine::evaluate_function: ";
  if (StartsWith(n, kNode)) n.remove_prefix(kNode.size());
  if (n == "Broadcast" || n == "BroadcastBackward" || n == "ReduceAddCoalesced" || n == "ReduceAddCoalescedBackward")
    return "replicate";
  if (n == "Scatter" || n == "ScatterBackward" || n == "Gather" || n == "GatherBackward") return "scatter/gather";
  return "";
}

}  // namespace

void AnalyzeDataParallel(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const Trace& trace = ctx.trace;
  const StepBasis basis(ctx.steps, rank);
  if (!basis.has_steps()) return;
  const StepWindows windows(ctx.steps, rank);
  std::vector<Interval> repl;
  std::set<int64_t> steps_broadcast, steps_split;  // step indices with Broadcast / Scatter or Gather
  bool from_frames = false;
  std::map<int32_t, int64_t> kernel_ns;  // per device, inside the steps
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank) continue;
    if (t.kind == TrackKind::kGpuStream) {
      for (const Event& e : trace.TrackEvents(ti))
        if (e.kind == EventKind::kKernel && windows.Contains(e.ts_ns)) kernel_ns[t.device] += e.dur_ns;
      continue;
    }
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.dur_ns <= 0) continue;
      const std::string_view step = ReplicationStep(e.kind, trace.Name(e));
      if (step.empty()) continue;
      const int64_t si = windows.Index(e.ts_ns);
      if (si < 0) continue;
      repl.push_back({e.ts_ns, e.end_ns()});
      from_frames = from_frames || e.kind == EventKind::kPythonFunction;
      (step == "replicate" ? steps_broadcast : steps_split).insert(si);
    }
  }
  const auto steps = static_cast<size_t>(basis.steps());
  if (steps_broadcast.size() * 2 < steps || steps_split.size() * 2 < steps) return;
  // GPU activity recorded on one device only: DataParallel over one GPU replicates nothing.
  if (kernel_ns.size() == 1) return;
  const int64_t repl_ns = MergeIntervals(repl);
  const double repl_per_step = basis.Per(static_cast<double>(repl_ns));
  // The first device (the output device, where gradients are reduced) against the others.
  double extra_per_step = 0;
  int32_t first_device = -1;
  if (kernel_ns.size() >= 2) {
    first_device = kernel_ns.begin()->first;
    std::vector<int64_t> others;
    for (const auto& [d, ns] : kernel_ns)
      if (d != first_device) others.push_back(ns);
    std::sort(others.begin(), others.end());
    const int64_t median_other = others[others.size() / 2];
    extra_per_step = basis.Per(static_cast<double>(std::max<int64_t>(0, kernel_ns.begin()->second - median_other)));
  }
  const double repl_pct = 100.0 * repl_per_step / basis.mean_step_ns();
  Finding f;
  f.id = "dist.data_parallel";
  f.rank = rank;
  f.confidence = kernel_ns.size() >= 2 ? Confidence::kHigh : Confidence::kMedium;
  f.title = fmt::format("torch.nn.DataParallel: one process drives {}; replicating the model, splitting the batch and "
                        "gathering the outputs take {:.2f} ms per step ({:.1f}% of the step){}",
                        kernel_ns.size() >= 2 ? fmt::format("{} GPUs", kernel_ns.size()) : std::string("several devices"),
                        repl_per_step / 1e6, repl_pct,
                        extra_per_step > 0 ? fmt::format(", and device {} runs {:.2f} ms more GPU work per step than the "
                                                         "others (loss, gradient reduction, optimizer)",
                                                         first_device, extra_per_step / 1e6)
                                           : "");
  f.measured = repl_pct;
  f.threshold = 0;
  f.measured_unit = "% of step in replication";
  f.evidence = {{basis.NsKey("replication"), static_cast<int64_t>(repl_per_step)},
                {"replication_steps_seen", static_cast<int64_t>(steps_broadcast.size())},
                {"devices_with_kernels", static_cast<int64_t>(kernel_ns.size())},
                {"measured_from", std::string(from_frames ? "replicate/scatter_gather Python frames and the Broadcast, "
                                                            "Scatter, Gather, ReduceAddCoalesced ops"
                                                          : "the Broadcast, Scatter, Gather, ReduceAddCoalesced ops (without "
                                                            "with_stack the Python copying in replicate() is not seen)")}};
  if (first_device >= 0) f.evidence.push_back({basis.NsKey("first_device_extra_kernel"), static_cast<int64_t>(extra_per_step)});
  for (const auto& [d, ns] : kernel_ns)
    f.examples.push_back(fmt::format("device {}: {:.2f} ms of kernels per step", d, basis.Per(static_cast<double>(ns)) / 1e6));
  // With DDP, the replication goes and every device carries its own loss and optimizer step.
  SetSaving(f, basis, repl_per_step, repl_per_step + extra_per_step,
            "time replicating, splitting and gathering per step, plus the first device's extra GPU work");
  f.severity = SeverityForSaving(f);
  if (f.severity == Severity::kInfo) f.severity = Severity::kLow;  // the GIL-bound threads cost beyond what is measured
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace trainrx::analyzers
