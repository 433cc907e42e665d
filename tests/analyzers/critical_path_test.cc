// The dependency model (analyzers/links.h), the idle split of gpu.idle and the critical path
// (issue 50): hand-built traces for each edge kind, and HTA's public samples where HTA is right
// (alexnet's cudaMalloc calls, ns_resolution's GPU-bound step) and where it is not (negative_queue:
// not CPU-bound; the idle time is queued work waiting; the blocking device-to-host copy waited for
// the GPU).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <variant>

#include "links.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/diff.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/reports/report.h"

namespace trainrx::analyzers {
namespace {

const Finding* FindingOf(const Report& r, const std::string& id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

std::string Evidence(const Finding& f, const std::string& key) {
  for (const auto& e : f.evidence)
    if (e.key == key && std::holds_alternative<std::string>(e.value)) return std::get<std::string>(e.value);
  return "";
}

bool AnyExampleHas(const Finding& f, const std::vector<std::string>& parts) {
  for (const auto& line : f.examples) {
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

double Share(const CriticalPath& p, PathClass c) {
  return p.mean_ns > 0 ? 100.0 * static_cast<double>(p.class_ns[static_cast<int>(c)]) / static_cast<double>(p.mean_ns) : 0.0;
}

PathClass LargestClass(const CriticalPath& p) {
  int best = 0;
  for (int k = 1; k < kPathClasses; ++k)
    if (p.class_ns[k] > p.class_ns[best]) best = k;
  return static_cast<PathClass>(best);
}

// Kineto JSON events in µs.
std::string Cpu(const std::string& cat, const std::string& name, double ts, double dur, int corr = -1, int tid = 1) {
  // CPU ops carry the External id only (as Kineto writes them); runtime calls both ids.
  std::string args = corr < 0 ? "" : cat == "cpu_op" ? fmt::format(R"(,"args":{{"External id":{}}})", corr)
                                                   : fmt::format(R"(,"args":{{"correlation":{},"External id":{}}})", corr, corr);
  return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{}{}}},)", cat, name, tid, ts, dur, args);
}
std::string Gpu(const std::string& cat, const std::string& name, double ts, double dur, int stream, int corr, int bytes = -1) {
  std::string extra = bytes >= 0 ? fmt::format(R"(,"bytes":{})", bytes) : "";
  return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":0,"tid":{},"ts":{},"dur":{},"args":{{"device":0,"stream":{},"correlation":{}{}}}}},)",
                     cat, name, stream, ts, dur, stream, corr, extra);
}

Report AnalyzeJson(std::string events, profiler::Trace& trace) {
  events.pop_back();
  const std::string json = fmt::format(R"({{"traceEvents":[{}]}})", events);
  const auto st = profiler::ReadTraceBuffer(json, "hand.json", 0, trace);
  EXPECT_TRUE(st.ok()) << st.message();
  trace.Finalize();
  return Analyze(trace);
}

// Launch -> kernel, stream order, a cross-stream wait inferred by time, a blocking sync: every
// nanosecond of each step on the path once, in the class the edges say.
TEST(CriticalPathTest, LaunchStreamOrderCrossStreamWaitAndSyncEachTakeTheirClass) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = i * 1000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 1000);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 10, 5, ++corr);
    ev += Gpu("kernel", "gemm", s + 20, 200, 7, corr);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 20, 5, ++corr);
    ev += Gpu("kernel", "side_work", s + 30, 570, 20, corr);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 30, 5, ++corr);
    ev += Gpu("kernel", "after_side", s + 605, 95, 7, corr);  // queued behind stream 20 from s+220 on
    ev += Cpu("cuda_runtime", "cudaStreamSynchronize", s + 40, 665, ++corr);
    ev += Cpu("cpu_op", "aten::host_work", s + 710, 280);
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  const CriticalPath& p = r.metrics.critical_paths[0];
  EXPECT_EQ(p.steps, 4);
  EXPECT_EQ(p.mean_ns, 1'000'000);  // the whole step, once
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kCompute)], 665'000);  // side_work 570 + after_side 95
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kDependency)], 5'000);  // side_work's end -> after_side's start
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kSyncWait)], 5'000);   // after_side's end -> the sync returns
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kLaunch)], 10'000);    // side_work's launch call and latency
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kCpu)], 315'000);      // before the launch, after the sync
  bool named = false;
  for (const auto& s : p.segments) named = named || (s.cls == PathClass::kDependency && s.what == "stream 7 waited on stream 20");
  EXPECT_TRUE(named);
  EXPECT_FALSE(p.sync_records);
  EXPECT_NE(p.note.find("inferred"), std::string::npos);
  // A sync a step holds the loop to the device: the device's pace is the loop's.
  EXPECT_NEAR(static_cast<double>(p.device_pace_ns), 1e6, 1e3);
  EXPECT_FALSE(p.DeviceBehind());
}

// Eight steps of 1 ms on the loop's thread (tid 1) whose kernels take 4 ms of device time a step,
// with no sync to hold the loop back: launched by `launch` from thread `tid` at these offsets into
// each step (another thread's launches inside an autograd node, as the engine's device thread runs
// them), the 4 ms shared among them.
std::string DeviceBehindSteps(const std::string& launch, const std::string& kernel, const std::vector<double>& launch_at, int tid) {
  std::string ev;
  int corr = 0;
  double device_free = 0;
  const double each = 4000.0 / static_cast<double>(launch_at.size());
  for (int i = 0; i < 8; ++i) {
    const double s = i * 1000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 1000);
    if (tid != 1) ev += Cpu("cpu_op", "autograd::engine::evaluate_function: MmBackward0", s + 100, 700, -1, tid);
    for (const double at : launch_at) {
      ev += Cpu("cuda_runtime", launch, s + at, 5, ++corr, tid);
      const double start = std::max(s + at + 10, device_free);
      ev += Gpu("kernel", kernel, start, each, 7, corr);
      device_free = start + each;
    }
    ev += Cpu("cpu_op", "aten::host_work", s + 20, 970);
  }
  return ev;
}

// The device's pace (4 ms) is the rank's throughput and its path, not the loop's 1 ms.
void ExpectTheDevicesPace(const CriticalPath& p) {
  EXPECT_EQ(p.device_pace_ns, 4'000'000);
  EXPECT_EQ(p.host_pace_ns, 1'000'000);
  EXPECT_TRUE(p.DeviceBehind());
  // The path is the device's pace too: from each step's previous last device work to its own (the
  // loop's windows had made it 14.5 ms a step, the queue of earlier steps' kernels included).
  EXPECT_EQ(p.steps, 7);
  EXPECT_EQ(p.mean_ns, 4'000'000);
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kCompute)], 4'000'000);
  EXPECT_NE(p.note.find("the device ran behind the loop"), std::string::npos) << p.note;
}

// No sync in the loop: the host enqueues a step in 1 ms, the device needs 4 ms for it (an H200 ran
// 20 steps of a ResNet at batch 1024 this way: host steps of 4 ms, 40-62 ms of kernels a step). The
// device's pace is the run's throughput; the Steps section says so beside the host's median.
TEST(CriticalPathTest, TheDevicesPaceIsTheThroughputWhereTheDeviceRunsBehindTheLoop) {
  profiler::Trace trace;
  const Report r = AnalyzeJson(DeviceBehindSteps("cudaLaunchKernel", "conv", {10}, 1), trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  ExpectTheDevicesPace(r.metrics.critical_paths[0]);
  std::ostringstream out;
  reports::WriteText(trace, r, Thresholds(), {}, out);
  EXPECT_NE(out.str().find("the device ran behind the loop: the steps' work finished on the device every 4.00 ms"),
            std::string::npos)
      << out.str();
}

// What would make the rule wrong: ROCm's runtime names and a second launching thread (the autograd
// engine's device thread launches backward's kernels) go through the same links (fails with the
// launches' correlation ids removed); the device still runs 4 ms a step behind a loop of 1 ms.
TEST(CriticalPathTest, TheDeviceRunsBehindOnRocmWithTwoLaunchingThreadsToo) {
  profiler::Trace trace;
  const Report r = AnalyzeJson(DeviceBehindSteps("hipLaunchKernel", "Cijk_Ailk_Bljk_SB_MT64x64x16", {110, 500}, 2), trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  ExpectTheDevicesPace(r.metrics.critical_paths[0]);
  EXPECT_EQ(FindingOf(r, "steps.slow"), nullptr);
}

// A device-bound step whose path runs through elementwise kernels, on a model that is not compiled:
// compile.not_compiled from the path, not from launches (an H200 CNN that compile made 4.5x faster,
// and a ResNet-18 it made 1.3x faster, had no compile finding). Not where the path's kernels are
// GEMMs, nor where they are already Triton's (compiled).
TEST(CriticalPathTest, AnUncompiledStepWhosePathRunsThroughFusableKernelsIsFlaggedForCompile) {
  const auto compile_finding = [](const std::string& kernel) {
    profiler::Trace trace;
    const Report r = AnalyzeJson(DeviceBehindSteps("cudaLaunchKernel", kernel, {10, 300}, 1), trace);
    const Finding* f = FindingOf(r, "compile.not_compiled");
    return f == nullptr ? std::optional<Finding>() : std::optional<Finding>(*f);
  };
  const auto f = compile_finding("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>");
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->measured, 100.0, 1.0);  // the device's 4 ms a step are all elementwise kernels
  EXPECT_NE(f->title.find("of the median step's critical path"), std::string::npos) << f->title;
  EXPECT_EQ(f->predicted.method.empty(), false) << "compile_fusion predicts it";
  EXPECT_FALSE(compile_finding("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64").has_value());
  EXPECT_FALSE(compile_finding("triton_poi_fused_add_relu_0").has_value());
  EXPECT_FALSE(compile_finding("Cijk_Ailk_Bljk_SB_MT64x64x16_SN_1LDSB0_APM1_AF0EM1").has_value()) << "ROCm's Tensile GEMM";
}

// A host-bound training step (an eager ViT-S on an H200 ran 49 ms a step, 35 compiled, its path 84 %
// host work and no compile finding): a module's forward of 20 elementwise ops (30 us of host each, a
// 5 us kernel), a backward node of 20 more, the optimizer. compile.not_compiled from the model's
// host work on the path; not where the step has no backward (ops on the loop's thread are then not
// known to be a model's).
TEST(CriticalPathTest, AHostBoundTrainingStepIsFlaggedForCompileByItsModelsHostWork) {
  const auto steps = [](bool backward) {
    std::string ev;
    int corr = 0;
    for (int i = 0; i < 6; ++i) {
      const double s = i * 2000.0;
      ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 2000);
      for (int half = 0; half < 2; ++half) {
        const double at = s + 10 + 950 * half;
        ev += half == 0 || !backward ? Cpu("user_annotation", half ? "nn.Module: Head" : "nn.Module: Net", at, 900)
                                     : Cpu("cpu_op", "autograd::engine::evaluate_function: MulBackward0", at, 900);
        for (int k = 0; k < 20; ++k) {
          const double op = at + 10 + 44 * k;
          ev += Cpu("cpu_op", half ? "aten::mul" : "aten::add_", op, 30, ++corr);
          ev += Cpu("cuda_runtime", "cudaLaunchKernel", op + 20, 5, corr);
          ev += Gpu("kernel", "void at::native::vectorized_elementwise_kernel<4, float>", op + 28, 5, 7, corr);
        }
      }
      ev += Cpu("cpu_op", "Optimizer.step#SGD.step", s + 1880, 100);
    }
    profiler::Trace trace;
    const Report r = AnalyzeJson(ev, trace);
    const Finding* f = FindingOf(r, "compile.not_compiled");
    return f == nullptr ? std::optional<Finding>() : std::optional<Finding>(*f);
  };
  const auto f = steps(true);
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->title.find("the model's forward and backward on the host"), std::string::npos) << f->title;
  EXPECT_GT(f->measured, 60.0) << f->title;
  EXPECT_FALSE(steps(false).has_value());
}

// The same host-bound training step on a CPU-only rank (no kernels): no compile finding (the CPU
// reference workloads' default runs were flagged by the rule above before it asked for a device).
TEST(CriticalPathTest, AHostBoundCpuOnlyStepIsNotFlaggedForCompile) {
  std::string ev;
  for (int i = 0; i < 6; ++i) {
    const double s = i * 2000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 2000);
    ev += Cpu("user_annotation", "nn.Module: Net", s + 10, 900);
    for (int k = 0; k < 20; ++k) ev += Cpu("cpu_op", "aten::add_", s + 20 + 44 * k, 30);
    ev += Cpu("cpu_op", "autograd::engine::evaluate_function: MulBackward0", s + 960, 900);
    for (int k = 0; k < 20; ++k) ev += Cpu("cpu_op", "aten::mul", s + 970 + 44 * k, 30);
    ev += Cpu("cpu_op", "Optimizer.step#SGD.step", s + 1880, 100);
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  EXPECT_EQ(FindingOf(r, "compile.not_compiled"), nullptr);
}

// A device-to-host copy into pageable memory waits behind its stream's work; the host is blocked
// in it. gpu.idle names the call, what it waited for and how long; the path runs through the copy
// and the kernel before it.
TEST(CriticalPathTest, ABlockingCopyIsTiedToTheWorkItWaitedBehind) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = i * 10000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 10000);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 50, 10, ++corr);
    ev += Gpu("kernel", "reduce_kernel", s + 65, 2935, 7, corr);
    ev += Cpu("cpu_op", "aten::copy_", s + 60, 3000, ++corr);
    ev += Cpu("cuda_runtime", "cudaMemcpyAsync", s + 61, 2990, corr);
    ev += Gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", s + 3003, 2, 7, corr, 4);
    ev += Cpu("cpu_op", "aten::host_work", s + 3100, 6800);
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  const Finding* idle = FindingOf(r, "gpu.idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_TRUE(AnyExampleHas(*idle, {"cudaMemcpyAsync in aten::copy_ waited", "for the GPU", "Memcpy DtoH",
                                    "after the call", "behind stream 7's reduce_kernel"}))
      << ::testing::PrintToString(idle->examples);
  // The host-starved idle (nothing launched during the host work) is the cause, with the host fix.
  EXPECT_EQ(Evidence(*idle, "idle_cause"), "host");
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  const CriticalPath& p = r.metrics.critical_paths[0];
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kCompute)], 2'935'000);
  EXPECT_EQ(p.class_ns[static_cast<int>(PathClass::kCopy)], 2'000);
  EXPECT_GT(Share(p, PathClass::kCpu), 60.0);
}

// cudaFree in every step while the device idles: gpu.allocator, and the allocator's share of the idle
// time and of the path.
TEST(CriticalPathTest, FreesInTheStepAreAllocatorTimeOnThePathAndAFinding) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < 5; ++i) {
    const double s = i * 10000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 10000);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 100, 10, ++corr);
    ev += Gpu("kernel", "k1", s + 115, 1885, 7, corr);
    ev += Cpu("cuda_runtime", "cudaFree", s + 2100, 2900, ++corr);
    ev += Cpu("cuda_runtime", "cudaMalloc", s + 5000, 100, ++corr);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 5100, 10, ++corr);
    ev += Gpu("kernel", "k2", s + 5115, 3885, 7, corr);
    ev += Cpu("cuda_runtime", "cudaStreamSynchronize", s + 5200, 3850, ++corr);
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  const Finding* alloc = FindingOf(r, "gpu.allocator");
  ASSERT_NE(alloc, nullptr);
  EXPECT_NEAR(alloc->measured, 30.0, 0.5);  // (2.9 + 0.1) ms of a 10 ms step
  EXPECT_NEAR(alloc->estimated_saving_pct, 30.0, 0.5);
  ASSERT_FALSE(r.metrics.temporal.empty());
  EXPECT_GE(r.metrics.temporal[0].idle_causes.allocator_ns, 4 * 2'900'000);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  EXPECT_NEAR(Share(r.metrics.critical_paths[0], PathClass::kAllocator), 30.0, 0.5);
}

// A graph launch fans out to its kernels: they count in gpu.launch_bound's denominator (one call
// for all of them), and the gaps between a graph's nodes are queued, not host-starved.
TEST(CriticalPathTest, GraphKernelsAreNotJudgedAsEagerLaunches) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = i * 2000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 2000);
    for (int k = 0; k < 2; ++k) {  // two eager kernels shorter than their launch
      ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 10 + 20 * k, 15, ++corr);
      ev += Gpu("kernel", "tiny", s + 30 + 20 * k, 2, 7, corr);
    }
    ev += Cpu("cuda_runtime", "cudaGraphLaunch", s + 100, 20, ++corr);
    for (int k = 0; k < 10; ++k) ev += Gpu("kernel", "graph_node", s + 130 + 150 * k, 100, 7, corr);
    ev += Cpu("cuda_runtime", "cudaStreamSynchronize", s + 130, 1610, ++corr);
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  EXPECT_EQ(FindingOf(r, "gpu.launch_bound"), nullptr);  // 8 short of 48 judged, not 8 of 8
  ASSERT_FALSE(r.metrics.temporal.empty());
  const IdleCauses& c = r.metrics.temporal[0].idle_causes;
  // The 9 gaps of 50 µs between nodes in each step but the last (HTA's window leaves the last step out).
  EXPECT_EQ(c.graph_ns, 3 * 9 * 50'000);
  EXPECT_GE(c.queued_ns, c.graph_ns);
}

// The same trace without the graph: the eager kernels alone are judged, and flagged.
TEST(CriticalPathTest, EagerShortKernelsAloneAreStillLaunchBound) {
  std::string ev;
  int corr = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = i * 2000.0;
    ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 2000);
    for (int k = 0; k < 12; ++k) {
      ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 10 + 20 * k, 15, ++corr);
      ev += Gpu("kernel", "tiny", s + 30 + 20 * k, 2, 7, corr);
    }
  }
  profiler::Trace trace;
  const Report r = AnalyzeJson(ev, trace);
  EXPECT_NE(FindingOf(r, "gpu.launch_bound"), nullptr);
}

// Across ranks: each of two ranks launches a kernel and then an all-reduce; rank 1's kernel runs
// 3 ms longer, so rank 0's all-reduce waits for it. Rank 0's path splits its all-reduce into
// rank_wait naming rank 1 (the 3 ms) and gpu_comm (the transfer both shared); rank 1's path has no
// rank wait, its longer kernel is its compute.
TEST(CriticalPathTest, ACollectiveWaitingForALateRankIsRankWaitNamingIt) {
  profiler::Trace trace;
  for (int rank = 0; rank < 2; ++rank) {
    const double compute = rank == 1 ? 4000 : 1000;
    std::string ev = Cpu("user_annotation", "ProfilerStep#1", 0, 5200);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", 10, 10, 1) + Gpu("kernel", "gemm", 30, compute, 7, 1);
    ev += Cpu("cuda_runtime", "cudaLaunchKernel", 25, 10, 2);
    ev += Gpu("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30 + compute, 4130 - compute + 1000, 20, 2);
    ev += Cpu("cuda_runtime", "cudaStreamSynchronize", 40, 5150, 3);
    ev.pop_back();
    const std::string json =
        fmt::format(R"({{"distributedInfo":{{"rank":{},"world_size":2,"backend":"nccl"}},"traceEvents":[{}]}})", rank, ev);
    ASSERT_TRUE(profiler::ReadTraceBuffer(json, fmt::format("r{}.json", rank), rank, trace).ok());
  }
  trace.Finalize();
  const Report r = Analyze(trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 2u);
  const CriticalPath& p0 = r.metrics.critical_paths[0];
  const CriticalPath& p1 = r.metrics.critical_paths[1];
  EXPECT_EQ(p0.class_ns[static_cast<int>(PathClass::kRankWait)], 3'000'000);
  EXPECT_EQ(p1.class_ns[static_cast<int>(PathClass::kRankWait)], 0);
  bool named = false;
  for (const auto& seg : p0.segments)
    named = named || (seg.cls == PathClass::kRankWait && seg.what.find("rank 1 arrived last at ncclDevKernel_AllReduce") == 0);
  EXPECT_TRUE(named);
  EXPECT_EQ(p0.class_ns[static_cast<int>(PathClass::kComm)], p1.class_ns[static_cast<int>(PathClass::kComm)]);
  EXPECT_GT(p1.class_ns[static_cast<int>(PathClass::kCompute)], p0.class_ns[static_cast<int>(PathClass::kCompute)] + 2'900'000);
}

// The same loop until the launch queue fills: the last steps wait in their launch for the device.
// Those slow steps are the device's pace showing through, not a stall: no steps.slow (it had said
// "62 % saving" on an H200 trace like this).
TEST(CriticalPathTest, SlowStepsWhereTheDeviceRunsBehindAreTheQueueNotAStall) {
  const auto loop = [] {
    std::string ev;
    int corr = 0;
    double device_free = 0, s = 0;
    for (int i = 0; i < 12; ++i) {
      const double kernel = 4000;
      const double launch_start = s + 10, launch_end = i >= 10 ? std::max(s + 15, device_free - 4000) : s + 15;
      const double wall = std::max(1000.0, launch_end - s + 980);
      ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, wall);
      ev += Cpu("cuda_runtime", "cudaLaunchKernel", launch_start, launch_end - launch_start, ++corr);
      const double start = std::max(launch_start + 10, device_free);
      ev += Gpu("kernel", "conv", start, kernel, 7, corr);
      device_free = start + kernel;
      ev += Cpu("cpu_op", "aten::host_work", launch_end + 5, 970);
      s += wall;
    }
    return ev;
  };
  profiler::Trace trace;
  const Report r = AnalyzeJson(loop(), trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  EXPECT_TRUE(r.metrics.critical_paths[0].DeviceBehind());
  const auto slow = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.id == "steps.slow"; });
  EXPECT_EQ(slow, r.findings.end()) << slow->title;
  // Without the guard the rule fires on this loop (the check above can fail): steps 10-11 are
  // the loop's slowest by far.
  int64_t longest = 0;
  for (const StepRow& row : r.metrics.steps.steps) longest = std::max(longest, row.wall_ns);
  EXPECT_GT(longest, 10 * r.metrics.steps.median_wall_ns);
}

// diff: the path's classes of A and B side by side (kind "path"), each the side's mean per step.
TEST(CriticalPathTest, DiffShowsThePathClassesOfBothRuns) {
  const auto run = [](double kernel_us, profiler::Trace& trace) {
    std::string ev;
    for (int i = 0; i < 3; ++i) {
      const double s = i * 10000;
      ev += Cpu("user_annotation", fmt::format("ProfilerStep#{}", i), s, 9000);
      ev += Cpu("cuda_runtime", "cudaLaunchKernel", s + 10, 10, 10 * i + 1) + Gpu("kernel", "gemm", s + 30, kernel_us, 7, 10 * i + 1);
      ev += Cpu("cuda_runtime", "cudaDeviceSynchronize", s + 40, kernel_us + 10, 10 * i + 2);
    }
    return AnalyzeJson(ev, trace);
  };
  profiler::Trace ta, tb;
  const Report a = run(1000, ta), b = run(3000, tb);
  const RunDiff d = DiffRuns(ta, a, "A", tb, b, "B");
  const DiffRow* compute = nullptr;
  for (const DiffRow& r : d.critical_path)
    if (r.name == "gpu_compute") compute = &r;
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(compute->kind, "path");
  EXPECT_EQ(compute->a, static_cast<double>(a.metrics.critical_paths[0].class_ns[static_cast<int>(PathClass::kCompute)]));
  EXPECT_NEAR(compute->delta(), 2'000'000, 1000);
  // The step keeps its 9 ms: the 2 ms more compute is 2 ms less host work; largest changes first.
  ASSERT_GE(d.critical_path.size(), 2u);
  EXPECT_NEAR(std::abs(d.critical_path[0].delta()), 2'000'000, 1000);
  EXPECT_NEAR(std::abs(d.critical_path[1].delta()), 2'000'000, 1000);
}

// --- HTA's public samples (../shared/external-traces/hta) ---

std::string TracePath(const std::string& name) { return std::string(TRAINRX_SHARED_DIR) + "/external-traces/hta/" + name; }
#define SKIP_WITHOUT_SHARED()                                                                      \
  if (!std::filesystem::is_directory(std::string(TRAINRX_SHARED_DIR) + "/external-traces/hta")) \
  GTEST_SKIP() << "no " << TRAINRX_SHARED_DIR << "/external-traces/hta"

void Read(const std::string& name, profiler::Trace& trace) {
  const auto st = profiler::ReadTraces({TracePath(name)}, trace);
  ASSERT_TRUE(st.ok()) << st.message();
}

// HTA is right here: on alexnet's forward (instance 1 of the PARAM annotation, as HTA's test), the
// cudaMalloc calls dominate the path (HTA: cpu_bound 89.42 %; the calls cover 90.3 % of the window).
TEST(CriticalPathTest, AlexnetForwardIsBoundByItsCudaMallocCalls) {
  SKIP_WITHOUT_SHARED();
  profiler::Trace trace;
  Read("benchmark_result_2869224_1695835535_trace.json.gz", trace);
  std::vector<const profiler::Event*> instances;
  for (const auto& e : trace.events)
    if (trace.Name(e) == "[param|pytorch.model.alex_net|0|0|0|measure|forward]") instances.push_back(&e);
  ASSERT_EQ(instances.size(), 2u);
  const profiler::Event* second = instances[0]->ts_ns < instances[1]->ts_ns ? instances[1] : instances[0];
  const CriticalPath p = CriticalPathOf(trace, 0, second->ts_ns, second->end_ns());
  EXPECT_GE(p.mean_ns, second->dur_ns);  // to the end of the last kernel the window launched
  EXPECT_EQ(LargestClass(p), PathClass::kAllocator);
  EXPECT_GT(Share(p, PathClass::kAllocator), 85.0);
  ASSERT_FALSE(p.top.empty());
  EXPECT_EQ(p.top[0].what, "cudaMalloc");
  EXPECT_TRUE(p.sync_records);  // this trace has cuda_sync records
  // The whole trace: the allocator calls are a finding.
  const Report r = Analyze(trace);
  EXPECT_NE(FindingOf(r, "gpu.allocator"), nullptr);
}

// HTA is right here too: ns_resolution's steps are GPU-bound (HTA: gpu_compute_bound 97.87 % on
// ProfilerStep instance 1; the launch queue is saturated, so the host's steps end long before their
// kernels do).
TEST(CriticalPathTest, NsResolutionStepsAreGpuComputeBound) {
  SKIP_WITHOUT_SHARED();
  profiler::Trace trace;
  Read("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", trace);
  const Report r = Analyze(trace);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  EXPECT_GE(Share(r.metrics.critical_paths[0], PathClass::kCompute), 90.0);
}

// HTA is wrong here: without cuda_sync records it calls negative_queue "100 % CPU-bound". 98 % of
// its idle time has launched work queued (HTA's own window: 695.5 of 705.9 ms), the main thread
// blocks ~146 ms a step in a device-to-host copy that waits behind stream 27's kernels.
TEST(CriticalPathTest, NegativeQueueIsNotCpuBoundItsIdleIsQueuedWorkAndTheCopyWaitsForTheGpu) {
  SKIP_WITHOUT_SHARED();
  profiler::Trace trace;
  Read("rank0.json.gz", trace);
  const Report r = Analyze(trace);
  ASSERT_EQ(r.metrics.temporal.size(), 1u);
  const TemporalBreakdown& tb = r.metrics.temporal[0];
  const IdleCauses& c = tb.idle_causes;
  EXPECT_EQ(c.host_starved_ns + c.queued_ns, tb.idle_ns);
  EXPECT_GT(static_cast<double>(c.queued_ns), 0.95 * static_cast<double>(tb.idle_ns));
  ASSERT_FALSE(c.queued_by_stream.empty());
  EXPECT_EQ(c.queued_by_stream[0].stream, 7);
  const Finding* idle = FindingOf(r, "gpu.idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(Evidence(*idle, "idle_cause"), "queued");
  EXPECT_NE(idle->fix_python.find("waited on another stream"), std::string::npos) << idle->fix_python;
  EXPECT_TRUE(AnyExampleHas(*idle, {"cudaMemcpyAsync", "waited", "for the GPU", "Memcpy DtoH", "behind stream 27"}))
      << ::testing::PrintToString(idle->examples);
  ASSERT_EQ(r.metrics.critical_paths.size(), 1u);
  const CriticalPath& p = r.metrics.critical_paths[0];
  EXPECT_LT(Share(p, PathClass::kCpu), 50.0);
  EXPECT_EQ(LargestClass(p), PathClass::kDependency);
  // Every saving whose fix has a transform is bounded by its replay (what_if_test.cc); the queued
  // idle has none: its saving stays the measured time.
  for (const auto& f : r.findings) {
    for (const auto& e : f.evidence) {
      if (e.key == "replay_bound_ns") {
        EXPECT_LE(f.estimated_saving_ns, std::get<int64_t>(e.value) + 1) << f.id;
      }
    }
  }
  EXPECT_TRUE(BoundTransform(*idle).empty());
}

}  // namespace
}  // namespace trainrx::analyzers

namespace trainrx::analyzers {
namespace {

// Issue 50: MTIA's device work (cat mtia_ccp_events, launched by mtia_runtime calls) is device
// work, not unknown events of a CPU-only run (tests/fixtures/mtia: HTA's public MTIA samples).
TEST(CriticalPathTest, MtiaDeviceWorkIsADeviceLinkedToItsLaunches) {
  profiler::Trace trace;
  const auto st = profiler::ReadTraces({std::string(TRAINRX_SOURCE_DIR) + "/tests/fixtures/mtia/mtia_rank_0.json.gz"}, trace);
  ASSERT_TRUE(st.ok()) << st.message();
  size_t device_tracks = 0;
  for (const auto& t : trace.tracks) device_tracks += t.kind == profiler::TrackKind::kGpuStream ? 1 : 0;
  EXPECT_GE(device_tracks, 2u);  // streams 1 and 102 of MTIA 9, and its DMA queue
  const LinkIndex links(trace);
  const RankLinks* l = links.Rank(0);
  ASSERT_NE(l, nullptr);
  size_t linked = 0;
  for (const DeviceWork& w : l->work)
    if (const HostCall* c = l->CallOf(w); c && c->kind == CallKind::kLaunch) ++linked;
  EXPECT_EQ(linked, 3453u);  // every runFunction call and its one kernel, by correlation
  const Report r = Analyze(trace);
  ASSERT_EQ(r.metrics.steps.steps.size(), 1u);
  const auto& step = r.metrics.steps.steps[0];
  // HTA: the device is busy 57.8 % of the step (kernels and DMA copies).
  EXPECT_NEAR(100.0 * static_cast<double>(step.gpu_kernel_ns + step.gpu_memcpy_ns) / static_cast<double>(step.wall_ns), 57.8, 0.1);
  const Finding* idle = FindingOf(r, "gpu.idle");
  ASSERT_NE(idle, nullptr);
  // Never "no sync on a CPU": the run has a device.
  for (const auto& f : r.findings) EXPECT_EQ(f.title.find("no sync on a CPU"), std::string::npos) << f.title;
  // The inference sample: its recordEvent / waitOnEvent / synchronizeStream calls are classified.
  profiler::Trace inference;
  ASSERT_TRUE(profiler::ReadTraces({std::string(TRAINRX_SOURCE_DIR) + "/tests/fixtures/mtia/mtia_inference_rank_0.json.gz"}, inference).ok());
  const LinkIndex il(inference);
  std::map<CallKind, int> kinds;
  for (const HostCall& c : il.Rank(0)->calls) ++kinds[c.kind];
  EXPECT_EQ(kinds[CallKind::kEventRecord], 224);
  EXPECT_EQ(kinds[CallKind::kStreamWait], 37);
  EXPECT_EQ(kinds[CallKind::kBlocking], 113);
  EXPECT_EQ(kinds[CallKind::kLaunch], 74 + 74 + 37);  // runFunction, HtoD and DtoH copies
}

}  // namespace
}  // namespace trainrx::analyzers

namespace trainrx::analyzers {
namespace {

const DeviceWork* WorkWithCorrelation(const RankLinks& l, int64_t correlation) {
  for (const DeviceWork& w : l.work)
    if (w.e->correlation == correlation) return &w;
  return nullptr;
}

// Event edges from cuda_sync records (HTA's cuda_event_sync samples, tests/fixtures/hta_event_sync):
// cudaEventRecord (corr 1385) on stream 20, cudaStreamWaitEvent (1389) on stream 24: stream 24's next
// work (the memset, 1411) waits for stream 20's last work launched before the record (the sgemm, 27),
// and the path names it without inference; cudaEventSynchronize (1536) is released by the spin
// kernel (1526) its event recorded.
TEST(CriticalPathTest, SyncRecordsTieEventRecordToStreamWaitAndEventSync) {
  const std::string dir = std::string(TRAINRX_SOURCE_DIR) + "/tests/fixtures/hta_event_sync/";
  profiler::Trace multi;
  ASSERT_TRUE(profiler::ReadTraces({dir + "multi_stream/event_sync_trace.json.gz"}, multi).ok());
  // Two Event Syncs and the Stream Wait Event name what they waited on (a query of an event never
  // recorded says wait_on_stream -1: nothing to tie, not kept).
  ASSERT_EQ(multi.sync_waits.size(), 3u);
  const LinkIndex ml(multi);
  const RankLinks& m = ml.ranks().front();
  EXPECT_EQ(m.event_edges, 1u);
  const DeviceWork* memset = WorkWithCorrelation(m, 1411);
  const DeviceWork* sgemm = WorkWithCorrelation(m, 27);
  ASSERT_NE(memset, nullptr);
  ASSERT_NE(sgemm, nullptr);
  ASSERT_GE(memset->waits_on, 0);
  EXPECT_EQ(&m.work[memset->waits_on], sgemm);
  EXPECT_EQ(sgemm->stream, 20);
  EXPECT_EQ(memset->stream, 24);
  // `convert` writes the waits back (Kineto JSON args): read again, the same edge.
  std::ostringstream written;
  profiler::WriteKinetoJson(multi, 0, written);
  profiler::Trace again;
  ASSERT_TRUE(profiler::ReadTraceBuffer(written.str(), "written.json", 0, again).ok());
  again.Finalize();
  EXPECT_EQ(again.sync_waits.size(), 3u);
  EXPECT_EQ(LinkIndex(again).ranks().front().event_edges, 1u);
  profiler::Trace single;
  ASSERT_TRUE(profiler::ReadTraces({dir + "one_stream/event_sync_trace.json.gz"}, single).ok());
  const LinkIndex sl(single);
  const RankLinks& one = sl.ranks().front();
  const HostCall* sync = one.CallByCorrelation(1536);
  ASSERT_NE(sync, nullptr);
  ASSERT_GE(sync->waited_for, 0);
  EXPECT_EQ(one.work[sync->waited_for].e->correlation, 1526);
  EXPECT_EQ(sync->synced_stream, 7);
}

}  // namespace
}  // namespace trainrx::analyzers
