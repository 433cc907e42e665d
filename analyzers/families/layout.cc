// model.channels_last (issue 60.4): a convolutional model run in NCHW where its convolutions,
// pooling and batch norms (forward and backward) take a large share of the step. Channels-last
// (NHWC) is the layout oneDNN's CPU kernels and cuDNN's tensor-core kernels prefer: in NCHW they
// reorder around every op, and PyTorch's NCHW max-pool runs a plain loop (pytorch/examples
// imagenet, shufflenet on CPU: max_pool2d_with_indices 17 % of the step in NCHW, the same step
// 1.28x faster in channels_last). The layout comes from our collector, which writes
// "channels_last" as a channels-last 4-D tensor's concrete input (profiler/trace.h OpInputs);
// torch.profiler writes "" for every tensor, so on its traces the layout is unknown and the rule
// is silent. Only on CPU-only ranks for now: a GPU rank's cost is in its kernels, which this rule
// does not yet read (docs/gpu-validation.md lists the check).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "config_view.h"
#include "families.h"
#include "intervals.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

// The ops whose cost depends on the layout, forward (outermost ATen names) and backward (autograd
// nodes, by the name after "evaluate_function: ").
bool LayoutOp(std::string_view n) {
  static constexpr std::array<std::string_view, 12> kForward = {
      "aten::conv2d",           "aten::convolution",        "aten::_convolution",     "aten::max_pool2d",
      "aten::max_pool2d_with_indices", "aten::avg_pool2d",  "aten::adaptive_avg_pool2d", "aten::adaptive_max_pool2d",
      "aten::batch_norm",       "aten::native_batch_norm",  "aten::_batch_norm_impl_index", "aten::mkldnn_convolution"};
  if (std::find(kForward.begin(), kForward.end(), n) != kForward.end()) return true;
  static constexpr std::array<std::string_view, 7> kBackward = {
      "ConvolutionBackward", "MaxPool2DWithIndicesBackward", "AvgPool2DBackward", "AdaptiveAvgPool2DBackward",
      "AdaptiveMaxPool2DBackward", "NativeBatchNormBackward", "CudnnBatchNormBackward"};
  const size_t at = n.find("evaluate_function: ");
  if (at == std::string_view::npos) return false;
  const std::string_view node = n.substr(at + 19);
  for (std::string_view b : kBackward)
    if (StartsWith(node, b)) return true;
  return false;
}

bool ConvOp(std::string_view n) { return n == "aten::conv2d" || n == "aten::convolution" || n == "aten::_convolution"; }

struct RankLayout {
  int64_t ns = 0;                           // union of the layout ops' time inside the steps
  int64_t convs_with_inputs = 0, channels_last = 0;  // 4-D convolutions with a recorded layout
  std::string top_op;                       // the layout op with the most time (by name)
  int64_t top_ns = 0;
};

RankLayout Gather(const profiler::Trace& trace, const StepModel& steps, int32_t rank) {
  RankLayout out;
  const StepWindows windows(steps, rank);
  std::map<std::string_view, int64_t> by_name;
  for (uint32_t t : TracksOf(trace, rank, TrackKind::kCpuThread)) {
    std::vector<Interval> spans;
    for (const Event& e : trace.TrackEvents(t)) {
      if (e.kind != EventKind::kCpuOp || !windows.Contains(e.ts_ns)) continue;
      const std::string_view name = trace.Name(e);
      if (!LayoutOp(name)) continue;
      spans.push_back({e.ts_ns, e.end_ns()});
      by_name[name] += e.dur_ns;
      if (!ConvOp(name)) continue;
      const auto dims = OpDims(trace, e);
      const auto concrete = OpConcrete(trace, e);
      if (!dims || dims->empty() || (*dims)[0].size() != 4 || !concrete || concrete->empty()) continue;
      ++out.convs_with_inputs;
      if ((*concrete)[0] == "channels_last") ++out.channels_last;
    }
    out.ns += MergeIntervals(spans);
  }
  for (const auto& [name, ns] : by_name)
    if (ns > out.top_ns) out.top_ns = ns, out.top_op = std::string(name);
  return out;
}

}  // namespace

void AnalyzeLayout(const AnalysisContext& ctx, Report& out) {
  const profiler::Trace& trace = ctx.trace;
  const double min_share = ctx.thresholds.Get("model.channels_last.share_pct");
  for (int32_t rank : trace.RankIds()) {
    if (!TracksOf(trace, rank, TrackKind::kGpuStream).empty()) continue;  // see the file comment
    // torch.profiler writes "" for every tensor's concrete input, whatever its layout: only our
    // collector's "" means a contiguous (NCHW) tensor.
    if (!ConfigView(trace, rank).from_collector()) continue;
    const RankLayout l = Gather(trace, ctx.steps, rank);
    // No convolution whose layout was recorded: unknown (another tool's trace, a model without
    // 2-D convolutions); any in channels-last: the model is already converted (its NCHW inputs
    // are a layer's own business).
    if (l.convs_with_inputs == 0 || l.channels_last > 0) continue;
    const StepBasis basis(ctx.steps, rank);
    if (!basis.has_steps()) continue;
    const double per_step = basis.Per(static_cast<double>(l.ns));
    const double share = 100.0 * per_step / basis.mean_step_ns();
    if (share < min_share) continue;
    Finding f;
    f.id = "model.channels_last";
    f.rank = rank;
    f.confidence = Confidence::kMedium;  // the layout is measured; the gain is the fix's to measure
    f.title = fmt::format("Convolutions, pooling and batch norms take {:.0f} % of the step in NCHW (channels-first); "
                          "{} alone {:.1f} ms a step",
                          share, l.top_op, basis.Per(static_cast<double>(l.top_ns)) / 1e6);
    f.measured = share;
    f.threshold = min_share;
    f.measured_unit = "% of the step in layout-sensitive ops";
    f.evidence = {{basis.NsKey("layout_ops"), per_step},
                  {"convolutions_nchw", l.convs_with_inputs},
                  {"top_op", l.top_op},
                  {basis.NsKey("top_op"), basis.Per(static_cast<double>(l.top_ns))}};
    // Assumed: those ops 1.33x faster in channels-last (shufflenet's CPU step measured 1.28x with
    // 17 % in pooling alone): a quarter of their time; `fix` measures it.
    SetSaving(f, basis, 0.25 * per_step, per_step, "time in convolutions, pooling and batch norms");
    f.severity = SeverityForSaving(f);
    SetFix(f);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace trainrx::analyzers
