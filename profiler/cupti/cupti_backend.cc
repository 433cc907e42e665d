// libtrainrx_cupti.so — the CUPTI activity backend, torch-free. Loaded two ways:
//  * by the probes (probes/cupti_bridge.cc dlopens it when a session starts), and
//  * by the CUDA driver itself, for a user who sets CUDA_INJECTION64_PATH to it: the driver
//    calls InitializeInjection() inside cuInit. `trainrx record` does not set it (cli/record.cc):
//    the probe starts CUPTI when it attaches, before the program's first CUDA call.
// Each buffer CUPTI hands back is converted and delivered to the probe's collector through the
// sink the probe sets (trainrx_cupti_set_sink), which keeps what the step window covers as the
// run goes; records from before a sink was set wait here (under a mutex) until collected.
//
// Lifetime: everything lives in one heap object that is never destroyed. The probe loads this
// library after it registered its exit handler, and exit handlers run last-registered first, so
// static objects of this library would be destroyed before that handler collects: the final
// cuptiActivityFlushAll would then append to a freed vector (once a run had filled a buffer
// before exit: the H100 crash with a DataLoader pin-memory thread, docs/gpu-validation.md).
// CUPTI may also call BufferCompleted from its own thread at any point of the exit.
//
// Buffers: 8 MB each (CUPTI recommends 1-10 MB; Kineto uses 4 MB), handed back by CUPTI when
// full, when their thread ends (CUPTI 13 keeps one per thread), or on cuptiActivityFlushAll at
// collection. Timestamps: CUPTI is told to use our clock (CLOCK_REALTIME ns, like the probes), so
// GPU and CPU events share one time base.
// Every CUPTI call goes through TRAINRX_CUPTI_CALL, which records the call text and CUPTI's error.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cupti_convert.h"

namespace trainrx::profiler::cupti {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

struct Backend {
  std::mutex mu;  // guards the members below
  GpuRecords records;
  std::string last_error;
};
Backend& State() {
  static Backend* b = new Backend();  // never destroyed: see the lifetime note above
  return *b;
}
std::atomic<bool> g_active{false};  // trivially destructible
using SinkFn = void (*)(trainrx::profiler::GpuRecords*);
std::atomic<SinkFn> g_sink{nullptr};

bool Check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  Backend& b = State();
  std::lock_guard<std::mutex> lock(b.mu);
  b.last_error = std::string(call) + " failed: " + (msg ? msg : "unknown CUPTI error");
  return false;
}

// Hands what one buffer converted to the sink, or keeps it for collection while there is none.
void Deliver(GpuRecords& local) {
  Backend& b = State();
  SinkFn sink = nullptr;
  {
    std::lock_guard<std::mutex> lock(b.mu);
    sink = g_sink.load();
    if (sink == nullptr) {
      b.records.records.insert(b.records.records.end(), std::make_move_iterator(local.records.begin()),
                               std::make_move_iterator(local.records.end()));
      b.records.external.insert(b.records.external.end(), local.external.begin(), local.external.end());
      b.records.dropped += local.dropped;
      return;
    }
  }
  sink(&local);  // outside our lock: the sink takes the collector's
}
#define TRAINRX_CUPTI_CALL(call) Check((call), #call)

uint64_t CUPTIAPI Timestamp() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const char* CallbackName(CUpti_CallbackDomain domain, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS) return nullptr;
  return name;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid) {
  GpuRecords local;
  ConvertStats stats;  // per buffer only: no trace field reports these counts yet
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    ConvertActivity(record, local, &CallbackName, stats);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) local.dropped = dropped;
  std::free(buffer);
  Deliver(local);
}

int StartActivity(bool check_device, char* msg, size_t msg_len) {
  std::string message;
  if (check_device) {
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      message = std::string("no CUDA device (cudaGetDeviceCount: ") +
                (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + "); recording CPU only";
      std::snprintf(msg, msg_len, "%s", message.c_str());
      return 1;
    }
    std::vector<DeviceProperties> found;
    for (int d = 0; d < devices; ++d) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
      found.push_back({d, p.name, static_cast<int64_t>(p.totalGlobalMem), p.major, p.minor, p.multiProcessorCount});
    }
    Backend& b = State();
    std::lock_guard<std::mutex> lock(b.mu);
    b.records.devices = std::move(found);
  }
  bool ok = TRAINRX_CUPTI_CALL(cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted));
  ok = ok && TRAINRX_CUPTI_CALL(cuptiActivityRegisterTimestampCallback(&Timestamp));
  // Runtime/driver records name their thread by the kernel's thread id (gettid), as the probes do;
  // CUPTI's default is pthread_self() cut to 32 bits, which matches no CPU track.
  ok = ok && TRAINRX_CUPTI_CALL(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                  CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD}) {
    ok = ok && TRAINRX_CUPTI_CALL(cuptiActivityEnable(kind));
  }
  // After the kinds (enabling a kind resets its per-call settings): the calls that only read
  // state are not recorded (QuietCalls). Best effort: where CUPTI refuses, ConvertActivity drops them.
  size_t quiet_count = 0;
  const QuietCall* quiet = QuietCalls(&quiet_count);
  for (size_t i = 0; ok && i < quiet_count; ++i) {
    if (quiet[i].domain == CUPTI_CB_DOMAIN_RUNTIME_API) cuptiActivityEnableRuntimeApi(quiet[i].cbid, 0);
    else cuptiActivityEnableDriverApi(quiet[i].cbid, 0);
  }
  if (!ok) {
    Backend& b = State();
    std::lock_guard<std::mutex> lock(b.mu);
    std::snprintf(msg, msg_len, "CUPTI could not start (%s); recording CPU only", b.last_error.c_str());
    return 2;
  }
  g_active.store(true);
  std::snprintf(msg, msg_len, "CUPTI activity recording on");
  return 0;
}

}  // namespace
}  // namespace trainrx::profiler::cupti

using namespace trainrx::profiler::cupti;

// The C interface the probes resolve with dlsym (stable across the two shared libraries).
extern "C" {

__attribute__((visibility("default"))) int trainrx_cupti_start(char* msg, size_t msg_len) {
  if (g_active.load()) return 0;
  return StartActivity(/*check_device=*/true, msg, msg_len);
}

__attribute__((visibility("default"))) int trainrx_cupti_active(void) { return g_active.load() ? 1 : 0; }

__attribute__((visibility("default"))) int trainrx_cupti_push(uint64_t id) {
  return cuptiActivityPushExternalCorrelationId(kExternalKind, id) == CUPTI_SUCCESS ? 1 : 0;
}

__attribute__((visibility("default"))) void trainrx_cupti_pop(void) {
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(kExternalKind, &last);
}

// Flushes CUPTI's buffers and moves everything converted so far into *out.
__attribute__((visibility("default"))) void trainrx_cupti_collect(trainrx::profiler::GpuRecords* out) {
  if (g_active.load()) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Backend& b = State();
  std::lock_guard<std::mutex> lock(b.mu);
  *out = std::move(b.records);
  b.records = {};
}

// From now on each converted buffer goes to `sink` (the probe's collector) as CUPTI hands it
// back, on whichever thread that happens, and what waits here (the devices, records from before)
// goes to it now; nullptr: kept here until collected. The records are gone when a sink returns.
__attribute__((visibility("default"))) void trainrx_cupti_set_sink(SinkFn sink) {
  trainrx::profiler::GpuRecords waiting;
  {
    Backend& b = State();
    std::lock_guard<std::mutex> lock(b.mu);  // Deliver decides under it: nothing falls between
    if (sink != nullptr) waiting = std::exchange(b.records, {});
    g_sink.store(sink);
  }
  if (sink != nullptr) sink(&waiting);
}

// Tests only: delivers already converted records as the buffer-completed callback does, so that
// delivery and the exit order can be tested on a machine without a GPU
// (tests/profiler/cupti_exit_test.cc).
__attribute__((visibility("default"))) void trainrx_cupti_deliver_for_test(const trainrx::profiler::GpuRecords* in) {
  trainrx::profiler::GpuRecords copy = *in;
  Deliver(copy);
}

// CUDA driver injection entry point (CUDA_INJECTION64_PATH). Runs inside cuInit: no runtime
// calls here (they would re-enter the driver's initialization).
__attribute__((visibility("default"))) int InitializeInjection(void) {
  char msg[512];
  if (StartActivity(/*check_device=*/false, msg, sizeof(msg)) != 0) std::fprintf(stderr, "trainrx: %s\n", msg);
  return 1;
}

}  // extern "C"
