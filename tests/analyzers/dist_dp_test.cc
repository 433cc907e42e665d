// dist.data_parallel on hand-built one-process traces: DataParallel over two GPUs (its Broadcast,
// Scatter, Gather and ReduceAddCoalesced ops at every step, kernels on two devices) is flagged
// with the time it replicates and the first device's extra load; DataParallel over one GPU, a
// lone custom "Gather" op, and replication seen in only one step are not.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

struct DpPlan {
  int steps = 6;
  int devices = 2;
  bool broadcast = true;         // replicate() at every step (else only in the first)
  bool scatter_gather = true;
  bool broadcast_every_step = true;
};

std::string Cpu(const std::string& name, int tid, int64_t ts_us, int64_t dur_us, const char* cat = "cpu_op") {
  return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}}},)", cat, name, tid, ts_us, dur_us);
}
std::string Kernel(int device, int64_t ts_us, int64_t dur_us, int corr) {
  return fmt::format(R"({{"ph":"X","cat":"kernel","name":"sm80_gemm","pid":{},"tid":7,"ts":{},"dur":{},"args":{{"device":{},"stream":7,"correlation":{}}}}},)",
                     device, ts_us, dur_us, device, corr);
}

// 10 ms steps: Broadcast 1 ms, Scatter 0.3 ms, the replicas' forwards on threads 2 and 3, Gather
// 0.2 ms, backward with BroadcastBackward 0.5 ms (holding ReduceAddCoalesced); device 0 runs 4 ms
// of kernels per step, the others 3 ms.
Report AnalyzeDp(const DpPlan& p) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < p.steps; ++i) {
    const int64_t s = 1000 + i * 10000;
    ev += Cpu(fmt::format("ProfilerStep#{}", i), 1, s, 10000, "user_annotation");
    const bool replicated = p.broadcast && (p.broadcast_every_step || i == 0);
    if (replicated) ev += Cpu("Broadcast", 1, s + 100, 1000);
    if (p.scatter_gather) ev += Cpu("Scatter", 1, s + 1200, 300);
    for (int d = 0; d < p.devices; ++d) ev += Cpu("aten::conv2d", 2 + d, s + 1600, 2000);
    if (p.scatter_gather) ev += Cpu("Gather", 1, s + 3700, 200);
    ev += Cpu(replicated ? "autograd::engine::evaluate_function: BroadcastBackward"
                         : "autograd::engine::evaluate_function: ConvolutionBackward0", 4, s + 6000, 500);
    if (replicated) ev += Cpu("ReduceAddCoalesced", 4, s + 6050, 400);
    for (int d = 0; d < p.devices; ++d) ev += Kernel(d, s + 1700, d == 0 ? 4000 : 3000, ++corr);
  }
  ev.pop_back();
  profiler::Trace trace;
  const auto st = profiler::ReadTraceBuffer(fmt::format(R"({{"traceEvents":[{}]}})", ev), "dp.json", 0, trace);
  EXPECT_TRUE(st.ok()) << st.message();
  trace.Finalize();
  return Analyze(trace);
}

const Finding* Dp(const Report& r) {
  for (const auto& f : r.findings)
    if (f.id == "dist.data_parallel") return &f;
  return nullptr;
}

TEST(DistDataParallelTest, TwoGpusReplicatedEveryStepAreFlaggedWithTheirCost) {
  const Report r = AnalyzeDp(DpPlan{});
  const Finding* f = Dp(r);
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->measured, 20.0, 0.5);  // 1 + 0.3 + 0.2 + 0.5 ms of 10 (ReduceAddCoalesced nested)
  EXPECT_NEAR(f->estimated_saving_ns, 2'000'000, 10'000);
  EXPECT_NE(f->title.find("2 GPUs"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("device 0 runs 1.00 ms more GPU work"), std::string::npos) << f->title;
  EXPECT_EQ(f->confidence, Confidence::kHigh);
  EXPECT_NE(f->fix_python.find("DistributedDataParallel"), std::string::npos);
}

TEST(DistDataParallelTest, WhatIsNotDataParallelOverSeveralGpusIsSilent) {
  DpPlan one_gpu;
  one_gpu.devices = 1;  // DataParallel over one GPU: nothing replicated
  EXPECT_EQ(Dp(AnalyzeDp(one_gpu)), nullptr);
  DpPlan gather_only;
  gather_only.broadcast = false;  // a custom autograd Function named Gather (model parallel code)
  EXPECT_EQ(Dp(AnalyzeDp(gather_only)), nullptr);
  DpPlan once;
  once.broadcast_every_step = false;  // a Broadcast in one step of six: not a per-step replication
  EXPECT_EQ(Dp(AnalyzeDp(once)), nullptr);
  DpPlan no_split;
  no_split.scatter_gather = false;
  EXPECT_EQ(Dp(AnalyzeDp(no_split)), nullptr);
}

}  // namespace
}  // namespace trainrx::analyzers
