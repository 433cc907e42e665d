// The collector's ticks (probes/tick_clock.h): the map from ticks to the trace's ns, and records
// read with the TSC coming out of a drain on the wall clock.
#include "tick_clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "collector.h"

namespace trainrx::probes {
namespace {

constexpr int64_t kBase = 5'000'000'000;

TEST(TickMapTest, RealtimeTicksAreNs) {
  TickMap map(TickSource::kRealtime);
  map.Add({1000, 7});  // ignored: there is nothing to map
  EXPECT_TRUE(map.points().empty());
  EXPECT_EQ(map.ToNs(123'456'789), 123'456'789);
  EXPECT_EQ(TickMap::Calibrated(TickSource::kRealtime).ToNs(42), 42);
}

TEST(TickMapTest, InterpolatesBetweenPairsAndExtendsOutsideThem) {
  TickMap map(TickSource::kTsc);
  map.Add({1000, kBase});
  map.Add({3000, kBase + 1000});  // 2 ticks a ns
  EXPECT_EQ(map.ToNs(1000), kBase);
  EXPECT_EQ(map.ToNs(2000), kBase + 500);
  EXPECT_EQ(map.ToNs(3000), kBase + 1000);
  EXPECT_EQ(map.ToNs(4000), kBase + 1500);
  EXPECT_EQ(map.ToNs(0), kBase - 500);
  map.Add({5000, kBase + 3000});  // 1 tick a ns from here
  EXPECT_EQ(map.ToNs(2000), kBase + 500);   // the first segment's slope still
  EXPECT_EQ(map.ToNs(4000), kBase + 2000);  // the second's
  // Past the last pair: the whole span's slope (3000 ns over 4000 ticks).
  EXPECT_EQ(map.ToNs(9000), kBase + 3000 + 3000);
}

TEST(TickMapTest, APairNotAfterTheLastIsDropped) {
  TickMap map(TickSource::kTsc);
  map.Add({1000, kBase});
  map.Add({3000, kBase + 1000});
  map.Add({4000, kBase + 500});   // the wall clock was set back
  map.Add({3000, kBase + 2000});  // the same tick
  ASSERT_EQ(map.points().size(), 2u);
  EXPECT_EQ(map.ToNs(4000), kBase + 1500);
}

TEST(TickMapTest, ConversionIsMonotonicInAnyOrderOfQueries) {
  TickMap map(TickSource::kTsc);
  std::mt19937_64 rng(7);
  int64_t t = 1'000'000, ns = kBase;
  std::vector<int64_t> ticks;
  for (int i = 0; i < 200; ++i) {
    map.Add({t, ns});
    t += 1 + static_cast<int64_t>(rng() % 100'000);
    ns += 1 + static_cast<int64_t>(rng() % 40'000);
  }
  for (int64_t x = 0; x < t + 200'000; x += 997) ticks.push_back(x);
  int64_t prev = INT64_MIN;
  std::vector<int64_t> forward;
  for (int64_t x : ticks) {
    const int64_t v = map.ToNs(x);
    EXPECT_GE(v, prev) << "at tick " << x;
    prev = v;
    forward.push_back(v);
  }
  // Queries out of order (the final drain reads every buffer from its start) give the same values.
  std::vector<size_t> order(ticks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) EXPECT_EQ(map.ToNs(ticks[i]), forward[i]);
  // Each pair maps to its own ns.
  for (const auto& p : map.points()) EXPECT_EQ(map.ToNs(p.ticks), p.ns);
}

TEST(TickMapTest, HoldsAtMostMaxPointsAndKeepsTheLatest) {
  TickMap map(TickSource::kTsc);
  const int64_t n = static_cast<int64_t>(TickMap::kMaxPoints) + 10;
  for (int64_t i = 1; i <= n; ++i) map.Add({i * 100, kBase + i * 50});
  ASSERT_EQ(map.points().size(), TickMap::kMaxPoints);
  EXPECT_EQ(map.points().back().ticks, n * 100);
  EXPECT_EQ(map.ToNs(n * 100), kBase + n * 50);
}

TEST(TickMapTest, CalibratedTscMapHoldsTwoPairsTheSpinApart) {
  if (DetectTickSource() != TickSource::kTsc) GTEST_SKIP() << "the kernel's clocksource is not the TSC here";
  const TickMap map = TickMap::Calibrated(TickSource::kTsc, 2'000'000);
  ASSERT_EQ(map.points().size(), 2u);
  EXPECT_GE(map.points()[1].ns - map.points()[0].ns, 2'000'000);
  EXPECT_GT(map.points()[1].ticks, map.points()[0].ticks);
  // Its conversion of a tick read now lands on the wall clock read beside it.
  const int64_t ns = NowNs();
  EXPECT_NEAR(static_cast<double>(map.ToNs(ReadTsc())), static_cast<double>(ns), 200'000.0);
}

// A TSC-ticked collector's records come out on the wall clock: inside the NowNs() read around
// them, with their duration.
TEST(TickMapTest, TscRecordsDrainOntoTheWallClock) {
  if (DetectTickSource() != TickSource::kTsc) GTEST_SKIP() << "the kernel's clocksource is not the TSC here";
  CollectorOptions o;
  o.ticks = TickSource::kTsc;
  Collector c(o);
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  ASSERT_NE(b, nullptr);
  const int64_t before_ns = NowNs();
  Rec* r = b->Append();
  ASSERT_NE(r, nullptr);
  r->name = b->InternStatic("aten::mm");
  r->start_ticks = c.NowTicks();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EndRecord(r, c.NowTicks());
  const int64_t after_ns = NowNs();
  // Drained while recording goes on (the journal), then assembled: the same times both ways.
  profiler::Trace fragment;
  fragment.ranks.emplace_back();
  DrainCursor cursor;
  c.Drain(fragment, 0, cursor);
  ASSERT_EQ(fragment.events.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Rec* later = b->Append();
  ASSERT_NE(later, nullptr);
  later->name = b->InternStatic("aten::add");
  later->start_ticks = c.NowTicks();
  EndRecord(later, c.NowTicks());
  profiler::Trace t = c.Assemble(0, NowNs());
  ASSERT_EQ(t.events.size(), 2u);
  const profiler::Event& e = t.events[0];
  EXPECT_EQ(t.Name(e), "aten::mm");
  constexpr int64_t kSlackNs = 2'000;  // a pair's read is tens of ns wide
  EXPECT_GE(e.ts_ns, before_ns - kSlackNs);
  EXPECT_LE(e.ts_ns + e.dur_ns, after_ns + kSlackNs);
  EXPECT_GE(e.dur_ns, 20'000'000 - kSlackNs);
  EXPECT_EQ(e.ts_ns, fragment.events[0].ts_ns);
  EXPECT_EQ(e.dur_ns, fragment.events[0].dur_ns);
  EXPECT_GT(t.events[1].ts_ns, e.ts_ns + e.dur_ns);
}

}  // namespace
}  // namespace trainrx::probes
