// Analysis of a set rank by rank, and `trainrx summarize`: each rank's trace is read, analyzed on
// its own and dropped, keeping its RankSide (analyzers/cross_rank.h: steps, collectives, machine,
// findings); the cross-rank analyses then run on the sides. Memory: the traces being read (one
// per worker) plus the sides.
#pragma once

#include <string>
#include <vector>

#include "trainrx/analyzers/cross_rank.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::cli {

// Reads every file (trace files, expanded from directories) with `threads` workers; fills `sides`
// (sorted by rank) and `stats` (the files' ingest problems, events and bytes). A rank claimed by
// two files moves the later one to the next free rank, as the merging reader does. False with
// *error naming the file when one cannot be read.
bool SidesOfTraces(const std::vector<std::string>& files, const analyzers::Thresholds& thresholds, size_t threads,
                   std::vector<analyzers::RankSide>* sides, profiler::IngestStats* stats, std::string* error);

// The same from per-rank summaries (`trainrx summarize`): their sides, and in `stats` what their
// traces held and the events their readers skipped.
bool SidesOfSummaries(const std::vector<std::string>& files, std::vector<analyzers::RankSide>* sides,
                      profiler::IngestStats* stats, std::string* error);

// A trace that holds no events, only what a report says of the inputs: the ranks (with their clock
// outcome) and the ingest stats. Reports render an AnalyzeSides report against it.
profiler::Trace SkeletonOf(const std::vector<analyzers::RankSide>& sides, profiler::IngestStats stats);

// `trainrx summarize PATHS -o DIR`: DIR/rank-R.summary.json per rank; prints one line per file.
int RunSummarize(const std::vector<std::string>& paths, const std::string& out_dir,
                 const std::vector<std::string>& threshold_args);

}  // namespace trainrx::cli
