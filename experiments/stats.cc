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

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
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
// Mean and sample variance (n - 1; 0 below 2 values) of the logs.
std::pair<double, double> LogMeanVar(const std::vector<double>& v) {
  if (v.empty()) return {0, 0};
  double mean = 0;
  for (double x : v) mean += std::log(x);
  mean /= static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (std::log(x) - mean) * (std::log(x) - mean);
  return {mean, v.size() > 1 ? s / static_cast<double>(v.size() - 1) : 0};
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
  const double se = std::sqrt(LogMeanVar(a).second / static_cast<double>(a.size()) + LogMeanVar(b).second / static_cast<double>(b.size()));
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

namespace {
// Regularized incomplete beta I_x(a, b) by the continued fraction (modified Lentz), using the
// symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly.
double IncompleteBetaFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = std::abs(d) < kTiny ? kTiny : d;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    for (int half = 0; half < 2; ++half) {
      d = 1 + num * d;
      d = std::abs(d) < kTiny ? kTiny : d;
      c = 1 + num / c;
      c = std::abs(c) < kTiny ? kTiny : c;
      d = 1 / d;
      const double del = d * c;
      h *= del;
      if (half == 1 && std::abs(del - 1) < kEps) return h;
      num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    }
  }
  return h;
}
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * IncompleteBetaFraction(a, b, x) / a;
  return 1 - front * IncompleteBetaFraction(b, a, 1 - x) / b;
}

// The least variance of one trial's median that its steps show: (pi/2) var(log step) / steps,
// averaged over the trials that have 2 steps or more (0 when none has).
double StepFloor(const std::vector<std::vector<double>>& steps) {
  double sum = 0;
  int n = 0;
  for (const auto& s : steps) {
    std::vector<double> positive;
    for (double x : s)
      if (x > 0) positive.push_back(x);
    if (positive.size() < 2) continue;
    sum += 1.5707963267948966 * LogMeanVar(positive).second / static_cast<double>(positive.size());
    ++n;
  }
  return n > 0 ? sum / n : 0;
}
}  // namespace

double StudentTCdf(double t, double df) {
  if (!(df > 0) || std::isnan(t)) return 0.5;
  const double tail = 0.5 * RegularizedIncompleteBeta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  double lo = -1, hi = 1;
  while (StudentTCdf(lo, df) > p) lo *= 2;
  while (StudentTCdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, std::abs(lo)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (StudentTCdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Comparison CompareFewTrials(const std::vector<double>& a, const std::vector<std::vector<double>>& a_steps,
                            const std::vector<double>& b, const std::vector<std::vector<double>>& b_steps,
                            const CompareOptions& options) {
  Comparison c;
  c.n_a = a.size();
  c.n_b = b.size();
  if (a.size() < 2 || b.size() < 2) return c;
  for (double x : a)
    if (!(x > 0)) return c;
  for (double x : b)
    if (!(x > 0)) return c;
  c.median_a = Median(a);
  c.median_b = Median(b);
  const auto [mean_a, var_a] = LogMeanVar(a);
  const auto [mean_b, var_b] = LogMeanVar(b);
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double va = std::max(var_a, StepFloor(a_steps)) / na, vb = std::max(var_b, StepFloor(b_steps)) / nb;
  const double d = mean_a - mean_b;
  c.speedup = std::exp(d);
  const double se = std::sqrt(va + vb);
  if (!(se > 0)) {  // no spread measured: nothing to weigh the difference against
    c.ci_low = c.ci_high = c.speedup;
    return c;
  }
  const double df = (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
  const double t = d / se;
  c.p_value = std::min(1.0, 2 * StudentTCdf(-std::abs(t), df));
  const double q = StudentTQuantile(1 - options.alpha / 2, df);
  c.ci_low = std::exp(d - q * se);
  c.ci_high = std::exp(d + q * se);
  c.detectable = std::exp((StudentTQuantile(0.975, df) + 0.84) * se);
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
