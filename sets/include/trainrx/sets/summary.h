// trainrx::sets summary — per-rank summaries (`trainrx summarize`, schema "trainrx.summary/1" in
// docs/json-schema.md): one rank's analysis side (analyzers/rank_side.h) in a small file, so the
// cross-rank analyses can run on thousands of ranks without their traces. Reader and writer live
// together so the format has one owner.
#pragma once

#include <ostream>
#include <string>

#include "trainrx/analyzers/rank_side.h"
#include "trainrx/profiler/status.h"

namespace trainrx::sets {

inline constexpr const char* kSummarySchema = "trainrx.summary/1";
// One trace file's sides and ingest stats (sets/rank_sides.h FileSides), as a worker hands them on.
inline constexpr const char* kFileSidesSchema = "trainrx.file_sides/1";
void WriteSummary(const analyzers::RankSide& side, std::ostream& out);
// An error naming the file and the field that was missing or of the wrong type.
Status ReadSummary(const std::string& path, analyzers::RankSide* side);
// Whether a file is a summary by its name (*.summary.json).
bool IsSummaryPath(const std::string& path);

}  // namespace trainrx::sets
