// How much of the hardware the steps use (issue 52): FLOPs and bytes per op from the recorded
// shapes (flops.h), their achieved TFLOP/s and GB/s against the device's roofline, and the model
// FLOPs utilization (MFU) of the median step against the dense peak of the dtype the model's
// matmuls ran in (device_peaks.h), per rank.
//
// Which ops are counted: on each CPU thread, the outermost op a model can cost (aten::linear, not
// also the aten::addmm inside it); an op with a model whose shapes do not resolve is looked through
// to the ops inside it. The time of an op is that of the device kernels its launches enqueued (the
// dependency model's launch links; graph launches give all their kernels), or on a CPU-only rank
// its own duration. Coverage: the share of the steps' kernel time (CPU: outermost op time) in costed
// ops, said in the report.
//
// Per step: our collector records inputs in the first steps only, torch.profiler with
// record_shapes in every step; the per-step figures are the mean over the costed steps whose model
// FLOPs are at least 90 % of the largest (a step whose input capture stopped half way is not one).
// MFU = model FLOPs per step / median steady step / peak. Without steps: totals, and no MFU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "device_peaks.h"
#include "cost.h"
#include "config_view.h"
#include "flops.h"
#include "links.h"
#include "ops.h"
#include "runtime_names.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

struct CostedOp {
  const Event* e = nullptr;
  uint32_t track = 0;
  int32_t step = -1;  // index among the rank's steady steps; -1: outside them
  OpCost cost;
  double device_ns = 0, tf32_ns = 0;
  bool recompute = false;  // a forward op run again inside the backward (activation checkpointing)
};

// Activation recomputation, as torch.utils.checkpoint shows in a trace: a module's forward op
// (aten::linear, a convolution, attention, a norm ...) run inside an autograd backward node, under
// "autograd::engine::evaluate_function: AddmmBackward0" (non-reentrant: the saved tensors'
// unpack hook recomputes) or "CheckpointFunctionBackward" (reentrant). Backward formulas call
// mm, convolution_backward, the norms' *_backward: never these entry points, so what runs under
// them inside a backward node is the forward again (hardware FLOPs, not model FLOPs).
bool IsBackwardNode(std::string_view name) {
  return name.starts_with("autograd::engine::evaluate_function:") ||
         (name.find("::") == std::string_view::npos && name.find("Backward") != std::string_view::npos);
}
bool IsForwardEntry(std::string_view name) {
  static const std::set<std::string_view> kEntries = {
      "aten::linear",      "aten::conv1d",     "aten::conv2d",         "aten::conv3d",
      "aten::convolution", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
      "aten::matmul",      "aten::einsum",     "aten::scaled_dot_product_attention",
      "aten::layer_norm",  "aten::group_norm", "aten::batch_norm",     "aten::instance_norm",
      "aten::rms_norm",    "aten::embedding"};
  return kEntries.count(name) > 0;
}

// An op's name and its inputs' interned texts: equal keys cost the same.
using CostKey = std::tuple<profiler::StrId, profiler::StrId, profiler::StrId, profiler::StrId>;
struct CachedCost {
  std::optional<OpCost> cost;
  bool unresolved_conv = false;  // a convolution whose shapes parsed but whose cost did not resolve
};

// Keys of the convolution hint: the input's and the weight's dims as text.
std::string ShapeKey(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::string k;
  for (int64_t d : a) k += std::to_string(d) + ",";
  k += "|";
  for (int64_t d : b) k += std::to_string(d) + ",";
  return k;
}

void AddTo(OpCostRow& row, const CostedOp& op, double time_ns) {
  row.calls += 1;
  row.flops += op.cost.flops;
  row.bytes += op.cost.bytes;
  row.time_ns += time_ns;
}

void Finish(OpCostRow& row, double per, double ridge) {
  row.calls /= per, row.flops /= per, row.bytes /= per, row.time_ns /= per;
  row.tflops = row.time_ns > 0 ? row.flops / row.time_ns / 1e3 : 0;
  row.gbps = row.time_ns > 0 ? row.bytes / row.time_ns : 0;
  row.intensity = row.bytes > 0 ? row.flops / row.bytes : 0;
  row.bound = ridge <= 0 || row.flops <= 0 ? "" : row.intensity >= ridge ? "compute" : "memory";
}

// The start-up hook's "trainrx::cpu_peak gflops=G n=N threads=T repeats=R" mark (sitecustomize.py),
// the CPU's measured fp32 matmul rate; nullopt when the rank has none.
struct CpuPeak {
  double gflops = 0;
  int64_t n = 0, threads = 0, repeats = 0;
};
std::optional<CpuPeak> CpuPeakMark(const Trace& trace, const std::vector<uint32_t>& tracks) {
  constexpr std::string_view kMark = "trainrx::cpu_peak gflops=";
  for (uint32_t t : tracks)
    for (const Event& e : trace.TrackEvents(t)) {
      if (e.kind != EventKind::kUserAnnotation) continue;
      const std::string_view name = trace.Name(e);
      if (name.substr(0, kMark.size()) != kMark) continue;
      CpuPeak p;
      const std::string text(name.substr(kMark.size()));
      long long n = 0, threads = 0, repeats = 0;
      if (std::sscanf(text.c_str(), "%lf n=%lld threads=%lld repeats=%lld", &p.gflops, &n, &threads, &repeats) == 4 &&
          p.gflops > 0 && std::isfinite(p.gflops)) {
        p.n = n, p.threads = threads, p.repeats = repeats;
        return p;
      }
    }
  return std::nullopt;
}

// The same figures from the trace's "trainrx" block, where our probe keeps them when the mark came
// after its step window closed (a run longer than `record --steps`).
std::optional<CpuPeak> CpuPeakOfBlock(const Trace& trace, int32_t rank) {
  const ConfigView config(trace, rank);
  const auto gflops = config.Static("cpu_peak_gflops");
  if (!gflops || !(*gflops > 0) || !std::isfinite(*gflops)) return std::nullopt;
  CpuPeak p;
  p.gflops = *gflops;
  p.n = static_cast<int64_t>(config.Static("cpu_peak_n").value_or(0));
  p.threads = static_cast<int64_t>(config.Static("cpu_peak_threads").value_or(0));
  p.repeats = static_cast<int64_t>(config.Static("cpu_peak_repeats").value_or(0));
  return p;
}

// One rank's costing, pass by pass: its steady steps, its CPU threads, the ops whose cost the
// shapes resolve and what ran for them.
struct Costing {
  Costing(const AnalysisContext& ctx, int32_t r) : trace(ctx.trace), rank(r), steps(ctx.steps, r) {
    has_steps = !steps.empty();
    for (const auto& s : ctx.steps.steps)
      if (s.rank == rank) walls.push_back(s.wall_ns);
    cpu_tracks = TracksOf(trace, rank, TrackKind::kCpuThread);
    step_params.assign(steps.size(), 0.0);
    step_tokens.assign(steps.size(), 0.0);
  }
  const Trace& trace;
  int32_t rank;
  StepWindows steps;  // the rank's steady steps, in time order
  bool has_steps = false;
  std::vector<int64_t> walls;  // their lengths
  std::vector<uint32_t> cpu_tracks;
  int32_t StepOf(int64_t ts) const { return static_cast<int32_t>(steps.Index(ts)); }
  // Which names have a model (by string id: each name is looked up once).
  bool HasModel(const Event& e) {
    auto [it, fresh] = modeled.try_emplace(e.name, false);
    if (fresh) it->second = HasCostModel(trace.Name(e));
    return it->second;
  }
  bool HasInputs(const Event& e) const { return e.aux != profiler::kNoAux && e.aux < trace.op_inputs.size(); }
  std::unordered_map<profiler::StrId, bool> modeled;
  // Pass 1: forward convolutions' outputs from their backwards' shapes (keyed by ShapeKey).
  std::unordered_map<std::string, std::vector<int64_t>> conv_out;
  // Pass 2: the outermost costed ops of every thread, and each step's parameters and tokens.
  std::vector<CostedOp> ops;
  std::map<uint32_t, std::pair<size_t, size_t>> by_track;  // track -> [first, last) in ops
  std::vector<double> step_params, step_tokens;
  int64_t convs_unresolved = 0;
  // Pass 3: what ran in each step (device kernels, or the CPU's outermost ops).
  bool device = false;
  std::vector<double> total_ns;
};

// Pass 1: convolution backwards' shapes (their grad_output is the forward's output), for forward
// convolutions recorded without their strides.
void CollectConvOutputs(Costing& c) {
  for (uint32_t t : c.cpu_tracks) {
    for (const Event& e : c.trace.TrackEvents(t)) {
      if (e.kind != EventKind::kCpuOp || !c.HasInputs(e) || !c.HasModel(e)) continue;
      const std::string_view name = c.trace.Name(e);
      if (name.find("convolution_backward") == std::string_view::npos) continue;
      if (const auto dims = OpDims(c.trace, e))
        if (const auto shapes = ConvShapesOfBackward(name, *dims)) c.conv_out.emplace(ShapeKey(shapes->input, shapes->weight), shapes->output);
    }
  }
}

// The parameters a step trains (each gradient accumulated once: torch.profiler's AccumulateGrad
// nodes with their input's shape) and the tokens it reads (the largest embedding lookup), for the
// 6 * N * tokens estimate.
void CountParamsAndTokens(Costing& c, const Event& e) {
  const std::string_view name = c.trace.Name(e);
  const bool grad = name == "torch::autograd::AccumulateGrad", lookup = name == "aten::embedding";
  if (!grad && !lookup) return;
  const int32_t s = c.StepOf(e.ts_ns);
  const auto dims = OpDims(c.trace, e);
  if (s < 0 || !dims || dims->size() <= (lookup ? 1u : 0u)) return;
  double n = 1;
  for (int64_t d : (*dims)[lookup ? 1 : 0]) n *= static_cast<double>(std::max<int64_t>(d, 0));
  if (grad) c.step_params[static_cast<size_t>(s)] += n;
  else c.step_tokens[static_cast<size_t>(s)] = std::max(c.step_tokens[static_cast<size_t>(s)], n);
}

// An op's cost from its shapes (the same op with the same inputs, every step's, costed once: the
// shapes' text is interned, so equal inputs have equal ids). A convolution backward without its
// output_mask (older torch.profiler traces) counts both gradients; where its children show one only
// (cuDNN's ..._backward_input / _weight: the first layer computes no input gradient), it computed
// that one.
std::optional<OpCost> CostOfOp(Costing& c, std::map<CostKey, CachedCost>& costs, const ConvOutputHint& hint,
                               std::span<const Event> events, size_t i) {
  const Trace& trace = c.trace;
  const Event& e = events[i];
  const profiler::OpInputs& in = trace.op_inputs[e.aux];
  const CostKey key{e.name, in.input_dims, in.input_types, in.concrete};
  auto [slot, fresh] = costs.try_emplace(key);
  if (fresh) {
    const auto dims = OpDims(trace, e);
    if (dims) {
      const auto types = OpTypes(trace, e);
      std::optional<std::vector<std::string>> concrete;
      if (in.concrete != profiler::kNoStr) concrete = ParseTypes(trace.strings.Get(in.concrete));
      OpArgs args{&*dims, types ? &*types : nullptr, concrete ? &*concrete : nullptr};
      slot->second.cost = CostOf(trace.Name(e), args, &hint);
      slot->second.unresolved_conv = !slot->second.cost && trace.Name(e).find("conv") != std::string_view::npos;
    }
  }
  if (!slot->second.cost) {
    c.convs_unresolved += slot->second.unresolved_conv;
    return std::nullopt;
  }
  OpCost cost = *slot->second.cost;
  if (cost.cls == OpClass::kConv && in.concrete == profiler::kNoStr && trace.Name(e).find("convolution_backward") != std::string_view::npos) {
    bool input = false, weight = false;
    for (size_t j = i + 1, end = SubtreeEnd(events, i); j < end; ++j) {
      const std::string_view child = trace.Name(events[j]);
      input = input || child.find("backward_input") != std::string_view::npos;
      weight = weight || child.find("backward_weight") != std::string_view::npos;
    }
    if (input != weight) cost.flops /= 2;
  }
  return cost;
}

// Pass 2: the outermost costed ops of every thread, each marked when it is a forward op run again
// inside a backward node (a recomputation).
void CollectCostedOps(Costing& c) {
  const ConvOutputHint hint = [&](const std::vector<int64_t>& in, const std::vector<int64_t>& w) -> const std::vector<int64_t>* {
    auto it = c.conv_out.find(ShapeKey(in, w));
    return it == c.conv_out.end() ? nullptr : &it->second;
  };
  // Each name's role for the recomputation test, found once per name.
  constexpr uint8_t kBackwardNode = 1, kForwardEntry = 2, kKnown = 4;
  std::vector<uint8_t> roles(c.trace.strings.size(), 0);
  const auto role_of = [&](profiler::StrId id) -> uint8_t {
    if (id >= roles.size()) return 0;
    if (!(roles[id] & kKnown)) {
      const std::string_view name = c.trace.strings.Get(id);
      roles[id] = kKnown | (IsBackwardNode(name) ? kBackwardNode : 0) | (IsForwardEntry(name) ? kForwardEntry : 0);
    }
    return roles[id];
  };
  std::map<CostKey, CachedCost> costs;
  for (uint32_t t : c.cpu_tracks) {
    const size_t first = c.ops.size();
    int64_t covered_until = INT64_MIN;
    const auto events = c.trace.TrackEvents(t);
    // The ranges open around the current event: where each ends, whether it is or lies in a
    // backward node, and whether it lies in a forward entry point inside one (a recomputation).
    struct Open {
      int64_t end;
      bool backward, recompute;
    };
    std::vector<Open> open;
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      while (!open.empty() && open.back().end <= e.ts_ns) open.pop_back();
      const bool in_backward = !open.empty() && open.back().backward;
      bool recompute = !open.empty() && open.back().recompute;
      if (e.kind == EventKind::kCpuOp || e.kind == EventKind::kUserAnnotation) {
        const uint8_t role = role_of(e.name);
        recompute = recompute || (in_backward && (role & kForwardEntry));
        if (e.dur_ns > 0) open.push_back({e.end_ns(), in_backward || (role & kBackwardNode), recompute});
      }
      if (e.kind == EventKind::kCpuOp && c.has_steps && c.HasInputs(e)) CountParamsAndTokens(c, e);
      if (e.kind != EventKind::kCpuOp || e.ts_ns < covered_until || !c.HasInputs(e) || !c.HasModel(e)) continue;
      const std::optional<OpCost> cost = CostOfOp(c, costs, hint, events, i);
      if (!cost) continue;
      CostedOp op;
      op.e = &e;
      op.track = t;
      op.step = c.has_steps ? c.StepOf(e.ts_ns) : -1;
      op.cost = *cost;
      op.recompute = recompute;
      c.ops.push_back(op);
      covered_until = e.end_ns();
    }
    if (c.ops.size() > first) c.by_track[t] = {first, c.ops.size()};
  }
}

// Pass 3: device time, every kernel to the costed op whose span holds its launching call, and each
// step's total (its kernels; without device work, its outermost CPU ops); fp32 model ops whose
// kernels are mostly TF32 tensor-core kernels ran in TF32.
void AttributeDeviceTime(const AnalysisContext& ctx, Costing& c) {
  const RankLinks* links = ctx.links.Rank(c.rank);
  c.device = links != nullptr && std::any_of(links->work.begin(), links->work.end(), [](const DeviceWork& w) {
                        return w.e->kind == EventKind::kKernel;
                      });
  c.total_ns.assign(c.has_steps ? c.steps.size() : 1, 0.0);
  if (c.device) {
    for (const DeviceWork& w : links->work) {
      if (w.e->kind != EventKind::kKernel) continue;
      const HostCall* call = links->CallOf(w);
      const int64_t at = call ? call->e->ts_ns : w.ts();
      const int32_t s = c.has_steps ? c.StepOf(at) : 0;
      if (s < 0) continue;
      c.total_ns[static_cast<size_t>(s)] += static_cast<double>(w.e->dur_ns);
      if (!call) continue;
      auto range = c.by_track.find(call->track);
      if (range == c.by_track.end()) continue;
      const auto begin = c.ops.begin() + static_cast<std::ptrdiff_t>(range->second.first);
      const auto end = c.ops.begin() + static_cast<std::ptrdiff_t>(range->second.second);
      auto it = std::upper_bound(begin, end, at, [](int64_t t, const CostedOp& o) { return t < o.e->ts_ns; });
      if (it == begin) continue;
      --it;
      if (at >= it->e->end_ns()) continue;
      it->device_ns += static_cast<double>(w.e->dur_ns);
      if (links->kernel_names->SaysTf32(w.e->name)) it->tf32_ns += static_cast<double>(w.e->dur_ns);
    }
  } else {
    for (uint32_t t : c.cpu_tracks) {
      const auto events = c.trace.TrackEvents(t);
      for (size_t i : OutermostOps(events, 0, events.size())) {
        const int32_t s = c.has_steps ? c.StepOf(events[i].ts_ns) : 0;
        if (s >= 0) c.total_ns[static_cast<size_t>(s)] += static_cast<double>(events[i].dur_ns);
      }
    }
  }
  // fp32 model ops whose kernels are mostly TF32 tensor-core kernels ran in TF32.
  for (CostedOp& op : c.ops)
    if (c.device && op.cost.dtype == "fp32" && IsModelFlopClass(op.cost.cls) && op.tf32_ns > 0.5 * op.device_ns) op.cost.dtype = "tf32";

}

// The steps that count: those with costed ops and at least 90 % of the largest step's model FLOPs.
struct Counted {
  std::vector<bool> counts;
  int64_t costed = 0, full = 0;
};
Counted CountedSteps(const Costing& c) {
  const size_t n_steps = c.has_steps ? c.steps.size() : 1;
  std::vector<double> step_model(n_steps, 0.0);
  std::vector<bool> step_costed(n_steps, false);
  for (const CostedOp& op : c.ops) {
    const int32_t s = c.has_steps ? op.step : 0;
    if (s < 0) continue;
    step_costed[static_cast<size_t>(s)] = true;
    if (IsModelFlopClass(op.cost.cls) && !op.recompute) step_model[static_cast<size_t>(s)] += op.cost.flops;
  }
  const double most = *std::max_element(step_model.begin(), step_model.end());
  Counted k;
  k.counts.assign(n_steps, false);
  for (size_t s = 0; s < n_steps; ++s) {
    k.costed += step_costed[s];
    k.counts[s] = step_costed[s] && step_model[s] >= 0.9 * most;
    k.full += k.counts[s];
  }
  return k;
}

// The rank's first device as the trace names it (a name with control bytes or NULs is not a
// device's name: see PeakOfProperties); nullptr without device time.
const profiler::DeviceProperties* DeviceOf(const Costing& c, Utilization& u) {
  if (!c.device) {
    u.device = "CPU";
    return nullptr;
  }
  const profiler::DeviceProperties* props = nullptr;
  for (const auto& r : c.trace.ranks)
    if (r.rank == c.rank)
      for (const auto& d : r.devices)
        if (props == nullptr) props = &d;
  const bool named = props != nullptr && !props->name.empty() &&
                     std::none_of(props->name.begin(), props->name.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; });
  u.device = named ? props->name : "GPU (unnamed in the trace)";
  return props;
}

using OpRows = std::map<std::pair<std::string, std::string>, OpCostRow>;
using ClassRows = std::map<std::string, OpCostRow>;

// Rows per (op, dtype) and per class over the counted steps; the FLOPs, bytes and times a counted
// step (with 6 * N * tokens where its parameters and tokens are seen), and the model's main dtype.
void SumRows(const Costing& c, const Counted& k, OpRows& rows, ClassRows& classes, Utilization& u) {
  std::map<std::string, double> model_by_dtype;
  for (const CostedOp& op : c.ops) {
    const int32_t s = c.has_steps ? op.step : 0;
    if (s < 0 || !k.counts[static_cast<size_t>(s)]) continue;
    const double time = c.device ? op.device_ns : static_cast<double>(op.e->dur_ns);
    OpCostRow& row = rows[{std::string(c.trace.Name(*op.e)), std::string(op.cost.dtype)}];
    row.name = c.trace.Name(*op.e);
    row.op_class = OpClassName(op.cost.cls);
    row.dtype = op.cost.dtype;
    AddTo(row, op, time);
    OpCostRow& cls = classes[std::string(OpClassName(op.cost.cls))];
    cls.name = cls.op_class = OpClassName(op.cost.cls);
    AddTo(cls, op, time);
    if (IsModelFlopClass(op.cost.cls) && !op.recompute) model_by_dtype[std::string(op.cost.dtype)] += op.cost.flops;
    if (op.recompute && IsModelFlopClass(op.cost.cls)) u.recompute_flops += op.cost.flops;
    else (IsModelFlopClass(op.cost.cls) ? u.model_flops : u.other_flops) += op.cost.flops;
    u.bytes += op.cost.bytes;
    u.costed_ns += time;
  }
  for (size_t s = 0; s < k.counts.size(); ++s)
    if (k.counts[s]) u.total_ns += c.total_ns[s];
  // 6 * N * tokens beside the model FLOPs where both are seen in the counted steps (the median of
  // each: a step's gradients are accumulated once per parameter, its largest lookup the tokens).
  if (c.has_steps) {
    std::vector<double> params, tokens;
    for (size_t s = 0; s < k.counts.size(); ++s)
      if (k.counts[s] && c.step_params[s] > 0 && c.step_tokens[s] > 0) params.push_back(c.step_params[s]), tokens.push_back(c.step_tokens[s]);
    if (!params.empty()) {
      std::sort(params.begin(), params.end());
      std::sort(tokens.begin(), tokens.end());
      u.params = params[params.size() / 2];
      u.tokens = tokens[tokens.size() / 2];
      u.six_n_tokens = 6 * u.params * u.tokens;
    }
  }
  const double per = static_cast<double>(k.full);
  u.model_flops /= per, u.other_flops /= per, u.recompute_flops /= per, u.bytes /= per, u.costed_ns /= per, u.total_ns /= per;
  u.covered_share = u.total_ns > 0 ? std::min(1.0, u.costed_ns / u.total_ns) : 0;
  for (const auto& [dtype, f] : model_by_dtype)
    if (u.dtype.empty() || f > model_by_dtype[u.dtype]) u.dtype = dtype;
}

// The peak: the user's, else the device table's, else the CPU's measured matmul rate. Returns why
// there is none ("" when there is).
std::string SetPeak(const AnalysisContext& ctx, const Costing& c, const profiler::DeviceProperties* props, Utilization& u) {
  const double user_peak = ctx.thresholds.Get("utilization.peak_tflops"), user_bw = ctx.thresholds.Get("utilization.peak_gbps");
  std::string why_no_peak;
  if (user_peak > 0) {
    u.peak_tflops = user_peak;
    u.peak_source = fmt::format("set with --threshold utilization.peak_tflops={:g}", user_peak);
  } else if (c.device) {
    std::optional<DevicePeak> p = PeakOfDevice(u.device);
    if (!p && props != nullptr)
      if ((p = PeakOfProperties(props->compute_major, props->compute_minor, props->num_sms, props->total_global_mem)))
        u.device = fmt::format("{} (by compute capability {}.{} and {} SMs: the trace's device name is unreadable)", p->model,
                               props->compute_major, props->compute_minor, props->num_sms);
    if (p) {
      u.peak_tflops = PeakTflops(*p, u.dtype.empty() ? "fp32" : u.dtype);
      u.peak_gbps = p->memory_gbps;
      u.peak_source = fmt::format("{} dense {} peak: {}", p->model, u.dtype.empty() ? "fp32" : u.dtype, p->source);
      if (u.peak_tflops <= 0) why_no_peak = fmt::format("the {} has no {} peak in the datasheet", p->model, u.dtype);
    } else {
      why_no_peak = fmt::format("no datasheet peak is known for '{}': give it with --threshold utilization.peak_tflops=N", u.device);
    }
  } else {
    std::optional<CpuPeak> peak = CpuPeakMark(c.trace, c.cpu_tracks);
    if (!peak) peak = CpuPeakOfBlock(c.trace, c.rank);
    if (peak) {
      u.peak_tflops = peak->gflops / 1e3;
      u.peak_source = fmt::format("measured at the end of the recording by the start-up hook: an fp32 {}x{} matmul on {} "
                                  "thread{}, the best of {} ({:.1f} GFLOP/s; a measured rate, not a datasheet peak)",
                                  peak->n, peak->n, peak->threads, peak->threads == 1 ? "" : "s", peak->repeats, peak->gflops);
      if (u.dtype != "fp32" && !u.dtype.empty())
        u.peak_source += fmt::format("; the model's matmuls ran in {}", u.dtype);
    } else {
      why_no_peak = "no CPU peak in the trace (trainrx record measures one at the end of a Python run; torch.profiler "
                    "traces have none): give it with --threshold utilization.peak_tflops=N";
    }
  }
  if (user_bw > 0) u.peak_gbps = user_bw;
  return why_no_peak;
}

// MFU and HFU from the median step, the rows finished (per counted step, against the roofline's
// ridge) and sorted by time, and the notes on what the figures leave out.
void FinishUtilization(Costing& c, const Counted& k, OpRows& rows, ClassRows& classes, const std::string& why_no_peak, Utilization& u) {
  const double ridge = u.peak_tflops > 0 && u.peak_gbps > 0 ? u.peak_tflops * 1e3 / u.peak_gbps : 0;  // FLOPs per byte
  if (c.has_steps) {
    std::nth_element(c.walls.begin(), c.walls.begin() + static_cast<std::ptrdiff_t>(c.walls.size() / 2), c.walls.end());
    u.step_ns = static_cast<double>(c.walls[c.walls.size() / 2]);
    u.achieved_tflops = u.step_ns > 0 ? u.model_flops / u.step_ns / 1e3 : 0;
    u.mfu = u.peak_tflops > 0 ? u.achieved_tflops / u.peak_tflops : 0;
    // Hardware FLOPs utilization: what the device computed, recomputation included (PaLM's HFU).
    if (u.recompute_flops > 0 && u.peak_tflops > 0 && u.step_ns > 0)
      u.hfu = (u.model_flops + u.recompute_flops) / u.step_ns / 1e3 / u.peak_tflops;
  }
  u.mfu_lower_bound = c.convs_unresolved > 0 || u.covered_share < 0.95;
  const double per = static_cast<double>(k.full);
  for (auto& [key, row] : rows) {
    Finish(row, per, ridge);
    u.ops.push_back(row);
  }
  for (auto& [key, row] : classes) {
    Finish(row, per, ridge);
    u.classes.push_back(row);
  }
  auto by_time = [](const OpCostRow& a, const OpCostRow& b) {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.flops > b.flops;
  };
  std::sort(u.ops.begin(), u.ops.end(), by_time);
  std::sort(u.classes.begin(), u.classes.end(), by_time);
  if (u.ops.size() > 15) u.ops.resize(15);

  std::vector<std::string> notes;
  if (!c.has_steps) notes.push_back("no steps: totals over the trace, and no MFU (it needs a step time)");
  else if (k.full < static_cast<int64_t>(c.steps.size()))
    notes.push_back(fmt::format("shapes in {} of {} steady steps{}; the per-step figures are theirs", k.full, c.steps.size(),
                                k.costed > k.full ? fmt::format(" ({} more with part of them)", k.costed - k.full) : ""));
  if (!why_no_peak.empty()) notes.push_back(why_no_peak);
  if (c.convs_unresolved > 0)
    notes.push_back(fmt::format("{} convolution call{} not costed: no strides recorded and no backward of the same shapes",
                                c.convs_unresolved, c.convs_unresolved == 1 ? "" : "s"));
  for (size_t i = 0; i < notes.size(); ++i) u.note += (i ? "; " : "") + notes[i];
}

std::optional<Utilization> RankUtilization(const AnalysisContext& ctx, int32_t rank) {
  Costing c(ctx, rank);
  CollectConvOutputs(c);
  CollectCostedOps(c);
  if (c.ops.empty()) return std::nullopt;
  AttributeDeviceTime(ctx, c);
  const Counted k = CountedSteps(c);
  if (k.full == 0) return std::nullopt;
  Utilization u;
  u.rank = rank;
  u.device_time = c.device;
  u.steps = c.has_steps ? static_cast<int64_t>(c.steps.size()) : 0;
  u.steps_costed = k.full;
  const profiler::DeviceProperties* props = DeviceOf(c, u);
  OpRows rows;
  ClassRows classes;
  SumRows(c, k, rows, classes, u);
  const std::string why_no_peak = SetPeak(ctx, c, props, u);
  FinishUtilization(c, k, rows, classes, why_no_peak, u);
  return u;
}

}  // namespace

void AddUtilizationEvidence(Report& report) {
  // What a low MFU's causes cost, seen beside the MFU: the families whose findings are why a device
  // does less than it could (idle, launch-bound, loader, syncs, stragglers, exposed communication,
  // the allocator, precision).
  static constexpr std::string_view kCauses[] = {"gpu.", "input.", "sync.", "dist.", "precision.", "compile.", "batch."};
  for (Finding& f : report.findings) {
    if (std::none_of(std::begin(kCauses), std::end(kCauses), [&](std::string_view p) { return f.id.rfind(p, 0) == 0; })) continue;
    const Utilization* u = nullptr;
    for (const auto& x : report.metrics.utilization)
      if (x.rank == f.rank || (f.rank < 0 && u == nullptr)) u = &x;
    if (u == nullptr || u->mfu <= 0) continue;
    f.evidence.push_back({"mfu_pct", 100 * u->mfu});
    if (u->mfu_lower_bound) f.evidence.push_back({"mfu_is_lower_bound", int64_t{1}});
    // fp32 matmuls where TF32 would do: their achieved rate against the TF32 peak they could reach.
    if (f.id == "precision.fp32_matmul") {
      double flops = 0, ns = 0;
      for (const auto& o : u->ops)
        if (o.dtype == "fp32" && (o.op_class == "matmul" || o.op_class == "conv")) flops += o.flops, ns += o.time_ns;
      if (ns > 0) f.evidence.push_back({"fp32_matmul_achieved_tflops", flops / ns / 1e3});
      if (const auto p = PeakOfDevice(u->device)) {
        f.evidence.push_back({"fp32_peak_tflops", p->fp32});
        if (p->tf32 > 0) f.evidence.push_back({"tf32_peak_tflops", p->tf32});
      }
    }
    // 16-bit matmuls whose shapes miss the tensor cores: their achieved rate beside the peak.
    if (f.id == "precision.matmul_alignment") {
      double flops = 0, ns = 0;
      for (const auto& o : u->ops)
        if ((o.dtype == "bf16" || o.dtype == "fp16") && o.op_class == "matmul") flops += o.flops, ns += o.time_ns;
      if (ns > 0) f.evidence.push_back({"half_matmul_achieved_tflops", flops / ns / 1e3});
    }
    // What torch.compile would fuse: the share of the costed time in memory-bound op classes (norms,
    // softmax, elementwise, on the device's roofline).
    if (f.id == "compile.not_compiled" && u->total_ns > 0) {
      double memory = 0;
      for (const auto& c : u->classes)
        if (c.bound == "memory" && (c.op_class == "elementwise" || c.op_class == "norm" || c.op_class == "softmax")) memory += c.time_ns;
      if (memory > 0) f.evidence.push_back({"memory_bound_time_pct", 100 * memory / u->total_ns});
    }
  }
}

void AnalyzeUtilization(const AnalysisContext& ctx, Report& out) {
  for (const auto& r : ctx.trace.ranks)
    if (auto u = RankUtilization(ctx, r.rank)) out.metrics.utilization.push_back(std::move(*u));
}

}  // namespace trainrx::analyzers
