#include "trainrx/sets/analyze_set.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "rank_sides.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/sets/summary.h"

namespace trainrx::sets {
namespace {

std::string Joined(const std::vector<std::string>& paths) {
  std::string s;
  for (const auto& p : paths) s += (s.empty() ? "" : ", ") + p;
  return s;
}

// A report from zero events would say "No problem crossed its threshold" about nothing. The
// ingest entries say why nothing was read (a file cut inside its first event, events all malformed).
// One exception: a recording whose step window never opened (record --skip past the run's end)
// holds no events by design, and its report says so first (reports' WindowText).
bool SomethingRead(const std::vector<std::string>& inputs, const profiler::IngestStats& stats,
                   const std::vector<analyzers::RecordedWindow>& windows, std::string* error) {
  if (stats.events_read > 0) return true;
  for (const auto& w : windows)
    if (!w.opened) return true;
  std::string why;
  for (const auto& e : stats.entries)
    if (e.severity != profiler::IssueSeverity::kInfo)
      why += fmt::format("; {} {}: {}", e.kind, e.count, e.example);
  *error = fmt::format("{}: no events read{}: nothing to analyze", Joined(inputs), why.empty() ? " (the trace is empty)" : why);
  return false;
}

// `--step NAME` that matched nothing is an error, not a report over other steps.
bool StepFound(const std::vector<std::string>& inputs, const SetOptions& o, const analyzers::Report& report,
               std::string* error) {
  if (o.step_name.empty() || report.metrics.steps.source.rfind("named: ", 0) == 0) return true;
  *error = fmt::format("{}: --step {}: no record_function range named '{}' and no Python frame of a function '{}' "
                       "(with_stack traces) in the trace",
                       Joined(inputs), o.step_name, o.step_name, o.step_name);
  return false;
}

// The step windows the ranks were recorded through (rank by rank: each side's own).
std::vector<analyzers::RecordedWindow> WindowsOf(const std::vector<analyzers::RankSide>& sides) {
  std::vector<analyzers::RecordedWindow> windows;
  for (const auto& s : sides) windows.insert(windows.end(), s.windows.begin(), s.windows.end());
  return windows;
}

bool Merged(const std::vector<std::string>& files, const SetOptions& o, SetAnalysis* out, std::string* error) {
  profiler::ReadOptions read_options;
  read_options.strict = o.strict;
  if (const auto st = profiler::ReadTraces(files, out->trace, read_options); !st.ok) {
    *error = st.error;
    return false;
  }
  if (!SomethingRead(files, out->trace.stats, analyzers::FindRecordedWindows(out->trace), error)) return false;
  if (!o.keep_clocks) analyzers::AlignRankClocks(out->trace);
  NameTheStep(out->trace, o.step_name);
  out->report = analyzers::Analyze(out->trace, o.thresholds);
  return StepFound(files, o, out->report, error);
}

bool RankByRank(const std::vector<std::string>& files, bool summaries, const SetOptions& o, SetAnalysis* out,
                std::string* error) {
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
  if (summaries && !o.step_name.empty()) {
    *error = "--step: names the step in traces; summaries were analyzed when they were written (trainrx summarize)";
    return false;
  }
  if (!(summaries ? SidesOfSummaries(files, &sides, &stats, error)
                  : SidesOfTraces(files, o.thresholds, &sides, &stats, error, o.step_name)))
    return false;
  if (!SomethingRead(files, stats, WindowsOf(sides), error)) return false;
  // The same check the merging reader makes (issue 35: a folder of more than 16 unrelated jobs'
  // traces was analyzed as one job, rank by rank, with no word of it).
  std::vector<profiler::RankInfo> ranks;
  for (const auto& s : sides) ranks.push_back(s.info);
  if (const std::string problem = profiler::CheckJobs(ranks, &stats); !problem.empty() && o.strict) {
    *error = fmt::format("{}: {} (strict: not analyzed)", Joined(files), problem);
    return false;
  }
  stats.Add("analyzed_rank_by_rank", profiler::IssueSeverity::kInfo,
            fmt::format("{} ranks from {} {}, each analyzed on its own: findings found on several ranks are shown once "
                        "(the rank with the largest saving), the straggler and clocks are compared across ranks; no "
                        "merged operator tables or timeline",
                        sides.size(), files.size(), summaries ? "summaries" : "files"),
            sides.size());
  out->report = analyzers::AnalyzeSides(sides, o.thresholds);
  out->trace = SkeletonOf(sides, std::move(stats));
  return StepFound(files, o, out->report, error);
}

}  // namespace

const char* StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kMerged: return "merged";
    case Strategy::kRankByRank: return "rank by rank";
    case Strategy::kSummaries: return "summaries";
  }
  return "merged";
}

bool AnalyzeSet(const std::vector<std::string>& paths, const SetOptions& o, SetAnalysis* out, std::string* error) {
  *out = {};
  if (paths.empty()) {
    *error = "no trace files given";
    return false;
  }
  const auto files = profiler::ExpandTracePaths(paths, error);
  if (!files) return false;
  out->files = *files;
  size_t summaries = 0;
  for (const auto& f : *files) summaries += IsSummaryPath(f);
  if (summaries > 0 && summaries < files->size()) {
    *error = fmt::format("{}: the inputs mix per-rank summaries (*.summary.json) and traces: give one kind", Joined(paths));
    return false;
  }
  out->strategy = summaries > 0                                      ? Strategy::kSummaries
                  : o.per_rank || files->size() > o.per_rank_above ? Strategy::kRankByRank
                                                                     : Strategy::kMerged;
  return out->strategy == Strategy::kMerged ? Merged(*files, o, out, error)
                                            : RankByRank(*files, out->strategy == Strategy::kSummaries, o, out, error);
}

bool AnalyzeBuffer(std::string_view bytes, std::string_view name, const SetOptions& o, SetAnalysis* out,
                   std::string* error) {
  *out = {};
  profiler::ReadOptions read_options;
  read_options.strict = o.strict;
  if (const auto st = profiler::ReadTraceBuffer(bytes, name, 0, out->trace, read_options); !st.ok) {
    *error = st.error;
    return false;
  }
  out->files = {std::string(name)};
  if (!SomethingRead(out->files, out->trace.stats, analyzers::FindRecordedWindows(out->trace), error)) return false;
  out->report = analyzers::Analyze(out->trace, o.thresholds);
  return true;
}

bool SummarizeSet(const std::vector<std::string>& paths, const analyzers::Thresholds& thresholds, const std::string& out_dir,
                  std::vector<WrittenSummary>* written, std::string* error) {
  const auto files = profiler::ExpandTracePaths(paths, error);
  if (!files) return false;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    *error = fmt::format("{}: cannot create the output directory", out_dir);
    return false;
  }
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
  if (!SidesOfTraces(*files, thresholds, &sides, &stats, error)) return false;
  if (!SomethingRead(*files, stats, WindowsOf(sides), error)) return false;
  for (const auto& side : sides) {
    const std::string path = (fs::path(out_dir) / fmt::format("rank-{}.summary.json", side.info.rank)).string();
    std::ofstream out(path);
    WriteSummary(side, out);
    out.flush();
    if (!out) {
      *error = path + ": write failed";
      return false;
    }
    written->push_back({side.info.rank, side.info.source, path, side.steps.size(), side.gpu.size() + side.gloo.size(),
                        side.findings.size()});
  }
  return true;
}

}  // namespace trainrx::sets
