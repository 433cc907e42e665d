// Golden tests against Holistic Trace Analysis on real traces (../shared/external-traces/hta).
//
// The numbers are what HTA 0.5.0 (PyPI HolisticTraceAnalysis==0.5.0, with pandas 2.2.3 and numpy 1.26.4,
// as pinned in bench/hta_side_by_side.sh) prints for TraceAnalysis.get_temporal_breakdown(),
// get_idle_time_breakdown() and get_cuda_kernel_launch_stats() on these files; they are identical to
// the HTA 0.6.1 figures in EXPECTED.md section B (both versions share the code involved).
//
// With the default gpu.idle.hta_time=1 we convert ns-resolution float timestamps exactly as HTA does
// (ts and dur read as doubles, end = floor(ts + dur), ts = ceil(ts); see profiler::HtaRoundedMicros),
// so all four traces match HTA to the µs: 0.5 pp on the shares is a loose bound, the µs figures are
// checked within 1 µs. With gpu.idle.hta_time=0 we keep exact ns (checked below on ns_resolution).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/time.h"

namespace trainrx::analyzers {
namespace {

std::string TracePath(const std::string& name) { return std::string(TRAINRX_SHARED_DIR) + "/external-traces/hta/" + name; }

// Without ../shared (a checkout on its own) these tests skip; with it, a missing trace fails.
#define SKIP_WITHOUT_SHARED()                                                                      \
  if (!std::filesystem::is_directory(std::string(TRAINRX_SHARED_DIR) + "/external-traces/hta")) \
  GTEST_SKIP() << "no " << TRAINRX_SHARED_DIR << "/external-traces/hta (../shared is not beside this checkout)"

struct Golden {
  const char* file;
  double idle, compute, non_compute;             // HTA's *_pctg (2 decimals)
  int64_t kernel_time_us;                        // HTA's kernel_time(us); -1 to skip
  std::array<int64_t, 3> idle_compute_noncompute_us;  // HTA's idle/compute/non_compute_time(us); -1 to skip
  std::vector<std::array<int64_t, 4>> streams;   // stream, host, kernel, other (µs)
  int64_t launches;                              // rows of HTA's launch stats; -1 to skip
  double mean_cpu_us, mean_gpu_us;               // HTA launch stats means; -1 to skip
  double comm_overlap_pct;                       // HTA's comp_comm_overlap_pctg; NaN: no NCCL kernels
};

class HtaGoldenTest : public ::testing::TestWithParam<Golden> {};
constexpr double kNoComm = std::numeric_limits<double>::quiet_NaN();

Report AnalyzeFile(const std::string& path, const Thresholds& th = Thresholds()) {
  profiler::Trace trace;
  const auto st = profiler::ReadTraces({path}, trace);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(trace.stats.TotalSkipped(), 0u);
  return Analyze(trace, th);
}

TEST_P(HtaGoldenTest, TemporalAndIdleBreakdownMatchHta) {
  SKIP_WITHOUT_SHARED();
  const Golden& g = GetParam();
  const std::string path = TracePath(g.file);
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing shared trace " << path;
  const Report r = AnalyzeFile(path);
  ASSERT_EQ(r.metrics.temporal.size(), 1u);
  const auto& t = r.metrics.temporal[0];
  constexpr double kPp = 0.5;
  EXPECT_NEAR(t.idle_pct, g.idle, kPp);
  EXPECT_NEAR(t.compute_pct, g.compute, kPp);
  EXPECT_NEAR(t.non_compute_pct, g.non_compute, kPp);
  // HTA rounds the shares to 2 decimals; ours agree to that print.
  EXPECT_NEAR(t.idle_pct, g.idle, 0.005 + 1e-9);
  EXPECT_NEAR(t.compute_pct, g.compute, 0.005 + 1e-9);
  EXPECT_NEAR(t.non_compute_pct, g.non_compute, 0.005 + 1e-9);
  if (g.kernel_time_us >= 0) {
    EXPECT_NEAR(t.kernel_time_ns / 1000.0, g.kernel_time_us, 1.0);
  }
  if (g.idle_compute_noncompute_us[0] >= 0) {
    EXPECT_NEAR(t.idle_ns / 1000.0, g.idle_compute_noncompute_us[0], 1.0);
    EXPECT_NEAR(t.compute_ns / 1000.0, g.idle_compute_noncompute_us[1], 1.0);
    EXPECT_NEAR(t.non_compute_ns / 1000.0, g.idle_compute_noncompute_us[2], 1.0);
  }
  for (const auto& [stream, host, kernel, other] : g.streams) {
    const int64_t want = stream;  // (clang 14 cannot capture a structured binding)
    const auto it = std::find_if(t.streams.begin(), t.streams.end(), [want](const StreamIdle& s) { return s.stream == want; });
    ASSERT_NE(it, t.streams.end()) << "stream " << stream;
    EXPECT_NEAR(it->host_wait_ns / 1000.0, host, 1.0) << "stream " << stream;
    EXPECT_NEAR(it->kernel_wait_ns / 1000.0, kernel, 1.0) << "stream " << stream;
    EXPECT_NEAR(it->other_ns / 1000.0, other, 1.0) << "stream " << stream;
  }
  ASSERT_EQ(r.metrics.launch.size(), 1u);
  if (g.launches >= 0) {
    EXPECT_EQ(r.metrics.launch[0].kernels, g.launches);
  }
  if (g.mean_cpu_us >= 0) {
    EXPECT_NEAR(r.metrics.launch[0].mean_cpu_us, g.mean_cpu_us, 0.01);
    EXPECT_NEAR(r.metrics.launch[0].mean_gpu_us, g.mean_gpu_us, 0.01);
  }
  if (std::isnan(g.comm_overlap_pct)) {
    EXPECT_TRUE(std::isnan(t.comm_overlap_pct)) << t.comm_overlap_pct;
    EXPECT_EQ(t.comm_ns, 0);
  } else {
    EXPECT_NEAR(t.comm_overlap_pct, g.comm_overlap_pct, 0.5);  // issue 18: within 0.5 pp of HTA
  }
}

// Where HTA differs by definition (see analyzers/families/gpu.cc): on alexnet it also counts 41 CUDA sync
// records as GPU activities (kernel_time 12996011 µs there; idle/compute/non-compute µs
// 12929684/10637/55690). Those fields are skipped; the shares still agree to 0.01 pp. Launch stats
// count launch calls only, as HTA's (on rank0: 5224, not every GPU activity with a
// correlated runtime call; means 131.0 / 44.8 µs there, as HTA prints them).
INSTANTIATE_TEST_SUITE_P(
    Traces, HtaGoldenTest,
    ::testing::Values(
        Golden{"rank0.json.gz", 69.44, 14.15, 16.41, 1016554, {705853, 143836, 166865},
               {{7, 0, 17159, 691231}, {25, 628598, 85, 0}, {27, 792592, 1000, 7135}, {84, 62901, 12, 665192},
                {285, 0, 0, 675305}, {363, 0, 75, 673182}},
               5224, -1, -1, 1.37},
        Golden{"benchmark_result_2869224_1695835535_trace.json.gz", 99.49, 0.08, 0.43, -1, {-1, -1, -1},
               {{7, 12855007, 104, 0}, {20, 12011718, 3, 0}}, 98, 31771.59, 675.54, kNoComm},
        Golden{"rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 2.63, 96.75, 0.62, 384634, {10113, 372150, 2371},
               {{7, 1709, 8404, 0}}, 4876, 39.39, 76.81, kNoComm},
        Golden{"nccl_data.json.gz", 77.78, 17.26, 4.97, 435586, {338781, 75169, 21636},
               {{7, 357247, 2155, 0}, {40, 381499, 0, 0}}, 2516, 8.46, 39.93, 14.31}),
    [](const auto& info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.')) == "rank-0" ? std::string("ns_resolution")
                                                  : std::string(n.substr(0, std::min<size_t>(n.find('.'), 12)));
    });

// gpu.idle.hta_time=0: exact ns. HTA's rounding shrinks every activity by up to 2 µs, which on this
// trace of many short kernels moves idle from 1.68 % to HTA's 2.63 %.
TEST(HtaGoldenTest, ExactNsOptionKeepsSubMicrosecondTimes) {
  SKIP_WITHOUT_SHARED();
  Thresholds th;
  std::string error;
  ASSERT_TRUE(th.Parse("gpu.idle.hta_time=0").ToBool(&error)) << error;
  const Report r = AnalyzeFile(TracePath("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), th);
  ASSERT_EQ(r.metrics.temporal.size(), 1u);
  const auto& t = r.metrics.temporal[0];
  EXPECT_EQ(t.kernel_time_ns, 384634463);
  EXPECT_EQ(t.idle_ns, 6452701);
  EXPECT_NEAR(t.idle_pct, 1.68, 0.005);
  EXPECT_NEAR(t.compute_pct, 97.43, 0.005);
  ASSERT_EQ(t.streams.size(), 1u);
  EXPECT_EQ(t.streams[0].host_wait_ns, 1347125);
  EXPECT_EQ(t.streams[0].kernel_wait_ns, 5105576);
  // Integer-µs traces: both time models give the same numbers.
  const Report a = AnalyzeFile(TracePath("rank0.json.gz"), th), b = AnalyzeFile(TracePath("rank0.json.gz"));
  ASSERT_EQ(a.metrics.temporal.size(), 1u);
  ASSERT_EQ(b.metrics.temporal.size(), 1u);
  EXPECT_EQ(a.metrics.temporal[0].idle_ns, b.metrics.temporal[0].idle_ns);
  EXPECT_EQ(a.metrics.temporal[0].compute_ns, b.metrics.temporal[0].compute_ns);
  EXPECT_EQ(a.metrics.temporal[0].kernel_time_ns, b.metrics.temporal[0].kernel_time_ns);
}

// The double a JSON reader gets (Python's float(), strtod) for the µs text, bit for bit.
TEST(HtaTimeConversion, NsToMicrosDoubleMatchesStrtod) {
  char buf[32];
  std::mt19937_64 rng(42);
  const int64_t bases[] = {0, 1000, 4458676522690655, int64_t{1} << 53, 1712195495519689047, 1695835542514261000,
                           4'000'000'000'000'000'000};
  for (const int64_t base : bases) {
    for (int i = 0; i < 20000; ++i) {
      const int64_t ns = base + static_cast<int64_t>(rng() % 2'000'000) - (base > 1'000'000 ? 1'000'000 : 0);
      for (const int64_t v : {ns, -ns}) {
        const std::string text(profiler::FormatNsAsMicros(v, buf));
        ASSERT_EQ(profiler::NsToMicrosDouble(v), std::strtod(text.c_str(), nullptr)) << text;
      }
    }
  }
  // Midpoints between doubles at 1.7e15 µs (steps of 0.25) tie to even, as strtod does.
  for (const int64_t v : {1712195495519689125, 1712195495519689375, 1712195495519689625, 1712195495519689875}) {
    const std::string text(profiler::FormatNsAsMicros(v, buf));
    EXPECT_EQ(profiler::NsToMicrosDouble(v), std::strtod(text.c_str(), nullptr)) << text;
  }
}

TEST(HtaTimeConversion, HtaRoundsStartUpAndEndDown) {
  // ts 10.2, dur 0.5: end 10.7 -> [11, 10]: a sub-µs kernel gets dur -1 µs, as in HTA.
  EXPECT_EQ(profiler::HtaRoundedMicros(10'200, 500).ts_us, 11);
  EXPECT_EQ(profiler::HtaRoundedMicros(10'200, 500).end_us, 10);
  // end is ts + dur summed as doubles before flooring: 1.1 + 0.9 = 2.0 exactly -> end 2.
  EXPECT_EQ(profiler::HtaRoundedMicros(1'100, 900).end_us, 2);
  // At epoch scale a double holds quarter µs: "...689.047" reads as ...689.0, so ts stays 689
  // (exact ceil would give 690), and "...689.047" + "63.813" sums to ...752.75 -> end 752.
  const auto m = profiler::HtaRoundedMicros(1712195495519689047, 63813);
  EXPECT_EQ(m.ts_us, 1712195495519689);
  EXPECT_EQ(m.end_us, 1712195495519752);
  // Whole µs stay as they are.
  EXPECT_EQ(profiler::HtaRoundedMicros(1695835542514261000, 104000).ts_us, 1695835542514261);
  EXPECT_EQ(profiler::HtaRoundedMicros(1695835542514261000, 104000).end_us, 1695835542514365);
}

TEST(HtaGoldenTest, StepsComeFromProfilerStepAndLastStepIsReported) {
  SKIP_WITHOUT_SHARED();
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraces({TracePath("rank0.json.gz")}, trace).ok());
  const Report r = Analyze(trace);
  EXPECT_EQ(r.metrics.steps.source, "ProfilerStep");
  EXPECT_EQ(r.metrics.steps.steps.size(), 5u);  // ProfilerStep#550..554
  EXPECT_TRUE(r.metrics.steps.has_gpu);
}

}  // namespace
}  // namespace trainrx::analyzers
