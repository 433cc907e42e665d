// Steps of a script without torch.optim (issue 34): inferred from its backward passes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/profiler_steps.h"

namespace trainrx::analyzers {
namespace {

std::string Ev(const char* cat, std::string_view name, int tid, double ts, double dur) {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}}},)J", cat, name, tid, ts, dur);
}

// `n` iterations of 1 ms: forward ops on thread 1, a backward pass of three nodes (on thread
// `bwd_tid`, nested ops inside), a hand-written update; `with_optimizer` adds Optimizer.step.
// After iteration 3, an evaluation of 5 forward passes and no backward.
std::string Iterations(int n, int bwd_tid, bool with_optimizer) {
  std::string ev;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    ev += Ev("cpu_op", "aten::linear", 1, t, 200);
    ev += Ev("cpu_op", "aten::addmm", 1, t + 10, 150);  // nested in linear
    ev += Ev("cpu_op", "aten::ones_like", 1, t + 210, 5);  // backward()'s seed gradient
    for (int k = 0; k < 3; ++k) {
      ev += Ev("cpu_op", fmt::format("autograd::engine::evaluate_function: Node{}Backward0", k), bwd_tid, t + 220 + k * 100, 90);
      ev += Ev("cpu_op", "aten::mm", bwd_tid, t + 225 + k * 100, 50);
    }
    if (with_optimizer) ev += Ev("user_annotation", "Optimizer.step#SGD.step", 1, t + 600, 100);
    else ev += Ev("cpu_op", "aten::add_", 1, t + 600, 100);  // p.data.add_(p.grad, alpha=-lr)
    t += 1000;
    if (i == 3) {
      for (int k = 0; k < 5; ++k) ev += Ev("cpu_op", "aten::linear", 1, t + k * 300, 200);
      t += 2000;
    }
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

TEST(BackwardStepsTest, HandWrittenUpdatesGetAStepPerBackwardPass) {
  for (const int bwd_tid : {1, 7}) {  // backward on the main thread (CPU) or autograd's own (GPU)
    profiler::Trace t;
    ASSERT_TRUE(profiler::ReadTraceBuffer(Iterations(8, bwd_tid, false), "hand.json", 0, t).ok());
    const auto spans = profiler::StepsFromBackward(t, 0);
    ASSERT_EQ(spans.size(), 7u) << "bwd_tid " << bwd_tid;  // 8 passes: 7 steps between their ends
    const Report r = Analyze(t);
    EXPECT_EQ(r.metrics.steps.source, "inferred from backward passes");
    EXPECT_EQ(r.metrics.steps.steps.size() + r.metrics.steps.warmup_steps.size(), 7u);
    // The evaluation (no backward) is not a step boundary: it lies inside one step.
    int64_t longest = 0;
    for (const auto& s : r.metrics.steps.steps) longest = std::max(longest, s.wall_ns);
    EXPECT_EQ(longest, 3'000'000);
    EXPECT_GT(r.metrics.steps.backward_share, 0);
  }
}

TEST(BackwardStepsTest, OptimizerStepsKeepTheirRuleAndTooFewPassesAreNoSteps) {
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(Iterations(8, 1, true), "optim.json", 0, t).ok());
  EXPECT_EQ(Analyze(t).metrics.steps.source, "inferred from Optimizer.step");
  profiler::Trace one;
  ASSERT_TRUE(profiler::ReadTraceBuffer(Iterations(1, 1, false), "one.json", 0, one).ok());
  EXPECT_TRUE(profiler::StepsFromBackward(one, 0).empty());
  EXPECT_EQ(Analyze(one).metrics.steps.source, "none");
}

}  // namespace
}  // namespace trainrx::analyzers
