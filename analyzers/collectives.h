// Collectives of a rank and their matching across ranks, shared by dist.cc (straggler, overlap,
// no_sync) and clocks.cc (clock alignment). Private to analyzers/.
//
// A collective is a GPU communication kernel (nccl*/rccl*) or, on ranks without any, the CPU
// range of a Gloo collective ("gloo:all_reduce", ...), which lasts until its data arrived. Every
// rank issues its collectives in the same order, so the k-th collective of a name on one rank is
// the k-th of that name on every other rank, as long as each has as many of that name.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

struct Collective {
  int64_t ts_ns, dur_ns;
  profiler::StrId name;
  bool in_steps;  // starts inside the rank's steady steps (false when no step model was given)
  int64_t end_ns() const { return ts_ns + dur_ns; }
};

// A rank's collectives in time order: GPU communication kernels when `gpu`, else Gloo's CPU
// ranges. `steps` (may be null) marks those inside the rank's steady steps.
std::vector<Collective> CollectivesOf(const profiler::Trace& trace, int32_t rank, const StepModel* steps, bool gpu);

// Whether the rank has any GPU communication kernel.
bool HasGpuCollectives(const profiler::Trace& trace, int32_t rank);

// One matched collective: its instance on each of `ranks`, in that order.
using MatchedSet = std::vector<const Collective*>;
// The collectives that are the same on every one of `ranks`: the k-th of each name, for the names
// every rank has equally often (a name whose counts differ is left out: which instance is which is
// then unknown). With `steady_only`, only sets inside every rank's steady steps. In the order of
// the first rank's collectives.
std::vector<MatchedSet> MatchAcrossRanks(const std::vector<int32_t>& ranks,
                                         const std::map<int32_t, std::vector<Collective>>& coll, bool steady_only);

}  // namespace trainrx::analyzers
