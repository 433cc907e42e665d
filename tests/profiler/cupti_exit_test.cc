// The CUPTI backend's records survive the exit order the probe meets (issue 14: the H100 exit
// crash of runs with a DataLoader pin-memory thread).
//
// The probe registers its exit handler when it attaches, then loads libtrainrx_cupti.so; exit
// handlers and static destructors run last-registered first. This program does the same: it
// registers a handler, loads the library, stores records as a buffer completed mid-run does, and
// exits. The handler then stores more (the last flush at collection) and collects, and every
// record must be there, intact. With the backend's records in a static object, they were
// destroyed before the handler ran: glibc aborts on the double free, or the names come back
// overwritten. Needs no GPU (no CUPTI call is made: the backend is never started here).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainrx/profiler/gpu_records.h"

namespace {

using trainrx::profiler::GpuRecord;
using trainrx::profiler::GpuRecords;
using StoreFn = void (*)(const GpuRecords*);
using CollectFn = void (*)(GpuRecords*);
StoreFn g_store = nullptr;
CollectFn g_collect = nullptr;

constexpr int kMidRun = 3;  // records of buffers completed before exit

// Longer than std::string's in-place capacity: each name has a heap block of its own.
std::string NameOf(int i) { return "void at::native::vectorized_elementwise_kernel<4, stage " + std::to_string(i) + ">"; }

GpuRecords Make(int first, int n) {
  GpuRecords r;
  for (int i = first; i < first + n; ++i) {
    GpuRecord g;
    g.ts_ns = 1000 + i;
    g.dur_ns = 10;
    g.correlation = i;
    g.name = NameOf(i);
    r.records.push_back(g);
    r.external.emplace_back(i, 100 + i);
  }
  return r;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cupti_exit_test: %s\n", what.c_str());
  std::fflush(stderr);
  _exit(1);
}

void CollectAtExit() {
  if (g_store == nullptr || g_collect == nullptr) return;  // main() already failed
  const GpuRecords last = Make(kMidRun, 1);
  g_store(&last);
  GpuRecords out;
  g_collect(&out);
  if (out.records.size() != kMidRun + 1 || out.external.size() != kMidRun + 1)
    Fail("collected " + std::to_string(out.records.size()) + " records and " + std::to_string(out.external.size()) +
         " correlations at exit; expected " + std::to_string(kMidRun + 1) + " of each");
  for (int i = 0; i < kMidRun + 1; ++i) {
    const GpuRecord& r = out.records[i];
    if (r.name != NameOf(i) || r.ts_ns != 1000 + i || r.correlation != i || out.external[i].second != 100 + i)
      Fail("record " + std::to_string(i) + " came back as \"" + r.name + "\" ts " + std::to_string(r.ts_ns) +
           "; expected \"" + NameOf(i) + "\" ts " + std::to_string(1000 + i));
  }
  std::printf("cupti_exit_test: %d records intact after the library's exit handlers ran\n", kMidRun + 1);
}

}  // namespace

int main() {
  std::atexit(&CollectAtExit);  // first, as the probe's: it runs after the library's handlers
  void* lib = dlopen(TRAINRX_CUPTI_LIB, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cupti_exit_test: cannot load %s: %s\n", TRAINRX_CUPTI_LIB, dlerror());
    return 2;
  }
  auto store = reinterpret_cast<StoreFn>(dlsym(lib, "trainrx_cupti_deliver_for_test"));
  auto collect = reinterpret_cast<CollectFn>(dlsym(lib, "trainrx_cupti_collect"));
  if (store == nullptr || collect == nullptr) {
    std::fprintf(stderr, "cupti_exit_test: %s lacks trainrx_cupti_deliver_for_test or trainrx_cupti_collect\n",
                 TRAINRX_CUPTI_LIB);
    return 2;
  }
  const GpuRecords mid_run = Make(0, kMidRun);
  store(&mid_run);
  g_store = store;
  g_collect = collect;
  return 0;
}
