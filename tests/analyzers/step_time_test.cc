// steps.slow (issue 49.9): slow steps after the warm-up are said by their shape (periodic, a burst,
// scattered) and by what grew (every phase: contention), never as warm-up.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "trainrx/analyzers/analysis.h"
#include "report_helpers.h"
#include "trainrx/profiler/reader.h"

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

Report AnalyzeText(const std::string& json) { return testing::AnalyzeJsonText(json, "steps.json"); }
const Finding* Find(const Report& r, const char* id) { return testing::FindFinding(r, id); }

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
  // With two warm-up steps left out, the title numbers the slow steps as their names do, as the
  // examples list them (issue 60: "steps 30, 66, 91" beside ProfilerStep#32, #68, #93).
  const Report warm = AnalyzeText(Steps(32, [](int i) { return i < 2 ? 9000.0 : 1000.0; },
                                        [](int i) { return i >= 2 && i % 5 == 4 ? 6000.0 : 0.0; }));
  ASSERT_EQ(warm.metrics.steps.warmup_steps.size(), 2u);
  const Finding* g = Find(warm, "steps.slow");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->title.find("(steps 4, 9, 14, 19, ...)"), std::string::npos) << g->title;
  EXPECT_EQ(g->examples.front().rfind("ProfilerStep#4", 0), 0u) << g->examples.front();
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

// Issue 49.7: PyTorch Lightning runs the step's forward and backward inside Optimizer.step (the
// closure). Phases follow what ran: forward to the first backward, backward to its last node,
// optimizer after it and in the nested zero_grad; the plain loop is unchanged.
TEST(StepPhasesTest, AClosureStepsForwardAndBackwardAreNotOptimizer) {
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double t = 1000.0 * i;
    const auto x = [&](const char* cat, const char* name, double s, double d) {
      ev += fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", cat, name, t + s, d);
    };
    x("user_annotation", "Optimizer.step#Adam.step", 10, 900);
    x("user_annotation", "nn.Module: Sequential", 20, 280);  // training_step's forward: 300 us from the step's start
    x("cpu_op", "aten::linear", 30, 250);
    x("user_annotation", "Optimizer.zero_grad#Adam.zero_grad", 310, 40);
    x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 400, 150);
    x("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 600, 100);  // backward 400-700
    x("cpu_op", "aten::_foreach_add_", 750, 100);                                                    // the update
  }
  ev.pop_back();
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "closure.json", 0, t).ok());
  const Report r = Analyze(t);
  const auto& steps = r.metrics.steps;
  ASSERT_GE(steps.steps.size(), 4u);
  const StepRow& row = steps.steps[2];
  EXPECT_EQ(row.forward_ns, 350'000);                // 10-400, less the nested zero_grad's 40 us
  EXPECT_EQ(row.backward_ns, 300'000);                // 400-700: the nodes and the engine between them
  EXPECT_EQ(row.optimizer_ns, 40'000 + 210'000);      // zero_grad, and 700-910
}

// LBFGS calls its closure several times in one step (pytorch/examples' time_sequence_prediction:
// up to 20): each call's forward and backward pass are theirs, not one backward from the first
// pass to the last (which read backward 100 %). Each step: three calls of 200 us forward (a module
// range) and a 220 us backward pass (two nodes, the engine between them), LBFGS's own math (a dot
// of 30 us) after each pass, and its update (50 us) at the end.
// Six LBFGS steps of 1.8 ms: three closure calls each (a 200 us forward, 220 us of backward), the
// optimizer's own dot between them and its update at the end. Where the closure calls
// `optimizer.zero_grad()` (10 us; 5 us): kFirst, the second and third calls start with it, as
// pytorch/examples' closure does; kBeforeBackward, every call makes it after its forward, just
// before backward, as Lightning's closure does.
enum class ZeroGrad { kNone, kFirst, kBeforeBackward };
Report LbfgsSteps(ZeroGrad zero_grad) {
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double t = 2000.0 * i;
    const auto x = [&](const char* cat, const char* name, double s, double d) {
      ev += fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", cat, name, t + s, d);
    };
    x("user_annotation", "Optimizer.step#LBFGS.step", 10, 1790);
    for (int k = 0; k < 3; ++k) {
      const double b = 10 + 600.0 * k;
      x("user_annotation", "nn.Module: Sequence", b, zero_grad == ZeroGrad::kBeforeBackward ? 190 : 200);
      x("cpu_op", "aten::linear", b + 10, zero_grad == ZeroGrad::kBeforeBackward ? 170 : 180);
      if (zero_grad == ZeroGrad::kBeforeBackward) x("user_annotation", "Optimizer.zero_grad#LBFGS.zero_grad", b + 192, 5);
      x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", b + 200, 100);
      x("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", b + 320, 100);
      x("cpu_op", "aten::dot", b + 430, 30);  // LBFGS's direction, between the closure's calls
      if (zero_grad == ZeroGrad::kFirst && k > 0) x("user_annotation", "Optimizer.zero_grad#LBFGS.zero_grad", b - 20, 10);
    }
    x("cpu_op", "aten::add_", 1700, 50);  // the update
  }
  ev.pop_back();
  profiler::Trace t;
  EXPECT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "lbfgs.json", 0, t).ok());
  return Analyze(t);
}

// The third step's forward, backward and optimizer time (us).
void ExpectThirdStepPhases(const Report& r, int64_t forward_us, int64_t backward_us, int64_t optimizer_us) {
  ASSERT_GE(r.metrics.steps.steps.size(), 4u);
  const StepRow& row = r.metrics.steps.steps[2];
  EXPECT_EQ(row.forward_ns, forward_us * 1000);
  EXPECT_EQ(row.backward_ns, backward_us * 1000);
  EXPECT_EQ(row.optimizer_ns, optimizer_us * 1000);
}

TEST(StepPhasesTest, AClosureCalledThreeTimesAStepHasThreeForwardAndBackwardPasses) {
  // Forward: 10-210, then from each pass's end to the next pass (LBFGS's dot counted there) 430-810
  // and 1030-1410; backward: 210-430, 810-1030, 1410-1630; optimizer: the last dot and the update,
  // 1630-1800.
  ExpectThirdStepPhases(LbfgsSteps(ZeroGrad::kNone), 960, 660, 170);
}

// Where the closure calls zero_grad, the next forward starts there: the optimizer's own work
// between the calls (its dot, and the gaps around it) is the optimizer's.
TEST(StepPhasesTest, AClosuresZeroGradStartsItsForwardAndTheOptimizersWorkBeforeItIsTheOptimizers) {
  // Forward: 10-210, 600-810, 1200-1410; backward as before; optimizer: 430-590 and 1030-1190 (the
  // dot and the wait for the next call), the two zero_grad calls (10 us each), 1630-1800.
  ExpectThirdStepPhases(LbfgsSteps(ZeroGrad::kFirst), 620, 660, 510);
  // Lightning's closure: zero_grad after the forward starts nothing; the forward stays forward
  // (its three zero_grad calls, 15 us, are the optimizer's).
  ExpectThirdStepPhases(LbfgsSteps(ZeroGrad::kBeforeBackward), 945, 660, 185);
}

}  // namespace
}  // namespace trainrx::analyzers

namespace trainrx::analyzers {
namespace {

// Issue 49.8: an evaluation pass inside a step (Hugging Face Trainer's eval_steps, Lightning's
// validation: between two optimizer steps) is forward that trains nothing. Each step: 2 ms of
// evaluation (its own loader range and ops), then the training batch's fetch, 1 ms forward, 1 ms
// backward, the optimizer; steps 2 and 6 evaluate. Where most steps do the same before their
// fetch (a second loader fetched mid-forward, a teacher model run first), it is training forward.
std::string EvalSteps(const std::function<bool(int)>& evaluates) {
  std::string ev;
  const char* loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
  for (int i = 0; i < 8; ++i) {
    const double s = i * 10000.0;
    const bool eval = evaluates(i);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":6000}},)J", i, s);
    double t = s + 10;
    if (eval) {
      ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"{}","pid":1,"tid":1,"ts":{},"dur":100}},)J", loader, t);
      ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::eval_only","pid":1,"tid":1,"ts":{},"dur":2000}},)J", t + 100);
      t += 2200;
    }
    // What the loop does before every fetch (Trainer: two aten::to, 8 us): the rule, not evaluation.
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::to","pid":1,"tid":1,"ts":{},"dur":8}},)J", t);
    t += 10;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"{}","pid":1,"tid":1,"ts":{},"dur":200}},)J", loader, t);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":{},"dur":1000}},)J", t + 200);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: MmBackward0","pid":1,"tid":1,"ts":{},"dur":1000}},)J",
                      t + 1300);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"Optimizer.step#SGD.step","pid":1,"tid":1,"ts":{},"dur":300}},)J", t + 2400);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

TEST(StepPhasesTest, AnEvaluationPassInsideAStepIsNotTheForward) {
  const Report r = AnalyzeText(EvalSteps([](int i) { return i == 2 || i == 6; }));
  ASSERT_EQ(r.metrics.steps.steps.size(), 8u);
  for (const StepRow& row : r.metrics.steps.steps) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.forward_ns, 1'008'000);  // the training forward, and the loop's own ops before the fetch
    const bool eval = row.name == "ProfilerStep#2" || row.name == "ProfilerStep#6";
    EXPECT_EQ(row.untrained_forward_ns, eval ? 2'000'000 : 0);
    EXPECT_GE(row.other_ns, row.untrained_forward_ns);
  }
  EXPECT_NEAR(r.metrics.steps.untrained_forward_share, 2 * 2.0 / (8 * 6.0), 1e-9);
  // The evaluation's ops are not the steps' ops (the op table counts what runs inside the steps).
  for (const auto& row : r.metrics.op_table.rows) EXPECT_NE(row.name, "aten::eval_only");
  bool to = false;
  for (const auto& row : r.metrics.op_table.rows) to = to || row.name == "aten::to";
  EXPECT_TRUE(to);
  // The same work before the fetch in every step but one: part of the training step.
  const Report every = AnalyzeText(EvalSteps([](int i) { return i != 5; }));
  for (const StepRow& row : every.metrics.steps.steps) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.untrained_forward_ns, 0);
    EXPECT_EQ(row.forward_ns, row.name == "ProfilerStep#5" ? 1'008'000 : 3'008'000);
  }
}

}  // namespace
}  // namespace trainrx::analyzers
