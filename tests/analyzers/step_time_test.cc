// steps.slow (issue 49.9): slow steps after the warm-up are said by their shape (periodic, a burst,
// scattered) and by what grew (every phase: contention), never as warm-up.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::analyzers {
namespace {

// `n` steps; step i lasts wall(i) us with a forward range of 40 % and a backward of 40 % of it
// (optimizer 10 %); `data(i)` us of data wait (a DataLoader range) before the forward.
std::string Steps(int n, const std::function<double(int)>& wall, const std::function<double(int)>& data = nullptr) {
  std::string ev;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    const double d = data ? data(i) : 0, w = wall(i) + d;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", i, t, w);
    if (d > 0)
      ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                        t + 1, d - 2);
    const double body = w - d;
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":{},"dur":{}}},)J", t + d, 0.4 * body);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: MmBackward0","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                      t + d + 0.45 * body, 0.4 * body);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"Optimizer.step#SGD.step","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                      t + d + 0.88 * body, 0.1 * body);
    t += w;
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

Report AnalyzeText(const std::string& json) {
  profiler::Trace t;
  const auto st = profiler::ReadTraceBuffer(json, "steps.json", 0, t);
  EXPECT_TRUE(st.ok()) << st.message();
  return Analyze(t);
}

const Finding* Find(const Report& r, const char* id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

TEST(SlowStepsTest, ABurstInTheMiddleIsABurstOfContentionNotWarmUp) {
  // 30 steps of 1 ms; steps 14-17 take 5 ms, every phase stretched (a busy machine).
  const Report r = AnalyzeText(Steps(30, [](int i) { return i >= 14 && i <= 17 ? 5000.0 : 1000.0; }));
  EXPECT_TRUE(r.metrics.steps.warmup_steps.empty());  // none of them is leading
  const Finding* f = Find(r, "steps.slow");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("4 of 30 steady steps took 5.0x the median step, in one burst (steps 14-17)"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("every phase slowed"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("after the warm-up: not warm-up"), std::string::npos) << f->title;
  EXPECT_NE(f->fix_python.find("quiet machine"), std::string::npos);
}

TEST(SlowStepsTest, EveryKStepsIsPeriodicAndALoaderStallNamesDataWait) {
  // Every 5th step waits 6 ms for data (a checkpoint written by the loop's own code would look the same).
  const Report r = AnalyzeText(Steps(30, [](int) { return 1000.0; }, [](int i) { return i % 5 == 4 ? 6000.0 : 0.0; }));
  const Finding* f = Find(r, "steps.slow");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("every 5 steps"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("data wait grew most"), std::string::npos) << f->title;
  EXPECT_EQ(f->knob, "");
}

TEST(SlowStepsTest, SteadyStepsLeadingWarmUpAndSmallNoiseAreNotFlagged) {
  // Leading slow steps are warm-up (left out), the rest steady within 2x: nothing to say.
  const Report warm = AnalyzeText(Steps(20, [](int i) { return i < 2 ? 9000.0 : 1000.0 + 500.0 * (i % 3 == 0); }));
  EXPECT_EQ(warm.metrics.steps.warmup_steps.size(), 2u);
  EXPECT_EQ(Find(warm, "steps.slow"), nullptr);
  // One slow step of 3.5 ms in 40: 2.5 ms above the median of 40 ms of steps (6 %) is flagged; in
  // 100 steps (2.4 %) it is not worth a finding.
  EXPECT_NE(Find(AnalyzeText(Steps(40, [](int i) { return i == 20 ? 3500.0 : 1000.0; })), "steps.slow"), nullptr);
  EXPECT_EQ(Find(AnalyzeText(Steps(100, [](int i) { return i == 50 ? 3500.0 : 1000.0; })), "steps.slow"), nullptr);
  // Too few steps to tell a slow step from the median.
  EXPECT_EQ(Find(AnalyzeText(Steps(6, [](int i) { return i == 3 ? 9000.0 : 1000.0; })), "steps.slow"), nullptr);
}

}  // namespace
}  // namespace trainrx::analyzers
