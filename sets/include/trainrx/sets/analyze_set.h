// trainrx::sets — a set of traces (or per-rank summaries) analyzed as one job: the one entrance
// for `analyze`, `record --analyze`, `run`, `summarize` and the experiments (fix/ab/gate) alike.
//
// AnalyzeSet expands the paths once, picks how to read them, checks once that they are one job's
// ranks (mixed jobs, ranks claimed twice: profiler::CheckJobs, whichever strategy reads them),
// aligns the ranks' clocks, analyzes and returns the report with the trace it describes.
// Strategies:
//   merged        up to `per_rank_above` trace files: one Trace, every analysis on it;
//   rank by rank  more files, or `per_rank`: each file read and analyzed on its own on the threads
//                 profiler::RunTasks chooses, keeping its RankSide (analyzers/cross_rank.h); the
//                 cross-rank analyses run on the sides (memory: one trace per core, not the set);
//   summaries     *.summary.json files (`trainrx summarize`): their sides, as rank by rank.
// A set from which no event was read is an error: a report built from nothing would look healthy
// (a file cut inside its first event gave "No problem crossed its threshold", exit 0).
// Torch-free; no printing. Threading: calls share no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/cross_rank.h"
#include "trainrx/profiler/status.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::sets {

struct SetOptions {
  analyzers::Thresholds thresholds;
  // Traces of different jobs, inconsistent ranks or a trace cut off inside its events are an
  // error, not a warning in the report.
  bool strict = false;
  bool keep_clocks = false;   // leave each rank's times as its file has them
  bool per_rank = false;      // rank by rank whatever the number of files
  // Above this many trace files, rank by rank: a merged model of hundreds of ranks does not fit in
  // memory (8 ranks of a 1 GB trace each take ~5 GB merged).
  size_t per_rank_above = 16;
  // The training step as the user names it (`analyze --step NAME`): every record_function range
  // of that name, or Python frame of that function in with_stack traces ("train.py(57): NAME"),
  // is a step, whatever else the trace has. A name that matches nothing is an error.
  std::string step_name;
  // Rank by rank and summaries: keep each rank's side in SetAnalysis::sides (trainrx export).
  bool keep_sides = false;
  // Fixes to replay together beside the findings' own (`analyze --what-if`; transform names,
  // analyzers::ResolveWhatIf). Merged analyses only: asked of a set read rank by rank, an error
  // (each finding's own fix is predicted either way).
  std::vector<std::string> what_if;
};

enum class Strategy { kMerged, kRankByRank, kSummaries };
const char* StrategyName(Strategy s);  // "merged", "rank by rank", "summaries"

struct SetAnalysis {
  Strategy strategy = Strategy::kMerged;
  std::vector<std::string> files;  // the inputs, directories expanded
  // Merged: the trace analyzed. Rank by rank and summaries: a skeleton holding what a report says
  // of its inputs (the ranks with their clock outcome, the ingest stats), no events.
  profiler::Trace trace;
  analyzers::Report report;
  // Rank by rank and summaries, with SetOptions::keep_sides: each rank's side, sorted by rank, its
  // clock outcome in its info (its times are its own file's: add info.clock_shift_ns).
  std::vector<analyzers::RankSide> sides;
};

// An error (which file, what was wrong) when the set cannot be analyzed; the caller exits 2.
Status AnalyzeSet(const std::vector<std::string>& paths, const SetOptions& options, SetAnalysis* out);
// One trace already in memory (the built-in sample), `name` in messages and the report.
Status AnalyzeBuffer(std::string_view bytes, std::string_view name, const SetOptions& options, SetAnalysis* out);

// The rank-by-rank strategy split at its seam, for a set analyzed on a cluster (trainrx.dask):
// FileSidesJson is the work of one file (read, analyze, keep its ranks' sides: JSON of schema
// "trainrx.file_sides/1", sets/summary.h), run where the file is; AnalyzeFileSides is the reduce,
// given every file's document in the order of `files` (ExpandTracePaths' order). Their report is
// the one AnalyzeSet gives for the same files rank by rank (`--per-rank`), byte for byte.
Status FileSidesJson(const std::string& file, const analyzers::Thresholds& thresholds, const std::string& step_name,
                     std::string* json);
Status AnalyzeFileSides(const std::vector<std::string>& files, const std::vector<std::string>& docs,
                        const SetOptions& options, SetAnalysis* out);

// `trainrx summarize`: each rank of the set analyzed on its own, one summary per rank written to
// out_dir/rank-R.summary.json. `written` gets each rank's side (without its findings' details)
// and path, for the caller to print.
struct WrittenSummary {
  int32_t rank = 0;
  std::string source, path;
  size_t steps = 0, collectives = 0, findings = 0;
};
Status SummarizeSet(const std::vector<std::string>& paths, const analyzers::Thresholds& thresholds,
                    const std::string& out_dir, std::vector<WrittenSummary>* written);

}  // namespace trainrx::sets
