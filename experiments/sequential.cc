#include "trainrx/experiments/sequential.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainrx::experiments::stats {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
// Beyond |Z| = 12 nothing is left to integrate (P(|Z| > 12) ~ 4e-33): a look with (almost) no
// alpha to spend gets an infinite critical value, and its continuation region is cut at 12.
constexpr double kZCap = 12;
// Simpson grid: spacing at most sqrt(D) / 8 of the narrower kernel (the density's own scale), and
// at most this many intervals (then coarser: 600 intervals over +-12 sd is still sd / 25).
constexpr int kMaxIntervals = 600;

double Phi0(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }

}  // namespace

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / kSqrt2); }

double NormalQuantile(double p) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  // Acklam's rational approximation (relative error < 1.2e-9) ...
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  double x;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= hi) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // ... refined by one Halley step on Phi(x) - p (Phi through erfc): full double precision.
  const double e = 0.5 * std::erfc(-x / kSqrt2) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

double Spending::Spent(double alpha, double t) const {
  t = std::clamp(t, 0.0, 1.0);
  if (t <= 0) return 0;
  if (t >= 1) return alpha;
  switch (kind) {
    case SpendingKind::kOBrienFleming:
      // Each side spends the one-sided function at alpha / 2 (ldbounds', gsDesign's and rpact's
      // convention for symmetric two-sided designs; their published bounds are computed so).
      return 2 * 2 * NormalUpperTail(NormalQuantile(1 - alpha / 4) / std::sqrt(t));
    case SpendingKind::kPocock:
      return alpha * std::log(1 + (std::exp(1.0) - 1) * t);
    case SpendingKind::kHwangShihDeCani:
      if (std::abs(gamma) < 1e-12) return alpha * t;
      return alpha * (1 - std::exp(-gamma * t)) / (1 - std::exp(-gamma));
  }
  return alpha * t;
}

std::string Spending::Name() const {
  switch (kind) {
    case SpendingKind::kOBrienFleming: return "O'Brien-Fleming type (Lan-DeMets)";
    case SpendingKind::kPocock: return "Pocock type (Lan-DeMets)";
    case SpendingKind::kHwangShihDeCani: return fmt::format("Hwang-Shih-DeCani (gamma = {:g})", gamma);
  }
  return "?";
}

SequentialDesign::SequentialDesign(Spending spending, double alpha) : spending_(spending), alpha_(alpha) {}

SequentialDesign::Step SequentialDesign::Compute(double t) const {
  const double t_last = looks_.empty() ? 0.0 : looks_.back().t;
  Step step;
  step.d = t - t_last;
  if (!(step.d > 0)) step.d = 1e-12;  // a caller's error (looks must advance); keep the numbers finite
  const double sd = std::sqrt(step.d);
  // The sub-density of S at the last look on a Simpson grid over its continuation region (-c, c):
  // f(y) = sum_i mass_i phi((y - x_i) / sqrt(d)) / sqrt(d), from the previous grid's masses.
  std::vector<double> y, m;
  if (looks_.empty()) {
    y = x_, m = mass_;  // before the first look: the unit mass at 0
  } else {
    const double h_max = std::min(std::sqrt(d_), sd) / 8;
    int intervals = static_cast<int>(std::ceil(2 * c_ / h_max));
    intervals = std::clamp(intervals + intervals % 2, 2, kMaxIntervals);
    const double h = 2 * c_ / intervals;
    const double kd = std::sqrt(d_), reach = 9 * kd;  // phi(9) ~ 1e-18: farther masses add nothing
    y.resize(static_cast<size_t>(intervals) + 1);
    m.resize(y.size());
    for (size_t j = 0; j < y.size(); ++j) {
      y[j] = -c_ + h * static_cast<double>(j);
      const auto from = std::lower_bound(x_.begin(), x_.end(), y[j] - reach) - x_.begin();
      const auto to = std::upper_bound(x_.begin(), x_.end(), y[j] + reach) - x_.begin();
      double f = 0;
      for (auto i = from; i < to; ++i) f += mass_[static_cast<size_t>(i)] * Phi0((y[j] - x_[static_cast<size_t>(i)]) / kd);
      const double w = (j == 0 || j + 1 == y.size()) ? 1 : (j % 2 ? 4 : 2);
      m[j] = f / kd * w * h / 3;
    }
  }
  // Probability of crossing +-c at this look, for paths still going.
  const auto exit = [&](double c) {
    double p = 0;
    for (size_t j = 0; j < y.size(); ++j) p += m[j] * (NormalUpperTail((c - y[j]) / sd) + NormalUpperTail((c + y[j]) / sd));
    return p;
  };
  const double spent_before = looks_.empty() ? 0.0 : looks_.back().alpha_spent;
  const double target = spending_.Spent(alpha_, t) - spent_before;
  const double root_t = std::sqrt(t);
  double z = kZCap;
  if (target > 0 && exit(kZCap * root_t) < target) {
    double lo = 0, hi = kZCap;  // exit(z sqrt(t)) falls as z grows
    for (int it = 0; it < 200 && hi - lo > 1e-10; ++it) {
      const double mid = 0.5 * (lo + hi);
      (exit(mid * root_t) > target ? lo : hi) = mid;
    }
    z = 0.5 * (lo + hi);
    step.look.z = z;
    step.look.nominal_alpha = 2 * NormalUpperTail(z);
    step.look.alpha_spent = spent_before + exit(z * root_t);
  } else {
    step.look.z = std::numeric_limits<double>::infinity();
    step.look.nominal_alpha = 0;
    step.look.alpha_spent = spent_before;
  }
  step.look.t = t;
  step.x = std::move(y);
  step.mass = std::move(m);
  step.c = z * root_t;
  return step;
}

Look SequentialDesign::Preview(double t) const { return Compute(t).look; }

Look SequentialDesign::Add(double t) {
  Step s = Compute(t);
  looks_.push_back(s.look);
  x_ = std::move(s.x);
  mass_ = std::move(s.mass);
  c_ = s.c;
  d_ = s.d;
  return looks_.back();
}

double ConditionalPower(double z, double t, double z_final) {
  if (t >= 1) return std::abs(z) >= z_final ? 1.0 : 0.0;
  if (t <= 0) return 0;
  const double mean = z * std::sqrt(t) + z / std::sqrt(t) * (1 - t), sd = std::sqrt(1 - t);
  return NormalUpperTail((z_final - mean) / sd) + NormalUpperTail((z_final + mean) / sd);
}

std::vector<Look> Boundaries(const std::vector<double>& t, Spending spending, double alpha) {
  SequentialDesign design(spending, alpha);
  for (double x : t) design.Add(x);
  return design.looks();
}

}  // namespace trainrx::experiments::stats
