// The devices' peak throughput, kept in one place (issue 52; private to analyzers/): dense
// tensor-core / matrix FLOP/s per dtype and memory bandwidth, from the vendors' datasheets, each
// entry with its source. Dense: NVIDIA's and AMD's headline bf16/fp16/fp8/tf32 figures are quoted
// *with 2:4 structured sparsity*, twice what a dense matmul can reach (PyTorch's own device table
// lists H100 bf16 at 1979 TFLOPS, the sparse figure, which halves every MFU computed from it); the
// figures here are the dense ones, the sparse datasheet figure halved where only that is printed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

struct DevicePeak {
  std::string_view model;  // "H100 SXM5"
  double fp64 = 0, fp32 = 0, tf32 = 0, bf16 = 0, fp16 = 0, fp8 = 0;  // dense TFLOP/s (0: none)
  double memory_gbps = 0;
  std::string_view source;  // the datasheet, and how the figure was read off it
};

// The entry for a device as a trace names it ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"),
// nullopt when the table has none.
std::optional<DevicePeak> PeakOfDevice(std::string_view device_name);
// The entry for a device by its compute capability, SM count and memory where its name does not
// say (a name recorded wrong: an H100 recording of 2026-11-22 named its device "cudaGetLastError"):
// 9.0 with 132 SMs is an H100 SXM5 (141 GB: an H200), 114 an H100 PCIe; 8.0 with 108 an A100;
// 7.0 with 80 a V100. nullopt otherwise.
std::optional<DevicePeak> PeakOfProperties(int major, int minor, int sms, int64_t memory_bytes);
// The entry for a rank's first device (by its name, else its properties), nullopt when the trace
// names no device the table has.
std::optional<DevicePeak> PeakOfRank(const profiler::Trace& trace, int32_t rank);
// The dense TFLOP/s of `dtype` ("fp32", "tf32", "bf16", "fp16", "fp8", "fp64"); 0 when none.
double PeakTflops(const DevicePeak& p, std::string_view dtype);

}  // namespace trainrx::analyzers
