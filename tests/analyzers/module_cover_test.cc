// The module table's shares are of the steps its ranges cover (issue 34: module ranges cover the
// model's first calls, shares were of every step: "GPT 7.7 % of step" while forward was 32.5 %).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

TEST(ModuleCoverTest, SharesAreOfTheStepsWithModuleRanges) {
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double s = i * 1000.0;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":1000}},)J", i, s);
    if (i < 2)  // the start-up hook's ranges: the first calls only
      ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"nn.Module: Net","pid":1,"tid":1,"ts":{},"dur":400}},)J", s + 10);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":380}},)J", s + 15);
  }
  ev.pop_back();
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "m.json", 0, t).ok());
  const NameTable& m = Analyze(t).metrics.module_table;
  ASSERT_EQ(m.rows.size(), 1u);
  EXPECT_EQ(m.steps, 2);
  EXPECT_EQ(m.basis_ns, 2'000'000);
  EXPECT_NEAR(m.rows[0].share, 0.4, 1e-9);  // not 0.8 ms / 6 ms
}

}  // namespace
}  // namespace trainrx::analyzers
