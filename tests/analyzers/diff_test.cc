// DiffRuns (`trainrx diff`): rows that add up, names new and gone, settings and findings that differ.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/diff.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::analyzers {
namespace {

// `n` steps: forward ops (aten::mm `mm_us`, plus aten::extra `extra_us` when > 0), a backward
// node, an optimizer range; the collector's block with anomaly_mode.
std::string Trace(int n, double mm_us, double extra_us, int anomaly) {
  std::string ev;
  for (int i = 0; i < n; ++i) {
    const double s = 2000.0 * i;
    const double fwd = mm_us + extra_us;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", i, s,
                      fwd + 600);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":{}}},)J", s + 10, mm_us);
    if (extra_us > 0)
      ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::extra","pid":1,"tid":1,"ts":{},"dur":{}}},)J", s + 10 + mm_us,
                        extra_us);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: MmBackward0","pid":1,"tid":1,"ts":{},"dur":300}},)J",
                      s + fwd + 50);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"Optimizer.step#SGD.step","pid":1,"tid":1,"ts":{},"dur":100}},)J",
                      s + fwd + 400);
  }
  ev.pop_back();
  return fmt::format(R"J({{"trainrx":{{"anomaly_mode":{},"cpu_count":2}},"traceEvents":[{}]}})J", anomaly, ev);
}

TEST(DiffTest, RowsAddUpAndNameWhatChanged) {
  profiler::Trace a, b;
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(6, 500, 0, 0), "a.json", 0, a).ok);
  ASSERT_TRUE(profiler::ReadTraceBuffer(Trace(6, 500, 300, 1), "b.json", 0, b).ok);
  const Report ra = Analyze(a), rb = Analyze(b);
  const RunDiff d = DiffRuns(a, ra, "a.json", b, rb, "b.json");
  EXPECT_EQ(d.a.steps, 6);
  EXPECT_NEAR(d.delta_mean_ns, 300'000, 1);
  double phases = 0;
  for (const auto& r : d.phases) phases += r.delta();
  EXPECT_NEAR(phases, d.delta_mean_ns, 1);  // the phases partition a step
  ASSERT_FALSE(d.ops.empty());
  EXPECT_EQ(d.ops.front().name, "aten::extra");
  EXPECT_EQ(d.ops.front().note, "new in B");
  EXPECT_NEAR(d.ops.front().delta(), 300'000, 1);
  EXPECT_NEAR(d.ops_explained_ns, 300'000, 1);
  bool anomaly = false;
  for (const auto& r : d.config) anomaly = anomaly || (r.name == "config.anomaly_mode" && r.a_text == "0" && r.b_text == "1");
  EXPECT_TRUE(anomaly);
  for (const auto& r : d.config) EXPECT_NE(r.name, "cpu_count");  // the same on both sides
  // The same run against itself: nothing changed.
  const RunDiff same = DiffRuns(a, ra, "a.json", a, ra, "a.json");
  EXPECT_EQ(same.delta_mean_ns, 0);
  EXPECT_TRUE(same.config.empty());
  EXPECT_TRUE(same.findings.empty());
  for (const auto& r : same.ops) EXPECT_EQ(r.delta(), 0);
}

}  // namespace
}  // namespace trainrx::analyzers
