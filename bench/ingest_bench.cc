// Ingest + analysis throughput on one core: read, parse, build the model, run every analyzer.
// Prints MB/s (uncompressed input bytes / wall time) and peak RSS against the file size.
//   build/bench/trainrx_ingest_bench TRACE.json [repeats]
// bench/ingest.sh makes a large trace from a real one with shared/tools/tile_trace.py.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE.json [repeats]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  double best = 1e30;
  uint64_t bytes = 0, events = 0;
  size_t findings = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    trainrx::profiler::Trace trace;
    const auto st = trainrx::profiler::ReadTraces({argv[1]}, trace);
    if (!st.ok) {
      std::fprintf(stderr, "%s\n", st.error.c_str());
      return 2;
    }
    const auto report = trainrx::analyzers::Analyze(trace);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    bytes = trace.stats.bytes_read;
    events = trace.stats.events_read;
    findings = report.findings.size();
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double file_mb = static_cast<double>(std::filesystem::file_size(argv[1])) / 1e6;
  std::printf("input %.1f MB (%.1f MB JSON), %llu events, %zu findings\n", file_mb, bytes / 1e6,
              static_cast<unsigned long long>(events), findings);
  std::printf("best of %d: %.3f s  =>  %.0f MB/s end to end (read+parse+model+analyze)\n", repeats, best,
              bytes / 1e6 / best);
  std::printf("peak RSS %.1f MB = %.2fx the file size\n", ru.ru_maxrss / 1e3, ru.ru_maxrss / 1e3 / file_mb);
  return 0;
}
