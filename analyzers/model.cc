// model.bias_before_norm: a convolution / linear layer with a bias whose output feeds a
// BatchNorm / LayerNorm. The norm subtracts the mean, which cancels the bias: it costs memory,
// an add per element in forward and a reduction in backward, for nothing.
//
// Evidence, best first (otherwise silent, never a guess):
//  1. exact dataflow from our collector: "trainrx.dataflow" flows from a conv/linear op to the
//     norm op whose input is that op's output tensor; the layer's recorded inputs say whether
//     its bias is defined.
//  2. recorded input shapes ("Input Dims", from record_shapes=True; torch 2.13 writes them as
//     torch 1.x did): on one thread, an outermost conv/linear op whose bias input is non-empty, followed — after its own nested ops, skipping shape-only
//     ops — by a norm op whose channel dimension equals the bias length (BatchNorm: dim 1;
//     LayerNorm: last dim).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "families.h"
#include "intervals.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

bool IsLayer(std::string_view n) {
  return n == "aten::conv1d" || n == "aten::conv2d" || n == "aten::conv3d" || n == "aten::linear";
}
bool IsBatchNorm(std::string_view n) { return n == "aten::batch_norm"; }
bool IsLayerNorm(std::string_view n) { return n == "aten::layer_norm" || n == "aten::group_norm"; }
bool IsShapeOnly(std::string_view n) {
  // aten::add_: BatchNorm's num_batches_tracked += 1 runs between the conv and the norm (and an
  // in-place residual add keeps the bias a constant shift the norm still cancels).
  static constexpr std::array<std::string_view, 15> kShape = {
      "aten::add_", "aten::view", "aten::reshape", "aten::flatten", "aten::contiguous", "aten::t", "aten::transpose",
      "aten::permute", "aten::as_strided", "aten::empty", "aten::empty_like", "aten::detach", "detach",
      "aten::to", "aten::_to_copy"};
  return std::find(kShape.begin(), kShape.end(), n) != kShape.end();
}

// The CPU op starting at `ts` on `track` whose name satisfies `pred`, or nullptr.
template <typename Pred>
const Event* OpAt(const profiler::Trace& trace, uint32_t track, int64_t ts, Pred pred) {
  const auto events = trace.TrackEvents(track);
  auto it = std::lower_bound(events.begin(), events.end(), ts, [](const Event& e, int64_t t) { return e.ts_ns < t; });
  for (; it != events.end() && it->ts_ns == ts; ++it)
    if (it->kind == EventKind::kCpuOp && pred(trace.Name(*it))) return &*it;
  return nullptr;
}

// Rule 1: exact dataflow edges. Returns false when the trace has none (use rule 2).
bool FromDataflow(const profiler::Trace& trace, std::map<std::string, int64_t>& pairs, int64_t& total,
                  int64_t& edges) {
  const profiler::StrId cat = trace.strings.Find("trainrx.dataflow");
  if (cat == profiler::kNoStr) return false;
  std::map<int64_t, std::pair<const profiler::Flow*, const profiler::Flow*>> by_id;
  for (const auto& f : trace.flows) {
    if (f.cat != cat) continue;
    auto& slot = by_id[f.id];
    (f.is_start ? slot.first : slot.second) = &f;
  }
  for (const auto& [id, ends] : by_id) {
    if (!ends.first || !ends.second) continue;
    const Event* layer = OpAt(trace, ends.first->track, ends.first->ts_ns, [](std::string_view n) {
      return IsLayer(n) || n == "aten::addmm" || n == "aten::add_";
    });
    const Event* norm = OpAt(trace, ends.second->track, ends.second->ts_ns,
                             [](std::string_view n) { return IsBatchNorm(n) || IsLayerNorm(n); });
    if (!layer || !norm || layer->aux == profiler::kNoAux) continue;
    ++edges;
    const auto dims = ParseDims(trace.strings.Get(trace.op_inputs[layer->aux].input_dims));
    // Which input is the bias: conv/linear (input, weight, bias); addmm (bias, a, b); the bias
    // add after a matmul (LibTorch's C++ Linear: output += bias) (output, bias).
    const std::string_view lname = trace.Name(*layer);
    const size_t bias_index = lname == "aten::addmm" ? 0 : lname == "aten::add_" ? 1 : 2;
    if (!dims || dims->size() <= bias_index || (*dims)[bias_index].size() != 1) continue;  // no bias
    ++total;
    // Keyed by the layer's input shapes: one entry per distinct layer of the model (the collector
    // captures inputs for the first steps only, so a per-step count would be meaningless).
    ++pairs[fmt::format("{}{} -> {}", lname == "aten::add_" ? "bias add (matmul + bias) " : std::string(lname),
                        trace.strings.Get(trace.op_inputs[layer->aux].input_dims), trace.Name(*norm))];
  }
  return !by_id.empty();
}

}  // namespace

void AnalyzeModel(const AnalysisContext& ctx, Report& out) {
  const auto& trace = ctx.trace;
  std::map<std::string, int64_t> pairs;  // "aten::conv2d(bias 64) -> aten::batch_norm" -> count
  int64_t total = 0, layers_with_shapes = 0, edges = 0;
  const bool exact = FromDataflow(trace, pairs, total, edges);
  for (uint32_t ti = 0; ti < trace.tracks.size() && !exact; ++ti) {
    if (trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    const auto events = trace.TrackEvents(ti);
    // Autocast (torch 2.x) records a layer twice, its dispatch wrapper around the op it
    // re-dispatches in 16-bit: aten::conv2d [float] > aten::conv2d [c10::BFloat16]. One layer.
    int64_t layer_end = INT64_MIN;
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& layer = events[i];
      if (layer.kind != EventKind::kCpuOp || layer.aux == profiler::kNoAux) continue;
      const std::string_view lname = trace.Name(layer);
      if (!IsLayer(lname)) continue;
      if (layer.ts_ns < layer_end) continue;  // nested in the layer op just judged
      layer_end = layer.end_ns();
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
  const double layers = exact ? static_cast<double>(pairs.size()) : total / steps;
  f.title = fmt::format("{:.0f} layers have a bias that the following norm cancels", layers);
  f.measured = layers;
  f.threshold = 0;
  f.measured_unit = exact ? "distinct biased layers feeding a norm" : "biased layers before a norm, per step";
  if (exact) f.evidence = {{"occurrences", total}, {"dataflow_edges", edges}, {"method", std::string("exact dataflow (trainrx collector)")}};
  else f.evidence = {{"occurrences", total}, {"layers_with_shapes", layers_with_shapes}, {"method", std::string("shapes of adjacent ops")}};
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
