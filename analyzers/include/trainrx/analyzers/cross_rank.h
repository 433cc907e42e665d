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
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// A collective of a rank: a GPU communication kernel (nccl*/rccl*) or a Gloo CPU range
// ("gloo:all_reduce"), which lasts until its data arrived.
struct Collective {
  std::string_view name;  // owned by the RankSide (or the trace) it came from
  int64_t ts_ns = 0, dur_ns = 0;
  bool in_steps = false;  // starts inside the rank's steady steps
  int64_t end_ns() const { return ts_ns + dur_ns; }
};

struct RankSide {
  profiler::RankInfo info;  // rank, source, world size, the collector's block (hostname, cpu_count)
  std::string steps_source;
  std::vector<StepRow> steps, warmup_steps;
  bool steps_have_gpu = false;
  std::vector<Collective> gpu, gloo;  // in time order; names in `names`
  std::shared_ptr<std::set<std::string, std::less<>>> names = std::make_shared<std::set<std::string, std::less<>>>();
  // The rank's machine, from our collector (0: unknown): a straggler on a machine with no free
  // core may be CPU contention.
  double cpu_count = 0, intra_op_threads = 0, local_ranks = 1;
  std::vector<Finding> findings;  // the rank's own findings (per-rank analysis)
  std::vector<UnfinishedRank> unfinished;  // its recording did not end normally
  std::vector<RecordedWindow> windows;     // it was recorded through a step window
  // Its critical path (critical_path.cc), from its own analysis, where the rank had device work: for
  // `trainrx export` of a set read rank by rank. Without the other ranks, a collective's wait for
  // the last rank is not split out as rank_wait. Not in summaries.
  std::vector<CriticalPath> critical_paths;
  // What the rank trains on: per step, the first input of its first conv/linear op (from
  // record_shapes, or our collector's first steps), e.g. "aten::conv2d [32, 3, 16, 16]"; the
  // most common one, the steps that had it and the steps that had one at all (0: none recorded).
  std::string input_shape;
  int64_t input_shape_steps = 0, shaped_steps = 0;
  // Fixed shapes: one shape in at least 60 % of the steps that had one (dynamic shapes vary).
  bool HasFixedInputShape() const { return shaped_steps > 0 && input_shape_steps * 10 >= shaped_steps * 6; }
  uint64_t events = 0, bytes = 0;  // read from its trace
  uint64_t skipped = 0;            // events its reader skipped (data loss)

  std::string_view Intern(std::string_view s) { return *names->emplace(s).first; }
  // The collectives the cross-rank analyses compare: GPU ones when it has any, else Gloo's.
  const std::vector<Collective>& Compared() const { return gpu.empty() ? gloo : gpu; }
};

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
