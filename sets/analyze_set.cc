#include "trainrx/sets/analyze_set.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rank_sides.h"
#include "trainrx/profiler/reader.h"
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
Status SomethingRead(const std::vector<std::string>& inputs, const profiler::IngestStats& stats,
                     const std::vector<analyzers::RecordedWindow>& windows) {
  if (stats.events_read > 0) return {};
  for (const auto& w : windows)
    if (!w.opened) return {};
  std::string why;
  for (const auto& e : stats.entries)
    if (e.severity != profiler::IssueSeverity::kInfo)
      why += fmt::format("; {} {}: {}", e.kind, e.count, e.example);
  return Status::Error(
      fmt::format("{}: no events read{}: nothing to analyze", Joined(inputs), why.empty() ? " (the trace is empty)" : why));
}

// `--step NAME` that matched nothing is an error, not a report over other steps.
Status StepFound(const std::vector<std::string>& inputs, const SetOptions& o, const analyzers::Report& report) {
  if (o.step_name.empty() || report.metrics.steps.source.rfind("named: ", 0) == 0) return {};
  return Status::Error(fmt::format("{}: --step {}: no record_function range named '{}' and no Python frame of a function '{}' "
                       "(with_stack traces) in the trace",
                                   Joined(inputs), o.step_name, o.step_name, o.step_name));
}

// The step windows the ranks were recorded through (rank by rank: each side's own).
std::vector<analyzers::RecordedWindow> WindowsOf(const std::vector<analyzers::RankSide>& sides) {
  std::vector<analyzers::RecordedWindow> windows;
  for (const auto& s : sides) windows.insert(windows.end(), s.windows.begin(), s.windows.end());
  return windows;
}

Status Merged(const std::vector<std::string>& files, const SetOptions& o, SetAnalysis* out) {
  profiler::ReadOptions read_options;
  read_options.strict = o.strict;
  if (Status st = profiler::ReadTraces(files, out->trace, read_options); !st.ok()) return st;
  if (Status st = SomethingRead(files, out->trace.stats, analyzers::FindRecordedWindows(out->trace)); !st.ok()) return st;
  if (!o.keep_clocks) analyzers::AlignRankClocks(out->trace);
  NameTheStep(out->trace, o.step_name);
  out->report = analyzers::Analyze(out->trace, o.thresholds, 0, o.what_if);
  return StepFound(files, o, out->report);
}

// The rank-by-rank report from the ranks' sides, however they were made (read here, from
// summaries, or on a cluster's workers): the same checks and the same cross-rank analysis.
Status FromSides(const std::vector<std::string>& files, bool summaries, std::vector<analyzers::RankSide> sides,
                 profiler::IngestStats stats, const SetOptions& o, SetAnalysis* out) {
  if (Status st = SomethingRead(files, stats, WindowsOf(sides)); !st.ok()) return st;
  // The same check the merging reader makes (issue 35: a folder of more than 16 unrelated jobs'
  // traces was analyzed as one job, rank by rank, with no word of it).
  std::vector<profiler::RankInfo> ranks;
  for (const auto& s : sides) ranks.push_back(s.info);
  if (const std::string problem = profiler::CheckJobs(ranks, &stats); !problem.empty() && o.strict)
    return Status::Error(fmt::format("{}: {} (strict: not analyzed)", Joined(files), problem));
  stats.Add("analyzed_rank_by_rank", profiler::IssueSeverity::kInfo,
            fmt::format("{} ranks from {} {}, each analyzed on its own: findings found on several ranks are shown once "
                        "(the rank with the largest saving), the straggler and clocks are compared across ranks; no "
                        "merged operator tables or timeline",
                        sides.size(), files.size(), summaries ? "summaries" : "files"),
            sides.size());
  out->report = analyzers::AnalyzeSides(sides, o.thresholds);
  out->trace = SkeletonOf(sides, std::move(stats));
  if (o.keep_sides) out->sides = std::move(sides);
  return StepFound(files, o, out->report);
}

Status RankByRank(const std::vector<std::string>& files, bool summaries, const SetOptions& o, SetAnalysis* out) {
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
  if (summaries && !o.step_name.empty())
    return Status::Error("--step: names the step in traces; summaries were analyzed when they were written (trainrx summarize)");
  if (Status st = summaries ? SidesOfSummaries(files, &sides, &stats)
                            : SidesOfTraces(files, o.thresholds, &sides, &stats, o.step_name);
      !st.ok())
    return st;
  return FromSides(files, summaries, std::move(sides), std::move(stats), o, out);
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

Status AnalyzeSet(const std::vector<std::string>& paths, const SetOptions& o, SetAnalysis* out) {
  *out = {};
  if (paths.empty()) return Status::Error("no trace files given");
  const auto files = profiler::ExpandTracePaths(paths);
  if (!files.ok()) return files.status();
  out->files = *files;
  size_t summaries = 0;
  for (const auto& f : *files) summaries += IsSummaryPath(f);
  if (summaries > 0 && summaries < files->size())
    return Status::Error(
        fmt::format("{}: the inputs mix per-rank summaries (*.summary.json) and traces: give one kind", Joined(paths)));
  out->strategy = summaries > 0                                      ? Strategy::kSummaries
                  : o.per_rank || files->size() > o.per_rank_above ? Strategy::kRankByRank
                                                                     : Strategy::kMerged;
  // The replay needs the set read as one (a rank's collectives wait for the others'): read rank by
  // rank, the asked fixes would be dropped without a word (each finding's own is still predicted).
  if (out->strategy != Strategy::kMerged && !o.what_if.empty())
    return Status::Error(fmt::format(
        "{}: --what-if replays a set read as one, and {} read {} ({}), where no asked fix is replayed: ask it of at "
        "most {} ranks' traces without --per-rank (each finding's own fix is still predicted rank by rank)",
        Joined(paths), files->size() == 1 ? std::string("this file is") : fmt::format("these {} files are", files->size()),
        StrategyName(out->strategy),
        summaries > 0 ? "per-rank summaries" : o.per_rank ? "--per-rank" : fmt::format("more than {} files", o.per_rank_above),
        o.per_rank_above));
  return out->strategy == Strategy::kMerged ? Merged(*files, o, out)
                                            : RankByRank(*files, out->strategy == Strategy::kSummaries, o, out);
}

Status AnalyzeBuffer(std::string_view bytes, std::string_view name, const SetOptions& o, SetAnalysis* out) {
  *out = {};
  profiler::ReadOptions read_options;
  read_options.strict = o.strict;
  if (Status st = profiler::ReadTraceBuffer(bytes, name, 0, out->trace, read_options); !st.ok()) return st;
  out->files = {std::string(name)};
  if (Status st = SomethingRead(out->files, out->trace.stats, analyzers::FindRecordedWindows(out->trace)); !st.ok())
    return st;
  NameTheStep(out->trace, o.step_name);
  out->report = analyzers::Analyze(out->trace, o.thresholds, 0, o.what_if);
  return StepFound(out->files, o, out->report);
}

Status FileSidesJson(const std::string& file, const analyzers::Thresholds& thresholds, const std::string& step_name,
                     std::string* json) {
  FileSides sides;
  if (Status st = ReadFileSides(file, thresholds, step_name, &sides); !st.ok()) return st;
  std::ostringstream out;
  WriteFileSides(sides, file, out);
  *json = std::move(out).str();
  return {};
}

Status AnalyzeFileSides(const std::vector<std::string>& files, const std::vector<std::string>& docs,
                        const SetOptions& o, SetAnalysis* out) {
  *out = {};
  if (files.empty()) return Status::Error("no trace files given");
  if (files.size() != docs.size())
    return Status::Internal(fmt::format("{} files but {} file sides", files.size(), docs.size()));
  std::vector<FileSides> per_file(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (Status st = ParseFileSides(docs[i], files[i], &per_file[i]); !st.ok()) return st;
  }
  out->strategy = Strategy::kRankByRank;
  out->files = files;
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
  CombineFileSides(per_file, &sides, &stats);
  return FromSides(files, false, std::move(sides), std::move(stats), o, out);
}

Status SummarizeSet(const std::vector<std::string>& paths, const analyzers::Thresholds& thresholds,
                    const std::string& out_dir, std::vector<WrittenSummary>* written) {
  const auto files = profiler::ExpandTracePaths(paths);
  if (!files.ok()) return files.status();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) return Status::Error(fmt::format("{}: cannot create the output directory", out_dir));
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
  if (Status st = SidesOfTraces(*files, thresholds, &sides, &stats); !st.ok()) return st;
  if (Status st = SomethingRead(*files, stats, WindowsOf(sides)); !st.ok()) return st;
  for (const auto& side : sides) {
    const std::string path = (fs::path(out_dir) / fmt::format("rank-{}.summary.json", side.info.rank)).string();
    std::ofstream out(path);
    WriteSummary(side, out);
    out.flush();
    if (!out) return Status::Error(path + ": write failed");
    written->push_back({side.info.rank, side.info.source, path, side.steps.size(), side.gpu.size() + side.gloo.size(),
                        side.findings.size()});
  }
  return {};
}

}  // namespace trainrx::sets
