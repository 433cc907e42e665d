// A stable sort for data that is mostly in order already (torch-free; the model and the analyzers
// use it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <vector>

namespace trainrx::profiler {

// Merges the sorted ranges [first, mid) and [mid, last) in place, stably (ties keep the first
// range's elements first, as std::stable_sort would). Only the stretch where the two overlap moves:
// the head of the first range that is not after mid's first element, and the tail of the second
// that is not before the first range's last element, stay where they are. Runs cut from traces
// overlap little (each Kineto copy of a thread's ops, runtime calls, annotations covers its own
// stretch of time), so most elements never move. `buf` is scratch, reused between calls; only the
// first range's moving part is copied into it.
template <typename It, typename Before>
void MergeAdjacentRuns(It first, It mid, It last, Before before,
                       std::vector<typename std::iterator_traits<It>::value_type>& buf) {
  if (first == mid || mid == last || !before(*mid, *std::prev(mid))) return;  // already in order
  first = std::upper_bound(first, mid, *mid, before);            // the first range's part after *mid
  last = std::lower_bound(mid, last, *std::prev(mid), before);   // the second's part before its end
  buf.assign(std::make_move_iterator(first), std::make_move_iterator(mid));
  auto a = buf.begin();
  It b = mid, out = first;
  // out never passes b: it trails it by what is left of buf.
  while (a != buf.end() && b != last) *out++ = before(*b, *a) ? std::move(*b++) : std::move(*a++);
  std::move(a, buf.end(), out);  // what is left of the second range is in place already
}

// Stable sort of [first, last) that is linear on input made of a few sorted runs (Kineto writes
// each thread's ops, its runtime calls and its annotations as sorted sequences; ids that grow with
// time, collected track by track, are a few runs). Adjacent runs are merged pairwise with
// MergeAdjacentRuns, so only where runs overlap in time do elements move. Input with many runs goes
// to std::stable_sort.
template <typename It, typename Before = std::less<>>
void SortRuns(It first, It last, Before before = Before()) {
  const auto n = static_cast<size_t>(last - first);
  if (n < 2) return;
  std::vector<size_t> bounds{0};  // run starts, then n
  for (size_t i = 1; i < n; ++i) {
    if (before(first[i], first[i - 1])) bounds.push_back(i);
  }
  if (bounds.size() == 1) return;
  if (bounds.size() > n / 32 + 1) {
    std::stable_sort(first, last, before);
    return;
  }
  bounds.push_back(n);
  std::vector<typename std::iterator_traits<It>::value_type> buf;
  while (bounds.size() > 2) {
    std::vector<size_t> merged{0};
    size_t k = 0;
    for (; k + 2 < bounds.size(); k += 2) {
      MergeAdjacentRuns(first + bounds[k], first + bounds[k + 1], first + bounds[k + 2], before, buf);
      merged.push_back(bounds[k + 2]);
    }
    if (k + 1 < bounds.size()) merged.push_back(bounds[k + 1]);  // an odd run left over, as it is
    bounds.swap(merged);
  }
}

}  // namespace trainrx::profiler
