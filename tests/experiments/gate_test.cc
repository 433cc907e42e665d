// The gate's decision rule and baseline format, without running anything.
#include "trainrx/reports/gate.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace trainrx::experiments {
namespace {

std::vector<double> Noisy(std::mt19937_64& rng, int n, double median, double sigma) {
  std::lognormal_distribution<double> d(std::log(median), sigma);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

GateVerdict Decide(const std::vector<double>& base, const std::vector<double>& cur, GateRule rule = {}) {
  return Overall(DecideGate({{"step time", "ms", false, base, cur, {}}}, rule));
}

TEST(GateTest, EachVerdictPath) {
  std::mt19937_64 rng(5);
  // A clear 20 % regression, low noise: fail.
  EXPECT_EQ(Decide(Noisy(rng, 8, 100, 0.01), Noisy(rng, 8, 120, 0.01)), GateVerdict::kFail);
  // Same distribution, low noise: the CI rules out a 10 % regression: pass.
  EXPECT_EQ(Decide(Noisy(rng, 8, 100, 0.01), Noisy(rng, 8, 100, 0.01)), GateVerdict::kPass);
  // Same distribution, 20 % noise and few trials: cannot rule out 10 %: inconclusive.
  EXPECT_EQ(Decide(Noisy(rng, 4, 100, 0.2), Noisy(rng, 4, 100, 0.2)), GateVerdict::kInconclusive);
  // A significant 1 % slowdown is below the 3 % tolerance: not a failure.
  EXPECT_NE(Decide(Noisy(rng, 30, 100, 0.002), Noisy(rng, 30, 101, 0.002)), GateVerdict::kFail);
  // Faster is never a failure.
  EXPECT_EQ(Decide(Noisy(rng, 8, 100, 0.01), Noisy(rng, 8, 80, 0.01)), GateVerdict::kPass);
}

// Sides whose batches differ (issue 60.2): time a step is shown, not judged; throughput decides.
// b32 -> b128 takes 3x longer a step and processes 4x the samples: a pass, not a failure.
TEST(GateTest, ABatchChangeIsJudgedByThroughput) {
  std::mt19937_64 rng(9);
  std::vector<MetricSamples> m = {{"median step time", "ms", false, Noisy(rng, 8, 10, 0.01), Noisy(rng, 8, 30, 0.01), {}},
                                  {"throughput", "samples/s", true, Noisy(rng, 8, 3200, 0.01), Noisy(rng, 8, 4267, 0.01), {}}};
  EXPECT_EQ(Overall(DecideGate(m, {})), GateVerdict::kFail);  // judged by time a step, as before
  std::vector<std::string> warnings;
  JudgeByThroughputWhereBatchesDiffer("cnn batch=32", "cnn batch=128", false, &m, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("32 samples a step, this check 128"), std::string::npos) << warnings[0];
  EXPECT_FALSE(m[0].judged);
  EXPECT_TRUE(m[1].judged);
  const auto decisions = DecideGate(m, {});
  EXPECT_EQ(Overall(decisions), GateVerdict::kPass);
  EXPECT_FALSE(decisions[0].judged);
  GateReport r;
  r.metrics = decisions;
  std::ostringstream text;
  reports::WriteGateText(r, text);
  EXPECT_NE(text.str().find("not judged"), std::string::npos) << text.str();
  // The same batch, or commands (their batch is not in the spec): unchanged.
  std::vector<MetricSamples> same = m;
  same[0].judged = true;
  warnings.clear();
  JudgeByThroughputWhereBatchesDiffer("cnn batch=32", "cnn batch=32 anomaly=1", false, &same, &warnings);
  JudgeByThroughputWhereBatchesDiffer("python a.py", "python b.py", true, &same, &warnings);
  EXPECT_TRUE(same[0].judged);
  EXPECT_TRUE(warnings.empty());
}

// fail_ci_margin: among runs that "CI above 1" fails (a 4 % slowdown, ~1.5 % noise), "CI above the
// tolerance" fails exactly those whose interval's lower bound clears 1.03, "above half" (the
// default) those clearing 1.015; both outcomes occur over the seeds (the margin decides).
TEST(GateTest, FailCiMarginAsksTheIntervalToClearTheMargin) {
  GateRule above1, half, full;
  above1.fail_ci_margin = 0;
  EXPECT_EQ(GateRule{}.fail_ci_margin, GateRule{}.tolerance / 2);
  half.fail_ci_margin = half.tolerance / 2;
  full.fail_ci_margin = full.tolerance;
  int kept = 0, dropped = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const auto base = Noisy(rng, 10, 100, 0.015), slow = Noisy(rng, 10, 104, 0.015);
    const auto d = DecideGate({{"step time", "ms", false, base, slow, {}}}, above1);
    if (d[0].verdict != GateVerdict::kFail) continue;
    const bool full_fails = Decide(base, slow, full) == GateVerdict::kFail;
    EXPECT_EQ(full_fails, d[0].ci_low > 1.03) << seed;
    EXPECT_EQ(Decide(base, slow, half) == GateVerdict::kFail, d[0].ci_low > 1.015) << seed;
    (full_fails ? kept : dropped) += 1;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(dropped, 0);
}

TEST(GateTest, ThroughputIsOrientedAndHolmCorrects) {
  std::mt19937_64 rng(9);
  // Throughput dropping 20 % is worse.
  const auto d = DecideGate({{"throughput", "samples/s", true, Noisy(rng, 8, 1000, 0.01), Noisy(rng, 8, 800, 0.01), {}}}, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NEAR(d[0].worse, 1.25, 0.03);
  EXPECT_EQ(d[0].verdict, GateVerdict::kFail);
  // Holm: the larger of two p-values is multiplied by 1, the smaller by 2 (then made monotone).
  const auto two = DecideGate({{"a", "ms", false, Noisy(rng, 6, 100, 0.05), Noisy(rng, 6, 104, 0.05), {}},
                               {"b", "ms", false, Noisy(rng, 6, 100, 0.05), Noisy(rng, 6, 100, 0.05), {}}},
                              {});
  for (const auto& m : two) EXPECT_GE(m.p_holm, m.p_value);
}

TEST(GateTest, BaselineRoundTripAndClearErrors) {
  Baseline b;
  b.spec = "cnn workers=2";
  b.fingerprint = {{"cpus", "2"}, {"cpu_model", "x"}};
  b.trial_ms = {50, 51, 49, 50.5};
  b.samples_per_s = {640, 630, 650, 645};
  std::ostringstream out;
  WriteBaseline(b, out);
  Baseline back;
  Status st;
  ASSERT_TRUE((st = ParseBaseline(out.str(), "base.json", &back)).ok()) << st.message();
  EXPECT_EQ(back.spec, b.spec);
  EXPECT_EQ(back.trial_ms, b.trial_ms);
  EXPECT_EQ(back.fingerprint.at("cpus"), "2");

  EXPECT_FALSE((st = ParseBaseline("{not json", "base.json", &back)).ok());
  EXPECT_NE(st.message().find("base.json: not a trainrx baseline"), std::string::npos) << st.message();
  EXPECT_FALSE((st = ParseBaseline(R"({"schema":"trainrx.baseline/2","spec":"cnn","trial_ms":[1,2,3,4]})",
                                   "b.json", &back)).ok());
  EXPECT_NE(st.message().find("newer"), std::string::npos) << st.message();
  back = {};
  EXPECT_FALSE((st = ParseBaseline(R"({"schema":"trainrx.baseline/1","spec":"cnn","trial_ms":[1,2,"x",4]})",
                                   "b.json", &back)).ok());
  EXPECT_NE(st.message().find("\"trial_ms\"[2]"), std::string::npos) << st.message();
  back = {};
  EXPECT_FALSE((st = ParseBaseline(R"({"schema":"trainrx.baseline/1","spec":"cnn","trial_ms":[1,2]})",
                                   "b.json", &back)).ok());
  EXPECT_NE(st.message().find("at least 4"), std::string::npos) << st.message();
}

// A baseline's -o that cannot be a file says which part is wrong: a file where a folder should be
// (at any depth), a folder given as the file.
TEST(GateTest, ABaselinePathThroughAFileOrOntoAFolderIsRefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("trainrx-gate-path-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "notes.txt").string();
  std::ofstream(file) << "x";
  Status st = PrepareBaselineFile(file + "/b.json");
  EXPECT_EQ(st.message(), file + "/b.json: " + file + " is a file, not a folder");
  st = PrepareBaselineFile(file + "/deeper/b.json");
  EXPECT_EQ(st.message(), file + "/deeper/b.json: " + file + " is a file, not a folder");
  st = PrepareBaselineFile(dir.string());
  EXPECT_NE(st.message().find("is a folder; give a file name"), std::string::npos) << st.message();
  // A new folder on the way is made; the file itself is not left behind.
  EXPECT_TRUE(PrepareBaselineFile((dir / "new" / "b.json").string()).ok());
  EXPECT_TRUE(fs::is_directory(dir / "new"));
  EXPECT_FALSE(fs::exists(dir / "new" / "b.json"));
  fs::remove_all(dir);
}

// Simulated study of the decision rule on a shared CI runner: per-trial times drift slowly (the
// machine warms, other jobs come and go) and a noisy neighbour slows some trials by 30 %.
// Interleaving (ABBA) keeps the false-alarm rate at or below nominal; running all of A then all
// of B does not.
TEST(GateTest, SimulatedDriftAndNoisyNeighbourInterleavedVsSequential) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> noise(0, 0.03);
  std::uniform_real_distribution<double> u(0, 1);
  const int studies = 300, n = 8;
  int fa_interleaved = 0, fa_sequential = 0, detected = 0;
  GateRule rule;
  rule.resamples = 300;
  for (int s = 0; s < studies; ++s) {
    rule.seed = static_cast<uint64_t>(s + 1);
    // 2n trial slots in time order; drift of up to +15 % across the run.
    const double drift_total = 0.15 * u(rng);
    auto trial = [&](int slot, double effect) {
      const double drift = 1 + drift_total * slot / (2.0 * n);
      const double neighbour = u(rng) < 0.15 ? 1.3 : 1.0;
      return 100 * effect * drift * neighbour * std::exp(noise(rng));
    };
    const std::string order = stats::PairOrder(n, static_cast<uint64_t>(s) + 7);
    std::vector<double> ia, ib, sa, sb, da, db;
    for (int slot = 0; slot < 2 * n; ++slot) {
      (order[slot] == 'A' ? ia : ib).push_back(trial(slot, 1.0));
      (slot < n ? sa : sb).push_back(trial(slot, 1.0));
      (order[slot] == 'A' ? da : db).push_back(trial(slot, order[slot] == 'A' ? 1.0 : 1.10));
    }
    fa_interleaved += Decide(ia, ib, rule) == GateVerdict::kFail;
    fa_sequential += Decide(sa, sb, rule) == GateVerdict::kFail;
    detected += Decide(da, db, rule) == GateVerdict::kFail;
  }
  std::printf("simulated gate: false alarms interleaved %d/%d = %.3f, sequential %d/%d = %.3f; "
              "10%% regression detected %d/%d\n",
              fa_interleaved, studies, 1.0 * fa_interleaved / studies, fa_sequential, studies,
              1.0 * fa_sequential / studies, detected, studies);
  EXPECT_LE(fa_interleaved, studies * 0.05);
  EXPECT_GT(fa_sequential, fa_interleaved);
  EXPECT_GT(detected, studies / 2);
}

}  // namespace
}  // namespace trainrx::experiments
