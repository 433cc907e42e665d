// trainrx::profiler::cupti conversion — CUPTI activity records -> GpuRecords.
//
// Who calls it: the buffer-completed callback of the CUPTI backend (cupti_backend.cc) for every
// record CUPTI hands back, and the unit tests, which build activity records by hand and feed
// them through this same function (no GPU needed; Kineto's MockCuptiActivities idea).
// Compiled only with the CUDA toolkit (needs cupti_activity.h, not a device).
//
// Example: a CUpti_ActivityMemcpy6 {copyKind HTOD, srcKind PAGEABLE, dstKind DEVICE, bytes 4096,
// start 1000, end 1600, deviceId 0, streamId 7, correlationId 42} becomes
// GpuRecord{kMemcpy, ts 1000, dur 600, device 0, stream 7, correlation 42,
//           "Memcpy HtoD (Pageable -> Device)", {4096, kHtoD, kPageable, kDevice}}.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "trainrx/profiler/gpu_records.h"

namespace trainrx::profiler::cupti {

// Resolves a runtime/driver callback id to its function name (cuptiGetCallbackName in the real
// backend; a table in tests). May return nullptr.
using CallbackNameFn = const char* (*)(CUpti_CallbackDomain domain, uint32_t cbid);

struct ConvertStats {
  uint64_t converted = 0;
  uint64_t quiet = 0;              // state-reading runtime/driver calls left out (QuietCalls)
  uint64_t overhead_records = 0;   // CUPTI's own overhead (buffer flushes, instrumentation)
  int64_t overhead_ns = 0;
  uint64_t unsupported = 0;        // kinds we do not convert (counted, not fatal)
};

// Runtime and driver calls that only read state: the current device, the last error, an
// attribute, a driver entry point, a kernel's name. They launch, copy, allocate and wait for
// nothing, no analysis reads them, and they are most of what PyTorch calls: on the H100 run
// (docs/gpu-validation.md) cudaGetDevice alone was 16 492 of 27 675 runtime records, and
// cuDevicePrimaryCtxGetState, cuKernelGetName and cuGetProcAddress 10 262 of 11 584 driver
// records (torch.profiler's traces leave such calls out too). The backend asks CUPTI not to record
// them (cuptiActivityEnableRuntimeApi / DriverApi), and ConvertActivity drops any that come anyway.
struct QuietCall {
  CUpti_CallbackDomain domain;  // CUPTI_CB_DOMAIN_RUNTIME_API or CUPTI_CB_DOMAIN_DRIVER_API
  CUpti_CallbackId cbid;
  const char* name;  // the function, for tests and messages
};
const QuietCall* QuietCalls(size_t* count);
bool IsQuietCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// Appends the record's conversion to `out` (external correlations to out.external). Returns
// false for kinds we do not convert and for quiet calls (counted in stats.quiet).
bool ConvertActivity(const CUpti_Activity* record, GpuRecords& out, CallbackNameFn names, ConvertStats& stats);

// "Memcpy HtoD (Pageable -> Device)" for the given CUPTI kinds (Kineto's spelling).
std::string MemcpyName(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind);

}  // namespace trainrx::profiler::cupti
