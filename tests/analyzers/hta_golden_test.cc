// Golden tests against Holistic Trace Analysis 0.6.1 on real traces (../shared/external-traces/hta,
// numbers from EXPECTED.md section B).
//
// Traces with integer-µs timestamps match HTA to its printed precision. On the two traces with
// ns-resolution float timestamps we differ by up to ~1 pp, by design: we keep exact ns, while HTA
// 0.6.1 loses sub-µs precision on its way to integer columns (truncating durations alone moves
// our idle % from 1.68 to 2.32 of HTA's 2.63 on ns_resolution). Those are checked within 1 pp.
#include <gtest/gtest.h>

#include <filesystem>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::analyzers {
namespace {

std::string TracePath(const std::string& name) { return std::string(TRAINRX_SHARED_DIR) + "/external-traces/hta/" + name; }

struct Golden {
  const char* file;
  double idle, compute, non_compute, tolerance_pp;
  int64_t kernel_time_us;  // HTA's kernel_time; -1 to skip
  std::vector<std::array<int64_t, 4>> streams;  // stream, host, kernel, other (µs)
  int64_t launches;
};

class HtaGoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(HtaGoldenTest, TemporalAndIdleBreakdownMatchHta) {
  const Golden& g = GetParam();
  const std::string path = TracePath(g.file);
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing shared trace " << path;
  profiler::Trace trace;
  const auto st = profiler::ReadTraces({path}, trace);
  ASSERT_TRUE(st.ok) << st.error;
  EXPECT_EQ(trace.stats.TotalSkipped(), 0u);
  const Report r = Analyze(trace);
  ASSERT_EQ(r.metrics.temporal.size(), 1u);
  const auto& t = r.metrics.temporal[0];
  EXPECT_NEAR(t.idle_pct, g.idle, g.tolerance_pp);
  EXPECT_NEAR(t.compute_pct, g.compute, g.tolerance_pp);
  EXPECT_NEAR(t.non_compute_pct, g.non_compute, g.tolerance_pp);
    const bool exact = g.tolerance_pp <= 0.5;
  // HTA prints whole µs; ns-resolution traces may differ by the sub-µs parts of two timestamps.
  if (g.kernel_time_us >= 0) EXPECT_NEAR(t.kernel_time_ns / 1000.0, g.kernel_time_us, exact ? 1.0 : 2.0);
  for (const auto& [stream, host, kernel, other] : g.streams) {
    const auto it = std::find_if(t.streams.begin(), t.streams.end(), [&](const StreamIdle& s) { return s.stream == stream; });
    ASSERT_NE(it, t.streams.end()) << "stream " << stream;
    // Exact traces: within 1 µs per category. ns traces: within 1 % of the stream's idle.
    const double tol = exact ? 1.0 : 0.01 * static_cast<double>(host + kernel + other) + 1.0;
    EXPECT_NEAR(it->host_wait_ns / 1000.0, host, tol) << "stream " << stream;
    EXPECT_NEAR(it->kernel_wait_ns / 1000.0, kernel, tol) << "stream " << stream;
    EXPECT_NEAR(it->other_ns / 1000.0, other, tol) << "stream " << stream;
  }
  if (g.launches >= 0) {
    ASSERT_EQ(r.metrics.launch.size(), 1u);
    EXPECT_EQ(r.metrics.launch[0].kernels, g.launches);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Traces, HtaGoldenTest,
    ::testing::Values(
        Golden{"rank0.json.gz", 69.44, 14.15, 16.41, 0.5, 1016554,
               {{7, 0, 17159, 691231}, {25, 628598, 85, 0}, {27, 792592, 1000, 7135}, {84, 62901, 12, 665192},
                {285, 0, 0, 675305}, {363, 0, 75, 673182}},
               -1},
        Golden{"benchmark_result_2869224_1695835535_trace.json.gz", 99.49, 0.08, 0.43, 0.5, -1,
               {{7, 12855007, 104, 0}, {20, 12011718, 3, 0}}, 98},
        Golden{"rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 2.63, 96.75, 0.62, 1.0, 384634, {}, 4876},
        Golden{"nccl_data.json.gz", 77.78, 17.26, 4.97, 1.0, 435586, {{40, 381499, 0, 0}}, 2516}),
    [](const auto& info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.')) == "rank-0" ? std::string("ns_resolution")
                                                  : std::string(n.substr(0, std::min<size_t>(n.find('.'), 12)));
    });

TEST(HtaGoldenTest, StepsComeFromProfilerStepAndLastStepIsReported) {
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraces({TracePath("rank0.json.gz")}, trace).ok);
  const Report r = Analyze(trace);
  EXPECT_EQ(r.metrics.steps.source, "ProfilerStep");
  EXPECT_EQ(r.metrics.steps.steps.size(), 5u);  // ProfilerStep#550..554
  EXPECT_TRUE(r.metrics.steps.has_gpu);
}

}  // namespace
}  // namespace trainrx::analyzers
