// Whether each rank's recording ran to its end. Our collector writes, in the trace's "trainrx"
// block, "end_reason" ("exit", "stop", or the signal that ended the process: "SIGSEGV",
// "SIGTERM", ...) and "incomplete" (true unless exit/stop), with "duration_ns" and the ranges it
// had to close at the end ("unfinished_ranges"), and "exit_code" when main() returned non-zero
// (a Python script that died of an exception returns 1): that run failed, though its trace is whole. Traces from other tools carry neither: a crashed
// torch.profiler run usually writes no trace at all, so those are taken as finished.
#include <algorithm>
#include <cstdlib>
#include <map>

#include "config_view.h"
#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

std::vector<UnfinishedRank> FindUnfinishedRanks(const profiler::Trace& trace, const StepModel& steps) {
  // Each rank's event span, to measure a trace without duration_ns and how far behind the
  // latest rank an unfinished one stopped.
  std::map<int32_t, std::pair<int64_t, int64_t>> span;  // rank -> (first start, last end)
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    auto& [lo, hi] = span.try_emplace(trace.tracks[ti].rank, INT64_MAX, INT64_MIN).first->second;
    for (const profiler::Event& e : trace.TrackEvents(ti)) {
      lo = std::min(lo, e.ts_ns);
      hi = std::max(hi, e.end_ns());
    }
  }
  int64_t latest = INT64_MIN;
  for (const auto& [rank, s] : span) latest = std::max(latest, s.second);

  std::vector<UnfinishedRank> out;
  for (const profiler::RankInfo& info : trace.ranks) {
    const std::string reason = ConfigText(info, "end_reason");
    const std::string exit_code = ConfigText(info, "exit_code");
    const bool failed_exit = !exit_code.empty() && exit_code != "0";
    const bool normal_end = reason.empty() || reason == "exit" || reason == "stop";
    if (ConfigText(info, "incomplete") != "true" && normal_end && !failed_exit) continue;
    UnfinishedRank u;
    u.rank = info.rank;
    u.source = info.source;
    u.end_reason = reason.empty() ? "unknown" : reason;
    if (failed_exit && normal_end) u.end_reason = "exit code " + exit_code + " (a Python script: an uncaught exception, or sys.exit)";
    const auto it = span.find(info.rank);
    const bool has_events = it != span.end() && it->second.second >= it->second.first;
    const int64_t duration = std::strtoll(ConfigText(info, "duration_ns").c_str(), nullptr, 10);
    u.recorded_ns = duration > 0 ? duration : has_events ? it->second.second - it->second.first : 0;
    u.steps = std::count_if(steps.steps.begin(), steps.steps.end(), [&](const StepRow& s) { return s.rank == info.rank; });
    u.open_ranges = std::strtoll(ConfigText(info, "unfinished_ranges").c_str(), nullptr, 10);
    if (trace.ranks.size() > 1 && has_events) u.behind_ns = latest - it->second.second;
    out.push_back(std::move(u));
  }
  return out;
}

namespace {
// A whole number of the rank's "trainrx" block; `none` where the key is missing.
int64_t BlockNumber(const profiler::RankInfo& info, const char* key, int64_t none = 0) {
  const std::string text = ConfigText(info, key);
  return text.empty() ? none : std::strtoll(text.c_str(), nullptr, 10);
}
}  // namespace

std::vector<RecordedWindow> FindRecordedWindows(const profiler::Trace& trace) {
  std::vector<RecordedWindow> out;
  for (const profiler::RankInfo& info : trace.ranks) {
    if (ConfigText(info, "window_steps").empty()) continue;
    RecordedWindow w;
    w.rank = info.rank;
    w.skip = BlockNumber(info, "window_skip");
    w.steps = BlockNumber(info, "window_steps");
    w.boundary = ConfigText(info, "window_boundary");
    w.run_boundaries = BlockNumber(info, "window_run_boundaries");
    w.opened = ConfigText(info, "window_opened") == "true";
    w.closed = ConfigText(info, "window_closed") == "true";
    w.gpu_records_outside = BlockNumber(info, "gpu_records_outside_window");
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<RecordingLoss> FindRecordingLosses(const profiler::Trace& trace) {
  std::map<int32_t, int64_t> kept;  // rank -> its events
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) kept[trace.tracks[ti].rank] += static_cast<int64_t>(trace.tracks[ti].event_count);
  std::vector<RecordingLoss> out;
  for (const profiler::RankInfo& info : trace.ranks) {
    RecordingLoss l;
    l.dropped = BlockNumber(info, "dropped_records", 0);
    l.gpu_dropped = BlockNumber(info, "gpu_records_over_cap", 0) + BlockNumber(info, "cupti_dropped_records", 0);
    if (l.dropped <= 0 && l.gpu_dropped <= 0) continue;
    l.rank = info.rank;
    l.source = info.source;
    l.kept = kept[info.rank];
    l.max_events = BlockNumber(info, "max_events", -1);
    l.run_ns = BlockNumber(info, "duration_ns", -1);
    const int64_t start = BlockNumber(info, "start_ns", -1), first = BlockNumber(info, "first_dropped_ns", -1);
    if (start > 0 && first >= start) {
      l.kept_ns = first - start;
      l.first_dropped_ns = first;
    }
    l.run_steps = BlockNumber(info, "window_run_boundaries", -1);
    l.boundary = ConfigText(info, "window_boundary");
    out.push_back(std::move(l));
  }
  return out;
}

void LeaveOutStepsPastLosses(StepModel& steps, std::vector<RecordingLoss>& losses) {
  bool cut = false;
  for (RecordingLoss& l : losses) {
    if (l.first_dropped_ns < 0) continue;
    const size_t before = steps.steps.size();
    std::erase_if(steps.steps, [&](const StepRow& s) { return s.rank == l.rank && s.start_ns + s.wall_ns > l.first_dropped_ns; });
    l.steps_cut = static_cast<int64_t>(before - steps.steps.size());
    cut = cut || l.steps_cut > 0;
  }
  if (cut) SummarizeStepRows(steps);
}

}  // namespace trainrx::analyzers
