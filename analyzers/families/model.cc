// model.bias_before_norm: a convolution / linear layer with a bias whose output feeds a norm that
// cancels it: it costs memory, an add per element in forward and a reduction in backward, for
// nothing. A norm cancels a bias exactly when it subtracts a mean taken, per channel, over every
// position the bias is constant across, i.e. the bias lies along the norm's channel axis (1):
//   BatchNorm    mean per channel over batch and space: cancels a conv's per-channel bias, and a
//                Linear's bias when the features are the channel axis ((N, F) into BatchNorm1d).
//                In eval mode its running mean was learned with the bias in it: still redundant.
//   InstanceNorm mean per sample and channel over space: cancels a conv's bias; after a Linear the
//                bias lies along the normalized (last) axis: not cancelled.
//   LayerNorm    mean per sample over the normalized (last) features, the axis a Linear's bias varies
//                along: only the bias's mean is removed, the rest changes the output. Not redundant
//                (issue 12: advising bias=False there changes what the model computes).
//   GroupNorm    mean over a group of channels (and space): channels of a group have different
//                biases, only the group's mean bias is removed. Not redundant (with one channel per
//                group it is InstanceNorm, but the group count is not in the recorded input dims).
//
// Evidence, best first (otherwise silent, never a guess):
//  1. exact dataflow from our collector: "trainrx.dataflow" flows from a conv/linear op to the
//     norm op whose input is that op's output tensor; the layer's recorded inputs say whether
//     its bias is defined and its input rank where the bias lies.
//  2. recorded input shapes ("Input Dims", from record_shapes=True; torch 2.13 writes them as
//     torch 1.x did): on one thread, an outermost conv/linear op whose bias input is non-empty, followed — after its own nested ops, skipping shape-only
//     ops — by a batch / instance norm op whose channel dimension (1) equals the bias length.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "families.h"
#include "scopes.h"
#include "intervals.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

// Spatial dims of a convolution op (conv1d: 1 ...), 0 when not one.
int ConvSpatialDims(std::string_view n) {
  if (n == "aten::conv1d") return 1;
  if (n == "aten::conv2d") return 2;
  if (n == "aten::conv3d") return 3;
  return 0;
}
bool IsLayer(std::string_view n) { return ConvSpatialDims(n) > 0 || n == "aten::linear"; }

enum class Norm { kNone, kBatch, kInstance };
Norm NormOf(std::string_view n) {
  static constexpr std::array<std::string_view, 9> kBatchNorms = {
      "aten::batch_norm", "aten::native_batch_norm", "aten::_native_batch_norm_legit",
      "aten::_native_batch_norm_legit_no_training", "aten::cudnn_batch_norm", "aten::miopen_batch_norm",
      "aten::_batch_norm_impl_index", "aten::_batch_norm_with_update", "aten::_batch_norm_no_update"};
  if (std::find(kBatchNorms.begin(), kBatchNorms.end(), n) != kBatchNorms.end()) return Norm::kBatch;
  if (n == "aten::instance_norm") return Norm::kInstance;
  return Norm::kNone;  // layer_norm, group_norm, rms_norm, ...: see the file comment
}

// Whether `norm` cancels a bias added along `bias_axis` of a tensor of rank `rank` (file comment).
bool NormCancelsBias(Norm norm, int64_t bias_axis, int64_t rank) {
  if (norm == Norm::kNone || bias_axis != 1) return false;
  return norm == Norm::kBatch ? rank >= 2 : rank >= 3;
}

// The axis of the layer's output its bias is added along, and that output's rank, from the
// layer's input dims: a convolution's channel axis (1 when batched), a Linear's / addmm's last.
std::pair<int64_t, int64_t> BiasAxis(std::string_view layer, const Dims& dims) {
  if (layer == "aten::addmm") return {1, 2};
  const int64_t rank = dims.empty() ? 0 : static_cast<int64_t>(dims[0].size());
  if (const int spatial = ConvSpatialDims(layer); spatial > 0) return {rank - spatial - 1, rank};
  return {rank - 1, rank};  // linear (x, weight, bias); the bias add after a matmul (output, bias)
}
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

// "Net.features.0 (Conv2d) -> Net.features.1 (BatchNorm2d): " when module ranges name both ops (the
// user's names for the layers), else "".
std::string ModulePair(const ScopeIndex& modules, const Event& layer, const Event& norm) {
  const std::string_view a = modules.Of(layer), b = modules.Of(norm);
  if (a.empty() && b.empty()) return {};
  return fmt::format("{} -> {}: ", a.empty() ? "?" : a, b.empty() ? "?" : b);
}

// Rule 1: exact dataflow edges. Returns false when the trace has none (use rule 2).
bool FromDataflow(const profiler::Trace& trace, const ScopeIndex& modules, std::map<std::string, int64_t>& pairs,
                  int64_t& total, int64_t& edges) {
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
                             [](std::string_view n) { return NormOf(n) != Norm::kNone; });
    if (!layer || !norm || layer->aux == profiler::kNoAux) continue;
    ++edges;
    const auto dims = ParseDims(trace.strings.Get(trace.op_inputs[layer->aux].input_dims));
    // Which input is the bias: conv/linear (input, weight, bias); addmm (bias, a, b); the bias
    // add after a matmul (LibTorch's C++ Linear: output += bias) (output, bias).
    const std::string_view lname = trace.Name(*layer);
    const size_t bias_index = lname == "aten::addmm" ? 0 : lname == "aten::add_" ? 1 : 2;
    if (!dims || dims->size() <= bias_index || (*dims)[bias_index].size() != 1) continue;  // no bias
    const auto [axis, rank] = BiasAxis(lname, *dims);
    if (!NormCancelsBias(NormOf(trace.Name(*norm)), axis, rank)) continue;
    ++total;
    // Keyed by the layer's input shapes: one entry per distinct layer of the model (the collector
    // captures inputs for the first steps only, so a per-step count would be meaningless).
    ++pairs[fmt::format("{}{}{} -> {}", ModulePair(modules, *layer, *norm),
                        lname == "aten::add_" ? "bias add (matmul + bias) " : std::string(lname),
                        trace.strings.Get(trace.op_inputs[layer->aux].input_dims), trace.Name(*norm))];
  }
  return !by_id.empty();
}

}  // namespace

void AnalyzeModel(const AnalysisContext& ctx, Report& out) {
  const auto& trace = ctx.trace;
  std::map<std::string, int64_t> pairs;  // "aten::conv2d(bias 64) -> aten::batch_norm" -> count
  int64_t total = 0, layers_with_shapes = 0, edges = 0;
  const bool exact = FromDataflow(trace, ctx.modules, pairs, total, edges);
  for (uint32_t ti = 0; ti < trace.tracks.size() && !exact; ++ti) {
    if (trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
    const StepWindows in_steps(ctx.steps, trace.tracks[ti].rank);  // a count per step: only inside the steps
    const auto events = trace.TrackEvents(ti);
    // Autocast (torch 2.x) records a layer twice, its dispatch wrapper around the op it
    // re-dispatches in 16-bit: aten::conv2d [float] > aten::conv2d [c10::BFloat16]. One layer.
    int64_t layer_end = INT64_MIN;
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& layer = events[i];
      if (layer.kind != EventKind::kCpuOp || layer.aux == profiler::kNoAux) continue;
      const std::string_view lname = trace.Name(layer);
      if (!IsLayer(lname) || !in_steps.Contains(layer.ts_ns)) continue;
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
        const Norm norm = NormOf(nname);
        if (norm != Norm::kNone && next.aux != profiler::kNoAux) {
          const auto ndims = ParseDims(trace.strings.Get(trace.op_inputs[next.aux].input_dims));
          const auto [axis, rank] = BiasAxis(lname, *dims);
          if (ndims && !ndims->empty() && (*ndims)[0].size() > 1 && NormCancelsBias(norm, axis, rank)) {
            if ((*ndims)[0][1] == channels) {  // the norm's channels are the bias's
              ++total;
              ++pairs[fmt::format("{}{} (bias[{}]) -> {}", ModulePair(ctx.modules, layer, next), lname, channels, nname)];
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
  const StepBasis basis(ctx.steps);
  const double layers = exact ? static_cast<double>(pairs.size()) : basis.Per(total);
  f.title = fmt::format("{:.0f} layers have a bias that the following batch/instance norm cancels", layers);
  f.measured = layers;
  f.threshold = 0;
  f.measured_unit = exact ? "distinct biased layers feeding a norm" : std::string("biased layers before a norm ") + basis.unit();
  if (exact) f.evidence = {{"occurrences", total}, {"dataflow_edges", edges}, {"method", std::string("exact dataflow (trainrx collector)")}};
  else f.evidence = {{"occurrences", total}, {"layers_with_shapes", layers_with_shapes}, {"method", std::string("shapes of adjacent ops")}};
  for (const auto& [k, v] : pairs) f.examples.push_back(fmt::format("{} x {}", v, k));
  // The bias add is one elementwise pass over the layer output; small (seeds: ~1-2 %) — the
  // trace cannot isolate it, so no time estimate; `trainrx fix` measures it.
  f.estimated_saving_pct = 0;
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace trainrx::analyzers
