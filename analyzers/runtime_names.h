// What a GPU runtime / driver call does, by name, for CUDA and HIP (ROCm) alike (private to
// analyzers/). Kineto records ROCm's HIP calls under the same categories as CUDA's
// (cuda_runtime / cuda_driver), so the name is all there is to go by.
//
// Sources: HTA's launch-event list (hta/common/trace_symbol_table.py,
// get_runtime_launch_events_mask: cudaLaunchKernel(ExC), cuLaunchKernel(Ex), cudaMemcpyAsync,
// cudaMemsetAsync, hipLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyAsync, hipMemsetAsync; MTIA's
// runFunction); Kineto's ROCm flow list (libkineto/src/RocprofActivity_inl.h: hipLaunchKernel,
// hipExtLaunchKernel, hipLaunchCooperativeKernel, hipHccModuleLaunchKernel, hipModuleLaunchKernel,
// hipExtModuleLaunchKernel, hipMemcpy, hipMemcpyAsync, hipMemcpyWithStream, hipGraphLaunch). HTA
// also lists hipMemcpyWithStream as a launch; it is not one here: it blocks the host until the copy
// is done (PyTorch's copy_ to or from the CPU with non_blocking=False), and on an MI300 inference
// trace its 46-928 µs calls made the mean "launch" 10-200x a real one (issue 12).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace trainrx::analyzers {

// Enqueues GPU work and returns: a kernel launch or an async copy / memset. Graph launches
// (cudaGraphLaunch, hipGraphLaunch) are not: one call runs many kernels, so per-kernel launch
// time and delay mean nothing for them.
inline bool IsLaunchCall(std::string_view n) {
  const bool cuda = n.substr(0, 4) == "cuda" || n.substr(0, 2) == "cu" || n.substr(0, 3) == "hip";
  if (!cuda)  // MTIA (HTA's launch list; its async copies are enqueued commands)
    return n == "runFunction - job_prep_and_submit_for_execution" || n == "enqueueCommand memcpyHtoDAsync" ||
           n == "enqueueCommand memcpyDtoHAsync";
  if (n.find("LaunchKernel") != std::string_view::npos || n.find("LaunchCooperativeKernel") != std::string_view::npos)
    return true;  // cudaLaunchKernel(ExC), cuLaunchKernel(Ex), hip(Ext)(Module)LaunchKernel, hipHccModuleLaunchKernel
  const bool copy_or_set = n.find("Memcpy") != std::string_view::npos || n.find("Memset") != std::string_view::npos;
  return copy_or_set && n.find("Async") != std::string_view::npos;  // cudaMemcpyAsync, hipMemsetAsync, cuMemcpyHtoDAsync_v2
}

// A copy call that returns only when the copy is done (its size is in the GPU memcpy record with
// the same correlation id).
inline bool IsSyncMemcpyCall(std::string_view n) {
  return n == "cudaMemcpy" || n == "cuMemcpyDtoH_v2" || n == "cuMemcpyHtoD_v2" || n == "hipMemcpy" ||
         n == "hipMemcpyWithStream" || n == "hipMemcpyDtoH" || n == "hipMemcpyHtoD";
}

// Blocks the host until the device (or a stream / event) catches up: a host-device sync.
inline bool IsBlockingCall(std::string_view n) {
  return IsSyncMemcpyCall(n) || n == "cudaStreamSynchronize" || n == "cudaDeviceSynchronize" ||
         n == "cudaEventSynchronize" || n == "cuStreamSynchronize" || n == "cuCtxSynchronize" ||
         n == "cuEventSynchronize" || n == "hipStreamSynchronize" || n == "hipDeviceSynchronize" ||
         n == "hipEventSynchronize" || n == "hipCtxSynchronize" || n == "synchronizeStream";  // the last: MTIA
}

// An op or call under which the host waits for a device value: a scalar read (`.item()`, `float(t)`,
// `bool(t)`, `torch.equal`) or a synchronization (what the unblock_syncs transform lifts).
inline bool IsScalarReadOrSync(std::string_view n) {
  return n == "aten::item" || n == "aten::_local_scalar_dense" || n == "aten::equal" || n == "aten::is_nonzero" ||
         n == "cudaDeviceSynchronize" || n == "cudaStreamSynchronize" || n == "hipDeviceSynchronize" ||
         n == "hipStreamSynchronize";
}

// Starts / ends recording a CUDA or HIP graph from a stream (torch.cuda.graph,
// mode="reduce-overhead"): between the two, launches are captured into the graph, not run.
inline bool IsCaptureBegin(std::string_view n) { return n.find("StreamBeginCapture") != std::string_view::npos; }
inline bool IsCaptureEnd(std::string_view n) { return n.find("StreamEndCapture") != std::string_view::npos; }

// A byte in ASCII lower case: what std::tolower does in the "C" locale trainrx runs in (it sets
// none), without a library call per byte (kernel names run to hundreds of bytes; the analysis
// lower-cased a few thousand of them).
constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Communication kernels: NCCL's (ncclKernel_*, and ncclDevKernel_* since NCCL 2.19, which the
// old "contains ncclKernel" test counted as compute) and RCCL's (ROCm), by prefix as HTA 0.6.1.
inline bool IsCommKernel(std::string_view name) {
  auto lower_prefix = [&](std::string_view p) {
    if (name.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
      if (AsciiLower(name[i]) != p[i]) return false;
    return true;
  };
  return lower_prefix("nccl") || lower_prefix("rccl");
}

// A gradient-reducing collective: all-reduce (DDP) or reduce-scatter (FSDP, ZeRO), as NCCL/RCCL
// kernels ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_ReduceScatter_...") or Gloo
// ranges ("gloo:all_reduce", "gloo:reduce_scatter") name them; not broadcasts, gathers or
// point-to-point sends (DDP's buffer broadcast, pipeline stages).
inline bool IsGradientReduction(std::string_view name) {
  std::string lower;
  lower.reserve(name.size());
  for (char ch : name)
    if (ch != '_') lower.push_back(AsciiLower(ch));
  return lower.find("allreduce") != std::string::npos || lower.find("reducescatter") != std::string::npos;
}

// `s` in ASCII lower case (kernel and runtime names).
inline std::string Lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

// cuDNN's CUDA-core convolution algorithms, whose kernel names say neither GEMM nor the math: the
// legacy weight- and data-gradient engines, FFT and Winograd convolutions (an H200 ran
// "wgrad_alg0_engine<float, ...>", "fft2d_r2c_32x32<float, ...>" and "fft2d_c2r_32x32" for an FP32
// ResNet with TF32 off, and tensor-core implicit GEMMs with it on: docs/gpu-validation.md,
// 2026-11-27). `lower` is the name in lower case; npos where it is none of them.
inline size_t CudnnCudaCoreConvAt(std::string_view lower) {
  for (std::string_view family : {"wgrad_alg", "dgrad_engine", "dgrad2d_alg", "wgrad2d", "fft2d_r2c", "fft2d_c2r",
                                  "fft1d_r2c", "fft1d_c2r", "fft2d_c2c", "winograd"})
    if (const size_t at = lower.find(family); at != std::string_view::npos) return at;
  return std::string_view::npos;
}

// The first template argument of the kernel whose identifier starts at `at` in `name`: demangled
// ("wgrad_alg0_engine<float, 128, ...>") or Itanium-mangled ("_Z17wgrad_alg0_engineIfLi128E...":
// the identifier's length, then I and the argument's code: f float, d double). 'f', 'd', 'o'
// (other: half, bfloat16, ...) or 0 where the name carries no template argument.
inline char FirstTemplateArg(std::string_view name, size_t at) {
  if (const size_t lt = name.find('<', at); lt != std::string_view::npos && name.find('(', at) > lt) {
    std::string_view arg = name.substr(lt + 1);
    while (!arg.empty() && arg.front() == ' ') arg.remove_prefix(1);
    if (arg.substr(0, 6) == "float," || arg.substr(0, 6) == "float>" || arg.substr(0, 6) == "float ") return 'f';
    if (arg.substr(0, 6) == "double") return 'd';
    return 'o';
  }
  size_t digits = at;
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  if (digits == at) return 0;
  size_t len = 0;
  for (size_t i = digits; i < at; ++i) len = len * 10 + static_cast<size_t>(name[i] - '0');
  const size_t end = at + len;
  if (end + 1 >= name.size() || name[end] != 'I') return 0;
  return name[end + 1] == 'f' ? 'f' : name[end + 1] == 'd' ? 'd' : 'o';
}

// Which math a GEMM / convolution kernel ran, by cuBLAS / cuDNN / CUTLASS naming (FP32 on CUDA cores
// "ampere_sgemm_...", "sm80_xmma_gemm_f32f32_f32f32_...", "..._ffma_..." xmma kernels, the complex
// FP32 GEMMs of an FFT convolution "sm80_xmma_gemm_cf32cf32_...", cuDNN's CUDA-core algorithms over
// float (above); TF32 tensor cores "..._tf32..._", "tensorop_s1688gemm"; 16-bit, 8-bit and 64-bit
// kernels are "other"); kNotGemm for anything else (matrix-vector kernels included: memory-bound, no
// tensor cores either way).
enum class GemmMath { kNotGemm, kFp32, kTf32, kOther };
inline GemmMath ClassifyGemmKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  const auto has = [&](std::string_view p) { return n.find(p) != std::string::npos; };
  if (const size_t at = CudnnCudaCoreConvAt(n); at != std::string::npos) {
    const char arg = FirstTemplateArg(name, at);
    if (arg == 'f') return GemmMath::kFp32;
    if (arg == 0 && !has("half") && !has("bfloat16") && !has("double") && has("float")) return GemmMath::kFp32;
    return GemmMath::kOther;
  }
  // cuBLAS's Hopper-JIT kernels ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT") are GEMMs
  // whose names do not say the data type (seen for bf16 on an H200, 2026-11-28): not FP32 evidence.
  if (has("nvjet")) return GemmMath::kOther;
  // ROCm's Tensile GEMMs (rocBLAS, hipBLASLt: "Cijk_Ailk_Bljk_SB_MT64x64x16_...") name no "gemm"
  // either: GEMMs of unread math, never fusable work.
  if (n.starts_with("cijk_")) return GemmMath::kOther;
  if (!has("gemm") && !has("conv") && !has("fprop") && !has("dgrad") && !has("wgrad")) return GemmMath::kNotGemm;
  if (has("gemv")) return GemmMath::kNotGemm;
  if (has("tf32")) return GemmMath::kTf32;
  if (has("f16") || has("half") || has("hgemm") || has("h1688") || has("h16816") || has("hmma") || has("i8") ||
      has("imma") || has("int8") || has("e4m3") || has("e5m2") || has("dgemm") || has("double") || has("complex") ||
      has("zgemm") || has("cgemm"))
    return GemmMath::kOther;
  if (has("tensorop_s")) return GemmMath::kTf32;  // CUTLASS sm80 "tensorop_s1688gemm": fp32 data, TF32 math
  if (has("sgemm") || has("f32f32_f32f32") || has("cf32cf32") || (has("xmma") && has("_ffma_")))
    return GemmMath::kFp32;
  return GemmMath::kOther;
}

// A kernel inductor would fuse with its neighbours: elementwise, reduction, normalization and
// indexing work (memory-bound), not a GEMM, convolution, attention or communication kernel.
inline bool IsFusableKernel(std::string_view name) {
  if (IsCommKernel(name) || ClassifyGemmKernel(name) != GemmMath::kNotGemm) return false;
  const std::string n = Lowercase(name);
  // cuBLAS's own helpers (cublasLt's splitKreduce_kernel) are a GEMM's, which stays.
  for (std::string_view no : {"flash", "fmha", "attention", "sdpa", "cutlass", "cudnn", "gemm", "conv", "triton", "cublas"})
    if (n.find(no) != std::string::npos) return false;
  return true;
}

// A reduction or normalization kernel ("at::native::reduce_kernel", "layer_norm_kernel",
// "batch_norm_collect_statistics_kernel", "softmax_warp_forward", cuDNN's batch norm): inductor ends a
// fused kernel at one, mostly (compile_fusion's count of the kernels it generates).
inline bool IsReductionKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  for (std::string_view yes : {"reduce", "norm", "softmax", "welford", "statistics"})
    if (n.find(yes) != std::string::npos) return true;
  return false;
}

// cuDNN's layout conversions around a convolution whose tensors are NCHW where its kernel wants NHWC
// ("cudnn::engines_precompiled::nchwToNhwcKernel", "nhwcToNchwKernel"): what a channels-last layout
// (inductor's layout optimization, or .to(memory_format=torch.channels_last)) does without.
inline bool IsLayoutConversionKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  return n.find("nchwtonhwc") != std::string::npos || n.find("nhwctonchw") != std::string::npos;
}

// A kernel over fp32 data by its template arguments, demangled ("<float>", "float, float") or
// Itanium-mangled as our collector records them ("...kernelIfffLb0E...", "...nchwIffiEE...", a
// lambda over float "...UlfE_..."), not bf16 / half.
inline bool IsFp32DataKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  const bool half = n.find("bfloat16") != std::string::npos || n.find("half") != std::string::npos ||
                    n.find("bf16") != std::string::npos || n.find("fp16") != std::string::npos;
  if (half) return false;
  if (n.find("float") != std::string::npos) return true;
  if (name.substr(0, 2) != "_Z") return false;
  for (size_t at = name.find("If"); at != std::string_view::npos; at = name.find("If", at + 1)) {
    const char next = at + 2 < name.size() ? name[at + 2] : 'E';
    if (next == 'f' || next == 'i' || next == 'j' || next == 'l' || next == 'm' || next == 'E' || next == 'L' ||
        std::isdigit(static_cast<unsigned char>(next)))
      return true;
  }
  return name.find("UlfE") != std::string_view::npos || name.find("Ulff") != std::string_view::npos;
}

// cuDNN's batch-norm kernels ("cudnn::bn_fw_tr_1C11_kernel_NCHW", "cudnn::bn_bw_1C11_kernel_new",
// "cudnn::batchnorm_fwtr_nhwc_semiPersist").
inline bool IsCudnnBatchNormKernel(std::string_view name) {
  const std::string n = Lowercase(name);
  return n.find("cudnn") != std::string::npos &&
         (n.find("bn_fw") != std::string::npos || n.find("bn_bw") != std::string::npos ||
          n.find("batchnorm") != std::string::npos);
}

// A point-to-point transfer between ranks (pipeline stages): NCCL/RCCL "SendRecv", "Send" and
// "Recv" kernels, Gloo's "gloo:send" / "gloo:recv" ranges.
inline bool IsPointToPoint(std::string_view name) {
  const std::string lower = Lowercase(name);
  const size_t kernel = lower.find("kernel_");
  const std::string_view op = kernel != std::string::npos ? std::string_view(lower).substr(kernel + 7)
                              : lower.rfind("gloo:", 0) == 0 ? std::string_view(lower).substr(5)
                                                            : std::string_view();
  return op.rfind("sendrecv", 0) == 0 || op.rfind("send", 0) == 0 || op.rfind("recv", 0) == 0;
}

}  // namespace trainrx::analyzers
