// SamplesPerStep: the batch read from recorded input shapes (sweep --cmd ranks by it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/batch.h"
#include "trainrx/profiler/reader.h"

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
  // Token ids [12, 128]: 128 tokens a sample (issue 81.1: a token model is judged in tokens).
  EXPECT_EQ(TokensPerSample(*b), 128);
  // An image's elements are not tokens.
  std::string conv;
  for (int i = 0; i < 3; ++i) conv += Step(i, 12);
  const auto c = Estimate(conv);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sample_elements, 3 * 28 * 28);
  EXPECT_EQ(TokensPerSample(*c), 0);
}

// Issue 51.4: minGPT's chargpt generates text with batch 1 at iteration 0, inside its first step and
// before that step's training forward; our collector records shapes in the first steps only. The
// batch is the training forward's, the one the step's backward differentiates.
// A GPT whose position embedding comes first: wpe(pos) with pos [T] = [64], then wte(idx) with idx
// [B, T] = [4, 64]. The batch is 4 sequences, not 64 (llm.c's train_gpt2.py, issue 60).
TEST(BatchTest, APositionEmbeddingsOneDimIndicesAreNotTheBatch) {
  std::string ev;
  for (int i = 0; i < 3; ++i) {
    const double s = i * 1000;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 1000);
    ev += Ev("cpu_op", "aten::embedding", 1, s + 10, 20, R"J("Input Dims":[[1024,768],[64]])J");
    ev += Ev("cpu_op", "aten::embedding", 1, s + 40, 20, R"J("Input Dims":[[50257,768],[4,64]])J");
    ev += Ev("cpu_op", "aten::layer_norm", 1, s + 80, 20, R"J("Input Dims":[[4,64,768],[768],[768],[]])J");
  }
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 4);
  EXPECT_EQ(b->op, "aten::embedding");
}

// karpathy/minGPT's forward: wte(idx) with idx [B, T], then wpe(pos) with pos = arange(T).unsqueeze(0),
// [1, T], broadcast over the batch. The batch is B (its adder project trains batches of 64; sweep read
// 1 sample a step); a step of one sequence, whose indices are [1, T] too, is still batch 1.
TEST(BatchTest, ABroadcastPositionIndexBesideTheBatchIsNotTheBatch) {
  const auto steps = [](int batch) {
    std::string ev;
    for (int i = 0; i < 3; ++i) {
      const double s = i * 1000;
      ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 1000);
      ev += Ev("cpu_op", "aten::embedding", 1, s + 10, 20, fmt::format(R"J("Input Dims":[[10,48],[{},6]])J", batch));
      ev += Ev("cpu_op", "aten::embedding", 1, s + 40, 20, R"J("Input Dims":[[6,48],[1,6]])J");
      ev += Ev("cpu_op", "aten::layer_norm", 1, s + 80, 20, fmt::format(R"J("Input Dims":[[{},6,48],[48],[48],[]])J", batch));
      ev += Ev("cpu_op", "autograd::engine::evaluate_function: EmbeddingBackward0", 1, s + 500, 100);
    }
    return ev;
  };
  const auto b = Estimate(steps(64));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 64);
  EXPECT_EQ(b->sample_elements, 6);
  const auto one = Estimate(steps(1));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->samples, 1);
}

TEST(BatchTest, ABatchOneGenerationBeforeTheTrainingForwardIsNotTheBatch) {
  std::string ev;
  for (int i = 0; i < 4; ++i) {
    const double s = i * 10000;
    const bool shapes = i == 0;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 10000);
    if (i == 0)  // generate(): 30 forwards of one sequence, no backward
      for (int k = 0; k < 30; ++k) {
        ev += Ev("cpu_op", "aten::embedding", 1, s + 10 + 100 * k, 20, fmt::format(R"J("Input Dims":[[65,48],[1,{}]])J", k + 1));
        ev += Ev("cpu_op", "aten::linear", 1, s + 40 + 100 * k, 20, fmt::format(R"J("Input Dims":[[1,{},48],[65,48]])J", k + 1));
      }
    const std::string dims = shapes ? R"J("Input Dims":[[65,48],[32,128]])J" : "";
    ev += Ev("cpu_op", "aten::embedding", 1, s + 5000, 50, dims);
    ev += Ev("cpu_op", "aten::linear", 1, s + 5100, 50, shapes ? R"J("Input Dims":[[32,128,48],[65,48]])J" : "");
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: EmbeddingBackward0", 1, s + 6000, 500);
    ev += Ev("cpu_op", "aten::embedding", 1, s + 9000, 20, shapes ? R"J("Input Dims":[[65,48],[1,1]])J" : "");  // after: not it
  }
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 32);
  EXPECT_EQ(b->op, "aten::embedding");
  EXPECT_EQ(b->steps_with_shapes, 1);
}

// Gradient accumulation (issue 81.1): nanoGPT-style steps of 4 micro-batches of 8, each a forward
// and its backward pass, then one optimizer step: 32 samples a step, not 8 (sweep named accum=1
// best, 3.47x ahead, where accum=4 had 1.15x its throughput).
TEST(BatchTest, EveryMicroBatchOfAnAccumulationStepCounts) {
  std::string ev;
  for (int i = 0; i < 3; ++i) {
    const double s = i * 10000;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 10000);
    for (int k = 0; k < 4; ++k) {
      const double m = s + 100 + 2000 * k;
      ev += Ev("cpu_op", "aten::embedding", 1, m, 50, R"J("Input Dims":[[65,48],[8,128]])J");
      ev += Ev("cpu_op", "aten::linear", 1, m + 100, 50, R"J("Input Dims":[[8,128,48],[65,48]])J");
      // the backward pass: several autograd nodes, on the autograd thread too
      ev += Ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 1, m + 500, 300);
      ev += Ev("cpu_op", "autograd::engine::evaluate_function: EmbeddingBackward0", 2, m + 900, 300);
    }
    ev += Ev("cpu_op", "Optimizer.step#AdamW.step", 1, s + 9000, 500);
  }
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 32);
  EXPECT_EQ(b->micro_steps, 4);
  EXPECT_EQ(b->micro_batch, 8);
  EXPECT_EQ(b->op, "aten::embedding");
  EXPECT_EQ(b->steps, 3);
}

// Activation checkpointing recomputes the forward inside the backward pass: its entry ops there are
// no micro-step of their own, and one pass stays one batch.
TEST(BatchTest, AForwardRecomputedInsideTheBackwardIsNoMicroStep) {
  std::string ev;
  for (int i = 0; i < 3; ++i) {
    const double s = i * 10000;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 10000);
    ev += Ev("cpu_op", "aten::linear", 1, s + 100, 50, R"J("Input Dims":[[16,64],[64,64]])J");
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: CheckpointFunctionBackward", 1, s + 1000, 3000);
    ev += Ev("cpu_op", "aten::linear", 1, s + 1100, 50, R"J("Input Dims":[[16,64],[64,64]])J");  // recomputed
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 1, s + 2000, 500);
    ev += Ev("cpu_op", "Optimizer.step#SGD.step", 1, s + 9000, 500);
  }
  const auto b = Estimate(ev);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples, 16);
  EXPECT_EQ(b->micro_steps, 1);
  EXPECT_EQ(b->micro_batch, 16);
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
