// torch.compile (issue 39): compile.graph_break, compile.recompiles, compile.time from the start-up
// hook's marks and from the compiled regions and compile spans of a torch.profiler trace.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "trainrx/analyzers/analysis.h"
#include "report_helpers.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

std::string Ev(std::string_view cat, std::string_view name, double ts, double dur) {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", cat, name, ts, dur);
}

// `steps` 1 ms steps of a compiled model: one region per step holding its graph; with `breaks`, the
// resume function's region inside it, 100 us of eager Python between the two graphs. `extra(i)`
// adds events to step i.
std::string CompiledSteps(int steps, bool breaks, const std::function<std::string(int, double)>& extra = nullptr) {
  std::string ev;
  for (int i = 0; i < steps; ++i) {
    const double s = 1000.0 * i;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), s, 1000);
    ev += Ev("user_annotation", "Torch-Compiled Region: 0/0", s + 10, breaks ? 500 : 300);
    ev += Ev("cpu_op", "CompiledFunction", s + 20, 200);
    if (breaks) {
      ev += Ev("user_annotation", "Torch-Compiled Region: 1/0", s + 320, 180);
      ev += Ev("cpu_op", "CompiledFunction", s + 320, 150);  // 100 us after the first graph
    }
    ev += Ev("cpu_op", "aten::mm", s + 600, 300);  // backward, optimizer: eager by design
    if (extra) ev += extra(i, s);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

Report AnalyzeText(const std::string& json) { return testing::AnalyzeJsonText(json, "compile.json"); }
const Finding* Find(const Report& r, const char* id) { return testing::FindFinding(r, id); }

TEST(CompileTest, AGraphBreakInEveryStepIsFlaggedWithItsLineAndItsEagerTime) {
  const auto mark = [](int i, double s) {
    std::string ev = i == 0 ? Ev("user_annotation", "trainrx::compile 0/0", s + 5, 400) +
                                  Ev("user_annotation",
                                     "trainrx::graph_break /home/u/train.py:33 Unsupported Tensor.item() call with "
                                     "capture_scalar_outputs=False",
                                     s + 406, 1)
                            : "";
    return ev;
  };
  const Report r = AnalyzeText(CompiledSteps(8, true, mark));
  ASSERT_EQ(r.metrics.compile.size(), 1u);
  const auto& c = r.metrics.compile[0];
  EXPECT_TRUE(c.marks);
  EXPECT_DOUBLE_EQ(c.regions_per_step, 2);
  EXPECT_DOUBLE_EQ(c.eager_between_ns, 100'000);
  ASSERT_EQ(c.graph_breaks.size(), 1u);
  EXPECT_EQ(c.graph_breaks[0].where, "train.py:33");
  const Finding* f = Find(r, "compile.graph_break");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->confidence, Confidence::kHigh);
  EXPECT_NE(f->title.find("2 compiled regions: 1 break, first at train.py:33 (Unsupported Tensor.item()"), std::string::npos) << f->title;
  EXPECT_EQ(f->estimated_saving_ns, 100'000);
  EXPECT_NE(f->fix_python.find("capture_scalar_outputs"), std::string::npos);
}

TEST(CompileTest, OneRegionAStepIsNoBreakAndATraceWithoutMarksSaysWhatItCannotTell) {
  const Report clean = AnalyzeText(CompiledSteps(8, false));
  ASSERT_EQ(clean.metrics.compile.size(), 1u);
  EXPECT_FALSE(clean.metrics.compile[0].marks);
  EXPECT_EQ(Find(clean, "compile.graph_break"), nullptr);
  // torch.profiler's trace of a break: two regions a step, no marks: a medium-confidence claim.
  const Report traced = AnalyzeText(CompiledSteps(8, true));
  const Finding* f = Find(traced, "compile.graph_break");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->confidence, Confidence::kMedium);
  EXPECT_NE(f->title.find("graph breaks, or several compiled functions"), std::string::npos) << f->title;
  // A break the hook saw outside the steps (evaluation): no step pays for it.
  const auto eval_break = [](int i, double s) {
    return i == 0 ? Ev("user_annotation", "trainrx::graph_break /u/eval.py:9 print", 50'000, 1) : std::string();
  };
  EXPECT_EQ(Find(AnalyzeText(CompiledSteps(8, false, eval_break)), "compile.graph_break"), nullptr);
  // Not compiled at all: no compile figures.
  EXPECT_TRUE(AnalyzeText(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":5}]})")
                  .metrics.compile.empty());
}

// nanoGPT (gradient_accumulation_steps = 40): the compiled model runs once per micro-batch, 40
// one-region calls a step. Not a break: before this rule it was flagged "40 compiled regions a step".
TEST(CompileTest, OneRegionPerCallRepeatedByGradientAccumulationIsNoBreak) {
  const auto micro = [](bool breaks, bool marks) {
    return [breaks, marks](int i, double s) {
      std::string ev = marks && i == 0 ? Ev("user_annotation", "trainrx::compile 0/0", s + 905, 1) : std::string();
      for (int k = 1; k < 4; ++k) {  // 3 more micro-batches after the helper's first call
        const double t = s + 600 + 90.0 * k;
        ev += Ev("user_annotation", "Torch-Compiled Region: 0/0", t, breaks ? 80 : 40);
        ev += Ev("cpu_op", "CompiledFunction", t + 2, 30);
        if (breaks) ev += Ev("user_annotation", "Torch-Compiled Region: 1/0", t + 45, 30);
      }
      return ev;
    };
  };
  for (bool marks : {false, true}) {
    const Report r = AnalyzeText(CompiledSteps(8, false, micro(false, marks)));
    ASSERT_EQ(r.metrics.compile.size(), 1u);
    EXPECT_DOUBLE_EQ(r.metrics.compile[0].regions_per_step, 4);
    EXPECT_DOUBLE_EQ(r.metrics.compile[0].regions_per_call, 1);
    EXPECT_EQ(Find(r, "compile.graph_break"), nullptr) << "marks " << marks;
  }
  // The same with a break in every call (the resume function's region inside the caller's): flagged.
  const Report broken = AnalyzeText(CompiledSteps(8, true, micro(true, false)));
  EXPECT_DOUBLE_EQ(broken.metrics.compile[0].regions_per_call, 2);
  EXPECT_NE(Find(broken, "compile.graph_break"), nullptr);
}

TEST(CompileTest, RecompilesNameTheFunctionAndTheGuard) {
  // A module attribute that changes every step: a compile and a recompile mark in steps 1..4.
  const auto recompile = [](int i, double s) {
    if (i < 1 || i > 4) return std::string();
    return Ev("user_annotation",
              fmt::format("trainrx::recompile /home/u/train.py:30 forward self.scale == {} # h = h * self.scale", i - 1), s + 1, 1) +
           Ev("user_annotation", fmt::format("trainrx::compile 0/{}", i), s + 2, 7);
  };
  const Report r = AnalyzeText(CompiledSteps(8, false, recompile));
  ASSERT_EQ(r.metrics.compile.size(), 1u);
  EXPECT_EQ(r.metrics.compile[0].recompiles, 4);
  const Finding* f = Find(r, "compile.recompiles");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("forward (train.py:30) was compiled again 4 times"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("self.scale == 3"), std::string::npos) << f->title;  // the latest guard
  EXPECT_NE(f->fix_python.find("mark_dynamic"), std::string::npos);
  // One recompile before the steps (automatic dynamic shapes settling while warming up): not flagged.
  const auto before = [](int i, double) {
    return i == 0 ? Ev("user_annotation", "trainrx::recompile /u/t.py:30 forward tensor 'x' size mismatch at index 0", -100, 1)
                  : std::string();
  };
  const Report r0 = AnalyzeText(CompiledSteps(8, false, before));
  EXPECT_EQ(r0.metrics.compile[0].recompiles, 1);
  EXPECT_EQ(r0.metrics.compile[0].recompiles_in_steps, 0);
  EXPECT_EQ(Find(r0, "compile.recompiles"), nullptr);
  // The same recompile inside a steady step: flagged, with the shapes fix.
  const auto inside = [](int i, double s) {
    return i == 3 ? Ev("user_annotation", "trainrx::recompile /u/t.py:30 forward tensor 'x' size mismatch at index 0", s + 1, 1)
                  : std::string();
  };
  const Report r1 = AnalyzeText(CompiledSteps(8, false, inside));
  EXPECT_EQ(r1.metrics.compile[0].recompiles_in_steps, 1);
  const Finding* g = Find(r1, "compile.recompiles");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->fix_python.find("dynamic=True"), std::string::npos);
}

TEST(CompileTest, TorchProfilersCompileSpansGiveCompileTimeAndRecompilesInTheSteps) {
  // A first compile before the steps (300 ms), then one in step 5 (50 ms).
  const auto spans = [](int i, double s) {
    std::string ev = i == 5 ? Ev("cpu_op", "_compile.compile_inner (dynamo_timed)", s + 1, 50) : std::string();
    return ev;
  };
  std::string j = CompiledSteps(8, false, spans);
  j.insert(std::string("{\"traceEvents\":[").size(), Ev("cpu_op", "_compile.compile_inner (dynamo_timed)", -400'000, 300'000));
  const Report r = AnalyzeText(j);
  ASSERT_EQ(r.metrics.compile.size(), 1u);
  EXPECT_EQ(r.metrics.compile[0].compiles, 2);
  EXPECT_EQ(r.metrics.compile[0].compile_ns, 300'050'000);
  const Finding* f = Find(r, "compile.recompiles");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->confidence, Confidence::kMedium);
  const Finding* t = Find(r, "compile.time");
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->title.find("torch.compile took 0.30 s in 2 compilations"), std::string::npos) << t->title;
  // The same trace with its compile shorter than 10 % of the recording: no compile.time.
  std::string quick = CompiledSteps(8, false);
  quick.insert(std::string("{\"traceEvents\":[").size(), Ev("cpu_op", "_compile.compile_inner (dynamo_timed)", -200, 100));
  EXPECT_EQ(Find(AnalyzeText(quick), "compile.time"), nullptr);
}

// Issue 49.3: a break the hook saw in a frame whose compiled code runs every steady step is a
// finding with its line, even where each step reads one compiled region (a `print(f"{h.mean().item()}")`
// at the end of forward: the resume function has no graph).
TEST(CompileTest, ABreakInAFrameTheStepsRunIsFlaggedWhateverTheRegionCount) {
  const auto marks = [](const char* id) {
    return [id](int i, double s) {
      return i == 0 ? Ev("user_annotation", fmt::format("trainrx::compile {}", id), s + 5, 4) +
                          Ev("user_annotation",
                             "trainrx::graph_break /home/u/train.py:30 Unsupported Tensor.item() call with capture_scalar_outputs=False",
                             s + 9.5, 0.1)
                    : std::string();
    };
  };
  const Report r = AnalyzeText(CompiledSteps(8, false, marks("0/0")));
  ASSERT_EQ(r.metrics.compile.size(), 1u);
  EXPECT_DOUBLE_EQ(r.metrics.compile[0].regions_per_step, 1);
  EXPECT_EQ(r.metrics.compile[0].breaks_in_steps, 1);
  const Finding* f = Find(r, "compile.graph_break");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("breaks the graph at train.py:30"), std::string::npos) << f->title;
  EXPECT_EQ(f->confidence, Confidence::kHigh);
  // The same break found while compiling another frame (1/0: an evaluation function whose regions
  // never run in the steps): no step pays for it.
  const Report other = AnalyzeText(CompiledSteps(8, false, marks("1/0")));
  EXPECT_EQ(other.metrics.compile[0].breaks_in_steps, 0);
  EXPECT_EQ(Find(other, "compile.graph_break"), nullptr);
}

// Issue 49.4: a compile inside the steady steps is a recompile only when its id is F/R with R >= 1;
// 1/0 is the first compile of a second frame (torch.profiler's "entire_frame_compile_data" names
// it, or the new region that runs after it).
TEST(CompileTest, AFirstCompileOfASecondFrameIsNoRecompile) {
  const auto with = [](const char* id, bool data_event) {
    return [id, data_event](int i, double s) {
      if (i != 5) return std::string();
      std::string ev = data_event ? Ev("cpu_op", fmt::format("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id={}", id), s + 1, 0.008)
                                  : std::string();
      ev += Ev("cpu_op", "_compile.compile_inner (dynamo_timed)", s + 1.01, 50);
      ev += Ev("user_annotation", fmt::format("Torch-Compiled Region: {}", id), s + 52, 5);
      return ev;
    };
  };
  for (bool data_event : {true, false}) {
    const Report first = AnalyzeText(CompiledSteps(8, false, with("1/0", data_event)));
    ASSERT_EQ(first.metrics.compile.size(), 1u);
    EXPECT_EQ(first.metrics.compile[0].first_compiles_in_steps, 1) << data_event;
    EXPECT_EQ(first.metrics.compile[0].recompiles_in_steps, 0) << data_event;
    EXPECT_EQ(Find(first, "compile.recompiles"), nullptr) << data_event;
    const Report again = AnalyzeText(CompiledSteps(8, false, with("0/1", data_event)));
    const Finding* f = Find(again, "compile.recompiles");
    ASSERT_NE(f, nullptr) << data_event;
    EXPECT_NEAR(f->estimated_saving_ns, 50'000.0 / 7, 1'000) << data_event;  // 50 us over the 7 steady steps
  }
}

// Issue 49.6: the one recompile of a switch between training and evaluation (grad mode, a
// module's .training) is said, with no saving: each mode's graph is compiled once.
TEST(CompileTest, AModeSwitchRecompileIsInformationWithoutASaving) {
  const auto eval = [](const char* guard) {
    return [guard](int i, double s) {
      return i == 3 ? Ev("user_annotation", fmt::format("trainrx::recompile /t/external_utils.py:67 inner {}", guard), s + 1, 1) +
                          Ev("user_annotation", "trainrx::compile 0/1", s + 2, 300)
                    : std::string();
    };
  };
  const Report r = AnalyzeText(CompiledSteps(8, false, eval("GLOBAL_STATE changed: grad_mode")));
  const Finding* f = Find(r, "compile.recompiles");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kInfo);
  EXPECT_EQ(f->estimated_saving_ns, 0);
  EXPECT_NE(f->title.find("mode switched"), std::string::npos) << f->title;
  // A guard on a value: a recompile with its cost.
  const Report value_guard = AnalyzeText(CompiledSteps(8, false, eval("self.scale == 3")));
  const Finding* g = Find(value_guard, "compile.recompiles");
  ASSERT_NE(g, nullptr);
  EXPECT_GT(g->estimated_saving_ns, 0);
}

TEST(CompileTest, ALaunchBoundGpuWithoutCompileIsToldToTryIt) {
  // The H100 session's torch.profiler trace of tests/gpu/train_gpu.py: launch-bound, eager.
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraces({std::string(TRAINRX_SOURCE_DIR) + "/tests/fixtures/h100/train_gpu.torch_profiler.json.gz"}, t).ok());
  const Report r = Analyze(t);
  ASSERT_NE(Find(r, "gpu.launch_bound"), nullptr);
  const Finding* f = Find(r, "compile.not_compiled");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->estimated_saving_ns, 0);  // a suggestion to measure
  EXPECT_EQ(Find(r, "compile.reduce_overhead"), nullptr);
  // A CPU trace (no launches to wait on): nothing to suggest.
  EXPECT_EQ(Find(AnalyzeText(CompiledSteps(8, false)), "compile.not_compiled"), nullptr);
}

}  // namespace
}  // namespace trainrx::analyzers
