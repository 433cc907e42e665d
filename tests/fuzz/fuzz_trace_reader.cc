// libFuzzer targets on arbitrary bytes (JSON or gzip) read as a trace, at a window size the first
// byte picks (64 B .. 8 MiB):
//   fuzz_trace_reader    the reader alone (fast: the long runs), on the calling thread and on three
//                        worker threads: both reads must give the same outcome, message, counts
//                        and events (windows are merged in file order)
//   fuzz_trace_pipeline  (TRAINRX_FUZZ_PIPELINE) then what every trace goes through: the analyzers,
//                        the three report renderers, and the Kineto writer, whose output must read
//                        back (the writer never writes what the reader refuses)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/reports/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainrx;
  if (size == 0) return 0;
  profiler::ReadOptions options;
  options.window_bytes = size_t{64} << ((data[0] % 18));
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  profiler::Trace trace;
  options.threads = 1;
  const auto status = profiler::ReadTraceBuffer(bytes, "fuzz.json", -1, trace, options);
#ifndef TRAINRX_FUZZ_PIPELINE
  {
    profiler::Trace threaded;
    options.threads = 3;
    const auto again = profiler::ReadTraceBuffer(bytes, "fuzz.json", -1, threaded, options);
    auto digest = [](const trainrx::Status& st, const profiler::Trace& t) {
      std::string d = (st.ok() ? "ok " : "error ") + st.message();
      d += " events=" + std::to_string(t.events.size()) + " strings=" + std::to_string(t.strings.size()) +
           " tracks=" + std::to_string(t.tracks.size()) + " read=" + std::to_string(t.stats.events_read);
      for (const auto& e : t.stats.entries) d += "\n" + e.kind + " " + std::to_string(e.count) + " " + e.example;
      for (const auto& e : t.events) d += " " + std::to_string(e.ts_ns) + "/" + std::to_string(e.name);
      return d;
    };
    if (digest(status, trace) != digest(again, threaded)) {
      fprintf(stderr, "one thread and three threads read differently:\n%s\n---\n%s\n", digest(status, trace).c_str(),
              digest(again, threaded).c_str());
      abort();
    }
  }
#endif
  if (!status.ok()) return 0;
#ifdef TRAINRX_FUZZ_PIPELINE
  const analyzers::Thresholds thresholds;
  const analyzers::Report report = analyzers::Analyze(trace, thresholds);
  reports::RenderOptions render;
  std::ostringstream sink;
  reports::WriteText(trace, report, thresholds, render, sink);
  reports::WriteMarkdown(trace, report, thresholds, render, sink);
  reports::WriteJson(trace, report, thresholds, render, sink);
  for (const int32_t rank : trace.RankIds()) {
    std::ostringstream written;
    profiler::WriteKinetoJson(trace, rank, written);
    profiler::Trace back;
    const auto st = profiler::ReadTraceBuffer(written.str(), "written.json", -1, back);
    if (!st.ok()) {
      fprintf(stderr, "the writer wrote what the reader refuses: %s\n", st.message().c_str());
      abort();
    }
  }
#endif
  return 0;
}
