// trainrx::experiments::stats sequential — group-sequential boundaries with error spending, for
// experiments that look at their data after every round and stop a row once it is decided
//. Called by fix_plan.cc (MeasureFixes). Torch-free, pure, deterministic; no threads.
//
// Why a design at all: testing after every round at p < 0.05 is wrong. Five looks at the 5 %
// level reject a true null about 14 % of the time (Armitage, McPherson & Rowe 1969); the unit
// test measures it. A group-sequential design tests look k at a stricter nominal level, so that
// the chance of ever rejecting a true null over all looks stays alpha.
//
// Model (Jennison & Turnbull, "Group Sequential Methods", 2000, ch. 3 and 19): at information
// fraction t_k the standardized statistic is Z_k = S_k / sqrt(t_k), where S is a Brownian
// motion in t (independent increments; for two samples of n trials each, t = n / n_max). Look k
// rejects when |Z_k| >= z_k (two-sided, symmetric).
//
// Error spending (Lan & DeMets 1983): a non-decreasing alpha(t), alpha(0) = 0, alpha(1) = alpha;
// look k spends alpha(t_k) - alpha(t_{k-1}):
//   P(|Z_1| < z_1, ..., |Z_{k-1}| < z_{k-1}, |Z_k| >= z_k) = alpha(t_k) - alpha(t_{k-1}) under H0.
// Neither the number of looks nor their times need to be fixed in advance, only that the choice
// does not depend on the data: a look skipped (e.g. because no result could be significant
// there) leaves its alpha to the next one.
//   O'Brien-Fleming type: alpha(t) = 2 (2 - 2 Phi(z_{1-alpha/4} / sqrt(t))), i.e. each side spends
//                         the one-sided function at alpha / 2 (as ldbounds, gsDesign, rpact)
//   Pocock type:          alpha(t) = alpha ln(1 + (e - 1) t)
//   Hwang-Shih-DeCani:    alpha(t) = alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)), gamma != 0;
//                         alpha t for gamma = 0 (gamma = -4 is O'Brien-Fleming-like, 1 Pocock-like)
//
// Computation: the recursive numerical integration of Armitage, McPherson & Rowe (1969), as in
// Jennison & Turnbull ch. 19: the sub-density of S_k on the continuation region (-c_k, c_k),
// c_k = z_k sqrt(t_k), of paths not stopped before, is
//   f_1(s) = phi(s / sqrt(t_1)) / sqrt(t_1)
//   f_k(s) = integral over (-c_{k-1}, c_{k-1}) of f_{k-1}(u) phi((s - u) / sqrt(D)) / sqrt(D) du,
// D = t_k - t_{k-1}, integrated by Simpson's rule on a grid of spacing <= sqrt(D) / 8 (at most 600
// intervals; the boundaries match ldbounds' and rpact's to 1e-4 or better); the
// crossing probability at look k is the same integral against the two normal tails beyond
// +-c_k, and z_k is found by bisection so that it equals the alpha to spend.
//
// No C++ library is a standard for this (the reference implementations are the R packages
// gsDesign, ldbounds and rpact), so this is our own, tested against those packages' published
// values (tests/experiments/sequential_test.cc).
#pragma once

#include <string>
#include <vector>

namespace trainrx::experiments::stats {

// Upper tail of the standard normal, 1 - Phi(z), accurate in the far tail (erfc).
double NormalUpperTail(double z);
// Phi^{-1}(p) for p in (0, 1) (Acklam's rational approximation, one Newton step on erfc: ~1e-15).
double NormalQuantile(double p);

enum class SpendingKind { kOBrienFleming, kPocock, kHwangShihDeCani };

struct Spending {
  SpendingKind kind = SpendingKind::kOBrienFleming;
  double gamma = 0;  // Hwang-Shih-DeCani only
  // Cumulative alpha spent by information fraction t (clamped to [0, 1]); Spent(a, 1) == a.
  double Spent(double alpha, double t) const;
  // "O'Brien-Fleming type (Lan-DeMets)", "Hwang-Shih-DeCani (gamma = -3)", ...
  std::string Name() const;
};

struct Look {
  double t = 0;              // information fraction of this look
  double z = 0;              // critical |Z|: reject when |Z| >= z (infinite: nothing to spend)
  double nominal_alpha = 0;  // the two-sided level of that boundary, 2 (1 - Phi(z))
  double alpha_spent = 0;    // cumulative alpha spent up to and including this look
};

// Boundaries for looks added one at a time, each one's critical value fixed given the ones
// before (so the schedule can change as a run goes, e.g. when a budget's end is re-estimated).
// A look at t >= 1 is the final one: it spends all that is left.
class SequentialDesign {
 public:
  SequentialDesign(Spending spending, double alpha);
  // The look a call of Add(t) would add, without adding it. t must be above the last look's.
  Look Preview(double t) const;
  Look Add(double t);
  const std::vector<Look>& looks() const { return looks_; }
  double alpha() const { return alpha_; }
  const Spending& spending() const { return spending_; }

 private:
  struct Step {
    Look look;
    std::vector<double> x, mass;  // grid on the new look's continuation region, with the masses
    double c = 0, d = 0;          // its half-width (S scale) and the increment D that reached it
  };
  Step Compute(double t) const;

  Spending spending_;
  double alpha_;
  std::vector<Look> looks_;
  // Sub-density of S at the last look, as masses at grid points: mass_i = Simpson weight x f(x_i)
  // (before the first look: one unit mass at 0).
  std::vector<double> x_{0.0}, mass_{1.0};
  double c_ = 0, d_ = 0;  // last look's continuation half-width (S scale) and its increment D
};

// Conditional power (Jennison & Turnbull sec. 10.2, "under the current trend"): the chance that
// the final look (t = 1, critical value z_final) rejects, given Z = z at information fraction t,
// if the effect is what it looks like now (drift z / sqrt(t) per unit of t):
//   S(1) ~ N(z sqrt(t) + (z / sqrt(t)) (1 - t), 1 - t),  CP = P(|S(1)| >= z_final).
// A futility rule that stops when CP is low is non-binding: stopping without rejecting can only
// lower the type I error.
double ConditionalPower(double z, double t, double z_final);

// All looks at the information fractions `t` (increasing), as SequentialDesign::Add in order.
std::vector<Look> Boundaries(const std::vector<double>& t, Spending spending, double alpha);

}  // namespace trainrx::experiments::stats
