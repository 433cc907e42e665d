// Walking the CPU ops of one thread as a call tree (private to analyzers/).
//
// After Trace::Finalize() a track's events are sorted by (start asc, duration desc), so an
// enclosing range comes before everything it encloses, and the events nested in events[i] are
// exactly the following ones that start before events[i] ends (ranges on one thread nest
// properly; Kineto and our collector both write them so).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

using EventSpan = std::span<const profiler::Event>;

// The rank's CPU thread tracks (the loop's, the autograd engine's device threads, the workers').
inline std::vector<uint32_t> CpuThreadTracks(const profiler::Trace& trace, int32_t rank) {
  std::vector<uint32_t> out;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti)
    if (trace.tracks[ti].rank == rank && trace.tracks[ti].kind == profiler::TrackKind::kCpuThread) out.push_back(ti);
  return out;
}

// One past the last event nested in events[i].
inline size_t SubtreeEnd(EventSpan events, size_t i) {
  const int64_t end = events[i].end_ns();
  size_t j = i + 1;
  while (j < events.size() && events[j].ts_ns < end) ++j;
  return j;
}

// Indices in [begin, end) of the CPU ops not nested in another CPU op of that window: the ops
// the program itself called (Python, C++), as opposed to what they call inside. User
// annotations and Python frames do not hide the ops inside them.
inline std::vector<size_t> OutermostOps(EventSpan events, size_t begin, size_t end) {
  std::vector<size_t> out;
  int64_t covered_until = INT64_MIN;
  for (size_t i = begin; i < end; ++i) {
    const profiler::Event& e = events[i];
    if (e.kind != profiler::EventKind::kCpuOp || e.ts_ns < covered_until) continue;
    out.push_back(i);
    covered_until = e.end_ns();
  }
  return out;
}

// The q-quantile (0..1, nearest rank) of `v`; 0 for an empty vector. Reorders v.
inline int64_t Quantile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace trainrx::analyzers
