#include "trainrx/experiments/stats.h"

#include <gtest/gtest.h>

#include <set>

#include <cmath>
#include <cstdio>
#include <random>

namespace trainrx::experiments::stats {
namespace {

std::vector<double> LogNormal(std::mt19937_64& rng, int n, double median, double sigma) {
  std::lognormal_distribution<double> d(std::log(median), sigma);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(StatsTest, MedianOfOddAndEven) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

TEST(StatsTest, MannWhitneyExactMatchesTheTable) {
  // Complete separation, 5 vs 5: the smallest two-sided p is 2 / C(10,5) = 2/252.
  EXPECT_NEAR(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 2.0 / 252, 1e-12);
  // 3 vs 3 can never reach 0.05: the design needs at least 4 trials per arm.
  EXPECT_NEAR(MannWhitneyP({1, 2, 3}, {4, 5, 6}), 0.1, 1e-12);
  // Interleaved samples: no evidence.
  EXPECT_GT(MannWhitneyP({1, 3, 5, 7}, {2, 4, 6, 8}), 0.5);
  // Ties use the normal approximation and stay in [0, 1].
  const double p = MannWhitneyP({1, 1, 2, 2}, {1, 2, 2, 3});
  EXPECT_GE(p, 0.0);
  EXPECT_LE(p, 1.0);
}

TEST(StatsTest, DetectsAKnownTwentyPercentSpeedup) {
  std::mt19937_64 rng(7);
  const auto a = LogNormal(rng, 8, 100, 0.03), b = LogNormal(rng, 8, 100 / 1.2, 0.03);
  const Comparison c = Compare(a, b);
  EXPECT_EQ(c.verdict, Verdict::kFaster);
  EXPECT_NEAR(c.speedup, 1.2, 0.05);
  EXPECT_LT(c.ci_low, c.speedup);
  EXPECT_GT(c.ci_high, c.speedup);
  EXPECT_GT(c.ci_low, 1.0);
  EXPECT_LT(c.p_value, 0.01);
  EXPECT_LT(c.detectable, 1.2);
}

TEST(StatsTest, SlowerIsSlowerAndNoiseIsNoDifference) {
  std::mt19937_64 rng(11);
  EXPECT_EQ(Compare(LogNormal(rng, 8, 100, 0.02), LogNormal(rng, 8, 110, 0.02)).verdict, Verdict::kSlower);
  const Comparison same = Compare(LogNormal(rng, 6, 100, 0.10), LogNormal(rng, 6, 101, 0.10));
  EXPECT_EQ(same.verdict, Verdict::kNoDifference);
  EXPECT_GT(same.detectable, 1.05);  // with 10 % noise and 6 trials, 1 % is far below what we can see
}

// Differences of figures that can be 0 or negative (memory growth a step): B - A of the medians,
// an interval around it, significant only when it excludes 0; A/A stays at the nominal rate.
TEST(StatsTest, DifferenceOfMediansWithItsIntervalAndAaRate) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 20e3);
  std::vector<double> leak, fixed;
  for (int i = 0; i < 6; ++i) leak.push_back(2.1e6 + noise(rng)), fixed.push_back(noise(rng));
  const Difference d = CompareDifference(leak, fixed);
  EXPECT_NEAR(d.diff, -2.1e6, 0.05e6);
  EXPECT_DOUBLE_EQ(d.diff, d.median_b - d.median_a);
  EXPECT_LE(d.ci_low, d.diff);
  EXPECT_GE(d.ci_high, d.diff);
  EXPECT_LT(d.ci_high, 0);
  EXPECT_TRUE(d.significant);
  EXPECT_LT(d.p_value, 0.01);
  EXPECT_FALSE(CompareDifference({}, fixed).significant);
  int false_positives = 0;
  CompareOptions o;
  o.resamples = 400;
  for (int s = 0; s < 400; ++s) {
    std::vector<double> a, b;
    for (int i = 0; i < 6; ++i) a.push_back(noise(rng)), b.push_back(noise(rng));
    o.seed = static_cast<uint64_t>(s + 1);
    false_positives += CompareDifference(a, b, o).significant;
  }
  EXPECT_LE(false_positives, 28);  // 5 % of 400 plus binomial slack
}

// A/A: both arms from the same distribution. The false-positive rate must be at or below the
// nominal 5 % (the verdict also needs the bootstrap CI to exclude 1, which only makes it stricter).
TEST(StatsTest, AaFalsePositiveRateIsAtMostNominal) {
  std::mt19937_64 rng(2026);
  const int studies = 400;
  int false_positives = 0;
  CompareOptions o;
  o.resamples = 400;
  for (int s = 0; s < studies; ++s) {
    o.seed = static_cast<uint64_t>(s + 1);
    const Comparison c = Compare(LogNormal(rng, 6, 50, 0.08), LogNormal(rng, 6, 50, 0.08), o);
    false_positives += c.verdict != Verdict::kNoDifference;
  }
  const double rate = static_cast<double>(false_positives) / studies;
  std::printf("A/A false-positive rate: %d / %d = %.3f (nominal 0.05)\n", false_positives, studies, rate);
  EXPECT_LE(rate, 0.05 + 0.02);  // binomial slack for 400 studies (sd ~ 0.011)
}

TEST(StatsTest, SignedRankExactAndPairedComparison) {
  // Six positive differences: the exact two-sided p is 2 / 2^6.
  EXPECT_NEAR(SignedRankP({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}), 2.0 / 64, 1e-12);
  EXPECT_GT(SignedRankP({0.1, -0.2, 0.3, -0.4, 0.5, -0.6}), 0.5);
  // Blocks where B takes 5 % longer, 1 % noise: slower, speedup ~ 1/1.05.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(std::log(1.05), 0.01);
  std::vector<double> d(30);
  for (auto& x : d) x = n(rng);
  const Comparison c = ComparePaired(d);
  EXPECT_EQ(c.verdict, Verdict::kSlower);
  EXPECT_NEAR(1 / c.speedup, 1.05, 0.01);
  EXPECT_LT(c.ci_high, 1.0);
}

TEST(StatsTest, PairedAaFalsePositiveRateIsAtMostNominal) {
  std::mt19937_64 rng(77);
  std::normal_distribution<double> n(0, 0.05);
  CompareOptions o;
  o.resamples = 400;
  int fp = 0;
  const int studies = 400;
  for (int s = 0; s < studies; ++s) {
    std::vector<double> d(28);
    for (auto& x : d) x = n(rng);
    o.seed = static_cast<uint64_t>(s + 1);
    fp += ComparePaired(d, o).verdict != Verdict::kNoDifference;
  }
  std::printf("paired A/A false-positive rate: %d / %d = %.3f (nominal 0.05)\n", fp, studies, 1.0 * fp / studies);
  EXPECT_LE(fp, studies * 0.07);
}

// Every block of two pairs is ABBA or BAAB: each arm takes the block's mean position, so a
// linear drift cancels (per-pair coin flips gave ABABABABAB for seed 1, which a drift biases).
TEST(StatsTest, PairOrderIsCounterbalancedForEverySeed) {
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    for (int trials : {4, 5, 6, 10}) {
      const std::string order = PairOrder(trials, seed);
      ASSERT_EQ(order.size(), 2u * static_cast<size_t>(trials));
      for (size_t i = 0; i + 4 <= order.size(); i += 4) {
        const std::string block = order.substr(i, 4);
        EXPECT_TRUE(block == "ABBA" || block == "BAAB") << order << " seed " << seed;
      }
      if (trials % 2) {
        EXPECT_NE(order[order.size() - 2], order.back());
      }
      int a_pos = 0, b_pos = 0;  // whole even-length orders: equal position sums
      for (size_t i = 0; i < order.size(); ++i) (order[i] == 'A' ? a_pos : b_pos) += static_cast<int>(i);
      if (trials % 2 == 0) {
        EXPECT_EQ(a_pos, b_pos) << order;
      }
      if (trials == 10) seen.insert(order);
    }
  }
  EXPECT_GT(seen.size(), 20u);  // the seed matters: 32 orders of 10 pairs exist
  EXPECT_EQ(PairOrder(6, 3), PairOrder(6, 3));
}

}  // namespace
}  // namespace trainrx::experiments::stats

namespace trainrx::experiments::stats {
namespace {

// Reference values computed by hand from the Wilson formula (z = 1.96).
TEST(WilsonIntervalTest, MatchesTheFormulaAndStaysInsideZeroOne) {
  const auto a = WilsonInterval(5, 100);
  EXPECT_NEAR(a.low, 0.02154, 1e-4);
  EXPECT_NEAR(a.high, 0.11175, 1e-4);
  const auto none = WilsonInterval(0, 300);  // no false alarm in 300: the rate is still not 0
  EXPECT_NEAR(none.low, 0.0, 1e-12);
  EXPECT_NEAR(none.high, 0.01264, 1e-4);
  const auto all = WilsonInterval(20, 20);
  EXPECT_NEAR(all.high, 1.0, 1e-12);
  EXPECT_NEAR(all.low, 0.8389, 1e-3);
  const auto empty = WilsonInterval(0, 0);
  EXPECT_EQ(empty.low, 0.0);
  EXPECT_EQ(empty.high, 1.0);
}

}  // namespace
}  // namespace trainrx::experiments::stats

namespace trainrx::experiments {
namespace {

// Student's t against published quantiles (two-sided 95 % and 99 %, whole and fractional df).
TEST(StudentTTest, MatchesPublishedQuantiles) {
  const struct { double df, q975, q995; } kTable[] = {
      {1, 12.7062047, 63.6567412}, {2, 4.30265273, 9.92484320}, {4, 2.77644511, 4.60409487},
      {10, 2.22813885, 3.16927267}, {30, 2.04227246, 2.75000000}, {1000, 1.96233908, 2.58075835}};
  for (const auto& row : kTable) {
    EXPECT_NEAR(stats::StudentTQuantile(0.975, row.df), row.q975, 1e-5 * row.q975) << row.df;
    EXPECT_NEAR(stats::StudentTQuantile(0.995, row.df), row.q995, 2e-4 * row.q995) << row.df;
    EXPECT_NEAR(stats::StudentTCdf(row.q975, row.df), 0.975, 1e-9) << row.df;
    EXPECT_NEAR(stats::StudentTCdf(-row.q975, row.df), 0.025, 1e-9) << row.df;
  }
  EXPECT_DOUBLE_EQ(stats::StudentTCdf(0, 3.5), 0.5);
  // df = 1 is the Cauchy distribution: P(T <= 1) = 3/4.
  EXPECT_NEAR(stats::StudentTCdf(1, 1), 0.75, 1e-12);
}

// Issue 51.1: two or three trials a side. A 6x difference is decided; equal sides are not; the
// steps' spread is a floor under trials that agree by chance; no spread at all decides nothing.
TEST(StatsTest, FewTrialsComparison) {
  const std::vector<double> slow = {60.1, 59.2, 61.0}, fast = {10.2, 9.9, 10.05};
  const stats::Comparison c = stats::CompareFewTrials(slow, {}, fast, {});
  EXPECT_EQ(c.verdict, stats::Verdict::kFaster);
  EXPECT_NEAR(c.speedup, 6.0, 0.1);
  EXPECT_LT(c.p_value, 1e-4);
  EXPECT_LT(c.ci_low, c.speedup);
  EXPECT_GT(c.ci_high, c.speedup);
  // Welch by hand: logs' means and variances, Welch-Satterthwaite df.
  auto mv = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += std::log(x) / v.size();
    for (double x : v) s += (std::log(x) - m) * (std::log(x) - m) / (v.size() - 1);
    return std::pair<double, double>{m, s};
  };
  const auto [ma, va] = mv(slow);
  const auto [mb, vb] = mv(fast);
  const double se = std::sqrt(va / 3 + vb / 3), df = (va / 3 + vb / 3) * (va / 3 + vb / 3) / ((va / 3) * (va / 3) / 2 + (vb / 3) * (vb / 3) / 2);
  EXPECT_NEAR(c.p_value, 2 * stats::StudentTCdf(-(ma - mb) / se, df), 1e-15);
  EXPECT_NEAR(c.ci_low, std::exp(ma - mb - stats::StudentTQuantile(0.975, df) * se), 1e-9);

  const stats::Comparison same = stats::CompareFewTrials({10.0, 10.4, 9.8}, {}, {10.1, 9.7, 10.3}, {});
  EXPECT_EQ(same.verdict, stats::Verdict::kNoDifference);
  // Three trials that agree to 0.1 % on each side, 3 % apart: decided from the trials alone, not
  // when their steps show a 10 % spread (a median of 20 such steps varies by about 2.8 %).
  const std::vector<double> a = {10.30, 10.31, 10.30}, b = {10.0, 10.01, 10.0};
  EXPECT_EQ(stats::CompareFewTrials(a, {}, b, {}).verdict, stats::Verdict::kFaster);
  std::vector<std::vector<double>> noisy_a, noisy_b;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(0, 0.10);
  for (int t = 0; t < 3; ++t) {
    noisy_a.emplace_back(), noisy_b.emplace_back();
    for (int s = 0; s < 20; ++s) noisy_a.back().push_back(10.3 * std::exp(n(rng))), noisy_b.back().push_back(10.0 * std::exp(n(rng)));
  }
  EXPECT_EQ(stats::CompareFewTrials(a, noisy_a, b, noisy_b).verdict, stats::Verdict::kNoDifference);
  // Identical trials and no steps: nothing to weigh the difference against.
  const stats::Comparison flat = stats::CompareFewTrials({10, 10}, {}, {20, 20}, {});
  EXPECT_EQ(flat.verdict, stats::Verdict::kNoDifference);
  EXPECT_EQ(flat.p_value, 1);
  // Fewer than 2 trials a side, or a value that is not positive: no comparison.
  EXPECT_EQ(stats::CompareFewTrials({10}, {}, {20, 21}, {}).verdict, stats::Verdict::kNoDifference);
  EXPECT_EQ(stats::CompareFewTrials({10, 0}, {}, {20, 21}, {}).verdict, stats::Verdict::kNoDifference);
}

}  // namespace
}  // namespace trainrx::experiments
