// CUPTI conversion without a GPU: hand-built activity records go through the same function the
// backend's buffer-completed callback uses (Kineto's MockCuptiActivities idea).
#include "cupti_convert.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "runtime_names.h"

namespace trainrx::profiler::cupti {
namespace {

const char* FakeNames(CUpti_CallbackDomain domain, uint32_t cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 211) return "cudaLaunchKernel_v7000";
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 131) return "cudaStreamSynchronize_v3020";
  return nullptr;
}

TEST(CuptiConvertTest, KernelKeepsTimesStreamAndCorrelation) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1000;
  k.end = 1750;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = 42;
  k.name = "volta_sgemm_128x64_nn";
  GpuRecords out;
  ConvertStats st;
  ASSERT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&k), out, FakeNames, st));
  ASSERT_EQ(out.records.size(), 1u);
  const GpuRecord& r = out.records[0];
  EXPECT_EQ(r.kind, EventKind::kKernel);
  EXPECT_EQ(r.ts_ns, 1000);
  EXPECT_EQ(r.dur_ns, 750);
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.stream, 7);
  EXPECT_EQ(r.correlation, 42);
  EXPECT_EQ(r.name, "volta_sgemm_128x64_nn");
}

TEST(CuptiConvertTest, MemcpyKindsBecomeKinetoNamesAndCopyInfo) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4096;
  m.start = 10;
  m.end = 610;
  m.streamId = 3;
  GpuRecords out;
  ConvertStats st;
  ASSERT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&m), out, FakeNames, st));
  const GpuRecord& r = out.records.at(0);
  EXPECT_EQ(r.name, "Memcpy HtoD (Pageable -> Device)");
  // The same name parses back to the same kinds (the reader's path for Kineto files).
  const MemcpyInfo parsed = ParseMemcpyName(r.name);
  EXPECT_EQ(parsed.copy, CopyKind::kHtoD);
  EXPECT_EQ(parsed.src, MemKind::kPageable);
  EXPECT_EQ(r.copy.bytes, 4096);
  EXPECT_EQ(r.copy.src, MemKind::kPageable);
  EXPECT_EQ(r.copy.dst, MemKind::kDevice);
}

TEST(CuptiConvertTest, RuntimeCallsDropTheVersionSuffixAndSyncsAreRecords) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof(a));
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = 131;
  a.start = 100;
  a.end = 900;
  a.threadId = 555;
  a.correlationId = 9;
  CUpti_ActivitySynchronization2 s;
  std::memset(&s, 0, sizeof(s));
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.start = 120;
  s.end = 880;
  s.streamId = 7;
  s.correlationId = 9;
  CUpti_ActivityAPI unknown = a;
  unknown.cbid = 99999;
  GpuRecords out;
  ConvertStats st;
  ASSERT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&a), out, FakeNames, st));
  ASSERT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&s), out, FakeNames, st));
  ASSERT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&unknown), out, FakeNames, st));
  EXPECT_EQ(out.records[0].name, "cudaStreamSynchronize");
  EXPECT_EQ(out.records[0].kind, EventKind::kCudaRuntime);
  EXPECT_EQ(out.records[0].tid, 555);
  EXPECT_EQ(out.records[1].kind, EventKind::kCudaSync);
  EXPECT_EQ(out.records[1].name, "Stream Sync");
  EXPECT_EQ(out.records[2].name, "cudaRuntime#99999");
}

TEST(CuptiConvertTest, ExternalCorrelationMapsKernelsToOpsInTheModel) {
  CUpti_ActivityExternalCorrelation x;
  std::memset(&x, 0, sizeof(x));
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  x.externalId = 1234;
  x.correlationId = 42;
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 50;
  k.end = 60;
  k.correlationId = 42;
  k.name = "relu_kernel";
  CUpti_ActivityOverhead3 o;
  std::memset(&o, 0, sizeof(o));
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.start = 0;
  o.end = 25;
  GpuRecords out;
  ConvertStats st;
  ConvertActivity(reinterpret_cast<CUpti_Activity*>(&x), out, FakeNames, st);
  ConvertActivity(reinterpret_cast<CUpti_Activity*>(&k), out, FakeNames, st);
  ConvertActivity(reinterpret_cast<CUpti_Activity*>(&o), out, FakeNames, st);
  EXPECT_EQ(st.overhead_records, 1u);
  EXPECT_EQ(st.overhead_ns, 25);
  Trace t;
  t.ranks.push_back({});
  out.dropped = 3;
  AppendGpuRecords(t, 0, 100, out);
  t.Finalize();
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].external_id, 1234);
  EXPECT_EQ(t.tracks[t.events[0].track].kind, TrackKind::kGpuStream);
  EXPECT_EQ(t.stats.Count("cupti_dropped_records"), 3u);
}

TEST(CuptiConvertTest, UnsupportedKindsAreCountedNotFatal) {
  CUpti_Activity a;
  std::memset(&a, 0, sizeof(a));
  a.kind = CUPTI_ACTIVITY_KIND_MARKER;
  GpuRecords out;
  ConvertStats st;
  EXPECT_FALSE(ConvertActivity(&a, out, FakeNames, st));
  EXPECT_EQ(st.unsupported, 1u);
  EXPECT_TRUE(out.records.empty());
}

// The calls left out only read state: none launches, copies, waits or allocates (what the
// analyzers look for in runtime/driver calls), and the everyday ones are in the list.
TEST(CuptiConvertTest, QuietCallsOnlyReadStateAndAreDroppedAndCounted) {
  size_t n = 0;
  const QuietCall* quiet = QuietCalls(&n);
  ASSERT_GT(n, 0u);
  std::set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = quiet[i].name;
    names.insert(name);
    EXPECT_FALSE(analyzers::IsLaunchCall(name)) << name;
    EXPECT_FALSE(analyzers::IsBlockingCall(name)) << name;
    EXPECT_FALSE(analyzers::IsCaptureBegin(name) || analyzers::IsCaptureEnd(name)) << name;
    for (const char* work : {"Launch", "Memcpy", "Memset", "Malloc", "Free", "Alloc", "Synchronize", "Record", "Wait",
                             "Query", "Create", "Destroy", "Set", "Graph", "Load", "Unload"}) {
      EXPECT_EQ(name.find(work), std::string::npos) << name << " does " << work;
    }
    EXPECT_TRUE(IsQuietCall(quiet[i].domain, quiet[i].cbid)) << name;
  }
  for (const char* everyday : {"cudaGetDevice", "cudaGetLastError", "cudaPeekAtLastError", "cuDevicePrimaryCtxGetState",
                               "cuKernelGetName", "cuGetProcAddress"}) {
    EXPECT_EQ(names.count(everyday), 1u) << everyday;
  }
  // A quiet call is dropped and counted; a launch and a sync are not quiet.
  EXPECT_FALSE(IsQuietCall(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_FALSE(IsQuietCall(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020));
  EXPECT_FALSE(IsQuietCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof(a));
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  a.start = 10;
  a.end = 20;
  GpuRecords out;
  ConvertStats st;
  EXPECT_FALSE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&a), out, FakeNames, st));
  a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  a.cbid = CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState;
  EXPECT_FALSE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&a), out, FakeNames, st));
  EXPECT_TRUE(out.records.empty());
  EXPECT_EQ(st.quiet, 2u);
  EXPECT_EQ(st.unsupported, 0u);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  EXPECT_TRUE(ConvertActivity(reinterpret_cast<CUpti_Activity*>(&a), out, FakeNames, st));
  EXPECT_EQ(out.records.size(), 1u);
}

// The real backend, started on a machine without a GPU, says so and does not start.
TEST(CuptiBackendTest, StartWithoutDeviceReportsNoCudaDevice) {
  struct stat sb;
  if (stat("/dev/nvidia0", &sb) == 0) GTEST_SKIP() << "a GPU is present; covered by the gpu-labelled runs";
  void* h = dlopen(TRAINRX_CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto start = reinterpret_cast<int (*)(char*, size_t)>(dlsym(h, "trainrx_cupti_start"));
  auto active = reinterpret_cast<int (*)()>(dlsym(h, "trainrx_cupti_active"));
  ASSERT_NE(start, nullptr);
  char msg[512] = {0};
  EXPECT_NE(start(msg, sizeof(msg)), 0);
  EXPECT_NE(std::strstr(msg, "no CUDA device"), nullptr) << msg;
  EXPECT_EQ(active(), 0);
}

// The probe sets a sink: from then on each buffer CUPTI hands back goes to it (the collector,
// which keeps what the step window covers during the run), and what waited goes first.
std::vector<GpuRecords> g_sunk;
void Sink(GpuRecords* r) { g_sunk.push_back(std::move(*r)); }

TEST(CuptiBackendTest, BuffersGoToTheSinkOnceSetAndWhatWaitedGoesFirst) {
  void* h = dlopen(TRAINRX_CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto deliver = reinterpret_cast<void (*)(const GpuRecords*)>(dlsym(h, "trainrx_cupti_deliver_for_test"));
  auto set_sink = reinterpret_cast<void (*)(void (*)(GpuRecords*))>(dlsym(h, "trainrx_cupti_set_sink"));
  auto collect = reinterpret_cast<void (*)(GpuRecords*)>(dlsym(h, "trainrx_cupti_collect"));
  ASSERT_TRUE(deliver && set_sink && collect);
  auto batch = [](int n, int64_t first) {
    GpuRecords g;
    for (int i = 0; i < n; ++i) {
      GpuRecord r;
      r.correlation = first + i;
      r.name = "kernel";
      g.records.push_back(r);
    }
    return g;
  };
  GpuRecords drained;
  collect(&drained);  // whatever an earlier test left
  g_sunk.clear();
  const GpuRecords early = batch(2, 1), mid = batch(1, 3), late = batch(1, 4);
  deliver(&early);
  set_sink(&Sink);
  ASSERT_EQ(g_sunk.size(), 1u);
  EXPECT_EQ(g_sunk[0].records.size(), 2u);
  deliver(&mid);
  ASSERT_EQ(g_sunk.size(), 2u);
  EXPECT_EQ(g_sunk[1].records.at(0).correlation, 3);
  set_sink(nullptr);
  deliver(&late);
  EXPECT_EQ(g_sunk.size(), 2u);
  GpuRecords rest;
  collect(&rest);
  ASSERT_EQ(rest.records.size(), 1u);
  EXPECT_EQ(rest.records[0].correlation, 4);
}

}  // namespace
}  // namespace trainrx::profiler::cupti
