// precision.fp32_matmul and precision.matmul_alignment: matrix multiplies that miss the tensor
// cores of the GPU they ran on.
//
// precision.fp32_matmul: an Ampere-or-newer GPU (deviceProperties computeMajor >= 8, else kernel
// names that say so: "ampere_...", "sm80_...", "sm90_...") runs GEMM / convolution kernels in full
// FP32 on the CUDA cores: TF32 is off. PyTorch leaves it off for matmuls by default since 1.12
// (torch.backends.cuda.matmul.allow_tf32 = False; cuDNN convolutions default to TF32 on). The
// kernel name says which math ran; the names below are cuBLAS / cuDNN / CUTLASS conventions:
//   FP32 on CUDA cores   "ampere_sgemm_128x64_tn", "cutlass_80_simt_sgemm_...",
//                        "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_...", "implicit_convolve_sgemm<float..."
//   TF32 tensor cores    "ampere_tf32_s1688gemm_...", "sm80_xmma_gemm_f32f32_tf32f32_f32_...",
//                        "cutlass_80_tensorop_s1688gemm_..."
//   16-bit / int8        "..._f16f16_...", "..._bf16...", "h1688gemm", "hmma", "i8", ...
// Anything else that is GEMM-like stays unclassified (never counted as FP32): a guess here would
// tell users to flip a numerics switch for nothing. Never on CPU-only traces (no GPU kernels).
// TorchTidy's FP32MatMulPattern instead reads the analyzing process's torch.cuda.get_arch_list():
// on a CPU-only torch that list is empty, all() of it is true, and it flags every aten::mm.
//
// precision.matmul_alignment: mm / bmm / addmm / baddbmm / linear / matmul (the innermost one
// with recorded shapes) with 16-bit inputs ("Input type" c10::BFloat16 / c10::Half) and an M, K or N from
// "Input Dims" that is not a multiple of 8: tensor-core GEMMs want 16-byte aligned rows (NVIDIA's
// matrix-multiplication performance guide; TorchTidy MatMulDimInFP16). On a GPU the op's kernels
// (by External id) give the time at stake. On a CPU-only trace there are no tensor cores; whether
// the CPU's bf16 path (AMX tiles, AVX512-BF16) cares cannot be told from a trace, so the finding is
// reported at severity "info" with no saving: the shapes are the model's, and they will matter on
// the GPU the model is headed for.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>

#include "by_name.h"
#include "families.h"
#include "links.h"
#include "scopes.h"
#include "intervals.h"
#include "ops.h"
#include "runtime_names.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

// Assumed speed-up of the fixed kernels, for the saving estimate. TF32: NVIDIA quotes 8x peak on
// A100 (156 vs 19.5 TFLOPS) and PyTorch's CUDA notes measure a 10240^2 matmul 0.11 s -> 0.016 s
// (6.9x); small or memory-bound GEMMs gain far less, so we assume 2x. Alignment: unaligned 16-bit
// GEMMs fall back to narrower (align1/align2) or CUDA-core kernels; 2x again, not measured here.
constexpr double kAssumedSpeedup = 2.0;

bool Has(const std::string& s, std::string_view p) { return s.find(p) != std::string::npos; }

bool IsConvKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  return Has(n, "conv") || Has(n, "fprop") || Has(n, "dgrad") || Has(n, "wgrad") ||
         CudnnCudaCoreConvAt(n) != std::string::npos;
}

// Compute capability major from an architecture-tagged kernel name ("ampere_sgemm..." -> 8,
// "sm90_xmma..." -> 9); 0 when the name does not say.
int ArchFromKernelName(std::string_view name) {
  if (StartsWith(name, "void ")) name.remove_prefix(5);
  if (StartsWith(name, "ampere_")) return 8;
  if (StartsWith(name, "hopper_")) return 9;
  if (StartsWith(name, "sm") && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[2])) &&
      std::isdigit(static_cast<unsigned char>(name[3]))) {
    size_t i = 2;
    int v = 0;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) v = v * 10 + (name[i++] - '0');
    if (i < name.size() && std::isalpha(static_cast<unsigned char>(name[i]))) ++i;  // "sm90a_"
    if (i < name.size() && name[i] == '_') return v / 10;
  }
  return 0;
}

std::string Shorten(std::string_view s, size_t n = 90) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

// The four kernels of `kernels` with the most time, each with the CPU op that launched it (by
// Kineto External id, the dependency model) and its module: "3 x sgemm_... <- aten::mm in Net.fc (1.20 ms)".
std::vector<std::string> TopKernels(const AnalysisContext& ctx, int32_t rank, const std::vector<const Event*>& kernels) {
  const Trace& trace = ctx.trace;
  std::map<std::string, std::pair<int64_t, int64_t>> examples;  // kernel (op) -> (count, ns)
  const RankLinks* links = ctx.links.Rank(rank);
  for (const Event* e : kernels) {
    const Event* op = links && e->external_id != profiler::kNoId ? links->OpByExternalId(e->external_id) : nullptr;
    auto& slot = examples[op ? fmt::format("{} <- {}{}", Shorten(trace.Name(*e), 70), trace.Name(*op), InModule(ctx.modules.Of(*op)))
                             : fmt::format("{} <- (no CPU op)", Shorten(trace.Name(*e), 70))];
    ++slot.first;
    slot.second += e->dur_ns;
  }
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [k, v] : examples) ranked.push_back({-v.second, fmt::format("{} x {} ({:.2f} ms)", v.first, k, v.second / 1e6)});
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (size_t k = 0; k < ranked.size() && k < 4; ++k) out.push_back(ranked[k].second);
  return out;
}

// The rank's devices' compute capability majors from its deviceProperties (device -> major), and
// where an Ampere-or-newer one was named (`arch_source`, "" when none was).
std::map<int32_t, int> DeviceMajors(const Trace& trace, int32_t rank, std::string& arch_source) {
  std::map<int32_t, int> major;
  if (const auto* info = trace.FindRank(rank)) {
    for (const auto& d : info->devices) {
      major[d.id] = d.compute_major;
      if (d.compute_major >= 8 && arch_source.empty())
        arch_source = fmt::format("deviceProperties: {} sm_{}{}", d.name, d.compute_major, d.compute_minor);
    }
  }
  return major;
}

void Fp32Matmul(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const Trace& trace = ctx.trace;
  std::string arch_source;
  const std::map<int32_t, int> major = DeviceMajors(trace, rank, arch_source);  // which devices are Ampere or newer
  int64_t kernel_ns = 0, kernels = 0, fp32_ns = 0, fp32_n = 0, fp32_conv_ns = 0, tf32_n = 0;
  std::vector<const Event*> fp32_kernels;
  const StepWindows in_steps(ctx.steps, rank);
  // A kernel name's math (GemmMath, bits 0-1) and whether it is a convolution (bit 2), told once a
  // name: a step launches the same kernels (a lowercase copy and a dozen searches per kernel, with
  // the kernel-id map MatmulAlignment made, were 8 % of a 256-rank set's analysis rank by rank).
  constexpr uint8_t kConv = 4;
  ByName gemm(trace, [](std::string_view n) {
    return static_cast<uint8_t>(static_cast<uint8_t>(ClassifyGemmKernel(n)) | (IsConvKernel(n) ? kConv : 0));
  });
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kGpuStream)) {
    const auto& t = trace.tracks[ti];
    auto it = major.find(t.device);
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kKernel || !in_steps.Contains(e.ts_ns)) continue;
      ++kernels;
      kernel_ns += e.dur_ns;
      const std::string_view name = trace.Name(e);
      int cc = it != major.end() ? it->second : 0;
      if (it == major.end()) {  // no deviceProperties for this device: the kernel name may say
        cc = ArchFromKernelName(name);
        if (cc >= 8 && arch_source.empty()) arch_source = "kernel names (" + Shorten(name, 40) + ")";
      }
      if (cc < 8) continue;
      const uint8_t kind = gemm(e);
      const auto m = static_cast<GemmMath>(kind & 3);
      if (m == GemmMath::kTf32) ++tf32_n;
      if (m != GemmMath::kFp32) continue;
      ++fp32_n;
      fp32_ns += e.dur_ns;
      if ((kind & kConv) != 0) fp32_conv_ns += e.dur_ns;
      fp32_kernels.push_back(&e);
    }
  }
  if (fp32_n == 0 || kernel_ns <= 0) return;
  const double share_pct = 100.0 * static_cast<double>(fp32_ns) / static_cast<double>(kernel_ns);
  const double threshold = ctx.thresholds.Get("precision.fp32_matmul.kernel_share_pct");
  if (share_pct < threshold) return;
  const bool conv_only = fp32_conv_ns == fp32_ns;
  Finding f;
  f.id = "precision.fp32_matmul";
  f.rank = rank;
  f.severity = share_pct >= 25 ? Severity::kMedium : Severity::kLow;
  // cuDNN may pick a CUDA-core convolution even with TF32 allowed (small channel counts): a
  // conv-only finding is weaker than a GEMM one (cuBLAS never uses TF32 unless allowed).
  f.confidence = conv_only ? Confidence::kLow : Confidence::kHigh;
  f.title = fmt::format("FP32 {} on an Ampere-or-newer GPU without TF32 ({:.0f}% of kernel time)",
                        conv_only ? "convolutions" : "matmuls", share_pct);
  f.measured = share_pct;
  f.threshold = threshold;
  f.measured_unit = "% of GPU kernel time in FP32 GEMM/conv kernels";
  const StepBasis basis(ctx.steps, rank);
  f.evidence = {{"fp32_gemm_kernels", fp32_n},
                {"fp32_gemm_ns", fp32_ns},
                {"fp32_conv_ns", fp32_conv_ns},
                {"tf32_kernels", tf32_n},
                {"gpu_kernels", kernels},
                {"gpu_kernel_ns", kernel_ns},
                {"architecture", arch_source}};
  f.examples = TopKernels(ctx, rank, fp32_kernels);
  if (basis.has_steps()) {
    // These kernels' time x (1 - 1/2): at most the kernels' own time, and it shortens the step
    // only where the GPU is the bottleneck (gpu.idle says when it is not).
    const double per_step = basis.Per(fp32_ns);
    SetSaving(f, basis, per_step * (1.0 - 1.0 / kAssumedSpeedup), per_step, "FP32 GEMM/conv kernel time");
    f.examples.push_back("estimate: FP32 GEMM/conv kernel time per step x (1 - 1/2), assuming TF32 runs them 2x faster "
                         "(A100 peak: 8x); upper bound, reached only when the GPU is the bottleneck");
  }
  SetFix(f, conv_only ? "conv" : "matmul");
  out.findings.push_back(std::move(f));
}

bool IsPrimitiveGemm(std::string_view n) {
  return n == "aten::mm" || n == "aten::bmm" || n == "aten::addmm" || n == "aten::baddbmm" || n == "aten::addbmm" ||
         n == "aten::_addmm_activation";
}
bool IsCompositeGemm(std::string_view n) { return n == "aten::linear" || n == "aten::matmul"; }

// addmm / baddbmm / addbmm / _addmm_activation take (bias, a, b): their matrices start at input 1.
bool GemmHasBias(std::string_view op) {
  return op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::addbmm" || op == "aten::_addmm_activation";
}

struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
};

// "M=10 N=30": the dimensions that are not a multiple of 8 ("" none).
std::string UnalignedDims(const GemmShape& s) {
  std::string bad;
  for (const auto& [label, v] : {std::pair<const char*, int64_t>{"M", s.m}, {"K", s.k}, {"N", s.n}})
    if (v % 8 != 0) bad += fmt::format("{}{}={}", bad.empty() ? "" : " ", label, v);
  return bad;
}

// The kernel time of each of `ids` (External ids: the CPU ops that launched the kernels), and
// whether any kernel carried it; `has_gpu`: the rank ran a kernel. One pass over the rank's
// kernels, a binary search each only where ids were asked.
struct KernelTimeOf {
  std::vector<int64_t> ids;      // sorted, unique
  std::vector<int64_t> ns;       // per id
  std::vector<uint8_t> matched;  // per id: a kernel carried it
  bool has_gpu = false;
  // The kernel time of `id` (one of ids), nullopt where no kernel carried it.
  std::optional<int64_t> Of(int64_t id) const {
    const auto k = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
    return k < ids.size() && ids[k] == id && matched[k] ? std::optional<int64_t>(ns[k]) : std::nullopt;
  }
};
KernelTimeOf KernelTimeByExternalId(const Trace& trace, int32_t rank, std::vector<int64_t> ids) {
  KernelTimeOf out;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  out.ids = std::move(ids);
  out.ns.assign(out.ids.size(), 0);
  out.matched.assign(out.ids.size(), 0);
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kGpuStream)) {
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kKernel) continue;
      out.has_gpu = true;
      if (out.ids.empty() || e.external_id == profiler::kNoId) continue;
      const auto it = std::lower_bound(out.ids.begin(), out.ids.end(), e.external_id);
      if (it == out.ids.end() || *it != e.external_id) continue;
      const auto k = static_cast<size_t>(it - out.ids.begin());
      out.ns[k] += e.dur_ns;
      out.matched[k] = 1;
    }
  }
  return out;
}

// Whether a GEMM op with recorded shapes runs inside op i (a GEMM is judged once, at the innermost
// one with shapes: Kineto records the addmm inside linear, and autocast's inner linear inside the
// outer one; our collector records the linear only).
bool HasShapedGemmInside(const Trace& trace, EventSpan events, size_t i) {
  const size_t end = SubtreeEnd(events, i);
  for (size_t j = i + 1; j < end; ++j) {
    const std::string_view n = trace.Name(events[j]);
    if (events[j].kind == EventKind::kCpuOp && (IsPrimitiveGemm(n) || IsCompositeGemm(n)) && OpDims(trace, events[j]).has_value())
      return true;
  }
  return false;
}

// The rank's steps that hold at least one of the instants `ts`.
int64_t StepsHolding(const StepModel& steps, int32_t rank, std::vector<int64_t> ts) {
  std::sort(ts.begin(), ts.end());
  int64_t n = 0;
  for (const auto& st : steps.steps) {
    if (st.rank != rank) continue;
    auto it = std::lower_bound(ts.begin(), ts.end(), st.start_ns);
    if (it != ts.end() && *it < st.start_ns + st.wall_ns) ++n;
  }
  return n;
}

// M, K, N of a GEMM op from its input dims; nullopt when the operands are not matrices.
// mm / bmm / matmul (a, b): a [..., M, K], b [..., K, N]; addmm / baddbmm / addbmm (bias, a, b);
// linear (x, weight, bias): x [..., K], weight [N, K], M = product of x's leading dims.
std::optional<GemmShape> ShapeOf(std::string_view op, const Dims& d) {
  const size_t ia = GemmHasBias(op) ? 1 : 0, ib = ia + 1;
  if (d.size() <= ib) return std::nullopt;
  const auto& a = d[ia];
  const auto& b = d[ib];
  GemmShape s;
  if (op == "aten::linear") {
    if (a.empty() || b.size() != 2) return std::nullopt;
    s.m = 1;
    for (size_t i = 0; i + 1 < a.size(); ++i) s.m *= a[i];
    s.k = a.back();
    s.n = b[0];
    return s;
  }
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  s.m = a[a.size() - 2];
  s.k = a.back();
  s.n = b.back();
  return s;
}

// The rank's 16-bit GEMMs in its steps with a dimension that is not a multiple of 8 (each judged
// once, at the innermost GEMM op with shapes), their host time and External ids (their kernels'
// time is looked up after, for them alone), and the GEMM ops with recorded shapes of any type
// (which steps recorded shapes).
struct UnalignedGemms {
  int64_t ops = 0, op_ns = 0, half_gemms = 0;
  std::map<std::string, int64_t> shapes;  // "aten::mm M=16 K=10 N=32 c10::BFloat16 (...)" -> count
  std::vector<int64_t> shaped_ts;         // GEMM ops with recorded shapes, any dtype
  std::vector<int64_t> external_ids;      // per unaligned GEMM with one: its External id
};
UnalignedGemms ScanGemms(const Trace& trace, int32_t rank, const StepWindows& in_steps) {
  UnalignedGemms out;
  auto& [ops, op_ns, half_gemms, shapes, shaped_ts, external_ids] = out;
  ByName gemm(trace, [](std::string_view n) { return static_cast<uint8_t>(IsPrimitiveGemm(n) || IsCompositeGemm(n)); });
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
    const auto events = trace.TrackEvents(ti);
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (e.kind != EventKind::kCpuOp || !gemm(e) || !in_steps.Contains(e.ts_ns)) continue;
      const std::string_view name = trace.Name(e);
      if (HasShapedGemmInside(trace, events, i)) continue;
      const auto types = OpTypes(trace, e);
      const auto dims = OpDims(trace, e);
      if (!types || !dims) continue;
      shaped_ts.push_back(e.ts_ns);
      const size_t ia = GemmHasBias(name) ? 1 : 0;
      if (types->size() <= ia + 1 || !IsHalfType((*types)[ia]) || !IsHalfType((*types)[ia + 1])) continue;
      ++half_gemms;
      const auto s = ShapeOf(name, *dims);
      if (!s) continue;
      const std::string bad = UnalignedDims(*s);
      if (bad.empty()) continue;
      ++ops;
      op_ns += e.dur_ns;
      if (e.external_id != profiler::kNoId) external_ids.push_back(e.external_id);
      ++shapes[fmt::format("{} M={} K={} N={} {} (not a multiple of 8: {})", name, s->m, s->k, s->n, (*types)[ia], bad)];
    }
  }
  return out;
}

void MatmulAlignment(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const Trace& trace = ctx.trace;
  const StepWindows in_steps(ctx.steps, rank);
  UnalignedGemms scan = ScanGemms(trace, rank, in_steps);
  auto& [ops, op_ns, half_gemms, shapes, shaped_ts, external_ids] = scan;
  if (ops == 0) return;
  // Their kernels by External id (an op counts on the GPU where a kernel carried its id).
  const KernelTimeOf kernels = KernelTimeByExternalId(trace, rank, external_ids);
  const bool rank_has_gpu = kernels.has_gpu;
  int64_t gpu_ops = 0, kernel_ns = 0;
  for (const int64_t id : external_ids)
    if (const std::optional<int64_t> ns = kernels.Of(id)) ++gpu_ops, kernel_ns += *ns;
  // Per step over the steps that recorded GEMM shapes: all of them with record_shapes, the first
  // few with our collector (it stops capturing inputs after input_capture_steps, 3 by default).
  const int64_t shaped_steps = StepsHolding(ctx.steps, rank, std::move(shaped_ts));
  const double steps = std::max<double>(1.0, static_cast<double>(shaped_steps));
  const char* per = shaped_steps > 0 ? "per step" : "in the trace";  // no steps: totals
  const double per_step = static_cast<double>(ops) / steps;
  const double threshold = ctx.thresholds.Get("precision.matmul_alignment.min_per_step");
  if (per_step < threshold) return;
  const StepBasis basis(ctx.steps, rank);
  Finding f;
  f.id = "precision.matmul_alignment";
  f.rank = rank;
  const bool on_gpu = rank_has_gpu && gpu_ops > 0;
  f.measured = per_step;
  f.threshold = threshold;
  f.measured_unit = std::string("unaligned 16-bit GEMMs ") + per;
  f.evidence = {{"unaligned_gemms", ops},
                {"half_precision_gemms", half_gemms},
                {"steps_with_shapes", shaped_steps},
                {"unaligned_gemm_cpu_ns", op_ns},
                {"device", std::string(on_gpu ? "GPU (kernels by External id)" : rank_has_gpu ? "GPU trace, kernels not matched" : "CPU-only trace")}};
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [k, v] : shapes) ranked.push_back({-v, fmt::format("{:.1f} x {} {}", v / steps, k, per)});
  std::sort(ranked.begin(), ranked.end());
  for (size_t k = 0; k < ranked.size() && k < 4; ++k) f.examples.push_back(ranked[k].second);
  if (on_gpu) {
    f.evidence.push_back({"unaligned_gemm_kernel_ns", kernel_ns});
    f.severity = Severity::kLow;
    f.confidence = Confidence::kHigh;
    f.title = fmt::format("{:.0f} bf16/fp16 matmuls {} have a dimension that is not a multiple of 8 (tensor cores underused)",
                          per_step, per);
    if (basis.has_steps()) {
      const double k_per_step = static_cast<double>(kernel_ns) / steps;
      SetSaving(f, basis, k_per_step * (1.0 - 1.0 / kAssumedSpeedup), k_per_step, "kernel time of those GEMMs");
      if (f.estimated_saving_pct >= 5) f.severity = Severity::kMedium;
      f.examples.push_back("estimate: their kernels' time per step x (1 - 1/2), assuming aligned shapes run 2x faster; "
                           "at most the kernels' own time");
    }
  } else {
    // CPU: no tensor cores; see the file comment for why this is info with no saving.
    f.severity = Severity::kInfo;
    f.confidence = Confidence::kLow;
    f.title = fmt::format("{:.0f} bf16/fp16 matmuls {} have a dimension that is not a multiple of 8 "
                          "(CPU trace: matters on GPU tensor cores)", per_step, per);
    f.examples.push_back("no saving estimated on CPU: alignment is a tensor-core (GPU) requirement");
  }
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzePrecision(const AnalysisContext& ctx, Report& out) {
  for (int32_t rank : ctx.trace.RankIds()) {
    Fp32Matmul(ctx, rank, out);
    MatmulAlignment(ctx, rank, out);
  }
}

}  // namespace trainrx::analyzers
