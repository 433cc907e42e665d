#include "cupti_bridge.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "collector.h"
#include "session.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::probes {

std::atomic<bool> CuptiBridge::active_{false};

namespace {
using StartFn = int (*)(char*, size_t);
using ActiveFn = int (*)();
using PushFn = int (*)(uint64_t);
using PopFn = void (*)();
using CollectFn = void (*)(profiler::GpuRecords*);
using SinkFn = void (*)(profiler::GpuRecords*);
using SetSinkFn = void (*)(SinkFn);
PushFn g_push = nullptr;
PopFn g_pop = nullptr;
CollectFn g_collect = nullptr;

// The backend's sink: each buffer CUPTI hands back goes to the collector, which keeps what the
// step window covers (on CUPTI's thread, or the thread whose buffer it was).
void DeliverToCollector(profiler::GpuRecords* records) noexcept {
  ProcessSession& s = ProcessSession::Get();
  if (records == nullptr || !s.active()) return;
  s.collector().AddGpuRecords(std::move(*records));
}
}  // namespace

std::string CuptiBridge::LibraryPath() {
  if (const char* p = std::getenv("TRAINRX_CUPTI_LIB"); p && *p) return p;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CuptiBridge::LibraryPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    return (slash == std::string::npos ? std::string() : self.substr(0, slash + 1)) + "libtrainrx_cupti.so";
  }
  return "libtrainrx_cupti.so";
}

void CuptiBridge::Start(ProcessSession& session) noexcept {
  Collector& c = session.collector();
  const auto collection = [&c](const std::string& what) {
    c.SetStatic("gpu_collection", profiler::JsonWriter::Quote(what));
  };
  const char* off = std::getenv("TRAINRX_CUPTI");
  if (off && std::strcmp(off, "0") == 0) {
    collection("off (TRAINRX_CUPTI=0)");
    return;
  }
  const std::string path = LibraryPath();
  // Injected by the driver already? Then use that instance; else load it.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    collection("off: trainrx was built without CUDA/CUPTI (" + path + " not found)");
    return;
  }
  auto start = reinterpret_cast<StartFn>(dlsym(handle, "trainrx_cupti_start"));
  auto active = reinterpret_cast<ActiveFn>(dlsym(handle, "trainrx_cupti_active"));
  g_push = reinterpret_cast<PushFn>(dlsym(handle, "trainrx_cupti_push"));
  g_pop = reinterpret_cast<PopFn>(dlsym(handle, "trainrx_cupti_pop"));
  g_collect = reinterpret_cast<CollectFn>(dlsym(handle, "trainrx_cupti_collect"));
  if (!start || !active || !g_push || !g_pop || !g_collect) {
    collection("off: " + path + " lacks the trainrx_cupti_* entry points");
    return;
  }
  char msg[512] = {0};
  const int rc = active() ? 0 : start(msg, sizeof(msg));
  if (rc != 0) {
    collection(std::string("off: ") + msg);
    ProcessSession::Info(msg);
    return;
  }
  collection("on (CUPTI activity; runtime/driver calls that only read state, such as cudaGetDevice, are not "
             "recorded)");
  active_.store(true);
  // Buffers go to the collector as CUPTI hands them back (what waited in the backend, the
  // devices among it, goes now), so the step window bounds what is held during the run.
  if (auto set_sink = reinterpret_cast<SetSinkFn>(dlsym(handle, "trainrx_cupti_set_sink"))) set_sink(&DeliverToCollector);
  // The backend, libcupti and the CUDA runtime were loaded and started after the session's exit
  // handler was registered: collect before their own exit handlers run.
  ProcessSession::RegisterExitHandlerAgain();
}

bool CuptiBridge::PushExternalId(int64_t id) noexcept { return g_push && g_push(static_cast<uint64_t>(id)) != 0; }

void CuptiBridge::PopExternalId() noexcept {
  if (g_pop) g_pop();
}

void CuptiBridge::Collect(Collector& collector) noexcept {
  if (!active_.load() || g_collect == nullptr) return;
  try {
    profiler::GpuRecords records;
    g_collect(&records);
    collector.AddGpuRecords(std::move(records));
  } catch (...) {
  }
}

}  // namespace trainrx::probes
