// Collectives of a rank and their matching across ranks, shared by dist.cc (straggler, overlap,
// no_sync), clocks.cc (clock alignment) and cross_rank.cc (RankSide). Private to analyzers/.
//
// Every rank issues its collectives in the same order, so the k-th collective of a name on one
// rank is the k-th of that name on every other rank, as long as each has as many of that name.
#pragma once

#include <cstdint>
#include <vector>

#include "trainrx/analyzers/rank_side.h"

namespace trainrx::analyzers {

// A rank's collectives in time order: GPU communication kernels when `gpu`, else Gloo's CPU
// ranges. `steps` (may be null) marks those inside the rank's steady steps. Names view the trace's
// string table.
std::vector<Collective> CollectivesOf(const profiler::Trace& trace, int32_t rank, const StepModel* steps, bool gpu);

// One matched collective: its instance on each list, in the order of the lists.
using MatchedSet = std::vector<const Collective*>;
// The collectives that are the same on every list (one list per rank): the k-th of each name,
// for the names every list has equally often (a name whose counts differ is left out: which
// instance is which is then unknown). With `steady_only`, only sets inside every rank's steady
// steps. In the order of the first list.
std::vector<MatchedSet> MatchAcrossRanks(const std::vector<const std::vector<Collective>*>& lists, bool steady_only);

}  // namespace trainrx::analyzers
