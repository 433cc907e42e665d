#include "cupti_convert.h"

#include <string>

namespace trainrx::profiler::cupti {
namespace {

CopyKind ToCopyKind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return CopyKind::kHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return CopyKind::kDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return CopyKind::kDtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return CopyKind::kHtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return CopyKind::kPtoP;
    default: return CopyKind::kUnknown;
  }
}

MemKind ToMemKind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return MemKind::kPageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return MemKind::kPinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return MemKind::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return MemKind::kManaged;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return MemKind::kArray;
    default: return MemKind::kUnknown;
  }
}

int64_t Dur(uint64_t start, uint64_t end) { return end > start ? static_cast<int64_t>(end - start) : 0; }

const char* SyncName(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "Event Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "Stream Wait Event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "Stream Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "Context Sync";
    default: return "Unknown Sync";
  }
}

#define TRAINRX_QUIET_RUNTIME(fn, version) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##fn##_##version, #fn}
#define TRAINRX_QUIET_DRIVER(fn) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##fn, #fn}
constexpr QuietCall kQuietCalls[] = {
    TRAINRX_QUIET_RUNTIME(cudaGetDevice, v3020),
    TRAINRX_QUIET_RUNTIME(cudaGetLastError, v3020),
    TRAINRX_QUIET_RUNTIME(cudaPeekAtLastError, v3020),
    TRAINRX_QUIET_RUNTIME(cudaGetErrorString, v3020),
    TRAINRX_QUIET_RUNTIME(cudaStreamIsCapturing, v10000),
    TRAINRX_QUIET_RUNTIME(cudaStreamIsCapturing_ptsz, v10000),
    TRAINRX_QUIET_RUNTIME(cudaDeviceGetAttribute, v5000),
    TRAINRX_QUIET_RUNTIME(cudaFuncGetAttributes, v3020),
    TRAINRX_QUIET_RUNTIME(cudaPointerGetAttributes, v4000),
    TRAINRX_QUIET_RUNTIME(cudaGetDeviceCount, v3020),
    TRAINRX_QUIET_RUNTIME(cudaDriverGetVersion, v3020),
    TRAINRX_QUIET_RUNTIME(cudaRuntimeGetVersion, v3020),
    TRAINRX_QUIET_DRIVER(cuDevicePrimaryCtxGetState),
    TRAINRX_QUIET_DRIVER(cuKernelGetName),
    TRAINRX_QUIET_DRIVER(cuGetProcAddress),
    TRAINRX_QUIET_DRIVER(cuGetProcAddress_v2),
    TRAINRX_QUIET_DRIVER(cuDeviceGetAttribute),
    TRAINRX_QUIET_DRIVER(cuCtxGetCurrent),
    TRAINRX_QUIET_DRIVER(cuCtxGetDevice),
    TRAINRX_QUIET_DRIVER(cuDeviceGet),
    TRAINRX_QUIET_DRIVER(cuDeviceGetCount),
    TRAINRX_QUIET_DRIVER(cuDriverGetVersion),
    TRAINRX_QUIET_DRIVER(cuGetErrorString),
    TRAINRX_QUIET_DRIVER(cuPointerGetAttribute),
    TRAINRX_QUIET_DRIVER(cuPointerGetAttributes),
    TRAINRX_QUIET_DRIVER(cuFuncGetAttribute),
};
#undef TRAINRX_QUIET_RUNTIME
#undef TRAINRX_QUIET_DRIVER

}  // namespace

const QuietCall* QuietCalls(size_t* count) {
  *count = sizeof(kQuietCalls) / sizeof(kQuietCalls[0]);
  return kQuietCalls;
}

bool IsQuietCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  for (const QuietCall& q : kQuietCalls)
    if (q.domain == domain && q.cbid == cbid) return true;
  return false;
}

std::string MemcpyName(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind) {
  const std::string dir(CopyKindName(ToCopyKind(copy_kind)));
  return "Memcpy " + dir + " (" + std::string(MemKindName(ToMemKind(src_kind))) + " -> " +
         std::string(MemKindName(ToMemKind(dst_kind))) + ")";
}

bool ConvertActivity(const CUpti_Activity* record, GpuRecords& out, CallbackNameFn names, ConvertStats& stats) {
  GpuRecord r;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      r.kind = EventKind::kKernel;
      r.ts_ns = static_cast<int64_t>(k->start);
      r.dur_ns = Dur(k->start, k->end);
      r.device = static_cast<int32_t>(k->deviceId);
      r.stream = k->streamId;
      r.correlation = k->correlationId;
      r.name = k->name ? k->name : "<unnamed kernel>";
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      r.kind = EventKind::kMemcpy;
      r.ts_ns = static_cast<int64_t>(m->start);
      r.dur_ns = Dur(m->start, m->end);
      r.device = static_cast<int32_t>(m->deviceId);
      r.stream = m->streamId;
      r.correlation = m->correlationId;
      r.name = MemcpyName(m->copyKind, m->srcKind, m->dstKind);
      r.copy = {static_cast<int64_t>(m->bytes), ToCopyKind(m->copyKind), ToMemKind(m->srcKind), ToMemKind(m->dstKind)};
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      r.kind = EventKind::kMemset;
      r.ts_ns = static_cast<int64_t>(m->start);
      r.dur_ns = Dur(m->start, m->end);
      r.device = static_cast<int32_t>(m->deviceId);
      r.stream = m->streamId;
      r.correlation = m->correlationId;
      r.name = "Memset (" + std::string(MemKindName(ToMemKind(static_cast<uint8_t>(m->memoryKind)))) + ")";
      r.copy = {static_cast<int64_t>(m->bytes), CopyKind::kUnknown, MemKind::kUnknown, ToMemKind(static_cast<uint8_t>(m->memoryKind))};
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      r.kind = EventKind::kCudaSync;
      r.ts_ns = static_cast<int64_t>(s->start);
      r.dur_ns = Dur(s->start, s->end);
      r.device = 0;  // the record carries a context, not a device; one device per process is the norm
      // Context-wide syncs have no stream (CUPTI reports (uint32)-1); keep them on stream -1.
      r.stream = s->streamId == UINT32_MAX ? -1 : static_cast<int64_t>(s->streamId);
      r.correlation = s->correlationId;
      r.name = SyncName(s->type);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      if (IsQuietCall(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid)) {
        ++stats.quiet;
        return false;
      }
      r.kind = runtime ? EventKind::kCudaRuntime : EventKind::kCudaDriver;
      r.ts_ns = static_cast<int64_t>(a->start);
      r.dur_ns = Dur(a->start, a->end);
      r.tid = a->threadId;
      r.correlation = a->correlationId;
      const char* n = names ? names(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid) : nullptr;
      r.name = n ? n : (runtime ? "cudaRuntime#" : "cuDriver#") + std::to_string(a->cbid);
      // cuptiGetCallbackName gives "cudaLaunchKernel_v7000": drop the version suffix (Kineto does).
      if (const size_t v = r.name.find("_v"); v != std::string::npos && v + 2 < r.name.size() &&
                                              std::isdigit(static_cast<unsigned char>(r.name[v + 2]))) {
        r.name.resize(v);
      }
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      out.external.emplace_back(static_cast<int64_t>(x->correlationId), static_cast<int64_t>(x->externalId));
      ++stats.converted;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
      ++stats.overhead_records;
      stats.overhead_ns += Dur(o->start, o->end);
      return true;
    }
    default:
      ++stats.unsupported;
      return false;
  }
  out.records.push_back(std::move(r));
  ++stats.converted;
  return true;
}

}  // namespace trainrx::profiler::cupti
