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
#include <sstream>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/thread_counters.h"
#include "trainrx/reports/report.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

using trainrx::profiler::ThreadCpuNs;
using trainrx::profiler::ThreadInstructions;

// Process CPU time (every thread), ns.
int64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One row of the breakdown: wall ms, CPU ms, its share of `total_cpu`, and M instructions ("-"
// where this machine counts none).
void Row(const char* name, double wall_ns, double cpu_ns, double total_cpu, int64_t instructions) {
  char ins[32] = "-";
  if (instructions >= 0) std::snprintf(ins, sizeof ins, "%.1f", static_cast<double>(instructions) / 1e6);
  char wall[32] = "";
  if (wall_ns >= 0) std::snprintf(wall, sizeof wall, "%.1f", wall_ns / 1e6);
  std::printf("  %-28s %10s %10.1f %6.1f%% %12s\n", name, wall, cpu_ns / 1e6, total_cpu > 0 ? 100.0 * cpu_ns / total_cpu : 0.0,
              ins);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE.json[.gz] [repeats]\n", argv[0]);
    return 2;
  }
  if (std::error_code ec; !std::filesystem::is_regular_file(argv[1], ec)) {
    std::fprintf(stderr, "%s: not a trace file (one file: the bench compares it with a parse of its bytes)\n", argv[1]);
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
  // summed over the threads that did them (ReadTimings); what is left of the read's CPU (reading
  // the bytes, finding where windows end, waiting) is its own row. The analysis's stages run side
  // by side (their wall times overlap): the CPU time of the thread that ran each adds up to the
  // work. Then the report, rendered as JSON and as HTML (to memory).
  {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t p0 = ProcessCpuNs();
    trainrx::profiler::Trace trace;
    trainrx::profiler::ReadTimings rt;
    trainrx::profiler::ReadOptions options;
    options.threads = static_cast<int>(cpus);
    options.timings = &rt;
    if (!trainrx::profiler::ReadTraces({argv[1]}, trace, options).ok()) return 2;
    const double read_s = Seconds(t0);
    const double read_cpu = static_cast<double>(ProcessCpuNs() - p0);
    std::vector<trainrx::analyzers::StageTime> stages;
    const auto t1 = std::chrono::steady_clock::now();
    const auto report = trainrx::analyzers::Analyze(trace, trainrx::analyzers::Thresholds(), cpus, {}, &stages);
    const double analysis_s = Seconds(t1);
    int64_t cpu = 0;
    for (const auto& s : stages) cpu += s.cpu_ns;
    struct Rendered {
      const char* name;
      double wall_ns, cpu_ns;
      int64_t instructions;
    };
    std::vector<Rendered> rendered;
    for (const char* format : {"json", "html"}) {
      std::ostringstream out;
      const auto r0 = std::chrono::steady_clock::now();
      const int64_t c0 = ThreadCpuNs(), i0 = ThreadInstructions();
      trainrx::reports::WriteReport(format, trace, report, trainrx::analyzers::Thresholds(), {}, out);
      const int64_t i1 = ThreadInstructions();
      rendered.push_back({format == std::string("json") ? "report, JSON" : "report, HTML",
                          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - r0).count(),
                          static_cast<double>(ThreadCpuNs() - c0), i0 >= 0 && i1 >= 0 ? i1 - i0 : -1});
    }
    double total = read_cpu + static_cast<double>(cpu);
    for (const auto& r : rendered) total += r.cpu_ns;
    std::printf("stages (%zu threads): read %.3f s wall, %.3f s CPU; analysis %.3f s wall, %.3f s CPU in its stages\n", cpus,
                read_s, read_cpu / 1e9, analysis_s, cpu / 1e9);
    std::printf("  %-28s %10s %10s %7s %12s\n", "stage", "wall ms", "CPU ms", "CPU %", "M instr.");
    using Part = trainrx::profiler::ReadTimings::Part;
    const auto part = [](const Part& p) { return p.counted ? static_cast<int64_t>(p.instructions) : int64_t{-1}; };
    double parts = 0;
    for (const Part* p : {&rt.parse, &rt.merge, &rt.copy, &rt.finalize}) parts += static_cast<double>(p->cpu_ns);
    Row("read: bytes, split, rest", -1, read_cpu - parts, total, -1);
    Row("read: parse windows", -1, static_cast<double>(rt.parse.cpu_ns), total, part(rt.parse));
    Row("read: merge in order", -1, static_cast<double>(rt.merge.cpu_ns), total, part(rt.merge));
    Row("read: copy events", -1, static_cast<double>(rt.copy.cpu_ns), total, part(rt.copy));
    Row("read: finalize (calling thread)", static_cast<double>(rt.finalize_wall_ns), static_cast<double>(rt.finalize.cpu_ns),
        total, part(rt.finalize));
    for (const auto& s : stages)
      Row(s.name.c_str(), static_cast<double>(s.wall_ns), static_cast<double>(s.cpu_ns), total, s.instructions);
    for (const auto& r : rendered) Row(r.name, r.wall_ns, r.cpu_ns, total, r.instructions);
    if (ThreadInstructions() < 0)
      std::printf("  (no instruction counter on this machine: count them with valgrind --tool=callgrind "
                  "--toggle-collect='trainrx::analyzers::NAME*' build/trainrx analyze TRACE)\n");
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
  // At least twice: the first parse also allocates (and page-faults) the parser's buffers.
  for (int i = 0; i < std::max(repeats, 2); ++i) {
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
