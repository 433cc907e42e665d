#include "trainrx/experiments/launch_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "trainrx/profiler/env.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/profiler_steps.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::experiments {

namespace fs = std::filesystem;

namespace {
// A file name another process of the launch of `name` ("run.json") writes: "run.rank1.json",
// "run.pid77.json" (profiler::ProcessTracePath's rule).
bool IsTaggedName(const std::string& n, const std::string& name) {
  return profiler::ParseTaggedTraceName(n, name).has_value();
}
}  // namespace

std::vector<std::string> LaunchTraces(const fs::path& output, fs::file_time_type since) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::exists(output, ec) && fs::last_write_time(output, ec) >= since) out.push_back(output.string());
  const std::string name = output.filename().string();
  std::vector<std::string> children;
  for (const auto& entry : fs::directory_iterator(output.parent_path(), ec)) {
    if (!IsTaggedName(entry.path().filename().string(), name) || entry.last_write_time(ec) < since) continue;
    children.push_back(entry.path().string());
  }
  std::sort(children.begin(), children.end());
  out.insert(out.end(), children.begin(), children.end());
  return out;
}

std::vector<std::string> FinishJournals(const fs::path& output, fs::file_time_type since,
                                        const std::string& root_end_reason, int64_t ended_ns) {
  std::vector<std::string> out;
  const std::string name = output.filename().string();
  const std::string kJournal = env::kJournalSuffix;
  std::error_code ec;
  std::vector<fs::path> journals;
  for (const auto& entry : fs::directory_iterator(output.parent_path(), ec)) {
    // The journal of this launch's trace or of one of its tagged children's.
    const std::string n = entry.path().filename().string();
    if (n.size() <= kJournal.size() || !n.ends_with(kJournal)) continue;
    const std::string traced = n.substr(0, n.size() - kJournal.size());
    if ((traced != name && !IsTaggedName(traced, name)) || entry.last_write_time(ec) < since) continue;
    journals.push_back(entry.path());
  }
  std::sort(journals.begin(), journals.end());
  for (const fs::path& journal : journals) {
    const std::string j = journal.string();
    const fs::path trace_path = j.substr(0, j.size() - kJournal.size());
    if (fs::exists(trace_path, ec) && fs::last_write_time(trace_path, ec) >= since) continue;  // written after all
    profiler::Trace trace;
    const auto st = profiler::ReadTraces({j}, trace);
    if (!st.ok() || trace.ranks.empty()) {
      out.push_back(fmt::format("{}: could not be read back ({}); left as it is", j, st.ok() ? "no rank" : st.message()));
      continue;
    }
    profiler::RankInfo& info = trace.ranks[0];
    // The last flush: the journal's own counter, else the last thing recorded.
    int64_t last = 0;
    const profiler::StrId flush = trace.strings.Find("trainrx.journal");
    for (const auto& c : trace.counters)
      if (c.name == flush) last = std::max(last, c.ts_ns);
    if (last == 0)
      for (const auto& e : trace.events) last = std::max(last, e.end_ns());
    const bool root = trace_path == output;
    const std::string reason = root ? root_end_reason : "killed";
    const auto start = info.config.find("start_ns");
    const int64_t start_ns = start == info.config.end() ? 0 : start->second.AsInt().value_or(0);
    info.config["end_reason"] = profiler::ConfigValue::String(reason);
    info.config["incomplete"] = profiler::ConfigValue::Bool(true);
    info.config["journal_salvaged"] = profiler::ConfigValue::Bool(true);
    if (start_ns > 0 && last > start_ns) info.config["duration_ns"] = profiler::ConfigValue::Number(last - start_ns);
    if (ended_ns > last && last > 0) info.config["journal_missing_ns"] = profiler::ConfigValue::Number(ended_ns - last);
    const std::string steps_from = profiler::AddProfilerSteps(trace, info.rank);
    if (!steps_from.empty()) info.config["profiler_steps_from"] = profiler::ConfigValue::String(steps_from);
    trace.Finalize();
    if (const auto wst = profiler::ReplaceKinetoFile(trace, info.rank, trace_path.string()); !wst.ok()) {
      out.push_back(fmt::format("{}: could not write the trace from its journal ({}); the journal is kept", j, wst.message()));
      continue;
    }
    fs::remove(journal, ec);
    // The binary journal's own losses (journal_format.h), said here as in the trace.
    std::string losses;
    if (auto it = info.config.find("journal_torn_bytes"); it != info.config.end())
      losses += fmt::format("; its last flush was cut off while it was written ({} bytes lost)", it->second.Text());
    if (auto it = info.config.find("journal_corrupt_frames"); it != info.config.end())
      losses += fmt::format("; {} flushes did not check out and were skipped", it->second.Text());
    out.push_back(fmt::format("{}: the process ended without writing its trace ({}); made it from its journal: "
                              "{} events up to its last flush{}{}",
                              trace_path.string(), reason, trace.events.size(),
                              ended_ns > last && last > 0 ? fmt::format(", {:.1f} s before the end", (ended_ns - last) / 1e9) : "",
                              losses));
  }
  return out;
}

}  // namespace trainrx::experiments
