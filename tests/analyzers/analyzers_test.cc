// Analyzer families on small hand-built traces: each rule fires on its planted problem, stays
// silent on the clean variant, and reports the measured value and evidence.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::analyzers {
namespace {

Report AnalyzeJson(const std::string& json, const Thresholds& th = Thresholds(), profiler::Trace* keep = nullptr) {
  profiler::Trace local;
  profiler::Trace& t = keep ? *keep : local;
  const auto st = profiler::ReadTraceBuffer(json, "fixture.json", 0, t);
  EXPECT_TRUE(st.ok) << st.error;
  return Analyze(t, th);
}

const Finding* Find(const Report& r, std::string_view id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

// N steps of 10 ms (ProfilerStep#i) with `data_us` of DataLoader wait, `items` .item() per step.
std::string CpuSteps(int n, int data_us, int items, bool zeroing, const char* loader = "_SingleProcessDataLoaderIter") {
  std::string ev;
  for (int i = 0; i < n; ++i) {
    const int s = i * 10000;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":10000}},)J", i, s);
    if (data_us > 0)
      ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#{}.__next__","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                        loader, s + 1, data_us);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":{},"dur":2000}},)J", s + data_us + 10);
    ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: ConvolutionBackward0","pid":1,"tid":2,"ts":{},"dur":3000}},)J",
                      s + data_us + 2100);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"Optimizer.zero_grad#SGD.zero_grad","pid":1,"tid":1,"ts":{},"dur":100}},)J",
                      s + 9000);
    if (zeroing) ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::zero_","pid":1,"tid":1,"ts":{},"dur":40}},)J", s + 9010);
    if (zeroing) ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::fill_","pid":1,"tid":1,"ts":{},"dur":30}},)J", s + 9015);
    for (int k = 0; k < items; ++k)
      ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":{},"dur":5}},{{"ph":"X","cat":"cpu_op","name":"aten::_local_scalar_dense","pid":1,"tid":1,"ts":{},"dur":3}},)J",
                        s + 9500 + k * 10, s + 9501 + k * 10);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

TEST(StepsTest, PhaseBreakdownFromProfilerSteps) {
  const Report r = AnalyzeJson(CpuSteps(4, 3000, 0, false));
  const auto& s = r.metrics.steps;
  EXPECT_EQ(s.source, "ProfilerStep");
  ASSERT_EQ(s.steps.size(), 4u);
  EXPECT_EQ(s.median_wall_ns, 10'000'000);
  EXPECT_EQ(s.steps[0].data_wait_ns, 3'000'000);
  EXPECT_EQ(s.steps[0].forward_ns, 2'000'000);
  EXPECT_EQ(s.steps[0].backward_ns, 3'000'000);
  EXPECT_EQ(s.steps[0].optimizer_ns, 100'000);
  EXPECT_NEAR(s.data_wait_share, 0.3, 1e-9);
  EXPECT_EQ(s.steps[0].wall_ns, s.steps[0].data_wait_ns + s.steps[0].forward_ns + s.steps[0].backward_ns +
                                    s.steps[0].optimizer_ns + s.steps[0].other_ns);
}

TEST(StepsTest, InferredFromOptimizerStepWhenNoProfilerStep) {
  std::string ev;
  for (int i = 0; i < 4; ++i)
    ev += fmt::format(R"J({{"ph":"X","name":"Optimizer.step#SGD.step","pid":"CPU functions","tid":1,"ts":{},"dur":100}},)J", i * 5000 + 4000);
  ev.pop_back();
  const Report r = AnalyzeJson("[" + ev + "]");
  EXPECT_EQ(r.metrics.steps.source, "inferred from Optimizer.step");
  ASSERT_EQ(r.metrics.steps.steps.size(), 3u);
  EXPECT_EQ(r.metrics.steps.median_wall_ns, 5'000'000);
}

TEST(StepsTest, NoStepsIsSaidAndPerStepRulesStaySilent) {
  const Report r = AnalyzeJson(R"J([{"ph":"X","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1}])J");
  EXPECT_EQ(r.metrics.steps.source, "none");
  EXPECT_TRUE(r.metrics.steps.steps.empty());
  EXPECT_EQ(Find(r, "input.dataloader_bound"), nullptr);
}

TEST(InputTest, DataloaderBoundAndWorkersFlagged) {
  const Report r = AnalyzeJson(CpuSteps(4, 3000, 0, false));
  const Finding* f = Find(r, "input.dataloader_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->measured, 30.0, 1e-6);
  EXPECT_EQ(f->threshold, 5.0);
  EXPECT_EQ(f->estimated_saving_ns, 3'000'000);
  EXPECT_EQ(f->knob, "workers");
  const Finding* w = Find(r, "input.workers");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, Severity::kHigh);
}

TEST(InputTest, SmallWaitWithWorkersIsClean) {
  const Report r = AnalyzeJson(CpuSteps(4, 200, 0, false, "_MultiProcessingDataLoaderIter"));
  EXPECT_EQ(Find(r, "input.dataloader_bound"), nullptr);  // 2 % < 5 %
  EXPECT_EQ(Find(r, "input.workers"), nullptr);
}

TEST(InputTest, SingleProcessLoadingOfCheapDataIsNotFlagged) {
  EXPECT_EQ(Find(AnalyzeJson(CpuSteps(4, 200, 0, false)), "input.workers"), nullptr);  // 2 % wait
}

TEST(InputTest, ThresholdOverrideChangesTheVerdict) {
  Thresholds th;
  std::string error;
  ASSERT_TRUE(th.Parse("input.dataloader_bound.share_pct=1", &error)) << error;
  const Report r = AnalyzeJson(CpuSteps(4, 200, 0, false, "_MultiProcessingDataLoaderIter"), th);
  ASSERT_NE(Find(r, "input.dataloader_bound"), nullptr);
  EXPECT_FALSE(th.Parse("input.dataloader_bound.shar_pct=1", &error));
  EXPECT_NE(error.find("unknown threshold"), std::string::npos);
  EXPECT_FALSE(th.Parse("input.dataloader_bound.share_pct=abc", &error));
}

TEST(SyncTest, ItemEveryStepCountedOncePerCall) {
  const Report r = AnalyzeJson(CpuSteps(4, 0, 2, false));
  const Finding* f = Find(r, "sync.host_device");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->measured, 2.0);  // _local_scalar_dense nested in item is not double counted
  EXPECT_EQ(f->severity, Severity::kLow);  // CPU-only trace: count only
  EXPECT_EQ(Find(AnalyzeJson(CpuSteps(4, 0, 0, false)), "sync.host_device"), nullptr);
}

TEST(SyncTest, GpuSyncsBlockedTimeAndCause) {
  const std::string json = R"J({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":1000,"dur":1000},
    {"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":1,"tid":1,"ts":100,"dur":400,"args":{"External id":5}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaMemcpy","pid":1,"tid":1,"ts":110,"dur":300,"args":{"External id":5,"correlation":50}},
    {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":200,"dur":200,"args":{"device":0,"stream":7,"correlation":50,"bytes":1048576}},
    {"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":1,"tid":1,"ts":1100,"dur":400,"args":{"External id":6}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":1110,"dur":250,"args":{"External id":6,"correlation":51}}
  ]})J";
  const Report r = AnalyzeJson(json);
  const Finding* f = Find(r, "sync.host_device");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->measured, 1.0);
  EXPECT_EQ(f->estimated_saving_ns, 275'000);  // (300 + 250) µs over 2 steps
  ASSERT_FALSE(f->examples.empty());
  EXPECT_NE(f->examples[0].find("from aten::copy_"), std::string::npos);
  const Finding* b = Find(r, "sync.blocking_copy");
  ASSERT_NE(b, nullptr);
  const Finding* p = Find(r, "input.pin_memory");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->measured, 0.5);
}

TEST(OptimTest, ZeroGradWritingZerosIsFlagged) {
  const Report r = AnalyzeJson(CpuSteps(4, 0, 0, true));
  const Finding* f = Find(r, "optim.zero_grad");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->measured, 1.0);  // fill_ nested in zero_ is the same zeroing, counted once
  EXPECT_EQ(Find(AnalyzeJson(CpuSteps(4, 0, 0, false)), "optim.zero_grad"), nullptr);
}

std::string ConvNorm(const char* conv_dims, const char* norm, const char* norm_dims, bool with_shapes = true) {
  auto args = [&](const char* d) { return with_shapes ? fmt::format(R"J(,"args":{{"Input Dims":{}}})J", d) : std::string(); };
  return fmt::format(R"J({{"traceEvents":[
    {{"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":0,"dur":100{}}},
    {{"ph":"X","cat":"cpu_op","name":"aten::convolution","pid":1,"tid":1,"ts":1,"dur":98}},
    {{"ph":"X","cat":"cpu_op","name":"aten::view","pid":1,"tid":1,"ts":101,"dur":1}},
    {{"ph":"X","cat":"cpu_op","name":"{}","pid":1,"tid":1,"ts":110,"dur":50{}}}]}})J",
                     args(conv_dims), norm, args(norm_dims));
}

TEST(ModelTest, BiasBeforeBatchNormNeedsShapesAndMatchingChannels) {
  const char* conv_bias = "[[8,3,32,32],[16,3,3,3],[16],[],[],[],[]]";
  const char* bn16 = "[[8,16,32,32],[16],[16],[16],[16],[],[],[],[]]";
  const Report flagged = AnalyzeJson(ConvNorm(conv_bias, "aten::batch_norm", bn16));
  const Finding* f = Find(flagged, "model.bias_before_norm");
  ASSERT_NE(f, nullptr);
  ASSERT_FALSE(f->examples.empty());
  EXPECT_NE(f->examples[0].find("aten::conv2d (bias[16]) -> aten::batch_norm"), std::string::npos);
  // No bias, a different consumer, mismatched channels, or no shapes: silent.
  EXPECT_EQ(Find(AnalyzeJson(ConvNorm("[[8,3,32,32],[16,3,3,3],[],[],[],[],[]]", "aten::batch_norm", bn16)),
                 "model.bias_before_norm"), nullptr);
  EXPECT_EQ(Find(AnalyzeJson(ConvNorm(conv_bias, "aten::relu", "[[8,16,32,32]]")), "model.bias_before_norm"), nullptr);
  EXPECT_EQ(Find(AnalyzeJson(ConvNorm(conv_bias, "aten::batch_norm", "[[8,32,32,32],[32]]")), "model.bias_before_norm"),
            nullptr);
  EXPECT_EQ(Find(AnalyzeJson(ConvNorm(conv_bias, "aten::batch_norm", bn16, false)), "model.bias_before_norm"), nullptr);
}

// Idle split on one stream, built so each HTA category gets one known gap.
TEST(GpuTest, IdleSplitCategoriesOnHandBuiltStream) {
  const std::string json = R"J({"traceEvents":[
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":6,"dur":5,"args":{"correlation":2}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":12,"dur":5,"args":{"correlation":3}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":300,"dur":5,"args":{"correlation":4}},
    {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":10,"dur":100,"args":{"stream":7,"device":0,"correlation":1}},
    {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":120,"dur":100,"args":{"stream":7,"device":0,"correlation":2}},
    {"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce","pid":0,"tid":7,"ts":270,"dur":10,"args":{"stream":7,"device":0,"correlation":3}},
    {"ph":"X","cat":"kernel","name":"k4","pid":0,"tid":7,"ts":310,"dur":90,"args":{"stream":7,"device":0,"correlation":4}},
    {"ph":"X","cat":"kernel","name":"uncorrelated","pid":0,"tid":7,"ts":500,"dur":90,"args":{"stream":7,"device":0}}
  ]})J";
  const Report r = AnalyzeJson(json);
  ASSERT_EQ(r.metrics.temporal.size(), 1u);
  const auto& t = r.metrics.temporal[0];
  EXPECT_EQ(t.kernel_time_ns, 390'000);  // 10..400; the uncorrelated kernel is excluded (HTA)
  EXPECT_EQ(t.idle_ns, 90'000);          // gaps 10 + 50 + 30
  EXPECT_EQ(t.compute_ns, 290'000);
  EXPECT_EQ(t.non_compute_ns, 10'000);   // the NCCL kernel
  ASSERT_EQ(t.streams.size(), 1u);
  EXPECT_EQ(t.streams[0].kernel_wait_ns, 10'000);  // 110 -> 120: launched long before, gap < 30 µs
  EXPECT_EQ(t.streams[0].other_ns, 50'000);        // 220 -> 270: launched long before, gap >= 30 µs
  EXPECT_EQ(t.streams[0].host_wait_ns, 30'000);    // 280 -> 310: launched at 300, after the previous end
  ASSERT_NE(Find(r, "gpu.idle"), nullptr);  // 23 % > 20 %
}

}  // namespace
}  // namespace trainrx::analyzers

namespace trainrx::analyzers {
namespace {

// A collected trace: CpuSteps plus our "trainrx" block and config counters.
std::string Collected(const std::string& block, const std::string& counters, bool gpu_kernel = false) {
  std::string json = CpuSteps(4, 100, 0, false);
  json.pop_back();  // the closing brace of the top-level object
  json.pop_back();  // the closing bracket of traceEvents
  json += counters;
  if (gpu_kernel) json += R"J(,{"ph":"X","cat":"kernel","name":"cudnn_conv","pid":0,"tid":7,"ts":100,"dur":50,"args":{"device":0,"stream":7}})J";
  return json + "],\"trainrx\":{\"collector\":\"trainrx probes\"" + block + "}}";
}
std::string ConfigCounter(const char* key, int ts, double v) {
  return fmt::format(R"J(,{{"ph":"C","name":"trainrx.config.{}","pid":1,"tid":1,"ts":{},"args":{{"v":{}}}}})J", key, ts, v);
}

TEST(ConfigTest, AnomalyModeSwitchedOnAfterStartIsFoundPerStep) {
  // Off at the first boundary, on from the third step: 2 of 4 steps.
  const Report r = AnalyzeJson(Collected("", ConfigCounter("anomaly_mode", 0, 0) + ConfigCounter("anomaly_mode", 20000, 1)));
  const Finding* f = Find(r, "debug.anomaly_detection");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->measured, 50.0);
}

TEST(ConfigTest, ProfilerAndLaunchBlockingAndNothingWithoutTheCollector) {
  const Report r = AnalyzeJson(Collected(",\"launch_blocking\":1", ConfigCounter("other_profiler", 0, 1)));
  EXPECT_NE(Find(r, "debug.profiler"), nullptr);
  const Finding* lb = Find(r, "debug.launch_blocking");
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->severity, Severity::kLow);  // no GPU activity in this trace
  // The same counters in a trace without our block and counters: silent.
  const Report plain = AnalyzeJson(CpuSteps(4, 100, 0, false));
  EXPECT_EQ(Find(plain, "debug.profiler"), nullptr);
  EXPECT_EQ(Find(plain, "debug.anomaly_detection"), nullptr);
}

TEST(ConfigTest, CudnnRulesNeedConvolutionsOnAGpu) {
  const std::string counters = ConfigCounter("cudnn_benchmark", 0, 0) + ConfigCounter("cudnn_deterministic", 0, 1);
  const Report cpu = AnalyzeJson(Collected("", counters, /*gpu_kernel=*/false));
  EXPECT_EQ(Find(cpu, "cudnn.benchmark_off"), nullptr);
  EXPECT_EQ(Find(cpu, "cudnn.deterministic_on"), nullptr);
  const Report gpu = AnalyzeJson(Collected("", counters, /*gpu_kernel=*/true));
  EXPECT_NE(Find(gpu, "cudnn.benchmark_off"), nullptr);
  EXPECT_NE(Find(gpu, "cudnn.deterministic_on"), nullptr);
}

// PyTorch's default (one intra-op thread per core) with up to one loader worker per CPU is not
// flagged; intra-op pools of several local ranks, or more workers than CPUs, are.
TEST(ConfigTest, ThreadsOversubscribedCountsRanksAndWorkers) {
  EXPECT_EQ(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":4", "")), "threads.oversubscribed"), nullptr);
  EXPECT_EQ(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":4,\"workers\":4", "")), "threads.oversubscribed"), nullptr);
  EXPECT_NE(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":4,\"workers\":5", "")), "threads.oversubscribed"), nullptr);
  EXPECT_NE(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":8", "")), "threads.oversubscribed"), nullptr);
  EXPECT_EQ(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":4,\"workers\":2", "")), "threads.oversubscribed"), nullptr);
  EXPECT_NE(Find(AnalyzeJson(Collected(",\"cpu_count\":4,\"intra_op_threads\":4,\"env\":{\"LOCAL_WORLD_SIZE\":\"2\"}", "")),
                 "threads.oversubscribed"),
            nullptr);
}

// Eval: one loader iteration with no backward after the training steps, with grad on or off.
std::string EvalTrace(double grad) {
  std::string ev = R"J({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":0,"dur":10},
    {"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":20,"dur":100},
    {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: ConvolutionBackward0","pid":1,"tid":1,"ts":200,"dur":100},
    {"ph":"X","cat":"user_annotation","name":"Optimizer.step#SGD.step","pid":1,"tid":1,"ts":400,"dur":50},
    {"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":1000,"dur":10},
    {"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":1020,"dur":100},
    {"ph":"C","name":"trainrx.grad_enabled","pid":1,"tid":1,"ts":20,"args":{"v":1}})J";
  ev += fmt::format(R"J(,{{"ph":"C","name":"trainrx.grad_enabled","pid":1,"tid":1,"ts":1020,"args":{{"v":{}}}}}]}})J", grad);
  return ev;
}

TEST(EvalTest, GradOnDuringAnIterationWithoutBackwardIsFlagged) {
  const Finding* f = Find(AnalyzeJson(EvalTrace(1)), "eval.grad_enabled");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(std::get<int64_t>(f->evidence[0].value), 1);  // one eval iteration
  EXPECT_EQ(Find(AnalyzeJson(EvalTrace(0)), "eval.grad_enabled"), nullptr);
}

}  // namespace
}  // namespace trainrx::analyzers
