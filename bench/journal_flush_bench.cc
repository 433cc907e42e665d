// The journal's cost per record, in one process: the binary frame a flush writes now
// (probes/journal.cc) against the Kineto JSON the journal wrote before issue 34.13 (the same drain,
// then Finalize and the Kineto writer), interleaved round by round, on the flushing thread's CPU
// clock. Each round records `records` ops on 3 threads (30 op names, inputs on the first 1 %,
// a dataflow edge every 100), then one consumer drains them all in flushes of `per_flush` records
// as the journal would, writing to `path`: by default a file in the temporary folder, as the
// journal writes next to the trace (the kernel's copy into the page cache is part of a flush's
// cost: more than half of it in a real run, issue 34.13); /dev/null leaves that out.
//
//   build/bench/trainrx_journal_bench [records=600000] [rounds=7] [per_flush=150000] [path]
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "journal.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/thread_counters.h"

namespace tp = trainrx::probes;
namespace pr = trainrx::profiler;

namespace {

using pr::ThreadCpuNs;

const char* kNames[30] = {"aten::add", "aten::mul", "aten::sub", "aten::div", "aten::clamp", "aten::sin", "aten::flip",
                          "aten::slice", "aten::select", "aten::view", "aten::contiguous", "aten::copy_", "aten::empty",
                          "aten::stack", "aten::linear", "aten::addmm", "aten::relu", "aten::t", "aten::transpose",
                          "aten::expand", "aten::as_strided", "aten::mm", "aten::sum", "aten::mean", "aten::zeros",
                          "aten::fill_", "aten::index", "aten::cat", "aten::to", "aten::_to_copy"};

// Records `n` finished ops on 3 threads, in `parts` slices so a drain can take each slice.
void Record(tp::Collector& c, uint64_t n, int64_t t0) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&c, n, t, t0] {
      tp::ThreadBuffer* b = c.ThisThread();
      int64_t ts = t0;
      for (uint64_t i = 0; i < n / 3; ++i) {
        tp::Rec* r = b->Append();
        if (!r) return;
        r->name = b->InternStatic(kNames[(i * 7 + t) % 30]);
        r->flags = tp::kGradEnabled;
        r->start_ticks = ts += 700;
        if (i < n / 300) r->aux = b->AddInputs({"[[64, 3, 16, 16], [3, 1, 1]]", "[\"float\", \"float\"]", ""});
        if (i % 100 == 1) b->AddEdge(i - 1, i);
        tp::EndRecord(r, ts += 300);
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t records = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 600'000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const uint64_t per_flush = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 150'000;
  const std::string path = argc > 4 ? argv[4] : (std::filesystem::temp_directory_path() / "trainrx_journal_bench.partial").string();
  std::vector<double> bin_ns, json_ns;
  size_t bin_bytes = 0, json_bytes = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int mode = 0; mode < 2; ++mode) {
      const bool binary = (mode + r) % 2 == 0;  // alternate which goes first
      tp::CollectorOptions options;
      options.max_events = records * 2;
      tp::Collector c(options);
      c.SetRecording(true);
      const int64_t base = tp::NowNs();
      int64_t cpu = 0;
      size_t bytes = 0;
      uint64_t drained = 0;
      tp::Journal j;
      tp::DrainCursor cursor;
      const int fd = binary ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (const trainrx::Status st = binary ? j.Open(path, c, 0, base, 2000) : trainrx::Status(); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      for (uint64_t done = 0; done < records; done += per_flush) {
        Record(c, std::min(per_flush, records - done), base + static_cast<int64_t>(done) * 1000);
        const int64_t t0 = ThreadCpuNs();
        if (binary) {
          if (!j.Flush(c, tp::NowNs()).ok()) return 1;
        } else {
          // The journal before issue 34.13: drain, finalize, Kineto JSON, one write.
          std::ostringstream buf;
          pr::JsonWriter w(buf);
          pr::Trace fragment;
          fragment.ranks.push_back({});
          c.Drain(fragment, 0, cursor);
          drained += fragment.events.size();
          fragment.Finalize(1);
          pr::WriteKinetoEvents(w, fragment, 0, base);
          const std::string s = buf.str();
          bytes += s.size();
          if (::write(fd, s.data(), s.size()) < 0) return 1;
        }
        cpu += ThreadCpuNs() - t0;
      }
      if (fd >= 0) ::close(fd);
      if (path != "/dev/null") {  // (never Journal::Remove on /dev/null: it would unlink it)
        if (binary) j.Remove();
        else ::unlink(path.c_str());
      }
      const uint64_t n = binary ? j.stats().events : drained;
      (binary ? bin_ns : json_ns).push_back(static_cast<double>(cpu) / static_cast<double>(n));
      if (binary) bin_bytes = j.stats().bytes;
      else json_bytes = bytes;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto range = [](const std::vector<double>& v) {
    return std::to_string(*std::min_element(v.begin(), v.end())).substr(0, 6) + "-" +
           std::to_string(*std::max_element(v.begin(), v.end())).substr(0, 6);
  };
  std::printf("journal flush, %llu records in flushes of %llu, %d rounds, written to %s (flushing thread's CPU time per "
              "record)\n",
              static_cast<unsigned long long>(records), static_cast<unsigned long long>(per_flush), rounds, path.c_str());
  std::printf("| format | ns/record (median) | rounds | bytes/record |\n|---|---|---|---|\n");
  std::printf("| binary frames (now) | %.0f | %s | %.1f |\n", median(bin_ns), range(bin_ns).c_str(),
              static_cast<double>(bin_bytes) / static_cast<double>(records));
  std::printf("| Kineto JSON (before) | %.0f | %s | %.1f |\n", median(json_ns), range(json_ns).c_str(),
              static_cast<double>(json_bytes) / static_cast<double>(records));
  std::printf("binary / JSON: %.2f\n", median(bin_ns) / median(json_ns));
  return 0;
}
