// The report's timeline: which steps it shows, what it keeps within its budget, and what it says
// it left out.
#include "trainrx/analyzers/timeline.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

struct Read {
  profiler::Trace trace;
  StepModel steps;
  explicit Read(const std::string& events) {
    const auto st = profiler::ReadTraceBuffer("{\"traceEvents\":[" + events + "]}", "t.json", 0, trace);
    EXPECT_TRUE(st.ok()) << st.message();
    steps = BuildStepModel(trace);
  }
};

// Step i lasts `dur_us[i]` and holds a data wait, an op with `ops` children and a sync call; a
// kernel on stream 7.
std::string Steps(const std::vector<int>& dur_us, int ops = 3, int rank_pid = 1) {
  std::string ev;
  int t = 0;
  for (size_t i = 0; i < dur_us.size(); ++i) {
    const int d = dur_us[i];
    ev += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":{},"tid":1,"ts":{},"dur":{}}},)", i, rank_pid, t, d);
    ev += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":{},"tid":1,"ts":{},"dur":{}}},)",
                      rank_pid, t + 1, d / 10);
    ev += fmt::format(R"({{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":{},"tid":1,"ts":{},"dur":{}}},)", rank_pid, t + d / 5, d / 2);
    for (int k = 0; k < ops; ++k)
      ev += fmt::format(R"({{"ph":"X","cat":"cpu_op","name":"aten::small","pid":{},"tid":1,"ts":{},"dur":1}},)", rank_pid, t + d / 5 + 1 + 2 * k);
    ev += fmt::format(R"({{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":{},"tid":1,"ts":{},"dur":2}},)", rank_pid, t + d - 10);
    ev += fmt::format(R"({{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":{},"dur":{},"args":{{"device":0,"stream":7}}}},)", t + d / 4, d / 4);
    t += d;
  }
  ev.pop_back();
  return ev;
}

const TimelineEvent* FindNamed(const Timeline& tl, const TimelineWindow& w, std::string_view name) {
  for (const auto& lane : w.lanes)
    for (const auto& e : lane.events)
      if (tl.names[e.name] == name) return &e;
  return nullptr;
}

TEST(TimelineTest, MedianAndSlowestStepsWithTheirLanes) {
  Read r(Steps({1000, 1000, 3000, 1000, 1200}));
  const Timeline tl = BuildTimeline(r.trace, r.steps);
  ASSERT_EQ(tl.windows.size(), 2u);
  EXPECT_EQ(tl.windows[0].why, "median");
  EXPECT_EQ(tl.windows[0].dur_ns, 1'000'000);
  EXPECT_EQ(tl.windows[1].why, "slowest");
  EXPECT_EQ(tl.windows[1].dur_ns, 3'000'000);
  EXPECT_EQ(tl.windows[1].step_index, 2);
  const auto& w = tl.windows[1];
  ASSERT_EQ(w.lanes.size(), 2u);  // the thread and the stream
  EXPECT_FALSE(w.lanes[0].gpu);
  EXPECT_TRUE(w.lanes[1].gpu);
  EXPECT_EQ(w.lanes[1].label, "GPU 0 · stream 7");
  // Classes and times relative to the window.
  const auto* data = FindNamed(tl, w, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->cls, TimelineClass::kData);
  EXPECT_EQ(data->ts_ns, 1000);
  EXPECT_EQ(data->depth, 1);  // inside ProfilerStep#2
  EXPECT_EQ(FindNamed(tl, w, "cudaStreamSynchronize")->cls, TimelineClass::kSync);
  EXPECT_EQ(FindNamed(tl, w, "gemm")->cls, TimelineClass::kKernel);
  EXPECT_EQ(FindNamed(tl, w, "ProfilerStep#2")->cls, TimelineClass::kStep);
  EXPECT_EQ(FindNamed(tl, w, "aten::small")->depth, 2);
  EXPECT_EQ(w.events_kept, w.events_in_window);
}

TEST(TimelineTest, TheBudgetDropsTheNarrowestAndKeepsSyncsAndDataWaits) {
  Read r(Steps({1000, 1000, 1000, 1000}, /*ops=*/200));
  TimelineOptions o;
  o.events_per_window = 20;
  const Timeline tl = BuildTimeline(r.trace, r.steps, o);
  ASSERT_FALSE(tl.windows.empty());
  const auto& w = tl.windows[0];
  EXPECT_EQ(w.events_kept, 20);
  int64_t left_out = 0, kept = 0;
  for (const auto& lane : w.lanes) left_out += lane.left_out, kept += static_cast<int64_t>(lane.events.size());
  EXPECT_EQ(kept + left_out, w.events_in_window);  // every event is drawn or counted
  EXPECT_NE(FindNamed(tl, w, "cudaStreamSynchronize"), nullptr);
  EXPECT_NE(FindNamed(tl, w, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), nullptr);
  EXPECT_NE(FindNamed(tl, w, "aten::linear"), nullptr);  // wider than the 1 us ops, kept first
  EXPECT_NE(FindNamed(tl, w, "gemm"), nullptr);
}

TEST(TimelineTest, DeepNestingIsCutAndCounted) {
  std::string ev = R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":0,"dur":1000},)";
  for (int d = 0; d < 10; ++d)
    ev += fmt::format(R"({{"ph":"X","cat":"cpu_op","name":"aten::level{}","pid":1,"tid":1,"ts":{},"dur":{}}},)", d, 10 + d, 900 - 20 * d);
  ev.pop_back();
  Read r(ev);
  TimelineOptions o;
  o.max_depth = 4;
  const Timeline tl = BuildTimeline(r.trace, r.steps, o);
  ASSERT_EQ(tl.windows.size(), 1u);
  const auto& lane = tl.windows[0].lanes.at(0);
  for (const auto& e : lane.events) EXPECT_LT(e.depth, 4);
  EXPECT_EQ(lane.events.size(), 4u);  // the step and levels 0-2
  EXPECT_EQ(lane.left_out, 7);
}

TEST(TimelineTest, ARangeOpenBeforeTheWindowIsClippedToIt) {
  Read r(R"({"ph":"X","cat":"user_annotation","name":"training","pid":1,"tid":1,"ts":0,"dur":5000},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":1000,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":2000,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":3000,"dur":1000})");
  const Timeline tl = BuildTimeline(r.trace, r.steps);
  ASSERT_FALSE(tl.windows.empty());
  const auto* outer = FindNamed(tl, tl.windows[0], "training");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->ts_ns, 0);
  EXPECT_EQ(outer->dur_ns, tl.windows[0].dur_ns);
  EXPECT_EQ(outer->depth, 0);
  EXPECT_EQ(FindNamed(tl, tl.windows[0], "training") != nullptr, true);
}

// The events before a window set the depth of what it shows (a range still open), and only those
// drawn count: an instant or an op that ended before it adds no level, and is not in the window.
TEST(TimelineTest, TheEventsBeforeAWindowSetItsDepthAndNothingElse) {
  Read r(R"({"ph":"X","cat":"user_annotation","name":"training","pid":1,"tid":1,"ts":0,"dur":5000},
            {"ph":"X","cat":"cpu_op","name":"aten::before","pid":1,"tid":1,"ts":100,"dur":100},
            {"ph":"i","cat":"cpu_instant_event","name":"marker","pid":1,"tid":1,"ts":500,"s":"t"},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":1000,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":2000,"dur":1000},
            {"ph":"X","cat":"cpu_op","name":"aten::inside","pid":1,"tid":1,"ts":2100,"dur":100},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":3000,"dur":1000})");
  const Timeline tl = BuildTimeline(r.trace, r.steps);
  ASSERT_FALSE(tl.windows.empty());
  const TimelineWindow& w = tl.windows[0];
  EXPECT_EQ(w.start_ns, 2'000'000);  // the median step, #1
  ASSERT_NE(FindNamed(tl, w, "aten::inside"), nullptr);
  EXPECT_EQ(FindNamed(tl, w, "training")->depth, 0);
  EXPECT_EQ(FindNamed(tl, w, "ProfilerStep#1")->depth, 1);
  EXPECT_EQ(FindNamed(tl, w, "aten::inside")->depth, 2);
  EXPECT_EQ(FindNamed(tl, w, "aten::before"), nullptr);
  EXPECT_EQ(FindNamed(tl, w, "marker"), nullptr);
  EXPECT_EQ(w.events_in_window, 3);
}

TEST(TimelineTest, WarmUpStepIsAWindowToo) {
  Read r(Steps({20000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}));
  ASSERT_EQ(r.steps.warmup_steps.size(), 1u);
  const Timeline tl = BuildTimeline(r.trace, r.steps);
  ASSERT_FALSE(tl.windows.empty());
  EXPECT_EQ(tl.windows.back().why, "warm-up");
  EXPECT_EQ(tl.windows.back().dur_ns, 20'000'000);
  EXPECT_EQ(tl.windows.back().step_index, -1);
}

TEST(TimelineTest, NoStepsGivesTheWholeTraceOfTheFirstRank) {
  Read r(R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":100,"dur":50},
            {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":300,"dur":50})");
  const Timeline tl = BuildTimeline(r.trace, r.steps);
  ASSERT_EQ(tl.windows.size(), 1u);
  EXPECT_EQ(tl.windows[0].why, "whole trace");
  EXPECT_EQ(tl.windows[0].start_ns, 100'000);
  EXPECT_EQ(tl.windows[0].dur_ns, 250'000);
  EXPECT_EQ(tl.windows[0].events_kept, 2);
}

TEST(TimelineTest, EmptyTraceHasNoWindow) {
  profiler::Trace trace;
  trace.Finalize();
  EXPECT_TRUE(BuildTimeline(trace, BuildStepModel(trace)).windows.empty());
}

TEST(TimelineTest, TheRankWithTheSlowestMedianStepIsShownBesideTheFirst) {
  profiler::Trace trace;
  const auto rank_file = [](int rank, int step_us) {
    return fmt::format(R"({{"distributedInfo":{{"rank":{},"world_size":3}},"traceEvents":[{}]}})", rank,
                       Steps({step_us, step_us, step_us, step_us}));
  };
  for (int rank = 0; rank < 3; ++rank)
    ASSERT_TRUE(profiler::ReadTraceBuffer(rank_file(rank, rank == 2 ? 3000 : 1000), fmt::format("r{}.json", rank), rank, trace).ok());
  trace.Finalize();
  const Timeline tl = BuildTimeline(trace, BuildStepModel(trace));
  EXPECT_EQ(tl.ranks_total, 3);
  EXPECT_EQ(tl.ranks_shown, (std::vector<int32_t>{0, 2}));
  bool saw_rank2 = false;
  for (const auto& w : tl.windows) saw_rank2 = saw_rank2 || (w.rank == 2 && w.dur_ns == 3'000'000);
  EXPECT_TRUE(saw_rank2);
}

}  // namespace
}  // namespace trainrx::analyzers
