// trainrx::experiments::stats — the statistics behind `trainrx fix`, `sweep`, `ab` and the CI gate.
// Torch-free, pure, deterministic (every random draw comes from a seed the caller passes).
//
// Unit of observation: one TRIAL (one process run of a configuration) summarized by the median of
// its per-step times after warm-up. Steps inside a trial are correlated (same process, same
// caches), so they are not independent samples; trials are, because A and B trials are
// interleaved in randomized pairs (ABBA/BAAB...) and drift hits both.
//
// Compare(a, b):
//   speedup     = median(a) / median(b): > 1 means B is faster (B takes 1/speedup of A's time)
//   95 % CI     = percentile bootstrap of that ratio, resampling trials of A and of B
//                 independently (2000 resamples)
//   p           = two-sided Mann-Whitney U on the trial medians (exact distribution for
//                 n_a + n_b <= 30, else the normal approximation with tie correction)
//   verdict     = faster / slower when p < alpha AND the CI excludes 1; else "no significant
//                 difference" (an honest, reported outcome)
//   detectable  = the smallest speedup this design could have detected: the ratio at which a
//                 one-sided 2.5 % test has 80 % power given the observed spread of log times,
//                 exp((1.96 + 0.84) * sqrt(s_a^2/n_a + s_b^2/n_b)) (normal approximation on logs)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::experiments::stats {

double Median(std::vector<double> v);
double Mean(const std::vector<double>& v);  // 0 for none

// At least 4 trials per side: with 3, no difference can reach p < 0.05 (exact U distribution).
// An error on --trials saying so.
Status EnoughTrials(int trials);

enum class Verdict { kFaster, kSlower, kNoDifference };
const char* VerdictName(Verdict v);  // "faster", "slower", "no significant difference"

struct Comparison {
  double median_a = 0, median_b = 0;
  double speedup = 1, ci_low = 1, ci_high = 1;
  double p_value = 1;
  double detectable = 1;  // smallest detectable speedup (>= 1)
  Verdict verdict = Verdict::kNoDifference;
  size_t n_a = 0, n_b = 0;
};

struct CompareOptions {
  double alpha = 0.05;
  int resamples = 2000;
  uint64_t seed = 1;
};

Comparison Compare(const std::vector<double>& a, const std::vector<double>& b, const CompareOptions& options = {});

// A figure that can be zero or negative (memory growth per step, bytes): the difference of the
// medians, median(b) - median(a), its percentile-bootstrap CI (resampling trials of each side, as
// Compare), and the Mann-Whitney p; significant when p < alpha and the CI excludes 0.
struct Difference {
  double median_a = 0, median_b = 0, diff = 0, ci_low = 0, ci_high = 0;
  double p_value = 1;
  bool significant = false;
  size_t n_a = 0, n_b = 0;
};
Difference CompareDifference(const std::vector<double>& a, const std::vector<double>& b, const CompareOptions& options = {});

// Paired design (in-process A/B): one value per block, d = log(mean B / mean A) over the block's
// steps. speedup = exp(-median d) (> 1: B is faster), CI = bootstrap of the median of d, p =
// two-sided Wilcoxon signed-rank (the paired counterpart of Mann-Whitney: exact for n <= 25,
// normal approximation above), detectable = exp((1.96 + 0.84) * sd(d) / sqrt(n)). median_a and
// median_b are left for the caller (raw step times).
Comparison ComparePaired(const std::vector<double>& log_ratios, const CompareOptions& options = {});
double SignedRankP(const std::vector<double>& d);

// Few trials. With 2 or 3 trials a side no rank test can reach p < 0.05 (complete
// separation of 3 and 3 gives p = 0.10), yet a 6x difference between two cells is plain. This
// comparison reads the trials as a two-level sample, steps within trials: Welch's t on the logs of
// the trial medians (Welch-Satterthwaite df), where each side's variance is at least what its own
// steps give the median of that many steps ((pi/2) var(log step) / steps, averaged over its trials),
// so two or three trials that agree by chance never pass as certainty. speedup = exp(mean log a -
// mean log b) (> 1: b is faster, as Compare), CI = exp(d -+ t_{df, 1 - alpha/2} se), p two-sided.
// Assumes process-to-process noise is log-normal; the A/A rate under it is printed by
// bench/experiments_aa_bench (a bootstrap of 3 trials, the other candidate, is not at its level).
// `a_steps` / `b_steps` may be empty (runs without steps: no floor) or hold one list per trial.
// No spread at all (identical trials, no steps) decides nothing.
Comparison CompareFewTrials(const std::vector<double>& a, const std::vector<std::vector<double>>& a_steps,
                            const std::vector<double>& b, const std::vector<std::vector<double>>& b_steps,
                            const CompareOptions& options = {});

// Student's t distribution: P(T <= t) for `df` > 0 degrees of freedom (not necessarily whole), and
// its quantile. Written here (the regularized incomplete beta by its continued fraction, about 40
// lines) rather than taken from Boost.Math: it would be a new required system package for every
// `pip install` user, for one function; the unit tests hold it to published quantiles.
double StudentTCdf(double t, double df);
double StudentTQuantile(double p, double df);

// Two-sided Mann-Whitney U p-value (analyzers::MannWhitneyP: the one implementation).
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

// 95 % bootstrap percentile interval of one sample's median.
struct Interval {
  double low = 0, high = 0;
};
Interval MedianCi(const std::vector<double>& v, int resamples = 2000, uint64_t seed = 1);

// 95 % Wilson score interval of a proportion k/n (a rate measured by counting: the gate's false
// alarms). Unlike k/n +- 1.96 SE it stays inside [0, 1] and is not empty at k = 0.
Interval WilsonInterval(int k, int n);

// Interleaving: the run order of `trials` A/B pairs, each pair AB or BA at random (seeded), e.g.
// "ABBAABBA...". Never all-A-then-all-B.
std::string PairOrder(int trials, uint64_t seed);

}  // namespace trainrx::experiments::stats
