// trainrx::analyzers clocks — the clock alignment of a multi-rank set, applied before analysis
// (clocks.cc; analysis.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// Clock alignment of a multi-rank set (clocks.cc): each rank's offset to a reference rank from
// the ends of the collectives they share (a synchronous collective ends at the same moment on
// every rank), applied only when the data support it.
struct RankClock {
  int32_t rank = 0;
  int32_t reference = 0;  // the rank whose clock the others are put on
  std::string status;     // "reference", "shifted", "agrees", "same host", "not aligned"
  int64_t offset_ns = 0;  // estimated: this rank's clock minus the reference's
  int64_t shift_ns = 0;   // added to its times: -offset_ns when shifted, else 0
  int64_t matched = 0;    // collectives shared with the reference
  int64_t spread_ns = 0;  // median deviation of the end differences from offset_ns
  std::string why;        // one sentence for the report
  // The outcome into the rank's RankInfo::clock_* fields (the shift itself is not applied).
  void RecordIn(profiler::RankInfo& info) const;
};
// Empty for fewer than 2 ranks. Pure: reads a finalized trace.
std::vector<RankClock> EstimateRankClocks(const profiler::Trace& trace);
// Estimates, shifts the ranks that are to be shifted (Trace::ShiftRankTime) and records the
// outcome in each RankInfo (clock_*). Call after reading a set and before Analyze; the readers
// leave clocks as the files have them.
std::vector<RankClock> AlignRankClocks(profiler::Trace& trace);

}  // namespace trainrx::analyzers
