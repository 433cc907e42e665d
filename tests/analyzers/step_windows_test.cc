// StepWindows::Index against a linear reading of its contract: the last window starting at or
// before ts, if it holds ts; else -1. The hint it keeps between questions must never change an
// answer: questions in time order (the common case the hint serves), in random order, across two
// objects asked in turn on one thread, and with overlapping windows (where the last window
// starting before ts may not hold it while an earlier one does).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "per_step.h"

namespace trainrx::analyzers {
namespace {

StepModel Model(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  StepModel m;
  for (const auto& [start, wall] : spans) {
    StepRow r;
    r.start_ns = start;
    r.wall_ns = wall;
    m.steps.push_back(r);
  }
  return m;
}

int64_t Reference(std::vector<std::pair<int64_t, int64_t>> spans, int64_t ts) {
  std::sort(spans.begin(), spans.end());
  int64_t last = -1;
  for (size_t k = 0; k < spans.size(); ++k)
    if (spans[k].first <= ts) last = static_cast<int64_t>(k);
  return last >= 0 && ts < spans[last].first + spans[last].second ? last : -1;
}

TEST(StepWindowsTest, IndexMatchesTheContractWhateverTheOrderOfQuestions) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::pair<int64_t, int64_t>> spans[2];
    for (auto& s : spans) {
      int64_t t = static_cast<int64_t>(rng() % 50);
      const size_t n = rng() % 12;
      const bool overlapping = rng() % 3 == 0;
      for (size_t k = 0; k < n; ++k) {
        const int64_t wall = 1 + static_cast<int64_t>(rng() % 40);
        s.push_back({t, wall});
        t += overlapping ? static_cast<int64_t>(rng() % 30) : wall + static_cast<int64_t>(rng() % 10);
      }
    }
    const StepWindows a(Model(spans[0]), 0), b(Model(spans[1]), 0);
    std::vector<int64_t> times;
    for (int k = 0; k < 200; ++k) times.push_back(static_cast<int64_t>(rng() % 600) - 20);
    if (round % 2 == 0) std::sort(times.begin(), times.end());
    for (int64_t ts : times) {
      ASSERT_EQ(a.Index(ts), Reference(spans[0], ts)) << "round " << round << " ts " << ts;
      if (rng() % 2) {
        ASSERT_EQ(b.Index(ts), Reference(spans[1], ts)) << "round " << round << " ts " << ts;
      }
    }
  }
}

}  // namespace
}  // namespace trainrx::analyzers
