#include "trainrx/experiments/stats.h"

#include "trainrx/analyzers/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace trainrx::experiments::stats {

Status EnoughTrials(int trials) {
  if (trials >= 4) return Status::Ok();
  return Status::Error("--trials: must be at least 4 (with 3 per side no difference can reach p < 0.05)");
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + n / 2));
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kFaster: return "faster";
    case Verdict::kSlower: return "slower";
    case Verdict::kNoDifference: return "no significant difference";
  }
  return "no significant difference";
}

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) { return analyzers::MannWhitneyP(a, b); }

Interval WilsonInterval(int k, int n) {
  if (n <= 0) return {0, 1};
  const double z = 1.959963984540054, z2 = z * z;
  const double p = static_cast<double>(k) / n;
  const double center = (p + z2 / (2.0 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / (1 + z2 / n);
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Interval MedianCi(const std::vector<double>& v, int resamples, uint64_t seed) {
  if (v.empty()) return {};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  std::vector<double> meds(static_cast<size_t>(resamples)), s(v.size());
  for (auto& med : meds) {
    for (auto& x : s) x = v[pick(rng)];
    med = Median(s);
  }
  std::sort(meds.begin(), meds.end());
  return {meds[static_cast<size_t>(0.025 * (resamples - 1))], meds[static_cast<size_t>(0.975 * (resamples - 1))]};
}

namespace {
double LogVar(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += std::log(x);
  mean /= static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (std::log(x) - mean) * (std::log(x) - mean);
  return s / static_cast<double>(v.size() - 1);
}

// Percentile bootstrap of a statistic of the two medians, resampling a and b independently: the
// (alpha/2, 1 - alpha/2) quantiles of `stat(median of a resample, median of b resample)`.
template <typename Stat>
Interval BootstrapTwo(const std::vector<double>& a, const std::vector<double>& b, const CompareOptions& options, Stat stat) {
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pa(0, a.size() - 1), pb(0, b.size() - 1);
  std::vector<double> values(static_cast<size_t>(options.resamples)), sa(a.size()), sb(b.size());
  for (auto& v : values) {
    for (auto& x : sa) x = a[pa(rng)];
    for (auto& x : sb) x = b[pb(rng)];
    v = stat(Median(sa), Median(sb));
  }
  std::sort(values.begin(), values.end());
  const size_t lo = static_cast<size_t>(options.alpha / 2 * (options.resamples - 1));
  const size_t hi = static_cast<size_t>((1 - options.alpha / 2) * (options.resamples - 1));
  return {values[lo], values[hi]};
}
}  // namespace

Comparison Compare(const std::vector<double>& a, const std::vector<double>& b, const CompareOptions& options) {
  Comparison c;
  c.n_a = a.size();
  c.n_b = b.size();
  if (a.empty() || b.empty()) return c;
  c.median_a = Median(a);
  c.median_b = Median(b);
  c.speedup = c.median_b > 0 ? c.median_a / c.median_b : 1;
  const Interval ci = BootstrapTwo(a, b, options, [](double ma, double mb) { return mb > 0 ? ma / mb : 1; });
  c.ci_low = ci.low;
  c.ci_high = ci.high;
  c.p_value = MannWhitneyP(a, b);
  const double se = std::sqrt(LogVar(a) / static_cast<double>(a.size()) + LogVar(b) / static_cast<double>(b.size()));
  c.detectable = std::exp((1.96 + 0.84) * se);
  const bool significant = c.p_value < options.alpha && (c.ci_low > 1 || c.ci_high < 1);
  c.verdict = !significant ? Verdict::kNoDifference : c.speedup > 1 ? Verdict::kFaster : Verdict::kSlower;
  return c;
}

Difference CompareDifference(const std::vector<double>& a, const std::vector<double>& b, const CompareOptions& options) {
  Difference d;
  d.n_a = a.size();
  d.n_b = b.size();
  if (a.empty() || b.empty()) return d;
  d.median_a = Median(a);
  d.median_b = Median(b);
  d.diff = d.median_b - d.median_a;
  const Interval ci = BootstrapTwo(a, b, options, [](double ma, double mb) { return mb - ma; });
  d.ci_low = ci.low;
  d.ci_high = ci.high;
  d.p_value = MannWhitneyP(a, b);
  d.significant = d.p_value < options.alpha && (d.ci_low > 0 || d.ci_high < 0);
  return d;
}

double SignedRankP(const std::vector<double>& d_in) {
  std::vector<double> d;
  for (double x : d_in)
    if (x != 0) d.push_back(x);
  const size_t n = d.size();
  if (n == 0) return 1.0;
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return std::abs(d[a]) < std::abs(d[b]); });
  std::vector<double> rank(n);
  bool ties = false;
  double tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && std::abs(d[idx[j]]) == std::abs(d[idx[i]])) ++j;
    for (size_t k = i; k < j; ++k) rank[idx[k]] = 0.5 * static_cast<double>(i + j + 1);
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    i = j;
  }
  double w_plus = 0;
  for (size_t i = 0; i < n; ++i)
    if (d[i] > 0) w_plus += rank[i];
  const double total = static_cast<double>(n) * (n + 1) / 2;
  const double w = std::min(w_plus, total - w_plus);
  if (!ties && n <= 25) {
    // Exact: number of subsets of {1..n} with rank sum s.
    std::vector<double> count(static_cast<size_t>(total) + 1, 0.0);
    count[0] = 1;
    for (size_t r = 1; r <= n; ++r)
      for (size_t s = count.size() - 1; s >= r; --s) count[s] += count[s - r];
    double tail = 0;
    for (size_t s = 0; s < count.size() && static_cast<double>(s) <= w + 1e-9; ++s) tail += count[s];
    return std::min(1.0, 2.0 * tail / std::pow(2.0, static_cast<double>(n)));
  }
  const double mean = total / 2;
  const double var = static_cast<double>(n) * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0;
  if (var <= 0) return 1.0;
  const double z = (std::abs(w - mean) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(std::max(0.0, z) / std::sqrt(2.0)));
}

Comparison ComparePaired(const std::vector<double>& d, const CompareOptions& options) {
  Comparison c;
  c.n_a = c.n_b = d.size();
  if (d.empty()) return c;
  const double med = Median(d);
  c.speedup = std::exp(-med);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pick(0, d.size() - 1);
  std::vector<double> meds(static_cast<size_t>(options.resamples)), s(d.size());
  for (auto& m : meds) {
    for (auto& x : s) x = d[pick(rng)];
    m = Median(s);
  }
  std::sort(meds.begin(), meds.end());
  const size_t lo = static_cast<size_t>(options.alpha / 2 * (options.resamples - 1));
  const size_t hi = static_cast<size_t>((1 - options.alpha / 2) * (options.resamples - 1));
  c.ci_low = std::exp(-meds[hi]);
  c.ci_high = std::exp(-meds[lo]);
  c.p_value = SignedRankP(d);
  double mean = 0, var = 0;
  for (double x : d) mean += x / static_cast<double>(d.size());
  for (double x : d) var += (x - mean) * (x - mean);
  var = d.size() > 1 ? var / static_cast<double>(d.size() - 1) : 0;
  c.detectable = std::exp((1.96 + 0.84) * std::sqrt(var / static_cast<double>(d.size())));
  const bool significant = c.p_value < options.alpha && (c.ci_low > 1 || c.ci_high < 1);
  c.verdict = !significant ? Verdict::kNoDifference : c.speedup > 1 ? Verdict::kFaster : Verdict::kSlower;
  return c;
}

std::string PairOrder(int trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string order;
  // Counterbalanced blocks of two pairs, ABBA or BAAB at random: inside every block each arm
  // takes the mean position, so a linear drift cancels (per-pair coin flips gave ABABABABAB for
  // seed 1, which a drift biases). An odd last pair is AB or BA at random.
  for (int t = 0; t + 1 < trials; t += 2) order += (rng() >> 63) ? "BAAB" : "ABBA";
  if (trials % 2) order += (rng() >> 63) ? "BA" : "AB";
  return order;
}

}  // namespace trainrx::experiments::stats
