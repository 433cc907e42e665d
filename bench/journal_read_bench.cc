// Reading a collector's journal (issue 53): directly into the trace model (the reader's journal
// importer, profiler/io/importer.h) against what the reader did before (decode the journal, write
// it as Kineto JSON, parse that text), interleaved A B A B in one process, wall clock.
// The journal is made from a recording (profiler::EncodeJournal: rank 0's events in 20 frames).
//
//   build/bench/trainrx_journal_read_bench TRACE [rounds=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "trainrx/profiler/journal_format.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"

namespace pr = trainrx::profiler;

namespace {

double Seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [rounds=5]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  pr::Trace recorded;
  if (auto st = pr::ReadTraces({argv[1]}, recorded); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  const std::string journal = pr::EncodeJournal(recorded, recorded.ranks.front().rank, 20);
  std::vector<double> direct, via_json;
  size_t events = 0;
  for (int r = 0; r < rounds; ++r) {
    {
      const auto t0 = std::chrono::steady_clock::now();
      pr::Trace t;
      if (!pr::ReadTraceBuffer(journal, "run.json.partial", -1, t).ok()) return 1;
      direct.push_back(Seconds(t0));
      events = t.events.size();
    }
    {
      const auto t0 = std::chrono::steady_clock::now();
      pr::JournalContents contents;
      if (!pr::DecodeJournal(journal, "run.json.partial", &contents).ok()) return 1;
      contents.trace.Finalize();
      std::ostringstream json;
      pr::WriteKinetoJson(contents.trace, contents.trace.ranks[0].rank, json);
      pr::Trace t;
      if (!pr::ReadTraceBuffer(json.str(), "run.json.partial", -1, t).ok()) return 1;
      via_json.push_back(Seconds(t0));
    }
  }
  std::printf("journal of %zu events, %.1f MB; %d rounds, medians:\n", events, journal.size() / 1e6, rounds);
  std::printf("  read directly (importer)      %8.1f ms\n", Median(direct) * 1e3);
  std::printf("  decode + Kineto JSON + parse  %8.1f ms\n", Median(via_json) * 1e3);
  std::printf("  ratio (before / now)          %8.2fx\n", Median(via_json) / Median(direct));
  return 0;
}
