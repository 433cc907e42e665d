// SortRuns and MergeAdjacentRuns against std::stable_sort: the same order, ties included, on the
// shapes traces have (a few overlapping runs, runs in order, many runs) and on random input.
#include "trainrx/profiler/sort_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace trainrx::profiler {
namespace {

struct Item {
  int key;
  int tag;  // input position: tells ties apart
  bool operator==(const Item& o) const { return key == o.key && tag == o.tag; }
};
const auto kByKey = [](const Item& a, const Item& b) { return a.key < b.key; };

std::vector<Item> Tagged(const std::vector<int>& keys) {
  std::vector<Item> v;
  for (size_t i = 0; i < keys.size(); ++i) v.push_back({keys[i], static_cast<int>(i)});
  return v;
}

void ExpectLikeStableSort(const std::vector<int>& keys) {
  auto want = Tagged(keys), got = want;
  std::stable_sort(want.begin(), want.end(), kByKey);
  SortRuns(got.begin(), got.end(), kByKey);
  ASSERT_EQ(got, want);
}

// The shape of a tiled Kineto thread: per copy, ops over a stretch of time, then the runtime calls
// of the same stretch, with equal timestamps between them.
TEST(SortRunsTest, OverlappingRunsPerCopyLikeTiledTraces) {
  std::vector<int> keys;
  for (int copy = 0; copy < 20; ++copy) {
    for (int i = 0; i < 300; ++i) keys.push_back(copy * 1000 + i * 3);
    for (int i = 0; i < 200; ++i) keys.push_back(copy * 1000 + i * 4);
  }
  ExpectLikeStableSort(keys);
}

TEST(SortRunsTest, TiesKeepInputOrderAcrossRuns) {
  ExpectLikeStableSort({5, 5, 7, 7, 1, 5, 5, 7, 2, 5, 7, 7});
  ExpectLikeStableSort({1, 1, 1, 0, 0, 1, 1, 0});
}

TEST(SortRunsTest, SortedAndManyRunInputs) {
  std::vector<int> sorted(1000);
  for (int i = 0; i < 1000; ++i) sorted[i] = i / 3;
  ExpectLikeStableSort(sorted);
  std::vector<int> descending(1000);
  for (int i = 0; i < 1000; ++i) descending[i] = 1000 - i;  // a run per element: std::stable_sort
  ExpectLikeStableSort(descending);
}

TEST(SortRunsTest, RandomFewAndManyRuns) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 2000);
    const int runs = 1 + static_cast<int>(rng() % 40);
    std::vector<int> keys;
    for (int r = 0; r < runs; ++r) {
      std::vector<int> run(static_cast<size_t>(n / runs + 1));
      for (auto& k : run) k = static_cast<int>(rng() % (round % 2 ? 50 : 100000));  // many ties, or few
      std::sort(run.begin(), run.end());
      keys.insert(keys.end(), run.begin(), run.end());
    }
    ExpectLikeStableSort(keys);
  }
}

TEST(MergeAdjacentRunsTest, MovesOnlyTheOverlap) {
  // [0..99] then [90..189]: 0..90 of the first (90 ties with the second's first and stays ahead of
  // it) and 100..189 of the second are in place already.
  std::vector<int> keys;
  for (int i = 0; i < 100; ++i) keys.push_back(i);
  for (int i = 90; i < 190; ++i) keys.push_back(i);
  auto got = Tagged(keys), want = got;
  std::stable_sort(want.begin(), want.end(), kByKey);
  std::vector<Item> buf;
  MergeAdjacentRuns(got.begin(), got.begin() + 100, got.end(), kByKey, buf);
  EXPECT_EQ(got, want);
  EXPECT_EQ(buf.size(), 9u);  // only keys 91..99 of the first run went through the buffer
}

TEST(MergeAdjacentRunsTest, InOrderRunsAreLeftAlone) {
  auto got = Tagged({1, 2, 3, 3, 4, 5});
  const auto want = got;
  std::vector<Item> buf;
  MergeAdjacentRuns(got.begin(), got.begin() + 3, got.end(), kByKey, buf);
  EXPECT_EQ(got, want);
  EXPECT_TRUE(buf.empty());
}

}  // namespace
}  // namespace trainrx::profiler
