// machine.busy (issue 60.5): the run-queue wait our collector samples (trainrx.sched.* counters)
// read over the steady steps; a finding and a caveat only when the threads waited, attributed to
// other programs or to the program's own threads; nothing said on a quiet run or without samples.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <thread>

#include "report_helpers.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/reports/report.h"

namespace trainrx::analyzers {
namespace {

struct Load {
  double run_per_ms, wait_per_ms, others_per_ms;  // ns of each per ms of wall time
  double cpus = 2;
};

// 20 steps of 10 ms; a sample of the counters every 50 ms (the collector's pace) from the first
// step's start to past the last step's end. Cumulative values grow at `load`'s rates.
std::string Trace(const Load& load, bool samples = true, const std::string& block = "") {
  std::string ev;
  for (int i = 0; i < 20; ++i) {
    const int t = 1000 + i * 10000;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":10000}},)J", i, t);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":9000}},)J", t + 500);
  }
  for (int k = 0; samples && k <= 5; ++k) {
    const int ts = 1000 + k * 50000;  // us
    const double ms = (ts - 1000) / 1000.0 + 10000.0;  // the process ran 10 s before the steps
    const auto counter = [&](profiler::CpuWaitWhat w, double v) {
      ev += fmt::format(R"J({{"ph":"C","name":"{}","pid":1,"tid":1,"ts":{},"args":{{"v":{:.0f}}}}},)J",
                        profiler::CpuWaitCounterName(w), ts, v);
    };
    counter(profiler::CpuWaitWhat::kRun, load.run_per_ms * ms);
    counter(profiler::CpuWaitWhat::kWait, load.wait_per_ms * ms);
    counter(profiler::CpuWaitWhat::kInvoluntary, 3 * ms);
    counter(profiler::CpuWaitWhat::kChildrenRun, -1);
    counter(profiler::CpuWaitWhat::kCpusBusy, (load.run_per_ms + load.others_per_ms) * ms + 5e12);
    counter(profiler::CpuWaitWhat::kCpus, load.cpus);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]" + (block.empty() ? "" : ",\"trainrx\":{\"collector\":\"trainrx probes\"" + block + "}") + "}";
}

std::string Text(const std::string& json) {
  profiler::Trace t;
  EXPECT_TRUE(profiler::ReadTraceBuffer(json, "machine.json", 0, t).ok());
  const Report r = Analyze(t);
  std::ostringstream out;
  reports::WriteText(t, r, Thresholds(), {}, out);
  // Without the header's event count (the samples are events read).
  std::istringstream in(out.str());
  std::string text;
  for (std::string line; std::getline(in, line);)
    if (line.find("events read from") == std::string::npos) text += line + "\n";
  return text;
}

TEST(MachineTest, AnotherProgramOnTheCpusIsAFindingWithItsShareAndACaveat) {
  // A thread that ran 0.5 ms and waited 0.5 ms of every ms; other programs used 1.5 CPUs.
  const Report r = testing::AnalyzeJsonText(Trace({0.5e6, 0.5e6, 1.5e6}));
  ASSERT_EQ(r.metrics.cpu_load.size(), 1u);
  const auto& l = r.metrics.cpu_load[0].load;
  EXPECT_NEAR(l.WaitShare(), 0.5, 1e-6);
  EXPECT_NEAR(l.OtherCpus(), 1.5, 1e-3);
  EXPECT_NEAR(l.wall_ns, 200e6, 1);  // the samples nearest the steps' start (1 ms) and end (201 ms)
  const Finding* f = testing::FindFinding(r, "machine.busy");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->measured, 50, 1e-6);
  EXPECT_NE(f->title.find("waited for a CPU 50 %"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("other programs used 1.5 of the 2 CPUs"), std::string::npos) << f->title;
  EXPECT_EQ(f->title.find("its threads wanted"), std::string::npos) << f->title;  // 1.0 CPU wanted of 2
  EXPECT_NEAR(f->estimated_saving_pct, 50, 0.5);
  EXPECT_NE(f->fix_python.find("quiet machine"), std::string::npos);
  EXPECT_NE(Text(Trace({0.5e6, 0.5e6, 1.5e6})).find("caveat: the program's threads waited for a CPU 50.0%"), std::string::npos);
}

TEST(MachineTest, ItsOwnThreadsAloneAreNotABusyMachineWithOthersBothAreSaid) {
  // 2 CPUs run by the program, 1.5 threads waiting on average, nobody else: the program's own
  // oversubscription (threads.oversubscribed's subject), on a quiet machine.
  Report r = testing::AnalyzeJsonText(Trace({2e6, 1.5e6, 0}));
  ASSERT_EQ(r.metrics.cpu_load.size(), 1u);
  EXPECT_EQ(testing::FindFinding(r, "machine.busy"), nullptr);
  // The same beside another program using half a CPU (the program then ran 1.5 of them).
  r = testing::AnalyzeJsonText(Trace({1.5e6, 1.5e6, 0.5e6}));
  const Finding* f = testing::FindFinding(r, "machine.busy");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("other programs used 0.5 of the 2 CPUs"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("its threads wanted 3.0 CPUs (1.5 running and 1.5 waiting on average) of the 2"), std::string::npos)
      << f->title;
}

// Issue 81.8: two Gloo ranks of one job on a 2-CPU machine, each running 1 CPU and waiting: /proc/stat
// counts each rank's sibling as "other programs". Analyzed together (same host), they are the job's
// own: no busy machine. One rank's trace alone, with LOCAL_WORLD_SIZE 2, cannot tell its sibling from
// another program: the finding says so, at medium confidence, and does not ask for a quiet machine.
TEST(MachineTest, TheJobsOwnRanksOnTheMachineAreNoOtherPrograms) {
  const std::string block = R"J(,"hostname":"node1","cpu_count":2,"env":{"LOCAL_WORLD_SIZE":"2"})J";
  const Load rank_load{1e6, 0.3e6, 1e6};  // runs 1 CPU, waits 0.3 ms a ms; 1 CPU used by "others" (the sibling)
  profiler::Trace both;
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(rank_load, true, block), "r0.json", 0, both).ok());
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(rank_load, true, block), "r1.json", 1, both).ok());
  both.Finalize();
  const Report together = Analyze(both);
  ASSERT_EQ(together.metrics.cpu_load.size(), 2u);
  EXPECT_EQ(testing::FindFinding(together, "machine.busy"), nullptr);
  // Rank 0 alone: the sibling is unseen.
  const Report alone = testing::AnalyzeJsonText(Trace(rank_load, true, block));
  const Finding* f = testing::FindFinding(alone, "machine.busy");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("the job's own 1 other rank on this machine (LOCAL_WORLD_SIZE), not in this trace, is among them"),
            std::string::npos) << f->title;
  EXPECT_EQ(f->confidence, Confidence::kLow);  // and 0.2 s of steps
  EXPECT_NE(f->title.find("measured over only 0.20 s of its steps"), std::string::npos) << f->title;
  EXPECT_EQ(f->fix_python.find("quiet machine"), std::string::npos) << f->fix_python;
  // A real other program beside the two ranks (1.5 CPUs on a 4-CPU machine, the ranks 1 each) stays one.
  profiler::Trace crowded;
  const Load busy{1e6, 0.5e6, 2.5e6, 4};
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(busy, true, block), "r0.json", 0, crowded).ok());
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(busy, true, block), "r1.json", 1, crowded).ok());
  crowded.Finalize();
  const Report r = Analyze(crowded);
  f = testing::FindFinding(r, "machine.busy");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("other programs used 1.5 of the 4 CPUs it may run on (besides the job's own 1 other rank here, 1.0 CPUs)"),
            std::string::npos) << f->title;
}

// Issue 81.9: slow first steps beside another program are contention, not warm-up: they waited for
// a CPU and ran no more CPU time than later steps, so they stay in the steps (and a note says why).
// Slow first steps that ran more CPU (one-time work) and did not wait stay warm-up.
TEST(MachineTest, SlowFirstStepsThatWaitedForACpuAreNotWarmUp) {
  // 20 steps: the first 5 take 35 ms, the rest 10 ms; counters sampled at every step boundary.
  const auto trace = [](double lead_run_ms, double lead_wait_ms, bool samples = true) {
    std::string ev;
    double t = 1000, run = 5e9, wait = 1e9, busy = 5e12;  // us; ns
    for (int i = 0; i < 20; ++i) {
      const bool lead = i < 5;
      const double dur = lead ? 35000 : 10000;
      const auto counters = [&](double ts) {
        if (!samples) return;
        for (const auto& [w, v] : {std::pair{profiler::CpuWaitWhat::kRun, run}, {profiler::CpuWaitWhat::kWait, wait},
                                   {profiler::CpuWaitWhat::kInvoluntary, 0.0}, {profiler::CpuWaitWhat::kChildrenRun, -1.0},
                                   {profiler::CpuWaitWhat::kCpusBusy, busy}, {profiler::CpuWaitWhat::kCpus, 2.0}})
          ev += fmt::format(R"J({{"ph":"C","name":"{}","pid":1,"tid":1,"ts":{},"args":{{"v":{:.0f}}}}},)J",
                            profiler::CpuWaitCounterName(w), ts, v);
      };
      counters(t);
      ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", i, t, dur);
      ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":{}}},)J", t + 100, dur - 200);
      run += (lead ? lead_run_ms : 10) * 1e6;
      wait += (lead ? lead_wait_ms : 0.2) * 1e6;
      busy += (lead ? lead_run_ms + 20 : 10.2) * 1e6;  // another program beside the contended steps
      t += dur;
      if (i == 19) counters(t);
    }
    ev.pop_back();
    return "{\"traceEvents\":[" + ev + "]}";
  };
  // Contention: 10 ms of CPU a step like the others, 25 ms waiting.
  Report r = testing::AnalyzeJsonText(trace(10, 25));
  EXPECT_EQ(r.metrics.steps.warmup_steps.size(), 0u);
  EXPECT_EQ(r.metrics.steps.steps.size(), 20u);
  ASSERT_EQ(r.metrics.steps.warmup_notes.size(), 1u);
  EXPECT_NE(r.metrics.steps.warmup_notes[0].find("the first 5 steps took over 3x the median but waited for a CPU 71 %"),
            std::string::npos) << r.metrics.steps.warmup_notes[0];
  // Warm-up: 35 ms of CPU a step (one-time work), no wait.
  r = testing::AnalyzeJsonText(trace(35, 0.2));
  EXPECT_EQ(r.metrics.steps.warmup_steps.size(), 5u);
  EXPECT_TRUE(r.metrics.steps.warmup_notes.empty());
  // No samples: as before, the slow first steps are warm-up.
  const std::string json = trace(10, 25, /*samples=*/false);
  r = testing::AnalyzeJsonText(json);
  EXPECT_EQ(r.metrics.steps.warmup_steps.size(), 5u);
}

TEST(MachineTest, AQuietRunSaysNothingAndKeepsItsText) {
  // 0.2 % of the runnable time waiting: the figure is in the metrics, nothing in the findings or text.
  const Report r = testing::AnalyzeJsonText(Trace({0.9e6, 0.002e6, 0.01e6}));
  ASSERT_EQ(r.metrics.cpu_load.size(), 1u);
  EXPECT_EQ(testing::FindFinding(r, "machine.busy"), nullptr);
  // The same trace without samples renders the same text: a quiet machine changes nothing.
  EXPECT_EQ(Text(Trace({0.9e6, 0.002e6, 0.01e6})), Text(Trace({0.9e6, 0.002e6, 0.01e6}, false)));
}

TEST(MachineTest, NoSamplesOrASliverOfTheStepsIsNoFigure) {
  EXPECT_TRUE(testing::AnalyzeJsonText(Trace({0.5e6, 0.5e6, 1.5e6}, false)).metrics.cpu_load.empty());
  // One sample only: no difference to take.
  std::string one = Trace({0.5e6, 0.5e6, 1.5e6});
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(one, "one.json", 0, t).ok());
  const StepModel steps = BuildStepModel(t);
  std::erase_if(t.counters, [&](const profiler::Counter& c) { return c.ts_ns > 1'000'000; });
  EXPECT_FALSE(CpuLoadOfRank(t, steps, 0).has_value());
}

TEST(MachineTest, AQuietRunWhoseWaitNeverChangedStillHasItsFigure) {
  // The collector stores a counter only when it changed: a run that never waited has one wait
  // sample, at the start (an H200 host with 16 CPUs, issue 62: no figure at all until the sample
  // times came from the run-time series, which changes at every sample).
  std::string json = Trace({0.8e6, 0, 1e6});
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(json, "quiet.json", 0, t).ok());
  const StepModel steps = BuildStepModel(t);
  const profiler::StrId wait = t.strings.Find(profiler::CpuWaitCounterName(profiler::CpuWaitWhat::kWait));
  ASSERT_NE(wait, profiler::kNoStr);
  const size_t before = t.counters.size();
  std::erase_if(t.counters, [&](const profiler::Counter& c) { return c.name == wait && c.ts_ns > 1'000'000; });
  ASSERT_EQ(t.counters.size(), before - 5);
  const auto load = CpuLoadOfRank(t, steps, 0);
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->load.wait_ns, 0);
  EXPECT_NEAR(load->load.wall_ns, 200e6, 1);
  EXPECT_NEAR(load->load.OtherCpus(), 1.0, 1e-3);
}

TEST(MachineTest, LoadBetweenNeverGoesBelowZeroWhenAThreadEnds) {
  profiler::CpuWaitSample a, b;
  a.ok = b.ok = true;
  a.run_ns = 100, a.wait_ns = 50, a.cpus_busy_ns = 1000, a.children_run_ns = -1, a.cpus = 2;
  b.run_ns = 80, b.wait_ns = 40, b.cpus_busy_ns = 1500, b.children_run_ns = -1, b.cpus = 2;  // a thread ended
  const profiler::CpuLoad l = profiler::LoadBetween(a, b, 1000);
  EXPECT_TRUE(l.measured);
  EXPECT_EQ(l.run_ns, 0);
  EXPECT_EQ(l.wait_ns, 0);
  EXPECT_EQ(l.others_ns, 500);
  EXPECT_EQ(l.children_ns, -1);
  EXPECT_FALSE(profiler::LoadBetween(a, profiler::CpuWaitSample{}, 1000).measured);
}

TEST(MachineTest, ThisProcessReadsItsOwnFigures) {
  // The kernel adds a running thread's time to schedstat at a tick or when the thread leaves the CPU:
  // a test run alone in a process that just started can read 0. Run a while, then sleep once.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const profiler::CpuWaitSample s = profiler::ReadCpuWait();
  if (!s.ok) GTEST_SKIP() << "no schedstat on this kernel";
  EXPECT_GT(s.run_ns, 0);
  EXPECT_GE(s.wait_ns, 0);
  EXPECT_GE(s.cpus, 1);
  EXPECT_GT(s.cpus_busy_ns, 0);
}

}  // namespace
}  // namespace trainrx::analyzers
