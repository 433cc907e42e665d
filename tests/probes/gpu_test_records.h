// GPU records as the CUPTI backend hands them to the collector, for the collector's and the
// journal's tests (no CUDA needed).
#pragma once

#include <cstdint>
#include <string>

#include "trainrx/profiler/gpu_records.h"

namespace trainrx::probes::testing {

// A cudaLaunchKernel call on thread 7, 10 ns long.
inline profiler::GpuRecord RuntimeRecord(int64_t ts, int64_t corr) {
  profiler::GpuRecord r;
  r.kind = profiler::EventKind::kCudaRuntime;
  r.ts_ns = ts;
  r.dur_ns = 10;
  r.tid = 7;
  r.correlation = corr;
  r.name = "cudaLaunchKernel";
  return r;
}

// Kernel "k<corr>" on device 0, stream 7.
inline profiler::GpuRecord KernelRecord(int64_t ts, int64_t corr, int64_t dur = 100) {
  profiler::GpuRecord r;
  r.ts_ns = ts;
  r.dur_ns = dur;
  r.device = 0;
  r.stream = 7;
  r.correlation = corr;
  r.name = "k" + std::to_string(corr);
  return r;
}

}  // namespace trainrx::probes::testing
