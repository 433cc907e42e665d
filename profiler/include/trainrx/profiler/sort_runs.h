// A stable sort for data that is mostly in order already (torch-free; the model and the analyzers
// use it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <vector>

namespace trainrx::profiler {

// Stable sort of [first, last) (contiguous storage) that is linear on input made of a few sorted
// runs (Kineto writes each thread's events almost in order: the ResNet trace of HTA has 1-12
// descents in 20 000 events; ids that grow with time, collected track by track, are a few runs).
// Adjacent runs are merged pairwise, left into right, through a buffer, so ties keep their input
// order exactly as std::stable_sort keeps them. Input with many runs goes to std::stable_sort.
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
  std::vector<typename std::iterator_traits<It>::value_type> buf(n);
  auto* src = &*first;
  auto* dst = buf.data();
  while (bounds.size() > 2) {
    std::vector<size_t> merged{0};
    size_t k = 0;
    for (; k + 2 < bounds.size(); k += 2) {
      std::merge(src + bounds[k], src + bounds[k + 1], src + bounds[k + 1], src + bounds[k + 2], dst + bounds[k], before);
      merged.push_back(bounds[k + 2]);
    }
    if (k + 1 < bounds.size()) {  // an odd run left over: carried as it is
      std::copy(src + bounds[k], src + bounds[k + 1], dst + bounds[k]);
      merged.push_back(bounds[k + 1]);
    }
    bounds.swap(merged);
    std::swap(src, dst);
  }
  if (src != &*first) std::copy(src, src + n, &*first);
}

}  // namespace trainrx::profiler
