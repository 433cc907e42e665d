// Ingest + analysis throughput: read, parse, build the model, run every analyzer, on one thread and
// on every usable CPU, best of N each (interleaved); then the limit a parser-bound reader could
// reach on the same bytes: simdjson's own DOM parse (no model building) on one core.
// Prints MB/s (uncompressed input bytes / wall time), MB/s per core, and peak RSS against the file.
//   build/bench/trainrx_ingest_bench TRACE.json[.gz] [repeats]
// bench/speed.sh makes a large trace from a real one with shared/tools/tile_trace.py and runs this.
#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/parallel.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE.json[.gz] [repeats]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  const size_t cpus = trainrx::profiler::UsableCpus();
  const size_t modes[2] = {1, cpus};
  double best[2] = {1e30, 1e30}, read_best[2] = {1e30, 1e30};
  uint64_t bytes = 0, events = 0;
  size_t findings = 0;
  for (int i = 0; i < repeats; ++i) {
    for (int m = 0; m < (cpus > 1 ? 2 : 1); ++m) {
      const auto t0 = std::chrono::steady_clock::now();
      trainrx::profiler::Trace trace;
      trainrx::profiler::ReadOptions options;
      options.threads = static_cast<int>(modes[m]);
      const auto st = trainrx::profiler::ReadTraces({argv[1]}, trace, options);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 2;
      }
      const double read_s = Seconds(t0);
      const auto report = trainrx::analyzers::Analyze(trace, trainrx::analyzers::Thresholds(), modes[m]);
      best[m] = std::min(best[m], Seconds(t0));
      read_best[m] = std::min(read_best[m], read_s);
      bytes = trace.stats.bytes_read;
      events = trace.stats.events_read;
      findings = report.findings.size();
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double file_mb = static_cast<double>(std::filesystem::file_size(argv[1])) / 1e6;
  std::printf("input %.1f MB on disk, %.1f MB of JSON, %llu events, %zu findings\n", file_mb, bytes / 1e6,
              static_cast<unsigned long long>(events), findings);
  for (int m = 0; m < (cpus > 1 ? 2 : 1); ++m) {
    std::printf("%zu thread%s: best of %d %.3f s (read %.3f s) => %.0f MB/s end to end, %.0f MB/s per core\n", modes[m],
                modes[m] > 1 ? "s" : " ", repeats, best[m], read_best[m], bytes / 1e6 / best[m],
                bytes / 1e6 / best[m] / static_cast<double>(modes[m]));
  }
  if (cpus > 1) std::printf("speedup on %zu CPUs: %.2fx\n", cpus, best[0] / best[1]);
  // Where the time goes (issue 82): one more run at every CPU, stage by stage. The read's parts are
  // the reader's; the analysis's stages run side by side (their wall times overlap): the CPU time
  // of the thread that ran each adds up to the work.
  {
    const auto t0 = std::chrono::steady_clock::now();
    trainrx::profiler::Trace trace;
    trainrx::profiler::ReadOptions options;
    options.threads = static_cast<int>(cpus);
    if (!trainrx::profiler::ReadTraces({argv[1]}, trace, options).ok()) return 2;
    const double read_s = Seconds(t0);
    std::vector<trainrx::analyzers::StageTime> stages;
    const auto t1 = std::chrono::steady_clock::now();
    (void)trainrx::analyzers::Analyze(trace, trainrx::analyzers::Thresholds(), cpus, {}, &stages);
    const double analysis_s = Seconds(t1);
    int64_t cpu = 0;
    for (const auto& s : stages) cpu += s.cpu_ns;
    std::printf("stages (%zu threads): read %.3f s; analysis %.3f s wall, %.3f s CPU in its stages\n", cpus, read_s, analysis_s,
                cpu / 1e9);
    std::printf("  %-28s %10s %10s %7s\n", "stage", "wall ms", "CPU ms", "CPU %");
    for (const auto& s : stages)
      std::printf("  %-28s %10.1f %10.1f %6.1f%%\n", s.name.c_str(), s.wall_ns / 1e6, s.cpu_ns / 1e6,
                  cpu > 0 ? 100.0 * static_cast<double>(s.cpu_ns) / static_cast<double>(cpu) : 0.0);
    // What an experiment's trial reads (analyzers::Measure) against the whole analysis, one
    // thread each, best of `repeats` interleaved: the trial's share of an analysis (issue 83).
    double measure_best = 1e30, analyze_best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const int64_t c0 = ThreadCpuNs();
      (void)trainrx::analyzers::Measure(trace);
      const int64_t c1 = ThreadCpuNs();
      (void)trainrx::analyzers::Analyze(trace, trainrx::analyzers::Thresholds(), 1);
      const int64_t c2 = ThreadCpuNs();
      measure_best = std::min(measure_best, (c1 - c0) / 1e9);
      analyze_best = std::min(analyze_best, (c2 - c1) / 1e9);
    }
    std::printf("a trial's measurement (Measure) %.4f s CPU, the whole analysis (1 thread) %.4f s: %.1fx cheaper\n", measure_best,
                analyze_best, analyze_best / std::max(measure_best, 1e-9));
  }
  std::printf("this process, all runs: peak RSS %.1f MB = %.2fx the file on disk, %.2fx the JSON\n", ru.ru_maxrss / 1e3,
              ru.ru_maxrss / 1e3 / file_mb, ru.ru_maxrss / 1e3 / (bytes / 1e6));

  // The parse limit: simdjson's DOM parse of the same bytes, whole, on one core (plain files only).
  std::ifstream f(argv[1], std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!text.empty() && static_cast<unsigned char>(text[0]) == 0x1f) {
    std::printf("parse limit: skipped for gzip input (run it on the plain file)\n");
    return 0;
  }
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  text.clear();
  text.shrink_to_fit();
  double parse_best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    simdjson::dom::element doc;
    if (parser.parse(padded).get(doc)) {
      std::fprintf(stderr, "simdjson could not parse %s as one document\n", argv[1]);
      return 2;
    }
    parse_best = std::min(parse_best, Seconds(t0));
  }
  std::printf("parse limit (simdjson DOM parse alone, 1 core, no model): %.3f s => %.0f MB/s; trainrx end to end "
              "per core is %.0f%% of it\n",
              parse_best, padded.size() / 1e6 / parse_best,
              100.0 * (bytes / 1e6 / best[cpus > 1 ? 1 : 0] / static_cast<double>(modes[cpus > 1 ? 1 : 0])) /
                  (padded.size() / 1e6 / parse_best));
  return 0;
}
