// A set rank by rank (private to sets/): each rank's trace read, analyzed on its own and dropped,
// keeping its RankSide (analyzers/cross_rank.h: steps, collectives, machine, findings). Memory:
// the traces being read (one per worker) plus the sides.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/cross_rank.h"
#include "trainrx/profiler/status.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::sets {

// One trace file read and analyzed on its own: its ranks' sides (the file's events, bytes and
// skipped events on the first) and its ingest stats. The unit of work of a set analyzed rank by
// rank, on this machine's threads (SidesOfTraces) or on a cluster's workers (file_sides.h).
struct FileSides {
  std::vector<analyzers::RankSide> sides;
  profiler::IngestStats stats;
};
Status ReadFileSides(const std::string& file, const analyzers::Thresholds& thresholds, const std::string& step_name,
                     FileSides* out);
// The files' sides, in file order, into one set: `sides` sorted by rank (a rank claimed twice moves
// to the next free one), `stats` their ingest stats summed.
void CombineFileSides(std::vector<FileSides>& per_file, std::vector<analyzers::RankSide>* sides,
                      profiler::IngestStats* stats);

// A FileSides as JSON ("trainrx.file_sides/1": the file, its ingest stats, its sides as summaries)
// and back: what a cluster's worker hands the client (trainrx.dask). summary.cc owns the format.
void WriteFileSides(const FileSides& file, const std::string& path, std::ostream& out);
Status ParseFileSides(std::string_view json, const std::string& name, FileSides* out);

// Reads and analyzes every trace file on the threads profiler::RunTasks chooses; fills `sides`
// (sorted by rank) and `stats` (the files' ingest problems, events and bytes). A rank claimed by
// two files moves the later one to the next free rank, as the merging reader does. An error
// naming the file when one cannot be read.
Status SidesOfTraces(const std::vector<std::string>& files, const analyzers::Thresholds& thresholds,
                     std::vector<analyzers::RankSide>* sides, profiler::IngestStats* stats,
                     const std::string& step_name = "");
// The user's step name into every rank's config, where the step model looks for it.
void NameTheStep(profiler::Trace& trace, const std::string& step_name);

// The same from per-rank summaries: their sides, and in `stats` what their traces held and the
// events their readers skipped.
Status SidesOfSummaries(const std::vector<std::string>& files, std::vector<analyzers::RankSide>* sides,
                        profiler::IngestStats* stats);

// A trace that holds no events, only what a report says of the inputs: the ranks (with their clock
// outcome) and the ingest stats. Reports render an AnalyzeSides report against it.
profiler::Trace SkeletonOf(const std::vector<analyzers::RankSide>& sides, profiler::IngestStats stats);

}  // namespace trainrx::sets
