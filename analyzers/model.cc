// model.bias_before_norm: a convolution / linear layer with a bias whose output feeds a
// BatchNorm / LayerNorm. The norm subtracts the mean, which cancels the bias: it costs memory,
// an add per element in forward and a reduction in backward, for nothing.
//
// Evidence needed (otherwise silent, never a guess): recorded input shapes ("Input Dims", from
// record_shapes=True or our collector). The rule: on one thread, a conv/linear op whose bias
// input is non-empty, followed — after its own nested ops, skipping shape-only ops — by a norm
// op whose channel dimension equals the bias length (BatchNorm: dim 1; LayerNorm: last dim).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "families.h"
#include "intervals.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;
using Dims = std::vector<std::vector<int64_t>>;

// "[[32, 3, 224, 224], [64, 3, 7, 7], [64], []]" -> {{32,3,224,224},{64,3,7,7},{64},{}}.
// Nested deeper than two levels (tensor lists) is flattened into its first level.
std::optional<Dims> ParseDims(std::string_view s) {
  Dims out;
  int depth = 0;
  int64_t num = 0;
  bool in_num = false, neg = false;
  for (char c : s) {
    if (c == '[') {
      ++depth;
      if (depth == 2) out.emplace_back();
    } else if (c == ']' || c == ',') {
      if (in_num && depth >= 2) out.back().push_back(neg ? -num : num);
      in_num = false;
      neg = false;
      num = 0;
      if (c == ']') --depth;
    } else if (c >= '0' && c <= '9') {
      num = num * 10 + (c - '0');
      in_num = true;
    } else if (c == '-') {
      neg = true;
    } else if (c != ' ' && c != '\n') {
      return std::nullopt;
    }
  }
  if (depth != 0) return std::nullopt;
  return out;
}

bool IsLayer(std::string_view n) {
  return n == "aten::conv1d" || n == "aten::conv2d" || n == "aten::conv3d" || n == "aten::linear";
}
bool IsBatchNorm(std::string_view n) { return n == "aten::batch_norm"; }
bool IsLayerNorm(std::string_view n) { return n == "aten::layer_norm" || n == "aten::group_norm"; }
bool IsShapeOnly(std::string_view n) {
  static constexpr std::array<std::string_view, 14> kShape = {
      "aten::view", "aten::reshape", "aten::flatten", "aten::contiguous", "aten::t", "aten::transpose",
      "aten::permute", "aten::as_strided", "aten::empty", "aten::empty_like", "aten::detach", "detach",
      "aten::to", "aten::_to_copy"};
  return std::find(kShape.begin(), kShape.end(), n) != kShape.end();
}

}  // namespace

void AnalyzeModel(const AnalysisContext& ctx, Report& out) {
  const auto& trace = ctx.trace;
  std::map<std::string, int64_t> pairs;  // "aten::conv2d(bias 64) -> aten::batch_norm" -> count
  int64_t total = 0, layers_with_shapes = 0;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    const auto events = trace.TrackEvents(ti);
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& layer = events[i];
      if (layer.kind != EventKind::kCpuOp || layer.aux == profiler::kNoAux) continue;
      const std::string_view lname = trace.Name(layer);
      if (!IsLayer(lname)) continue;
      const auto& inputs = trace.op_inputs[layer.aux];
      if (inputs.input_dims == profiler::kNoStr) continue;
      const auto dims = ParseDims(trace.strings.Get(inputs.input_dims));
      if (!dims || dims->size() < 3) continue;
      ++layers_with_shapes;
      const auto& bias = (*dims)[2];
      if (bias.size() != 1) continue;  // no bias (empty) or not a vector
      const int64_t channels = bias[0];
      // The next op after the layer (and its nested ops) on this thread.
      for (size_t j = i + 1; j < events.size(); ++j) {
        const Event& next = events[j];
        if (next.ts_ns < layer.end_ns() || next.kind != EventKind::kCpuOp) continue;
        const std::string_view nname = trace.Name(next);
        if (IsShapeOnly(nname)) continue;
        if ((IsBatchNorm(nname) || IsLayerNorm(nname)) && next.aux != profiler::kNoAux) {
          const auto ndims = ParseDims(trace.strings.Get(trace.op_inputs[next.aux].input_dims));
          if (ndims && !ndims->empty() && !(*ndims)[0].empty()) {
            const auto& x = (*ndims)[0];
            const int64_t c = IsBatchNorm(nname) ? (x.size() > 1 ? x[1] : -1) : x.back();
            if (c == channels) {
              ++total;
              ++pairs[fmt::format("{} (bias[{}]) -> {}", lname, channels, nname)];
            }
          }
        }
        break;
      }
    }
  }
  if (total == 0) return;
  Finding f;
  f.id = "model.bias_before_norm";
  f.severity = Severity::kLow;
  f.confidence = Confidence::kHigh;
  const double steps = StepCount(ctx.steps);
  f.title = fmt::format("{:.0f} layers per step have a bias that the following norm cancels", total / steps);
  f.measured = static_cast<double>(total) / steps;
  f.threshold = 0;
  f.measured_unit = "biased layers before a norm, per step";
  f.evidence = {{"occurrences", total}, {"layers_with_shapes", layers_with_shapes}};
  for (const auto& [k, v] : pairs) f.examples.push_back(fmt::format("{} x {}", v, k));
  // The bias add is one elementwise pass over the layer output; small (seeds: ~1-2 %) — the
  // trace cannot isolate it, so no time estimate; `trainrx fix` measures it.
  f.estimated_saving_pct = 0;
  f.fix_python = "nn.Conv2d(..., bias=False) / nn.Linear(..., bias=False) when followed by BatchNorm / LayerNorm";
  f.fix_cpp = "torch::nn::Conv2dOptions(...).bias(false) / LinearOptions(...).bias(false) before a norm layer";
  f.knob = "bias";
  out.findings.push_back(std::move(f));
}

}  // namespace trainrx::analyzers
