// optim.zero_grad: gradients zeroed (aten::zero_ / aten::fill_) inside Optimizer.zero_grad#...
// instead of set to None (PyTorch < 2.0 default; C++ zero_grad(false)).
#include <fmt/format.h>

#include "families.h"
#include "intervals.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

void AnalyzeOptim(const AnalysisContext& ctx, Report& out) {
  const auto& trace = ctx.trace;
  int64_t zero_ops = 0, zero_ns = 0, ranges = 0;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    const auto events = trace.TrackEvents(ti);
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& z = events[i];
      if (!StartsWith(trace.Name(z), "Optimizer.zero_grad#")) continue;
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
  const double steps = StepCount(ctx.steps);
  const double per_step = static_cast<double>(zero_ops) / steps;
  if (zero_ops == 0 || per_step < ctx.thresholds.Get("optim.zero_grad.min_ops")) return;
  Finding f;
  f.id = "optim.zero_grad";
  f.severity = Severity::kLow;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("zero_grad writes zeros into gradients ({:.0f} zeroing ops per step)", per_step);
  f.measured = per_step;
  f.threshold = ctx.thresholds.Get("optim.zero_grad.min_ops");
  f.measured_unit = "zeroing ops per step";
  f.evidence = {{"zero_grad_calls", ranges}, {"zeroing_ops", zero_ops}, {"zeroing_ns", zero_ns}};
  // Saves the memset kernels/ops; backward then writes instead of accumulating (not counted).
  f.estimated_saving_ns = static_cast<int64_t>(static_cast<double>(zero_ns) / steps);
  const double mean = MeanStepNs(ctx.steps);
  f.estimated_saving_pct = mean > 0 ? 100.0 * static_cast<double>(f.estimated_saving_ns) / mean : 0;
  f.fix_python = "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0)";
  f.fix_cpp = "optimizer.zero_grad(/*set_to_none=*/true)";
  f.knob = "zero_grad_none";
  out.findings.push_back(std::move(f));
}

}  // namespace trainrx::analyzers
