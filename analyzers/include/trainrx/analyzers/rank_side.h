// trainrx::analyzers rank side — what the analyses across ranks need of one rank, as a small value
// (a RankSide, with its collectives): the type alone, for the code that reads or builds sides
// (collectives.h, the phase and mismatch rules, sets/, exports/) without the cross-rank drivers
// (cross_rank.h: BuildRankSide, AnalyzeStraggler, ...).
#pragma once

#include <cstdint>
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

}  // namespace trainrx::analyzers
