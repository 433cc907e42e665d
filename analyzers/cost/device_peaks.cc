#include "device_peaks.h"

#include <array>

namespace trainrx::analyzers {
namespace {

// Figures in TFLOP/s (dense) and GB/s. Where the datasheet prints only the sparse figure ("with
// sparsity"), it is halved here; the source line says which.
constexpr std::array<DevicePeak, 10> kPeaks = {{
    {"H100 SXM5", 67, 67, 494.5, 989.5, 989.5, 1979, 3350,
     "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column: tensor FP64 67, FP32 67; TF32 989, BF16/FP16 1979, "
     "FP8 3958 TFLOPS are with sparsity, halved here; HBM3 3.35 TB/s"},
    {"H100 PCIe", 51, 51, 378, 756, 756, 1513, 2000,
     "NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe column: tensor FP64 51, FP32 51; TF32 756, BF16/FP16 1513, "
     "FP8 3026 TFLOPS are with sparsity, halved here; HBM2e 2.0 TB/s"},
    {"H200 SXM", 67, 67, 494.5, 989.5, 989.5, 1979, 4800,
     "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column: tensor FP64 67, FP32 67; TF32 989, BF16/FP16 1979, "
     "FP8 3958 TFLOPS are with sparsity, halved here; HBM3e 4.8 TB/s"},
    {"A100 80GB SXM", 19.5, 19.5, 156, 312, 312, 0, 2039,
     "NVIDIA A100 Tensor Core GPU datasheet (2021), 80GB SXM: FP64 tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312 "
     "TFLOPS dense (the sparse figures, 312 / 624, are the asterisked ones); HBM2e 2039 GB/s"},
    {"A100 80GB PCIe", 19.5, 19.5, 156, 312, 312, 0, 1935,
     "NVIDIA A100 Tensor Core GPU datasheet (2021), 80GB PCIe: as the SXM in FLOPS; HBM2e 1935 GB/s"},
    {"A100 40GB", 19.5, 19.5, 156, 312, 312, 0, 1555,
     "NVIDIA A100 Tensor Core GPU datasheet (2021), 40GB PCIe / SXM: FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense; "
     "HBM2 1555 GB/s"},
    {"V100", 7.8, 15.7, 0, 0, 125, 0, 900,
     "NVIDIA Tesla V100 datasheet (2018), SXM2: FP64 7.8, FP32 15.7, tensor FP16 125 TFLOPS (no sparsity, no bf16); "
     "HBM2 900 GB/s (the PCIe card: 14 / 112)"},
    {"L4", 0, 30.3, 60, 121, 121, 242.5, 300,
     "NVIDIA L4 datasheet (2023): FP32 30.3; TF32 120, BF16/FP16 242, FP8 485 TFLOPS are with sparsity, halved here; "
     "GDDR6 300 GB/s"},
    {"MI300X", 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 5300,
     "AMD Instinct MI300X data sheet (2023): matrix FP64 163.4, FP32 163.4, TF32 653.7, BF16/FP16 1307.4, FP8 2614.9 "
     "TFLOPS dense (twice that with sparsity); HBM3 5.3 TB/s"},
    {"MI250X", 95.7, 95.7, 0, 383, 383, 0, 3277,
     "AMD Instinct MI250X data sheet (2021): matrix FP64 95.7, FP32 95.7, BF16/FP16 383 TFLOPS; HBM2e 3.2 TB/s"},
}};

bool Has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

std::optional<DevicePeak> PeakOfDevice(std::string_view n) {
  auto find = [](std::string_view model) -> std::optional<DevicePeak> {
    for (const auto& p : kPeaks)
      if (p.model == model) return p;
    return std::nullopt;
  };
  if (Has(n, "H200")) return find("H200 SXM");
  if (Has(n, "H100")) return Has(n, "PCIe") || Has(n, "PCIE") ? find("H100 PCIe") : find("H100 SXM5");
  if (Has(n, "A100")) {
    if (Has(n, "80GB") && (Has(n, "PCIe") || Has(n, "PCIE"))) return find("A100 80GB PCIe");
    if (Has(n, "80GB")) return find("A100 80GB SXM");
    return find("A100 40GB");
  }
  if (Has(n, "V100")) return find("V100");
  if (Has(n, "MI300X")) return find("MI300X");
  if (Has(n, "MI250X")) return find("MI250X");
  // "NVIDIA L4" (not L40 / L40S, which are other cards).
  if (n == "NVIDIA L4" || (Has(n, " L4") && !Has(n, " L40"))) return find("L4");
  return std::nullopt;
}

std::optional<DevicePeak> PeakOfProperties(int major, int minor, int sms, int64_t memory_bytes) {
  const double gb = static_cast<double>(memory_bytes) / 1e9;
  if (major == 9 && minor == 0 && sms == 132) return PeakOfDevice(gb > 120 ? "H200" : "H100 SXM");
  if (major == 9 && minor == 0 && sms == 114) return PeakOfDevice("H100 PCIe");
  if (major == 8 && minor == 0 && sms == 108) return PeakOfDevice(gb > 60 ? "A100 80GB" : "A100");
  if (major == 7 && minor == 0 && sms == 80) return PeakOfDevice("V100");
  return std::nullopt;
}

std::optional<DevicePeak> PeakOfRank(const profiler::Trace& trace, int32_t rank) {
  const profiler::RankInfo* info = trace.FindRank(rank);
  if (info == nullptr || info->devices.empty()) return std::nullopt;
  const profiler::DeviceProperties& d = info->devices.front();
  if (auto p = PeakOfDevice(d.name)) return p;
  return PeakOfProperties(d.compute_major, d.compute_minor, d.num_sms, d.total_global_mem);
}

double PeakTflops(const DevicePeak& p, std::string_view dtype) {
  if (dtype == "fp32") return p.fp32;
  if (dtype == "tf32") return p.tf32;
  if (dtype == "bf16") return p.bf16;
  if (dtype == "fp16") return p.fp16;
  if (dtype == "fp8") return p.fp8;
  if (dtype == "fp64") return p.fp64;
  return 0;
}

}  // namespace trainrx::analyzers
