// trainrx::profiler GPU records — device activity as the CUPTI backend converts it, before it
// joins a Trace. CUDA-free on purpose: the conversion from CUPTI structs (profiler/cupti/,
// compiled only with the CUDA toolkit) fills these, and the collector (probes/) and the unit
// tests merge them into the model with AppendGpuRecords() on any machine.
//
// Threading: plain values; whoever owns a GpuRecords serializes access to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

struct GpuRecord {
  EventKind kind = EventKind::kKernel;  // kKernel, kMemcpy, kMemset, kCudaSync (GPU side),
                                        // kCudaRuntime, kCudaDriver (CPU side: tid = thread)
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int32_t device = -1;
  int64_t stream = -1;   // GPU side
  int64_t tid = 0;       // CPU side (runtime / driver calls)
  int64_t correlation = kNoId;
  std::string name;      // kernel name, runtime function name, "Memcpy HtoD (Pageable -> Device)"
  MemcpyInfo copy;       // kMemcpy / kMemset
};

struct GpuRecords {
  std::vector<GpuRecord> records;
  // CUPTI external correlation: CUDA correlation id -> our op's external id.
  std::vector<std::pair<int64_t, int64_t>> external;
  std::vector<DeviceProperties> devices;
  uint64_t dropped = 0;  // records CUPTI reported as dropped
};

// Adds GPU records to `trace` under `rank`: GPU activity on (device, stream) tracks, runtime and
// driver calls on the CPU track of (pid, tid); every event gets the external id that CUPTI's
// external correlation attached to its correlation id, so kernels map to the ops that launched
// them. Names are interned; memcpy details go to trace.memcpys.
void AppendGpuRecords(Trace& trace, int32_t rank, int64_t pid, const GpuRecords& gpu);

}  // namespace trainrx::profiler
