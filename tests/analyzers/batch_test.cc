// SamplesPerStep: the batch read from recorded input shapes (sweep --cmd ranks by it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/batch.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::analyzers {
namespace {

std::string Ev(const char* cat, std::string_view name, int tid, double ts, double dur, const std::string& args = "") {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}{}}},)J", cat, name, tid, ts, dur,
                     args.empty() ? "" : ",\"args\":{" + args + "}");
}

std::optional<BatchEstimate> Estimate(std::string events) {
  events.pop_back();
  profiler::Trace t;
  const auto st = profiler::ReadTraceBuffer("{\"traceEvents\":[" + events + "]}", "batch.json", 0, t);
  EXPECT_TRUE(st.ok()) << st.message();
  return SamplesPerStep(t, BuildStepModel(t));
}

// A step: a loader op with a leading dim that is not the batch (a per-sample transform's tensor,
// on another thread and earlier), then the model's first layer.
std::string Step(int i, int batch, const char* first_op = "aten::conv2d", bool shapes = true) {
  const double s = i * 1000;
  std::string ev = Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 1000);
  ev += Ev("cpu_op", "aten::add", 1, s + 5, 5, R"J("Input Dims":[[3,28,28],[]])J");  // not batch-led
  const std::string dims = std::string(first_op) == "aten::embedding" ? fmt::format("[[50257,64],[{},128]]", batch)
                                                                        : fmt::format("[[{},3,28,28],[8,3,3,3],[8]]", batch);
  ev += Ev("cpu_op", first_op, 1, s + 20, 100, shapes ? "\"Input Dims\":" + dims : "");
  ev += Ev("cpu_op", "aten::linear", 1, s + 200, 50, R"J("Input Dims":[[999,10],[10,10]])J");  // later: not the first
  return ev;
}

TEST(BatchTest, LeadingDimOfTheFirstBatchLedOpInTheSteps) {
  std::string ev;
  for (int i = 0; i < 5; ++i) ev += Step(i, i == 4 ? 7 : 32);  // the epoch's last batch is smaller
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 32);
  EXPECT_EQ(b->op, "aten::conv2d");
  EXPECT_EQ(b->steps, 4);
  EXPECT_EQ(b->steps_with_shapes, 5);
}

TEST(BatchTest, EmbeddingReadsItsIndicesNotItsWeight) {
  std::string ev;
  for (int i = 0; i < 3; ++i) ev += Step(i, 12, "aten::embedding");
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 12);
}

TEST(BatchTest, NothingToReadIsNotAGuess) {
  std::string ev;
  for (int i = 0; i < 3; ++i) ev += Step(i, 32, "aten::conv2d", /*shapes=*/false);
  // The only batch-led op with shapes left is the later linear: it is still the first one with
  // shapes in its step, so that is what is read; without it nothing is.
  auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 999);
  EXPECT_FALSE(Estimate(Ev("cpu_op", "aten::conv2d", 1, 0, 10, R"J("Input Dims":[[32,3,28,28]])J")));  // no steps
  std::string no_shapes;
  for (int i = 0; i < 3; ++i)
    no_shapes += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, i * 1000, 1000) +
                 Ev("cpu_op", "aten::conv2d", 1, i * 1000 + 10, 10);
  EXPECT_FALSE(Estimate(no_shapes));
}

}  // namespace
}  // namespace trainrx::analyzers
