#include "rank_sides.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/trace_names.h"
#include "trainrx/sets/summary.h"

namespace trainrx::sets {

void NameTheStep(profiler::Trace& trace, const std::string& step_name) {
  if (step_name.empty()) return;
  for (auto& r : trace.ranks) r.config["step_name"] = profiler::ConfigValue::String(step_name);
}

Status ReadFileSides(const std::string& file, const analyzers::Thresholds& thresholds, const std::string& step_name,
                     FileSides* out) {
  *out = {};
  profiler::Trace t;
  // One file per task, read on the task's thread (the tasks are the parallelism).
  profiler::ReadOptions read_options;
  read_options.threads = 1;
  if (Status st = profiler::ReadTraces({file}, t, read_options); !st.ok()) return st;
  NameTheStep(t, step_name);
  // One worker per file: the analysis of a file runs on the worker's thread.
  const analyzers::Report report = analyzers::Analyze(t, thresholds, 1);
  const auto& m = report.metrics;
  for (analyzers::RankSide& side : analyzers::BuildRankSides(t, &m.steps, m.unfinished, m.windows)) {
    for (const auto& f : report.findings)
      if (f.rank == side.info.rank || f.rank < 0) side.findings.push_back(f);
    for (const auto& path : m.critical_paths)
      if (path.rank == side.info.rank) side.critical_paths.push_back(path);
    out->sides.push_back(std::move(side));
  }
  if (!out->sides.empty()) {
    out->sides.front().events = t.stats.events_read;
    out->sides.front().bytes = t.stats.bytes_read;
    out->sides.front().skipped = t.stats.TotalSkipped();
  }
  out->stats = std::move(t.stats);
  return {};
}

void CombineFileSides(std::vector<FileSides>& per_file, std::vector<analyzers::RankSide>* sides,
                      profiler::IngestStats* stats) {
  // Ranks in file order; a rank claimed twice moves to the next free one (profiler::MoveClaimedRank,
  // as ReadTraces does).
  std::set<int32_t> taken;
  const auto is_taken = [&](int32_t r) { return taken.count(r) > 0; };
  for (FileSides& file : per_file) {
    for (auto& side : file.sides) {
      const int32_t from = side.info.rank;
      if (profiler::MoveClaimedRank(&side.info.rank, &side.info.rank_source, is_taken)) {
        const int32_t to = side.info.rank;
        for (auto& s : side.steps) s.rank = to;
        for (auto& s : side.warmup_steps) s.rank = to;
        for (auto& f : side.findings)
          if (f.rank == from) f.rank = to;
        for (auto& u : side.unfinished) u.rank = to;
        for (auto& w : side.windows) w.rank = to;
        for (auto& p : side.critical_paths) p.rank = to;
      }
      taken.insert(side.info.rank);
      sides->push_back(std::move(side));
    }
    for (const auto& e : file.stats.entries) stats->Add(e.kind, e.severity, e.example, e.count);
    stats->events_read += file.stats.events_read;
    stats->bytes_read += file.stats.bytes_read;
  }
  std::sort(sides->begin(), sides->end(), [](const auto& a, const auto& b) { return a.info.rank < b.info.rank; });
}

Status SidesOfTraces(const std::vector<std::string>& files, const analyzers::Thresholds& thresholds,
                     std::vector<analyzers::RankSide>* sides, profiler::IngestStats* stats,
                     const std::string& step_name) {
  std::vector<FileSides> per_file(files.size());
  std::vector<Status> errors(files.size());
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < files.size(); ++i)
    tasks.push_back([&, i] { errors[i] = ReadFileSides(files[i], thresholds, step_name, &per_file[i]); });
  profiler::RunTasks(tasks);
  for (const Status& st : errors)
    if (!st.ok()) return st;
  CombineFileSides(per_file, sides, stats);
  return {};
}

Status SidesOfSummaries(const std::vector<std::string>& files, std::vector<analyzers::RankSide>* sides,
                        profiler::IngestStats* stats) {
  for (const auto& f : files) {
    analyzers::RankSide side;
    if (Status st = ReadSummary(f, &side); !st.ok()) return st;
    stats->events_read += side.events;
    stats->bytes_read += side.bytes;
    if (side.skipped > 0)
      stats->Add("skipped_in_summarized_trace", profiler::IssueSeverity::kDataLoss,
                 fmt::format("{}: its trace {} had events skipped when summarized", f, side.info.source), side.skipped);
    sides->push_back(std::move(side));
  }
  return {};
}

profiler::Trace SkeletonOf(const std::vector<analyzers::RankSide>& sides, profiler::IngestStats stats) {
  profiler::Trace t;
  for (const auto& side : sides) t.ranks.push_back(side.info);
  t.stats = std::move(stats);
  t.Finalize();
  return t;
}

}  // namespace trainrx::sets
