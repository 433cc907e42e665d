// Clock alignment (analyzers::AlignRankClocks) on hand-built multi-rank traces: planted clock
// offsets are found and removed, and ranks whose data do not support a shift are left as they are,
// each with the reason.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

struct ClockPlan {
  int64_t clock_ns = 0;      // this rank's clock minus true time
  int64_t end_jitter_ns = 0; // its collectives end this much late on odd steps (true time)
  double drift_ppm = 0;      // its clock runs this much fast
  int collectives = 20;      // steps, one all-reduce each
  std::string host;          // our collector's hostname, if any
  int64_t step_ns = 10'000'000;
};

// One step per 10 ms (true time): a compute kernel and an all-reduce (an NCCL kernel, or a Gloo
// range) that ends at step start + 8 ms on every rank; rank r arrives at it r x 0.5 ms late.
std::string RankDoc(int rank, int world, const ClockPlan& p, bool gpu) {
  std::string ev;
  auto stamp = [&](int64_t true_ns) {
    const double t = static_cast<double>(true_ns);
    return static_cast<int64_t>(std::llround(t + t * p.drift_ppm * 1e-6)) + p.clock_ns;
  };
  auto us = [](int64_t ns) { return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000)); };
  for (int i = 0; i < p.collectives; ++i) {
    const int64_t s = 1'000'000'000 + static_cast<int64_t>(i) * p.step_ns;
    const int64_t start = s + 5'000'000 + rank * 500'000;
    const int64_t end = s + 8'000'000 + (i % 2 ? p.end_jitter_ns : 0);
    ev += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":{}}},)", i,
                      us(stamp(s)), us(stamp(s + p.step_ns) - stamp(s)));
    if (gpu)
      ev += fmt::format(R"({{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":0,"tid":20,"ts":{},"dur":{},"args":{{"device":0,"stream":20,"correlation":{}}}}},)",
                        us(stamp(start)), us(stamp(end) - stamp(start)), i + 1);
    else
      ev += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"gloo:all_reduce","pid":1,"tid":1,"ts":{},"dur":{}}},)",
                        us(stamp(start)), us(stamp(end) - stamp(start)));
  }
  ev.pop_back();
  const std::string block = p.host.empty() ? "" : fmt::format(R"("trainrx":{{"collector":"trainrx probes","hostname":"{}"}},)", p.host);
  return fmt::format(R"({{"distributedInfo":{{"rank":{},"world_size":{},"backend":"{}"}},{}"traceEvents":[{}]}})", rank, world,
                     gpu ? "nccl" : "gloo", block, ev);
}

profiler::Trace ReadRanks(const std::vector<ClockPlan>& plans, bool gpu) {
  profiler::Trace trace;
  for (size_t r = 0; r < plans.size(); ++r) {
    const auto st = profiler::ReadTraceBuffer(RankDoc(static_cast<int>(r), static_cast<int>(plans.size()), plans[r], gpu),
                                              fmt::format("rank{}.json", r), static_cast<int32_t>(r), trace);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  trace.Finalize();
  return trace;
}

// The end of the first all-reduce of a rank, in the trace's times.
int64_t FirstCollectiveEnd(const profiler::Trace& t, int32_t rank) {
  int64_t best = INT64_MAX;
  for (uint32_t ti = 0; ti < t.tracks.size(); ++ti) {
    if (t.tracks[ti].rank != rank) continue;
    for (const auto& e : t.TrackEvents(ti)) {
      const auto n = t.Name(e);
      if (n.find("AllReduce") != std::string_view::npos || n == "gloo:all_reduce") best = std::min(best, e.end_ns());
    }
  }
  return best;
}

const RankClock& Of(const std::vector<RankClock>& v, int32_t rank) {
  for (const auto& c : v)
    if (c.rank == rank) return c;
  ADD_FAILURE() << "no clock for rank " << rank;
  return v.front();
}

TEST(ClockAlignTest, PlantedOffsetsAreFoundAndRemovedOnGpuAndGloo) {
  for (const bool gpu : {true, false}) {
    SCOPED_TRACE(gpu ? "NCCL kernels" : "Gloo ranges");
    std::vector<ClockPlan> plans(3);
    plans[1].clock_ns = 412'000;   // 412 µs ahead
    plans[2].clock_ns = -250'000;  // 250 µs behind
    profiler::Trace t = ReadRanks(plans, gpu);
    EXPECT_NE(FirstCollectiveEnd(t, 0), FirstCollectiveEnd(t, 1));  // as recorded: apart
    const auto clocks = AlignRankClocks(t);
    ASSERT_EQ(clocks.size(), 3u);
    EXPECT_EQ(Of(clocks, 0).status, "reference");
    EXPECT_EQ(Of(clocks, 1).status, "shifted") << Of(clocks, 1).why;
    EXPECT_EQ(Of(clocks, 1).shift_ns, -412'000);
    EXPECT_EQ(Of(clocks, 2).shift_ns, 250'000);
    EXPECT_EQ(Of(clocks, 1).matched, 20);
    // Aligned: the all-reduces end together again, and the report can say so.
    EXPECT_EQ(FirstCollectiveEnd(t, 0), FirstCollectiveEnd(t, 1));
    EXPECT_EQ(FirstCollectiveEnd(t, 0), FirstCollectiveEnd(t, 2));
    EXPECT_EQ(t.FindRank(1)->clock_shift_ns, -412'000);
    EXPECT_NE(t.FindRank(1)->clock_note.find("412.0 µs ahead of rank 0"), std::string::npos) << t.FindRank(1)->clock_note;
  }
}

TEST(ClockAlignTest, SameClocksAndSmallNoiseAreNotShifted) {
  std::vector<ClockPlan> plans(2);
  plans[1].clock_ns = 3'000;        // 3 µs: below what the ends can tell apart
  plans[1].end_jitter_ns = 8'000;   // half its all-reduces end 8 µs late
  profiler::Trace t = ReadRanks(plans, true);
  const auto before = FirstCollectiveEnd(t, 1);
  const auto clocks = AlignRankClocks(t);
  EXPECT_EQ(Of(clocks, 1).status, "agrees") << Of(clocks, 1).why;
  EXPECT_EQ(Of(clocks, 1).shift_ns, 0);
  EXPECT_EQ(FirstCollectiveEnd(t, 1), before);
}

TEST(ClockAlignTest, RanksOnOneHostShareItsClock) {
  std::vector<ClockPlan> plans(2);
  plans[0].host = plans[1].host = "node7";
  plans[1].clock_ns = 300'000;  // the ends say 300 µs; one host has one clock: left as is
  profiler::Trace t = ReadRanks(plans, true);
  const auto clocks = AlignRankClocks(t);
  EXPECT_EQ(Of(clocks, 1).status, "same host");
  EXPECT_EQ(Of(clocks, 1).shift_ns, 0);
  // On different hosts the same data are shifted.
  plans[1].host = "node8";
  profiler::Trace other = ReadRanks(plans, true);
  EXPECT_EQ(Of(AlignRankClocks(other), 1).status, "shifted");
}

TEST(ClockAlignTest, DataThatDoNotSupportAShiftLeaveTheRankAsRecorded) {
  {
    SCOPED_TRACE("too few shared collectives");
    std::vector<ClockPlan> plans(2);
    for (auto& p : plans) p.collectives = 4;
    plans[1].clock_ns = 400'000;
    profiler::Trace t = ReadRanks(plans, true);
    const auto c = Of(AlignRankClocks(t), 1);
    EXPECT_EQ(c.status, "not aligned");
    EXPECT_EQ(c.shift_ns, 0);
    EXPECT_NE(c.why.find("only 4"), std::string::npos) << c.why;
  }
  {
    SCOPED_TRACE("ends that do not coincide");
    std::vector<ClockPlan> plans(2);
    plans[1].clock_ns = 400'000;
    plans[1].end_jitter_ns = 900'000;  // every other one ends 0.9 ms late: no common end
    profiler::Trace t = ReadRanks(plans, false);
    const auto c = Of(AlignRankClocks(t), 1);
    EXPECT_EQ(c.status, "not aligned") << c.why;
    EXPECT_EQ(c.shift_ns, 0);
    EXPECT_NE(c.why.find("do not coincide"), std::string::npos) << c.why;
  }
  {
    SCOPED_TRACE("a clock that drifts");
    std::vector<ClockPlan> plans(2);
    plans[1].clock_ns = 400'000;
    plans[1].drift_ppm = 100;               // 100 ppm over 200 ms of steps: 20 µs... 
    plans[1].step_ns = 100'000'000;         // ...so 100 ms steps: 2 s, 200 µs of drift
    plans[0].step_ns = 100'000'000;
    profiler::Trace t = ReadRanks(plans, true);
    const auto c = Of(AlignRankClocks(t), 1);
    EXPECT_EQ(c.status, "not aligned") << c.why;
    EXPECT_NE(c.why.find("different rates"), std::string::npos) << c.why;
  }
  {
    SCOPED_TRACE("collectives of different counts: which is which is unknown");
    std::vector<ClockPlan> plans(2);
    plans[1].collectives = 19;
    plans[1].clock_ns = 400'000;
    profiler::Trace t = ReadRanks(plans, true);
    const auto c = Of(AlignRankClocks(t), 1);
    EXPECT_EQ(c.status, "not aligned");
    EXPECT_EQ(c.matched, 0);
  }
}

TEST(ClockAlignTest, OneRankIsLeftAlone) {
  profiler::Trace t = ReadRanks(std::vector<ClockPlan>(1), true);
  EXPECT_TRUE(AlignRankClocks(t).empty());
  EXPECT_TRUE(t.ranks[0].clock_status.empty());
}

}  // namespace
}  // namespace trainrx::analyzers
