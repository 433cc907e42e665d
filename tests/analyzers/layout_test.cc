// model.channels_last (issue 60.4): an NCHW conv model whose convolutions, pooling and batch norms
// take much of the step is flagged with their time; channels-last inputs, an unknown layout
// (torch.profiler's traces) or a small share are not.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "report_helpers.h"
#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {
namespace {

// 10 steps of 1000 us: a conv2d (input layout `layout`: "none" no concrete inputs, "channels_last",
// or "nchw" = "" for a contiguous tensor), a max_pool2d and their backward nodes take `layout_us` of
// each step, an mm the rest. `collector`: our collector's trace (a config counter), else
// torch.profiler's, whose "" says nothing of the layout.
std::string Trace(const char* layout, double layout_us, bool collector = true) {
  std::string ev;
  if (collector) ev += R"J({"ph":"C","name":"trainrx.config.intra_op_threads","pid":1,"tid":1,"ts":100,"args":{"v":2}},)J";
  const std::string concrete = std::string(layout) == "none" ? ""
                               : fmt::format(R"J(,"Concrete Inputs":["{}","","","[1, 1]","[1, 1]","[1, 1]","1"])J",
                                             std::string(layout) == "channels_last" ? "channels_last" : "");
  for (int i = 0; i < 10; ++i) {
    const double t = 100 + i * 1000.0, q = layout_us / 4;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":1000}},)J", i, t);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":{},"dur":{},"args":{{"Input Dims":[[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],"Input type":["float","float","float","","","",""]{}}}}},)J",
                      t + 1, q, concrete);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::max_pool2d","pid":1,"tid":1,"ts":{},"dur":{}}},)J", t + 2 + q, q);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":{}}},)J", t + 3 + 2 * q,
                      990 - layout_us);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: ConvolutionBackward0","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                      t + 994 - 2 * q, 2 * q);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

TEST(ChannelsLastTest, AnNchwConvModelWhoseLayoutOpsDominateIsFlaggedWithTheirTime) {
  const Report r = testing::AnalyzeJsonText(Trace("nchw", 600));
  const Finding* f = testing::FindFinding(r, "model.channels_last");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->measured, 60, 1);
  EXPECT_NE(f->title.find("ConvolutionBackward0 alone 0.3 ms a step"), std::string::npos) << f->title;
  EXPECT_NEAR(f->estimated_saving_pct, 15, 0.5);  // a quarter of the 60 %
  EXPECT_EQ(f->knob, "channels_last=1");
  EXPECT_NE(f->fix_python.find("memory_format=torch.channels_last"), std::string::npos);
}

TEST(ChannelsLastTest, ChannelsLastAnUnknownLayoutOrASmallShareAreNotFlagged) {
  EXPECT_EQ(testing::FindFinding(testing::AnalyzeJsonText(Trace("channels_last", 600)), "model.channels_last"), nullptr);
  // No concrete inputs, or torch.profiler's "" for every tensor: the layout is unknown, silent.
  EXPECT_EQ(testing::FindFinding(testing::AnalyzeJsonText(Trace("none", 600)), "model.channels_last"), nullptr);
  EXPECT_EQ(testing::FindFinding(testing::AnalyzeJsonText(Trace("nchw", 600, false)), "model.channels_last"), nullptr);
  EXPECT_EQ(testing::FindFinding(testing::AnalyzeJsonText(Trace("nchw", 200)), "model.channels_last"), nullptr);
}

}  // namespace
}  // namespace trainrx::analyzers
