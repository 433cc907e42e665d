// trainrx::analyzers cross-rank — what the analyses across ranks (the straggler, clock alignment)
// need of one rank, as a small value: a RankSide. A merged set builds them from its trace; a set
// too large to merge (hundreds of ranks) is analyzed one rank at a time, each rank's trace dropped
// once its side (and its own findings) is kept; `trainrx summarize` writes sides where the traces
// are, and `trainrx analyze` of those summaries does the cross-rank part. Same code either way:
// the cross-rank findings of summaries equal those of the full traces.
//
// Pure functions, no I/O (sets/summary.cc reads and writes sides as JSON).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/rank_side.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// `steps` may be null (no step model: nothing is in_steps, no rows).
RankSide BuildRankSide(const profiler::Trace& trace, const StepModel* steps, int32_t rank);
// The sides of all the trace's ranks, with the ranks' unfinished and window records (`steps` may
// be null, as for BuildRankSide).
std::vector<RankSide> BuildRankSides(const profiler::Trace& trace, const StepModel* steps,
                                     const std::vector<UnfinishedRank>& unfinished,
                                     const std::vector<RecordedWindow>& windows);

// dist.straggler over the sides (sorted by rank, 2+), appended to out.findings.
void AnalyzeStraggler(const std::vector<RankSide>& sides, const Thresholds& thresholds, Report& out);
// One rank's part in a collective matched across ranks, as dist.straggler reads them: instance k of
// the matched sets (GPU collectives where every rank has them, else Gloo's; by name and order, in
// the steady steps when 4 or more are), whether this rank arrived last (the shortest instance, with
// the others' median wait beyond it > 0) and that wait. Sides sorted by rank; empty for fewer than 2.
struct MatchedCollectiveRow {
  int64_t instance = 0;
  int32_t rank = 0;
  std::string_view name;  // owned by the side
  int64_t ts_ns = 0, dur_ns = 0;
  bool in_steps = false, arrived_last = false;
  double others_wait_ns = 0;  // the others' median wait for it, where it arrived last
};
std::vector<MatchedCollectiveRow> MatchedCollectives(const std::vector<RankSide>& sides);
// dist.rank_mismatch over the sides (sorted by rank): ranks that ran different numbers of steps,
// or trained on different input shapes (rank_mismatch.cc).
void AnalyzeRankMismatch(const std::vector<RankSide>& sides, Report& out);
// Clock offsets of the sides' ranks (see clocks.cc); empty for fewer than 2.
std::vector<RankClock> EstimateRankClocks(const std::vector<RankSide>& sides);
// The step model of all sides' rows.
StepModel StepModelOf(const std::vector<RankSide>& sides);
// Findings of many ranks, each claim once: the findings of one id and knob, one per rank, fold
// into the one with the largest saving, its title saying on how many of `ranks` ranks it was
// found, its examples naming them. Findings of the whole set (rank -1), and rules that gave one
// rank several (one per op or site), stay as they are; the order is that of first appearance.
std::vector<Finding> FoldFindings(std::vector<Finding> findings, size_t ranks);
// The report of a set from its sides: clocks (recorded in the sides' infos), the steps, the
// ranks' findings folded, the straggler; findings ranked by saving as Analyze() ranks them.
Report AnalyzeSides(std::vector<RankSide>& sides, const Thresholds& thresholds);

}  // namespace trainrx::analyzers
