// Interval helpers shared by the analyzer families (private to analyzers/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "trainrx/profiler/sort_runs.h"

namespace trainrx::analyzers {

using Interval = std::pair<int64_t, int64_t>;  // [start, end) in ns

// Merges overlapping/touching intervals in place (sorts first); returns the covered length. The
// intervals are mostly gathered track by track in time order: a few sorted runs, which SortRuns
// sorts in linear time (equal intervals are alike, so any sort gives the same result).
inline int64_t MergeIntervals(std::vector<Interval>& v) {
  if (v.empty()) return 0;
  profiler::SortRuns(v.begin(), v.end());
  size_t w = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i].first <= v[w].second) v[w].second = std::max(v[w].second, v[i].second);
    else v[++w] = v[i];
  }
  v.resize(w + 1);
  int64_t total = 0;
  for (const auto& iv : v) total += iv.second - iv.first;
  return total;
}

// Length of merged (sorted, disjoint) intervals inside [lo, hi).
inline int64_t CoveredWithin(const std::vector<Interval>& merged, int64_t lo, int64_t hi) {
  auto it = std::lower_bound(merged.begin(), merged.end(), Interval{lo, lo},
                             [](const Interval& a, const Interval& b) { return a.second < b.first; });
  int64_t total = 0;
  for (; it != merged.end() && it->first < hi; ++it) {
    const int64_t s = std::max(it->first, lo), e = std::min(it->second, hi);
    if (e > s) total += e - s;
  }
  return total;
}

// Length of merged `busy` inside each of the merged `queries` (both sorted and disjoint), summed:
// CoveredWithin for each query, in one sweep over both lists.
inline int64_t CoveredWithinEach(const std::vector<Interval>& busy, const std::vector<Interval>& queries) {
  int64_t total = 0;
  size_t j = 0;
  for (const auto& [lo, hi] : queries) {
    while (j < busy.size() && busy[j].second < lo) ++j;  // CoveredWithin's lower_bound, moved forward
    for (size_t k = j; k < busy.size() && busy[k].first < hi; ++k) {
      const int64_t s = std::max(busy[k].first, lo), e = std::min(busy[k].second, hi);
      if (e > s) total += e - s;
    }
  }
  return total;
}

inline bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace trainrx::analyzers
