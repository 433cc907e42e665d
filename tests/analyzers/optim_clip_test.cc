// optim.single_tensor's share is clipped to the steps and counts nested ranges once (issue 34).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

std::string Ev(const char* cat, std::string_view name, double ts, double dur) {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", cat, name, ts, dur);
}

TEST(OptimClipTest, NestedOptimizerRangesCountOnceAndStayInsideTheSteps) {
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double s = i * 1000.0;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), s, 1000);
    ev += Ev("cpu_op", "aten::mm", s + 10, 600);
    // The step's optimizer range recorded twice (an outer wrapper's range of the same name), and
    // in the last step running past the step's end.
    const double dur = i == 5 ? 400 : 150;
    ev += Ev("user_annotation", "Optimizer.step#SGD.step", s + 800, dur);
    ev += Ev("user_annotation", "Optimizer.step#SGD.step", s + 800, dur);
    for (int k = 0; k < 20; ++k) ev += Ev("cpu_op", "aten::add_", s + 802 + k * 7, 5);
  }
  ev.pop_back();
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "opt.json", 0, t).ok());
  const Report r = Analyze(t);
  const Finding* f = nullptr;
  for (const auto& x : r.findings)
    if (x.id == "optim.single_tensor") f = &x;
  ASSERT_NE(f, nullptr);
  // 150 us of each 1000 us step (the last step's range clipped at its end: 200 us): ~15.8 %, not
  // twice that.
  EXPECT_NEAR(f->measured, 100.0 * (5 * 150 + 200) / 6000.0, 0.5);
  double phase = 0, wall = 0;
  for (const auto& s : r.metrics.steps.steps) phase += static_cast<double>(s.optimizer_ns), wall += static_cast<double>(s.wall_ns);
  EXPECT_LE(f->measured, 100 * phase / wall + 0.5);
}

}  // namespace
}  // namespace trainrx::analyzers
