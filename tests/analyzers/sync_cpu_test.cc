// sync.host_device on a CPU-only run (issue 34): scalar reads, not device syncs; the caller named
// from with_stack frames; the fix that fits reads made while loading data.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

std::string Ev(const char* cat, std::string_view name, double ts, double dur) {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":1,"ts":{},"dur":{}}},)J", cat, name, ts, dur);
}

// 5 steps of 10 ms; in each, `loading` reads inside the loader's range under get_batch's frame,
// and `logging` reads after backward under train's frame.
std::string CpuRun(int loading, int logging) {
  std::string ev;
  for (int i = 0; i < 5; ++i) {
    const double s = i * 10000.0;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), s, 10000);
    ev += Ev("python_function", "train.py(120): <module>", s + 1, 9990);
    ev += Ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 10, 2000);
    ev += Ev("python_function", "train.py(57): get_batch", s + 20, 1900);
    for (int k = 0; k < loading; ++k) {
      ev += Ev("python_function", "<built-in method __index__ of Tensor object at 0x7f>", s + 30 + k * 30, 20);
      ev += Ev("cpu_op", "aten::item", s + 31 + k * 30, 10);
      ev += Ev("cpu_op", "aten::_local_scalar_dense", s + 32 + k * 30, 5);
    }
    ev += Ev("cpu_op", "aten::mm", s + 2100, 3000);
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", s + 5200, 2000);
    for (int k = 0; k < logging; ++k) ev += Ev("cpu_op", "aten::item", s + 7300 + k * 20, 10);
    ev += Ev("user_annotation", "Optimizer.step#SGD.step", s + 8000, 500);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

const Finding* Sync(const Report& r) {
  for (const auto& f : r.findings)
    if (f.id == "sync.host_device") return &f;
  return nullptr;
}

TEST(SyncCpuTest, ScalarReadsInLoadingAreNamedWithTheirCallerAndTheIndexingFix) {
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(CpuRun(48, 1), "cpu.json", 0, t).ok());
  const Report r = Analyze(t);
  const Finding* f = Sync(r);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("scalar reads (.item())"), std::string::npos) << f->title;
  EXPECT_EQ(f->title.find("host-device syncs"), std::string::npos) << f->title;
  // Issue 81.5: reads in data loading are of host tensors (a sampler's ids), on a GPU run too: no
  // claim that each would wait for the device there.
  EXPECT_NE(f->title.find("mostly in data loading"), std::string::npos) << f->title;
  EXPECT_EQ(f->title.find("would wait for the device"), std::string::npos) << f->title;
  EXPECT_NEAR(f->measured, 49, 0.01);
  ASSERT_FALSE(f->examples.empty());
  EXPECT_NE(f->examples.front().find("240 x"), std::string::npos) << f->examples.front();
  EXPECT_NE(f->examples.front().find("from train.py(57): get_batch"), std::string::npos) << f->examples.front();
  EXPECT_NE(f->fix_python.find("indices"), std::string::npos) << f->fix_python;
  // 49 reads of 10 us in a 10 ms step: ~4.9 % of it.
  EXPECT_EQ(f->severity, Severity::kLow);
  EXPECT_LE(f->estimated_saving_pct, 5.0);
}

TEST(SyncCpuTest, LoggingReadsKeepTheRunningSumFixAndCheapReadsAreInfo) {
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(CpuRun(0, 2), "cpu.json", 0, t).ok());
  const Report r = Analyze(t);
  const Finding* f = Sync(r);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->fix_python.find("running sums"), std::string::npos) << f->fix_python << " / " << f->examples.front();
  EXPECT_NE(f->title.find("would wait for the device on a GPU if its tensor lives there"), std::string::npos) << f->title;
  EXPECT_NE(f->examples.front().find("from train.py(120): <module>"), std::string::npos) << f->examples.front();
  EXPECT_EQ(f->severity, Severity::kInfo);  // 20 us of a 10 ms step
}

// Issue 49.12: `trainrx record`'s start-up hook wraps the calls that sync in a
// "trainrx::at <file>(<line>): <function>" range (no with_stack frames): the finding names the line,
// as from torch.profiler's frames, and the mark is not shown as a user annotation ("in trainrx::at").
TEST(SyncCpuTest, TheRecordersCallSiteNamesTheLine) {
  std::string ev;
  for (int i = 0; i < 5; ++i) {
    const double s = i * 10000.0;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), s, 10000);
    ev += Ev("cpu_op", "aten::mm", s + 100, 3000);
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", s + 3200, 2000);
    ev += Ev("user_annotation", "Optimizer.step#SGD.step", s + 5300, 500);
    ev += Ev("user_annotation", "trainrx::at /home/u/train.py(42): train_step", s + 6000, 30);
    ev += Ev("cpu_op", "aten::item", s + 6005, 20);
    ev += Ev("cpu_op", "aten::_local_scalar_dense", s + 6006, 15);
    // A read inside torch's own code (the hook walks past torch's frames; a site in a library is
    // still a site, but a frame the user did not write is not named as theirs).
    ev += Ev("user_annotation", "trainrx::at /venv/lib/python3.11/site-packages/timm/utils.py(9): f", s + 7000, 30);
    ev += Ev("cpu_op", "aten::item", s + 7005, 20);
  }
  ev.pop_back();
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "at.json", 0, t).ok());
  const Report r = Analyze(t);  // kept: the finding points into it
  const Finding* f = Sync(r);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->examples.size(), 2u);
  EXPECT_NE(f->examples[0].find("5 x aten::item"), std::string::npos) << f->examples[0];
  bool named = false;
  for (const auto& x : f->examples) {
    named = named || x.find("from /home/u/train.py(42): train_step") != std::string::npos;
    EXPECT_EQ(x.find("trainrx::at"), std::string::npos) << x;
  }
  EXPECT_TRUE(named);
  // The read in timm's code is named as a library's line (a framework's setting is its fix:
  // Hugging Face Trainer's loss check at trainer.py(1911)), never as the user's.
  bool library = false;
  for (const auto& x : f->examples) library = library || x.find("from library code timm/utils.py(9): f") != std::string::npos;
  EXPECT_TRUE(library);
}

// An optimizer step that calls its closure several times (LBFGS), called from the user's line
// (a call site around the whole step): the closure's own reads (it prints its loss, a call site
// opened inside the step) are the user's; the optimizer's between the calls (LBFGS's line search:
// no frame of its own, torch's, or only the line that called optimizer.step) and after the last
// pass are not (pytorch/examples' time_sequence_prediction: 20 closure reads a step, beside ~1 200
// of LBFGS's; on an H200 94 of LBFGS's were counted as the user's, named at the step's line). On
// a GPU each read calls cudaStreamSynchronize: the optimizer's are counted apart and named.
std::string LbfgsReads(bool gpu) {
  std::string ev;
  int corr = 0;
  const auto read = [&](double at) {
    ev += Ev("cpu_op", "aten::item", at, 20);
    if (!gpu) return;
    ev += fmt::format(R"J({{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":{},"dur":10,"args":{{"correlation":{}}}}},)J",
                      at + 5, corr++);
  };
  for (int i = 0; i < 5; ++i) {
    const double s = i * 10000.0;
    ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), s, 10000);
    ev += Ev("user_annotation", "trainrx::at /home/u/train.py(69): <module>", s + 5, 9910);
    ev += Ev("user_annotation", "Optimizer.step#LBFGS.step", s + 10, 9900);
    for (int k = 0; k < 3; ++k) {
      const double b = s + 10 + 3000.0 * k;
      ev += Ev("cpu_op", "aten::mm", b + 10, 1000);
      if (gpu)
        ev += fmt::format(R"J({{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":{},"dur":500,"args":{{"device":0,"stream":7,"correlation":{}}}}},)J",
                          b + 20, 100000 + i * 10 + k);
      ev += Ev("user_annotation", "trainrx::at /home/u/train.py(65): closure", b + 1100, 30);
      read(b + 1105);
      ev += Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", b + 1200, 1000);
      read(b + 2300);  // LBFGS's own: only the step's line encloses it
      ev += Ev("user_annotation", "trainrx::at /venv/lib/python3.11/site-packages/torch/optim/lbfgs.py(400): step", b + 2400, 30);
      read(b + 2405);
    }
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

TEST(SyncCpuTest, AClosuresReadsAreTheUsersAndTheOptimizersBetweenItsCallsAreNot) {
  for (const bool gpu : {false, true}) {
    profiler::Trace t;
    ASSERT_TRUE(profiler::ReadTraceBuffer(LbfgsReads(gpu), "lbfgs.json", 0, t).ok());
    const Report r = Analyze(t);
    const Finding* f = Sync(r);
    ASSERT_NE(f, nullptr) << (gpu ? "gpu" : "cpu");
    EXPECT_NEAR(f->measured, 3, 0.01) << (gpu ? "gpu" : "cpu");
    ASSERT_FALSE(f->examples.empty());
    bool apart = false, closure = false;
    for (const auto& x : f->examples) {
      closure = closure || x.find("from /home/u/train.py(65): closure") != std::string::npos;
      EXPECT_EQ(x.find("lbfgs.py"), std::string::npos) << x;
      EXPECT_EQ(x.find("train.py(69)"), std::string::npos) << x;
      apart = apart || x.find("not counted: 30 more blocking calls in Optimizer.step#LBFGS.step inside the optimizer's own work") !=
                           std::string::npos;
    }
    EXPECT_TRUE(closure) << f->examples.front();
    EXPECT_EQ(apart, gpu) << (f->examples.empty() ? "" : f->examples.back());
  }
}

}  // namespace
}  // namespace trainrx::analyzers
