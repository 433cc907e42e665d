// The what-if's GPU transforms (issue 59; docs/what-if.md): TF32 for FP32 GEMM / convolution
// kernels, pinned host memory for pageable host-to-device copies, and CUDA graphs for launch-bound
// steps. Each is an edit of the rank's dependency graph (replay.h) at three levels of its one
// uncertain assumption, with that assumption said in plain words.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dependency/what_if.h"
#include "cost/device_peaks.h"
#include "cost/flops.h"
#include "shapes.h"
#include "phases.h"
#include "runtime_names.h"
#include "ops.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using Kind = RankGraph::Kind;

namespace {

// The device work a task runs (nullptr for a host task).
const Event* WorkOf(const RankGraph& g, const RankGraph::Task& t) {
  return t.kind == Kind::kDevice && t.work >= 0 ? g.links().work[static_cast<size_t>(t.work)].e : nullptr;
}

// Per frame: under the optimizer's step or zero_grad (what torch.compile(model) leaves eager).
std::vector<uint8_t> OptimizerFrames(const RankGraph& g) {
  return g.FramesUnder([](std::string_view n) { return n.starts_with("Optimizer.step#") || n.starts_with("Optimizer.zero_grad#"); });
}

// The rank's median duration of a kernel launch call (what an asynchronous copy's call costs once
// it no longer stages the data); 5 us when the trace has none.
int64_t MedianLaunchCallNs(const RankGraph& g) {
  std::vector<int64_t> d;
  for (const HostCall& c : g.links().calls)
    if (c.kind == CallKind::kLaunch && g.trace().Name(*c.e).find("LaunchKernel") != std::string_view::npos)
      d.push_back(c.e->dur_ns);
  return d.empty() ? 5000 : Quantile(d, 0.5);
}

// The scale of a kernel `s` times faster, not under 2 us (launch and tail) unless it was shorter.
float SpedUp(int64_t dur_ns, double s) {
  constexpr double kFloorNs = 2000;
  const double dur = static_cast<double>(std::max<int64_t>(1, dur_ns));
  return static_cast<float>(std::max(dur / s, std::min(dur, kFloorNs)) / dur);
}

// The host slices of the calls that enqueued each of `work_tasks` (device tasks), and their time.
struct CallSlices {
  std::vector<std::vector<size_t>> tasks;
  std::vector<int64_t> ns;
};
CallSlices CallSlicesOf(const RankGraph& g, const std::vector<size_t>& work_tasks) {
  const auto& links = g.links();
  // Per frame: the work it launched (a call's slices share its frame: its first slice's).
  std::vector<int32_t> of_frame(g.frames().size(), -1);
  for (size_t k = 0; k < work_tasks.size(); ++k) {
    const DeviceWork& w = links.work[static_cast<size_t>(g.tasks()[work_tasks[k]].work)];
    if (const int32_t c = w.call >= 0 ? g.CallTask(w.call) : -1; c >= 0) of_frame[static_cast<size_t>(g.tasks()[c].frame)] = static_cast<int32_t>(k);
  }
  CallSlices out;
  out.tasks.resize(work_tasks.size());
  out.ns.assign(work_tasks.size(), 0);
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.kind == Kind::kDevice || t.frame < 0 || of_frame[static_cast<size_t>(t.frame)] < 0) continue;
    const auto k = static_cast<size_t>(of_frame[static_cast<size_t>(t.frame)]);
    out.tasks[k].push_back(i);
    out.ns[k] += t.dur;
  }
  return out;
}

// The bytes one launch of each kernel (by name) moves and the FLOPs it does, from the innermost op around its launch call
// whose input shapes are recorded, anywhere in the rank (our collector records shapes in the first
// steps only; the replayed steps are later ones): the op's bytes (cost/flops.h: inputs read once,
// the output written once; an op without a cost model: its tensor inputs and an output the size of
// the largest) shared among the kernels it launched; averaged over the launches seen.
struct LaunchCost {
  double bytes = 0, flops = 0;
};
using LaunchCosts = std::unordered_map<profiler::StrId, LaunchCost>;
// One op's bytes and FLOPs from its recorded input shapes and types (nothing without shapes).
LaunchCost OpCost(const profiler::Trace& tr, const Event& op) {
  const auto dims = OpDims(tr, op);
  if (!dims) return {};
  const auto types = OpTypes(tr, op);
  if (HasCostModel(tr.Name(op)))
    if (const auto c = CostOf(tr.Name(op), OpArgs{&*dims, types ? &*types : nullptr}); c && c->bytes > 0)
      return {c->bytes, IsModelFlopClass(c->cls) ? c->flops : 0.0};
  double sum = 0, largest = 0;
  for (size_t k = 0; k < dims->size(); ++k) {
    const auto& d = (*dims)[k];
    if (d.empty()) continue;
    const int eb = types && k < types->size() ? ElementBytes((*types)[k]) : 4;
    if (eb == 0) continue;
    double n = eb;
    for (int64_t x : d) n *= static_cast<double>(std::max<int64_t>(0, x));
    sum += n;
    largest = std::max(largest, n);
  }
  return {sum + largest, 0.0};
}

LaunchCosts CostPerLaunchOfRank(const profiler::Trace& tr, const RankLinks& links) {
  // An op's cost is a function of its name and its inputs' shapes and types (interned strings): each
  // such triple parsed once in the trace (a step repeats the same ops with the same shapes, and the
  // ranks of a data-parallel job the same steps). The ranks' passes may run at once: a lock.
  struct ByInputs {  // filled as the ranks ask, behind its lock
    mutable std::mutex mu;
    mutable std::map<std::array<profiler::StrId, 3>, LaunchCost> costs;
  };
  const ByInputs& by_inputs = links.TraceDerived<ByInputs>([] { return ByInputs{}; });
  const auto op_cost_once = [&](const Event& op) -> LaunchCost {
    if (op.aux == profiler::kNoAux || op.aux >= tr.op_inputs.size()) return OpCost(tr, op);
    const profiler::OpInputs& in = tr.op_inputs[op.aux];
    const std::array<profiler::StrId, 3> key{op.name, in.input_dims, in.input_types};
    {
      std::lock_guard<std::mutex> lock(by_inputs.mu);
      if (const auto it = by_inputs.costs.find(key); it != by_inputs.costs.end()) return it->second;
    }
    const LaunchCost c = OpCost(tr, op);  // the same whoever makes it: a race makes it twice, not differently
    std::lock_guard<std::mutex> lock(by_inputs.mu);
    return by_inputs.costs.try_emplace(key, c).first->second;
  };
  std::unordered_map<profiler::StrId, std::pair<LaunchCost, double>> acc;  // name -> (cost, launches)
  std::vector<const Event*> open;  // the ops with shapes around the current time, outermost first
  // (op, a kernel it launched), grouped by op below: the op's events lie in the trace in order, so
  // the groups come in the same order every run (a hash map's order is the addresses').
  std::vector<std::pair<const Event*, profiler::StrId>> kernels_of;
  for (uint32_t ti : CpuThreadTracks(tr, links.rank)) {
    open.clear();
    kernels_of.clear();
    for (const Event& e : tr.TrackEvents(ti)) {
      while (!open.empty() && open.back()->ts_ns + open.back()->dur_ns <= e.ts_ns) open.pop_back();
      if (e.kind == EventKind::kCpuOp && e.aux != profiler::kNoAux) {
        open.push_back(&e);
        continue;
      }
      if (open.empty() || (e.kind != EventKind::kCudaRuntime && e.kind != EventKind::kCudaDriver) ||
          e.correlation == profiler::kNoId)
        continue;
      const HostCall* c = links.CallByCorrelation(e.correlation);
      if (c == nullptr || c->kind != CallKind::kLaunch || c->work < 0) continue;
      const Event* k = links.work[static_cast<size_t>(c->work)].e;
      if (k->kind == EventKind::kKernel) kernels_of.push_back({open.back(), k->name});
    }
    std::stable_sort(kernels_of.begin(), kernels_of.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0, j; i < kernels_of.size(); i = j) {  // each op's cost shared among its kernels
      for (j = i + 1; j < kernels_of.size() && kernels_of[j].first == kernels_of[i].first;) ++j;
      const LaunchCost c = op_cost_once(*kernels_of[i].first);
      const double share = 1.0 / static_cast<double>(j - i);
      for (size_t k = i; k < j; ++k) {
        auto& [sum, count] = acc[kernels_of[k].second];
        sum.bytes += c.bytes * share, sum.flops += c.flops * share, count += 1;
      }
    }
  }
  LaunchCosts out;
  for (const auto& [name, v] : acc) out[name] = {v.first.bytes / v.second, v.first.flops / v.second};
  return out;
}
const LaunchCosts kNoLaunchCosts;
// The rank's, made once (a pass over all its host events) for all its graphs and transforms.
const LaunchCosts& CostPerLaunch(const RankGraph& g) {
  struct Costs {
    LaunchCosts by_name;
  };
  return g.links().Derived<Costs>([&] { return Costs{CostPerLaunchOfRank(g.trace(), g.links())}; }).by_name;
}

// Per frame: the outermost aten:: op it lies in (-1: none); and per op frame whether every kernel it
// launched is one inductor regenerates (1), not (0: a GEMM, a convolution, attention, a copy), or it
// launched none (-1).
struct OpKernels {
  std::vector<int32_t> outermost;
  std::vector<int8_t> regenerated_only;
};
OpKernels OpKernelsOf(const RankGraph& g, const std::vector<std::vector<size_t>>& runs) {
  const auto& tr = g.trace();
  // Each kernel's outermost aten:: op (what the module's Python code called: aten::batch_norm,
  // aten::relu_, not the module or autograd ranges around them, which also launch the GEMMs that stay).
  OpKernels out;
  std::vector<int32_t>& outermost = out.outermost;
  outermost.assign(g.frames().size(), -1);
  for (size_t f = 0; f < g.frames().size(); ++f) {
    const int32_t parent = g.frames()[f].parent;
    if (parent >= 0 && outermost[static_cast<size_t>(parent)] >= 0) outermost[f] = outermost[static_cast<size_t>(parent)];
    else if (tr.Name(*g.frames()[f].op).substr(0, 6) == "aten::") outermost[f] = static_cast<int32_t>(f);
  }
  std::vector<int8_t>& regenerated_only = out.regenerated_only;
  regenerated_only.assign(g.frames().size(), -1);
  std::vector<uint8_t> regenerated(g.tasks().size(), 0);
  for (const auto& r : runs)
    for (size_t i : r) regenerated[i] = 1;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.kind != Kind::kDevice || t.frame < 0 || outermost[static_cast<size_t>(t.frame)] < 0) continue;
    int8_t& v = regenerated_only[static_cast<size_t>(outermost[static_cast<size_t>(t.frame)])];
    v = static_cast<int8_t>((v != 0) && regenerated[i]);
  }
  return out;
}


// A GEMM kernel's time under a faster math mode (TF32, bf16) where it is compute-bound: its FLOPs
// (its op's recorded shapes) at `efficiency` of the faster mode's dense peak, not faster than the
// peaks' ratio allows. Compute-bound: it ran at half its present math's peak or more. -1 where its
// FLOPs are unknown or it ran below that (then the caller's model of an unknown GEMM stands).
double ComputeBoundNs(int64_t dur_ns, const std::unordered_map<profiler::StrId, LaunchCost>& cost, profiler::StrId name,
                      double peak_from, double peak_to, double efficiency) {
  const auto c = cost.find(name);
  if (c == cost.end() || c->second.flops <= 0 || peak_from <= 0 || peak_to <= 0 || dur_ns <= 0) return -1;
  const double tflops = c->second.flops / static_cast<double>(dur_ns) / 1e3;  // FLOP per ns = 1e-3 TFLOP/s
  if (tflops < 0.5 * peak_from) return -1;
  return std::max(static_cast<double>(dur_ns) * peak_from / peak_to, c->second.flops / (efficiency * peak_to * 1e3));
}

// Per level (point; least; most), the share of the faster math's peak a compute-bound GEMM reaches
// (what cuBLAS reaches on large GEMMs); and the compute-bound GEMMs of the steps, counted at the point.
constexpr double kComputeBoundEfficiency[3] = {0.75, 0.5, 0.9};
struct ComputeBound {
  size_t kernels = 0;
  int64_t ns = 0;
  // The scale of GEMM task i at level k: compute-bound by its shapes (ComputeBoundNs), else
  // `guess` times faster (SpedUp).
  float Scale(const RankGraph& g, size_t i, int k, const std::unordered_map<profiler::StrId, LaunchCost>& cost,
              double peak_from, double peak_to, double guess) {
    const int64_t dur = g.tasks()[i].dur;
    const double after = ComputeBoundNs(dur, cost, WorkOf(g, g.tasks()[i])->name, peak_from, peak_to,
                                        kComputeBoundEfficiency[k]);
    if (after < 0) return SpedUp(dur, guess);
    if (k == 0 && g.StepOf(static_cast<int32_t>(i)) >= 0) ++kernels, ns += dur;
    return static_cast<float>(after / static_cast<double>(dur));
  }
  // What the assumptions add ("" when none was): `peak_from` names the present math's peak.
  std::string Text(const RankGraph& g, std::string_view peak_from, std::string_view peak_to) const {
    if (kernels == 0) return "";
    const double steps = g.steps();
    return fmt::format("; but {} GEMM kernels ({:.2f} ms a step) ran at half {} or more by their ops' recorded shapes: "
                       "compute-bound, they run at 75 % of the {} peak (50-90 %: what cuBLAS reaches on large GEMMs)",
                       kernels, static_cast<double>(ns) / 1e6 / steps, peak_from, peak_to);
  }
};

}  // namespace

// precision.fp32_matmul: TF32 tensor cores run the FP32 GEMM and convolution kernels.
TransformPlan Tf32(const RankGraph& g) {
  std::vector<size_t> fp32;
  int64_t fp32_ns = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const Event* w = WorkOf(g, g.tasks()[i]);
    if (w != nullptr && w->kind == EventKind::kKernel && g.links().kernel_names->Gemm(w->name) == GemmMath::kFp32) {
      fp32.push_back(i);
      if (g.StepOf(static_cast<int32_t>(i)) >= 0) fp32_ns += g.tasks()[i].dur;
    }
  }
  if (fp32.empty()) return NoSaving(g, "no FP32 GEMM or convolution kernel in this trace: nothing to save");
  // The device's TF32 / FP32 dense peak ratio (8 for an A100, 7.4 for an H100 SXM).
  double ratio = 8.0;
  std::string source = "the A100's datasheet ratio (156 / 19.5 TFLOP/s; the trace names no device the table has)";
  if (const auto peak = PeakOfRank(g.trace(), g.links().rank); peak && peak->fp32 > 0 && peak->tf32 > 0) {
    ratio = peak->tf32 / peak->fp32;
    source = fmt::format("the {}'s dense peaks, {:g} / {:g} TFLOP/s", peak->model, peak->tf32, peak->fp32);
  }
  // Per level, the kernels' speed-up: half the peak ratio (point); 2x, a small or memory-bound
  // GEMM (least); 86 % of it, PyTorch's CUDA notes' 10240^2 matmul (0.11 s -> 0.016 s on an A100).
  const double speedups[3] = {std::max(1.0, 0.5 * ratio), std::min(2.0, ratio), std::max(1.0, 0.86 * ratio)};
  // A GEMM whose FLOPs are known and that ran at half the FP32 peak or more is compute-bound: it
  // runs at 75 % of the TF32 peak (50 %; 90 %: what cuBLAS reaches on large GEMMs).
  const auto peak = PeakOfRank(g.trace(), g.links().rank);
  const LaunchCosts& cost = peak ? CostPerLaunch(g) : kNoLaunchCosts;
  ComputeBound bound;
  TransformPlan p;
  AddLevels(p, g, [&](int k, Edits& e) {
    for (size_t i : fp32)
      e.Scale(i, bound.Scale(g, i, k, cost, peak ? peak->fp32 : 0, peak ? peak->tf32 : 0, speedups[k]));
  });
  const double steps = g.steps();
  p.assumptions = fmt::format(
      "TF32 tensor cores run the {} FP32 GEMM/convolution kernels ({:.2f} ms a step) {:.1f}x faster ({:.1f}x-{:.1f}x: "
      "{:.1f}x is the TF32/FP32 peak ratio, from {}; half of it at the point, 2x for small or memory-bound GEMMs, 86 % "
      "of it for a large one), none under 2 us; the trace holds no bytes per kernel, so a memory-bound GEMM is "
      "counted at the point's speed-up",
      fp32.size(), static_cast<double>(fp32_ns) / 1e6 / steps, speedups[0], speedups[1], speedups[2], ratio, source);
  p.assumptions += bound.Text(g, "the FP32 peak", "TF32");
  return p;
}

// input.pin_memory: the batches come from pinned memory and are copied with non_blocking=True: the
// copy call returns at once and the copy runs at pinned bandwidth.
TransformPlan PinnedCopies(const RankGraph& g) {
  const auto& tr = g.trace();
  // The pageable host-to-device copies, and the pinned ones' bandwidth where the trace has some.
  std::vector<size_t> copies;
  std::vector<int64_t> bytes;
  std::vector<double> pinned_gbps;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const Event* w = WorkOf(g, g.tasks()[i]);
    if (w == nullptr || w->kind != EventKind::kMemcpy || w->aux == profiler::kNoAux) continue;
    const profiler::MemcpyInfo& m = tr.memcpys[w->aux];
    if (m.copy != profiler::CopyKind::kHtoD || m.bytes <= 0) continue;
    if (m.src == profiler::MemKind::kPageable) {
      copies.push_back(i);
      bytes.push_back(m.bytes);
    } else if (m.src == profiler::MemKind::kPinned && m.bytes >= (256 << 10) && w->dur_ns > 0) {
      pinned_gbps.push_back(static_cast<double>(m.bytes) / static_cast<double>(w->dur_ns));
    }
  }
  if (copies.empty()) return NoSaving(g, "no host-to-device copy from pageable memory in this trace: nothing to save");
  // The calls that enqueued them: their host slices shrink to a launch call's time and no longer wait.
  const CallSlices calls = CallSlicesOf(g, copies);
  const std::vector<int64_t>& call_ns = calls.ns;
  const std::vector<std::vector<size_t>>& call_tasks = calls.tasks;
  const int64_t launch_ns = MedianLaunchCallNs(g);
  // Pinned bandwidth: the trace's own pinned copies (median), else PCIe 4 x16's ~24 GB/s achieved
  // (12, PCIe 3; 50, PCIe 5).
  double gbps[3] = {24, 12, 50};
  std::string bw_source = "PCIe 4 x16's achieved ~24 GB/s (12 GB/s, PCIe 3; 50 GB/s, PCIe 5: the trace has no pinned copy of 256 kB or more)";
  if (!pinned_gbps.empty()) {
    std::sort(pinned_gbps.begin(), pinned_gbps.end());
    const double median = pinned_gbps[pinned_gbps.size() / 2];
    gbps[0] = median, gbps[1] = 0.75 * median, gbps[2] = pinned_gbps.back();
    bw_source = fmt::format("the trace's {} pinned copies: median {:.1f} GB/s (75 % of it; their best, {:.1f})",
                            pinned_gbps.size(), median, pinned_gbps.back());
  }
  TransformPlan p;
  int64_t total_bytes = 0;
  for (int level = 0; level < 3; ++level) {
    Edits e(g.tasks().size());
    for (size_t k = 0; k < copies.size(); ++k) {
      const auto& t = g.tasks()[copies[k]];
      const double dur = static_cast<double>(std::max<int64_t>(1, t.dur));
      e.Scale(copies[k], static_cast<float>(std::min(1.0, static_cast<double>(bytes[k]) / gbps[level] / dur)));
      // The call: a launch's time. At the least saving, the loop pins the batch itself (a C++ loop's
      // tensor.pin_memory()): a host copy at 10 GB/s stays on its thread.
      const int64_t keep = std::min(call_ns[k], launch_ns) + (level == 1 ? bytes[k] / 10 : 0);
      int64_t left = keep;
      for (size_t i : call_tasks[k]) {
        const int64_t d = g.tasks()[i].dur;
        const int64_t take = std::min(d, left);
        left -= take;
        e.Scale(i, d > 0 ? static_cast<float>(static_cast<double>(take) / static_cast<double>(d)) : 0.0f);
        e.Unblock(i);
      }
      if (left > 0 && !call_tasks[k].empty()) e.Add(call_tasks[k].front(), left);
    }
    p.levels.push_back(std::move(e));
  }
  for (int64_t b : bytes) total_bytes += b;
  p.assumptions = fmt::format(
      "the {} pageable host-to-device copies ({:.1f} MB) come from pinned memory (DataLoader(pin_memory=True), pinned "
      "on its pin-memory thread) and are enqueued with non_blocking=True: each call takes a launch's time ({:.1f} us, "
      "the rank's median) and no longer waits, and the copy runs at {:.0f} GB/s ({:.0f}-{:.0f}), from {}; at the least "
      "saving the loop's thread pins each batch itself at 10 GB/s",
      copies.size(), static_cast<double>(total_bytes) / 1e6, static_cast<double>(launch_ns) / 1e3, gbps[0], gbps[1],
      gbps[2], bw_source);
  return p;
}

namespace {

// An optimizer whose own step reads device values (LBFGS's line search: `float(t)` on a CUDA tensor
// a thousand times a step) cannot be one graph: its control flow follows what it reads. Its reads
// (blocking calls under a scalar read, on the loop's thread, the optimizer's own: OptimizersOwn;
// a closure's `print(loss.item())` is the user's to move out, as the assumption says) cut a step
// into pieces. A piece that runs a backward pass (an autograd node starts in it) is a
// closure call: the model's forward and backward, which torch.cuda.make_graphed_callables
// captures, one graph launch a piece; the optimizer's own work in the other pieces stays.
struct OptimizerReads {
  std::vector<std::vector<int64_t>> cuts;  // per step: the reads' ends, in time order
  std::vector<int64_t> backward_starts;    // autograd nodes' slices, any thread, sorted
  std::vector<uint8_t> in_optimizer;       // per frame: under an Optimizer.step# range
  size_t reads = 0;
  // The piece of step `s` that time `ts` falls in (0: before the first read).
  size_t PieceOf(int32_t s, int64_t ts) const {
    const auto& c = cuts[static_cast<size_t>(s)];
    return static_cast<size_t>(std::upper_bound(c.begin(), c.end(), ts) - c.begin());
  }
  // Whether the piece of step `s` from `ts`'s piece start to its end holds an autograd node.
  bool PieceRunsBackward(int32_t s, size_t piece, int64_t step_end) const {
    const auto& c = cuts[static_cast<size_t>(s)];
    const int64_t from = piece == 0 ? INT64_MIN : c[piece - 1], to = piece < c.size() ? c[piece] : step_end;
    const auto it = std::lower_bound(backward_starts.begin(), backward_starts.end(), from);
    return it != backward_starts.end() && *it < to;
  }
};
OptimizerReads OptimizerReadsOf(const RankGraph& g) {
  OptimizerReads r;
  r.cuts.resize(g.windows().size());
  r.in_optimizer = g.FramesUnder([](std::string_view n) { return n.starts_with("Optimizer.step#"); });
  if (std::none_of(r.in_optimizer.begin(), r.in_optimizer.end(), [](uint8_t x) { return x; })) return r;
  const auto& frames = g.frames();
  // A blocking call under a scalar read: the call's frame, or one enclosing it, is a read.
  const auto under_read = [&](int32_t f) {
    for (; f >= 0; f = frames[static_cast<size_t>(f)].parent)
      if (IsScalarReadOrSync(g.trace().Name(*frames[static_cast<size_t>(f)].op))) return true;
    return false;
  };
  std::vector<uint8_t> seen(frames.size(), 0);
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.frame < 0 || t.track != g.loop_thread()) continue;
    const auto f = static_cast<size_t>(t.frame);
    // one cut a blocking call (its slices are several tasks), at the call's end
    if (!r.in_optimizer[f] || seen[f]) continue;
    seen[f] = 1;
    const profiler::Event* call = frames[f].op;
    const int32_t s = g.StepOf(static_cast<int32_t>(i));
    if (s < 0 || !IsBlockingCall(g.trace().Name(*call)) || !under_read(t.frame) || !OptimizersOwn(g, t.frame)) continue;
    r.cuts[static_cast<size_t>(s)].push_back(call->end_ns());
    ++r.reads;
  }
  if (r.reads == 0) return r;
  const auto backward = g.FramesUnder([](std::string_view n) { return n.starts_with("autograd::engine::evaluate_function"); });
  for (const auto& t : g.tasks())
    if (t.frame >= 0 && backward[static_cast<size_t>(t.frame)]) r.backward_starts.push_back(t.ts);
  std::sort(r.backward_starts.begin(), r.backward_starts.end());
  for (auto& c : r.cuts) std::sort(c.begin(), c.end());
  return r;
}

}  // namespace

// gpu.launch_bound, compile.reduce_overhead: each step's device work, from its first launch to its
// last, is captured once and replayed as a CUDA graph: the host work in between (Python, the
// framework, the launches) is gone, one graph launch stands for it, and the kernels run one after
// another with a graph's gap between nodes.
TransformPlan CudaGraphs(const RankGraph& g) {
  const auto& links = g.links();
  const size_t windows = g.windows().size();
  // Per step: the span of its launches (the calls that enqueued the step's device work) and the
  // threads that launched.
  std::vector<std::pair<int64_t, int64_t>> span(windows, {INT64_MAX, INT64_MIN});
  std::vector<uint32_t> launching;
  size_t kernels = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    const int32_t s = g.StepOf(static_cast<int32_t>(i));
    if (t.kind != Kind::kDevice || s < 0 || t.work < 0) continue;
    const HostCall* c = links.CallOf(links.work[static_cast<size_t>(t.work)]);
    if (c == nullptr || c->kind != CallKind::kLaunch) continue;
    span[static_cast<size_t>(s)].first = std::min(span[static_cast<size_t>(s)].first, c->e->ts_ns);
    span[static_cast<size_t>(s)].second = std::max(span[static_cast<size_t>(s)].second, c->e->end_ns());
    if (std::find(launching.begin(), launching.end(), c->track) == launching.end()) launching.push_back(c->track);
    ++kernels;
  }
  if (kernels == 0) return NoSaving(g, "no device work launched in the steps: nothing to capture");
  const auto data = g.FramesInPhase(kData);
  const OptimizerReads opt = OptimizerReadsOf(g);
  // The captured host tasks, and the first on the loop's thread of each captured piece of a step
  // (where a graph's launch goes: one piece a step unless its optimizer reads).
  std::vector<size_t> captured, first;
  std::vector<int64_t> last_piece(windows, -1);
  int64_t captured_ns = 0, kept_ns = 0;
  size_t pieces = 0;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    const int32_t s = g.StepOf(static_cast<int32_t>(i));
    if (s < 0 || (t.kind != Kind::kHost && t.kind != Kind::kBetweenOps)) continue;
    if (std::find(launching.begin(), launching.end(), t.track) == launching.end()) continue;
    if (t.frame >= 0 && data[static_cast<size_t>(t.frame)]) continue;
    const auto [lo, hi] = span[static_cast<size_t>(s)];
    if (t.ts < lo || t.ts + t.dur > hi) continue;
    const size_t piece = opt.PieceOf(s, t.ts);
    if (opt.reads > 0 && t.frame >= 0 && opt.in_optimizer[static_cast<size_t>(t.frame)] &&
        !opt.PieceRunsBackward(s, piece, hi)) {
      kept_ns += t.dur;  // the optimizer's own work between its reads
      continue;
    }
    captured.push_back(i);
    captured_ns += t.dur;
    if (t.track == g.loop_thread() && last_piece[static_cast<size_t>(s)] < static_cast<int64_t>(piece)) {
      last_piece[static_cast<size_t>(s)] = static_cast<int64_t>(piece);
      first.push_back(i);
      ++pieces;
    }
  }
  // Device work launched apart from its predecessor on the stream (by more than a node's gap) runs
  // a node's gap after it in the graph; work already queued back to back keeps its gap.
  std::vector<std::pair<size_t, int64_t>> device_gaps;  // (task, its gap to the previous on its stream)
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if (t.kind != Kind::kDevice || g.StepOf(static_cast<int32_t>(i)) < 0 || t.work < 0) continue;
    const DeviceWork& w = links.work[static_cast<size_t>(t.work)];
    const int64_t gap = w.prev >= 0 ? w.e->ts_ns - links.work[static_cast<size_t>(w.prev)].e->end_ns() : INT64_MAX;
    device_gaps.push_back({i, gap});
  }
  // Levels: (share of the captured host time that stays, graph launch ns a step, node gap ns).
  struct Level {
    double stays;
    int64_t launch_ns, gap_ns;
  };
  const Level levels[3] = {{0.0, 10'000, 1'000}, {0.25, 50'000, 2'000}, {0.0, 2'500, 500}};
  TransformPlan p;
  for (const Level& lv : levels) {
    Edits e(g.tasks().size());
    for (size_t i : captured) e.Scale(i, static_cast<float>(lv.stays));
    for (size_t f : first) e.Add(f, lv.launch_ns);
    for (const auto& [i, gap] : device_gaps)
      if (gap > lv.gap_ns) e.Add(i, lv.gap_ns);
    p.levels.push_back(std::move(e));
  }
  const double steps = static_cast<double>(std::max<size_t>(1, windows));
  p.assumptions = fmt::format(
      "each step's work from its first launch to its last is one CUDA graph (torch.cuda.graphs, or torch.compile "
      "mode=\"reduce-overhead\"): the host work in between on the launching threads ({:.2f} ms a step: Python, the "
      "framework, {:.0f} launches) goes and one graph launch of 10 us (2.5-50) stands for it; at the least saving a "
      "quarter of it stays (guards, copies into the graph's static inputs, what cannot be captured); kernels launched "
      "apart run 1 us (0.5-2) after the one before; data loading and waits for the device stay. Capture needs static "
      "shapes and no host sync inside the step (move .item() reads out first: sync.host_device)",
      static_cast<double>(captured_ns) / 1e6 / steps, static_cast<double>(kernels) / steps);
  if (opt.reads > 0)
    p.assumptions += fmt::format(
        "; but the optimizer reads device values inside its step ({:.0f} reads a step: its control flow follows them), "
        "so the step cannot be one graph: the pieces between those reads that run a backward pass (the closure's forward "
        "and backward: torch.cuda.make_graphed_callables on the model) are captured, {:.1f} graph launches a step, and "
        "the optimizer's own work between its reads ({:.2f} ms a step) stays",
        static_cast<double>(opt.reads) / steps, static_cast<double>(pieces) / steps, static_cast<double>(kept_ns) / 1e6 / steps);
  return p;
}

// --what-if amp_bf16: torch.autocast(dtype=torch.bfloat16) around forward and loss. GEMM and
// convolution kernels in FP32 or TF32 run on bf16 tensor cores; elementwise, normalization and
// reduction kernels over fp32 data move half the bytes; each GEMM gets a cast of its inputs on the
// host (autocast's _to_copy: one more launch).
TransformPlan AmpBf16(const RankGraph& g) {
  const KernelNames& names = *g.links().kernel_names;
  std::vector<size_t> gemm_fp32, gemm_tf32, elementwise, batch_norm;
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const Event* w = WorkOf(g, g.tasks()[i]);
    if (w == nullptr || w->kind != EventKind::kKernel || names.Comm(w->name)) continue;
    switch (names.Gemm(w->name)) {
      case GemmMath::kFp32: gemm_fp32.push_back(i); break;
      case GemmMath::kTf32: gemm_tf32.push_back(i); break;
      case GemmMath::kNotGemm:
        if (!names.Fp32Data(w->name)) break;  // fp32 data by its template arguments
        (names.CudnnBatchNorm(w->name) ? batch_norm : elementwise).push_back(i);
        break;
      default: break;
    }
  }
  TransformPlan p;
  if (g.links().work.empty()) {
    p.not_predictable = "no device kernels in this trace: on a CPU, what autocast to bf16 gains depends on the CPU's "
                        "bf16 instructions (AMX, AVX512-BF16), which the trace does not say";
    return p;
  }
  if (gemm_fp32.empty() && gemm_tf32.empty() && elementwise.empty() && batch_norm.empty())
    return NoSaving(g, "no FP32/TF32 GEMM or convolution kernel and no kernel over fp32 data in this trace (already "
                       "in 16-bit?): nothing to save");
  double bf16 = 312, fp32 = 19.5, tf32 = 156;  // the A100's dense peaks
  std::string source = "the A100's datasheet (the trace names no device the table has)";
  if (const auto peak = PeakOfRank(g.trace(), g.links().rank); peak && peak->bf16 > 0 && peak->fp32 > 0 && peak->tf32 > 0) {
    bf16 = peak->bf16, fp32 = peak->fp32, tf32 = peak->tf32;
    source = fmt::format("the {}'s dense peaks", peak->model);
  }
  // Per level: how far toward the peak ratio a GEMM gets (half; a quarter; 86 %), what a kernel
  // over fp32 data keeps of its time (60 %: half the bytes, autocast keeps softmax, norms and the
  // loss in fp32; 90 %; 50 %), what cuDNN's fp32 batch norm becomes (PyTorch runs a bf16 batch norm
  // in its own kernels, not cuDNN's: 1.35x the time, measured on an H200 with torch 2.11 and cuDNN
  // 9.19, docs/gpu-validation.md; 1.5x; unchanged), and the launches a GEMM's input casts add (1; 2; 0).
  const double toward[3] = {0.5, 0.25, 0.86}, keeps[3] = {0.6, 0.9, 0.5}, norm[3] = {1.35, 1.5, 1.0},
               casts[3] = {1, 2, 0};
  const int64_t launch_ns = MedianLaunchCallNs(g);
  // A GEMM whose FLOPs are known and that ran at half its math's peak or more is compute-bound: it
  // runs at 75 % of the bf16 peak (50 %; 90 %), not faster than the peaks' ratio.
  const LaunchCosts& cost = CostPerLaunch(g);
  ComputeBound bound;
  AddLevels(p, g, [&](int k, Edits& e) {
    const auto speed = [&](std::vector<size_t>& tasks, double ratio) {
      const double s = 1.0 + (std::max(1.0, ratio) - 1.0) * toward[k];
      for (size_t i : tasks) {
        e.Scale(i, bound.Scale(g, i, k, cost, bf16 / std::max(1.0, ratio), bf16, s));
        // The host slice that launched the GEMM: its launch call's first slice (-1: none in the graph).
        const int32_t call = g.links().work[static_cast<size_t>(g.tasks()[i].work)].call;
        if (call < 0 || casts[k] == 0) continue;
        if (const int32_t slice = g.CallTask(call); slice >= 0)
          e.Add(static_cast<size_t>(slice), static_cast<int64_t>(casts[k] * static_cast<double>(launch_ns)));
      }
    };
    speed(gemm_fp32, bf16 / fp32);
    speed(gemm_tf32, bf16 / tf32);
    for (size_t i : elementwise) e.Scale(i, static_cast<float>(keeps[k]));
    for (size_t i : batch_norm) e.Scale(i, static_cast<float>(norm[k]));
  });
  p.assumptions = fmt::format(
      "autocast to bf16: {} FP32 and {} TF32 GEMM/convolution kernels run on bf16 tensor cores, halfway to the peak "
      "ratio ({:.1f}x and {:.1f}x from {}; a quarter of the way, or 86 % of it), none under 2 us; {} kernels over fp32 "
      "data keep 60 % of their time (half the bytes; autocast keeps softmax, norms and the loss in fp32: 90 %, or 50 %); "
      "each GEMM's input casts add one launch on the host ({:.1f} us; two, or none); {} cuDNN batch-norm kernels take "
      "1.35x their time (PyTorch runs a bf16 batch norm in its own kernels, not cuDNN's: measured on one H200; 1.5x, "
      "or unchanged). Kernels whose names do not say fp32 are left as they are",
      gemm_fp32.size(), gemm_tf32.size(), bf16 / fp32, bf16 / tf32, source, elementwise.size(),
      static_cast<double>(launch_ns) / 1e3, batch_norm.size());
  p.assumptions += bound.Text(g, "their math's peak", "bf16");
  return p;
}

// What inductor regenerates: fusable kernels (elementwise, reductions, norms, indexing) and cuDNN's
// batch norm (decomposed in training), launched outside the optimizer's step and zero_grad
// (torch.compile(model) compiles the module; the optimizer's foreach kernels stay eager).
std::vector<uint8_t> RegeneratedKernels(const RankGraph& g, const std::vector<uint8_t>& in_optimizer) {
  const auto& links = g.links();
  std::vector<uint8_t> out(g.tasks().size(), 0);
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    const Event* w = WorkOf(g, t);
    if (w == nullptr || w->kind != EventKind::kKernel || g.StepOf(static_cast<int32_t>(i)) < 0) continue;
    const HostCall* c = links.CallOf(links.work[static_cast<size_t>(t.work)]);
    if (c == nullptr || c->kind != CallKind::kLaunch) continue;
    if (t.frame >= 0 && in_optimizer[static_cast<size_t>(t.frame)]) continue;
    out[i] = links.kernel_names->Fusable(w->name) || links.kernel_names->CudnnBatchNorm(w->name);
  }
  return out;
}

// Runs of regenerated kernels: per stream, consecutive ones of one step launched from one thread;
// a lone kernel is a run of one (inductor regenerates it too, fused with nothing).
std::vector<std::vector<size_t>> FusableRuns(const RankGraph& g, const std::vector<uint8_t>& regenerated) {
  const auto& links = g.links();
  std::vector<std::vector<size_t>> runs;
  std::vector<size_t> run;
  int64_t run_stream = -1;
  int32_t run_step = -1;
  uint32_t run_thread = UINT32_MAX;
  const auto close = [&] {
    if (!run.empty()) runs.push_back(run);
    run.clear();
  };
  for (size_t i = 0; i < g.tasks().size(); ++i) {  // device tasks are in stream, then time order
    const auto& t = g.tasks()[i];
    if (WorkOf(g, t) == nullptr) continue;
    if (!regenerated[i]) {
      close();
      continue;
    }
    const DeviceWork& dw = links.work[static_cast<size_t>(t.work)];
    const HostCall* c = links.CallOf(dw);
    const int32_t step = g.StepOf(static_cast<int32_t>(i));
    if (dw.stream != run_stream || step != run_step || c->track != run_thread) close();
    run_stream = dw.stream, run_step = step, run_thread = c->track;
    run.push_back(i);
  }
  close();
  return runs;
}

// The host side of torch.compile(model) (measured on an H200 with torch 2.11, 2026-11-28: timm's ViT-S
// and torchvision's ResNet-18, eager against compiled, both recorded; docs/gpu-validation.md): the
// compiled region's generated code replaces the model's forward and backward on the host. It
// launched about as many kernels as the eager model (ViT 685 launches a step against 773), at about
// twice an eager elementwise op's host time each (ViT 42 us against 21, ResNet 41 against 15-20:
// Triton's launcher, the wrapper's allocations, the guards); what it saves is the rest (5 000 eager
// ops a step became 2 400). Counted here as one kernel a run plus one at each reduction or norm in
// it, 3.3x the median eager fused op each (3.27x on both models: the count is under inductor's, the
// multiple makes it up). The ops that launched a kept kernel (GEMMs, convolutions, attention,
// copies) stay, called from the generated code, as does what `optimizer` (OptimizerFrames) marks.
struct CompiledHost {
  std::vector<size_t> replaced;  // host tasks the compiled code replaces
  std::vector<size_t> launches;  // per generated kernel launched from a replaced op: its launch's first slice
  size_t generated = 0;          // the kernels the compiled code launches in the steps, as counted here
  int64_t replaced_ns = 0;
  int64_t op_ns = 0;  // an eager fused op's host time: the median of the replaced ops that launched only regenerated kernels
  std::string op_source;
};
CompiledHost CompiledHostOf(const RankGraph& g, const std::vector<std::vector<size_t>>& runs,
                            const std::vector<uint8_t>& optimizer) {
  const auto& links = g.links();
  const OpKernels ops = OpKernelsOf(g, runs);
  const std::vector<uint8_t> accumulate =
      g.FramesUnder([](std::string_view n) { return n.find("AccumulateGrad") != std::string_view::npos; });
  const std::vector<uint8_t> module = g.FramesUnder([](std::string_view n) { return n.starts_with("nn.Module: "); });
  const std::vector<uint8_t> data = g.FramesInPhase(kData), backward = g.FramesInPhase(kBackward);
  const bool has_modules = std::find(module.begin(), module.end(), 1) != module.end();
  // The threads that launched regenerated kernels: the model's forward and backward run there.
  std::vector<uint32_t> threads;
  for (const auto& r : runs)
    for (size_t i : r)
      if (const HostCall* c = links.CallOf(links.work[static_cast<size_t>(g.tasks()[i].work)]);
          std::find(threads.begin(), threads.end(), c->track) == threads.end())
        threads.push_back(c->track);
  CompiledHost out;
  std::vector<uint8_t> replaced_frame(g.frames().size(), 0);
  std::vector<int64_t> fused_ops;
  std::vector<uint8_t> seen(g.frames().size(), 0);
  for (size_t i = 0; i < g.tasks().size(); ++i) {
    const auto& t = g.tasks()[i];
    if ((t.kind != Kind::kHost && t.kind != Kind::kBetweenOps) || t.frame < 0 || g.StepOf(static_cast<int32_t>(i)) < 0)
      continue;
    const auto f = static_cast<size_t>(t.frame);
    if (optimizer[f] || accumulate[f] || data[f]) continue;
    if (std::find(threads.begin(), threads.end(), t.track) == threads.end()) continue;
    // In the model: under its modules' ranges or in the backward; where no module range was recorded
    // (torch.profiler without with_modules), the ops that launched regenerated kernels only.
    const int32_t op = ops.outermost[f];
    const int8_t fused = op >= 0 ? ops.regenerated_only[static_cast<size_t>(op)] : -1;
    if (fused == 0 || !(module[f] || backward[f] || (!has_modules && fused == 1))) continue;
    out.replaced.push_back(i);
    out.replaced_ns += t.dur;
    replaced_frame[f] = 1;
    if (fused == 1 && !seen[static_cast<size_t>(op)]) {
      seen[static_cast<size_t>(op)] = 1;
      fused_ops.push_back(g.frames()[static_cast<size_t>(op)].op->dur_ns);
    }
  }
  // The kernels the compiled code launches: one a run, and one more at each reduction or norm in it
  // (where inductor mostly ends a kernel), each launched where the eager kernel was.
  for (const auto& r : runs)
    for (size_t n = 0; n < r.size(); ++n) {
      const Event* w = WorkOf(g, g.tasks()[r[n]]);
      if (n > 0 && !links.kernel_names->Reduction(w->name) && !links.kernel_names->CudnnBatchNorm(w->name)) continue;
      ++out.generated;
      // Its launch call's first slice (-1: none in the graph).
      const int32_t call = links.work[static_cast<size_t>(g.tasks()[r[n]].work)].call;
      const int32_t slice = call >= 0 ? g.CallTask(call) : -1;
      if (slice >= 0 && replaced_frame[static_cast<size_t>(g.tasks()[static_cast<size_t>(slice)].frame)])
        out.launches.push_back(static_cast<size_t>(slice));
    }
  if (!fused_ops.empty()) {
    out.op_ns = Quantile(fused_ops, 0.5);
    out.op_source = fmt::format("the median of the {} eager ops it fuses", fused_ops.size());
  } else {
    // An eager elementwise op took 3.1x (ViT) and 3.3x (ResNet) the median launch call on the H200.
    out.op_ns = static_cast<int64_t>(3.0 * static_cast<double>(MedianLaunchCallNs(g)));
    out.op_source = "no fused op recorded: 3x the median launch call";
  }
  return out;
}

// compile.not_compiled: torch.compile (inductor) regenerates the model's memory-bound kernels as
// Triton kernels: each run of consecutive ones on a stream becomes one kernel that reads the run's
// inputs and writes its outputs once, at the bandwidth a generated kernel reaches (an eager kernel
// far from its memory roofline, such as a batch norm over NCHW, is replaced by one near it); cuDNN's
// layout conversions around convolutions go (inductor lays convolutions out channels-last); the
// ops that launched the fused-away kernels no longer run eagerly on the host.
// One level k of compile_fusion's edits: each run fused, the layout conversions gone where the
// level says so, the compiled code's host time in place of the eager ops it replaces.
Edits FusionLevel(const RankGraph& g, const std::vector<std::vector<size_t>>& runs, const std::vector<double>& bytes,
                  double gbps, const std::vector<size_t>& layout, const CompiledHost& host, int k) {
  // Per level: what the fused kernel keeps of the run's time (half: each intermediate is written
  // and read once less; 80 %; 30 %); the share of the memory bandwidth a generated kernel reaches
  // (half; a quarter; 80 %); whether the layout conversions go (yes; no: the layout optimization
  // declined; yes); the generated code's host time per kernel it launches, in eager fused ops' host
  // time (CompiledHostOf: 3.3x an eager fused op's median host time; 4.6x; 2.3x).
  const double keeps[3] = {0.5, 0.8, 0.3}, bandwidth[3] = {0.5, 0.25, 0.8}, per_kernel[3] = {3.3, 4.6, 2.3};
  const bool layout_goes[3] = {true, false, true};
  Edits e(g.tasks().size());
  for (const auto& r : runs) {
    // Each kernel's time at the generated kernel's bandwidth where that is shorter (its bytes known).
    double sum = 0, longest = 0, first = 1;
    for (size_t n = 0; n < r.size(); ++n) {
      double d = static_cast<double>(g.tasks()[r[n]].dur);
      if (n == 0) first = std::max(1.0, d);
      if (bytes[r[n]] > 0) d = std::min(d, bytes[r[n]] / (bandwidth[k] * gbps));
      sum += d;
      longest = std::max(longest, d);
    }
    const double fused_ns = r.size() >= 2 ? std::max(longest, sum * keeps[k]) : sum;
    e.Scale(r.front(), static_cast<float>(fused_ns / first));
    for (size_t n = 1; n < r.size(); ++n) e.Scale(r[n], 0.0f);
  }
  if (layout_goes[k])
    for (size_t i : layout) e.Scale(i, 0.0f);
  for (size_t i : host.replaced) e.Scale(i, 0.0f);
  for (size_t i : host.launches) e.Add(i, static_cast<int64_t>(per_kernel[k] * static_cast<double>(host.op_ns)));
  return e;
}

// The tallies compile_fusion's words report.
struct FusionTally {
  size_t regenerated = 0, floored = 0, fused_runs = 0, layout = 0;
  int64_t before_ns = 0, layout_ns = 0;
  double floored_ns = 0, roofline_ns = 0, gbps = 0, steps = 1;
  std::string device;
};
std::string FusionAssumptions(const FusionTally& t, const CompiledHost& host) {
  std::string a = fmt::format(
      "torch.compile regenerates the model's {} elementwise, reduction and norm kernels ({:.2f} ms a step; cuDNN's "
      "batch norm included, the optimizer's kernels not: torch.compile(model) leaves the optimizer eager), fusing each of "
      "{} runs of consecutive ones on a stream into one kernel that keeps half the run's time (80-30 %: intermediates are "
      "no longer written and read back), none shorter than the run's longest",
      t.regenerated, static_cast<double>(t.before_ns) / 1e6 / t.steps, t.fused_runs);
  if (t.floored > 0)
    a += fmt::format(
        "; {} of them have bytes from their ops' recorded shapes ({:.2f} ms a step, {:.2f} ms at the {}'s {:.0f} GB/s): "
        "each runs at half that bandwidth where that is faster (a quarter, or 80 %), as a generated kernel does",
        t.floored, t.floored_ns / 1e6 / t.steps, t.roofline_ns / 1e6 / t.steps, t.device, t.gbps);
  else
    a += t.gbps > 0 ? "; no kernel's bytes are known (no input shapes recorded): an eager kernel far from the memory "
                      "bandwidth keeps its time"
                    : "; the device's memory bandwidth is unknown: an eager kernel far from it keeps its time";
  if (t.layout > 0)
    a += fmt::format(
        "; cuDNN's {} layout conversions around convolutions ({:.2f} ms a step) go: inductor lays convolutions out "
        "channels-last (they stay at the least saving)",
        t.layout, static_cast<double>(t.layout_ns) / 1e6 / t.steps);
  a += fmt::format(
      "; on the host, the compiled code replaces the model's forward and backward ({:.2f} ms a step: Python between "
      "the modules' ops, the ops whose kernels it regenerates, views and allocations, the autograd engine's work per "
      "node) with its own calls: {:.0f} generated kernels a step (one a run of fused kernels, one more at each "
      "reduction or norm in it), each costing 3.3x an eager fused op's host time ({:.1f} us, {}; 4.6x, or 2.3x: "
      "Triton's launcher, the allocations and guards around it, and the kernels a run splits into beyond those; "
      "fitted on one H200 with a ViT and a ResNet, 3.27x both); the ops that launch GEMMs, convolutions and "
      "attention keep their time, as do the optimizer, AccumulateGrad, data loading and the loop's code outside "
      "the model; GEMMs and convolutions keep their device time, and the first steps' compile time is not counted "
      "(compile.time)",
      static_cast<double>(host.replaced_ns) / 1e6 / t.steps, static_cast<double>(host.generated) / t.steps,
      static_cast<double>(host.op_ns) / 1e3, host.op_source);
  return a;
}

TransformPlan CompileFusion(const RankGraph& g) {
  if (g.links().work.empty()) {  // a CPU-only rank: inductor fuses CPU ops too, into C++/OpenMP loops
    TransformPlan p;
    p.not_predictable = "no device kernels in this trace: on a CPU, inductor fuses the ops themselves into generated "
                        "C++/OpenMP loops, and what that gains depends on the code it generates, which the trace does "
                        "not hold";
    return p;
  }
  const std::vector<uint8_t> optimizer = OptimizerFrames(g);
  const std::vector<std::vector<size_t>> runs = FusableRuns(g, RegeneratedKernels(g, optimizer));
  std::vector<size_t> layout;  // cuDNN's layout conversions in the steps
  for (size_t i = 0; i < g.tasks().size(); ++i)
    if (const Event* w = WorkOf(g, g.tasks()[i]); w != nullptr && w->kind == EventKind::kKernel &&
                                                   g.StepOf(static_cast<int32_t>(i)) >= 0 &&
                                                   g.links().kernel_names->LayoutConversion(w->name))
      layout.push_back(i);
  FusionTally t;
  for (const auto& r : runs) t.fused_runs += r.size() >= 2;
  // The bandwidth a generated kernel reaches, where the device and the kernels' bytes are known.
  const auto peak = PeakOfRank(g.trace(), g.links().rank);
  const double gbps = peak ? peak->memory_gbps : 0;  // bytes per ns
  t.gbps = gbps;
  t.device = peak ? peak->model : "";
  const LaunchCosts& cost = gbps > 0 ? CostPerLaunch(g) : kNoLaunchCosts;
  std::vector<double> bytes(g.tasks().size(), 0.0);  // per regenerated task: its launch's bytes (0: unknown)
  for (const auto& r : runs) {
    t.regenerated += r.size();
    for (size_t i : r) {
      t.before_ns += g.tasks()[i].dur;
      if (const auto b = cost.find(WorkOf(g, g.tasks()[i])->name); b != cost.end() && b->second.bytes > 0) {
        bytes[i] = b->second.bytes;
        ++t.floored;
        t.floored_ns += static_cast<double>(g.tasks()[i].dur);
        t.roofline_ns += bytes[i] / gbps;
      }
    }
  }
  t.layout = layout.size();
  for (size_t i : layout) t.layout_ns += g.tasks()[i].dur;
  if (t.fused_runs == 0 && layout.empty() && t.floored == 0)
    return NoSaving(g, gbps > 0 ? "no run of two or more consecutive elementwise, reduction or norm kernels, no layout "
                                  "conversion and no such kernel whose bytes are known in the steps: nothing for "
                                  "inductor to fuse"
                                : "no run of two or more consecutive elementwise, reduction or norm kernels and no layout "
                                  "conversion in the steps, and the device's memory bandwidth is unknown (the trace "
                                  "names no device the table has): how far a lone kernel is from it cannot be told");
  const CompiledHost host = CompiledHostOf(g, runs, optimizer);
  TransformPlan p;
  for (int k = 0; k < 3; ++k) p.levels.push_back(FusionLevel(g, runs, bytes, gbps, layout, host, k));
  t.steps = g.steps();
  p.assumptions = FusionAssumptions(t, host);
  return p;
}

}  // namespace trainrx::analyzers
