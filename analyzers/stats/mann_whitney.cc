#include "trainrx/analyzers/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>

namespace trainrx::analyzers {

namespace {

// Number of arrangements with U statistic == u for sample sizes (m, n): the classic recursion
// c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u). Returned as doubles (counts up to C(30,15) fit).
std::vector<double> UCounts(int m, int n) {
  // table[i][j] = counts for (i, j), as vectors indexed by u (0..i*j).
  std::vector<std::vector<std::vector<double>>> t(m + 1, std::vector<std::vector<double>>(n + 1));
  for (int i = 0; i <= m; ++i) {
    for (int j = 0; j <= n; ++j) {
      auto& c = t[i][j];
      c.assign(static_cast<size_t>(i * j + 1), 0.0);
      if (i == 0 || j == 0) {
        c[0] = 1;
        continue;
      }
      const auto& a = t[i - 1][j];  // the largest value is from sample 1: it beats all j of sample 2
      const auto& b = t[i][j - 1];
      for (size_t u = 0; u < c.size(); ++u) {
        if (u >= static_cast<size_t>(j) && u - j < a.size()) c[u] += a[u - j];
        if (u < b.size()) c[u] += b[u];
      }
    }
  }
  return t[m][n];
}

}  // namespace

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t m = a.size(), n = b.size();
  if (m == 0 || n == 0) return 1.0;
  // Ranks with ties averaged.
  std::vector<std::pair<double, int>> all;
  for (double x : a) all.push_back({x, 0});
  for (double x : b) all.push_back({x, 1});
  std::sort(all.begin(), all.end());
  std::vector<double> rank(all.size());
  double tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double r = 0.5 * static_cast<double>(i + j + 1);  // ranks are 1-based
    for (size_t k = i; k < j; ++k) rank[k] = r;
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    i = j;
  }
  double r1 = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].second == 0) r1 += rank[i];
  const double u1 = r1 - static_cast<double>(m) * (m + 1) / 2.0;
  const double u2 = static_cast<double>(m * n) - u1;
  const double u = std::min(u1, u2);
  if (!ties && m + n <= 30) {
    const auto counts = UCounts(static_cast<int>(m), static_cast<int>(n));
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    double tail = 0;
    for (size_t k = 0; k < counts.size() && static_cast<double>(k) <= u + 1e-9; ++k) tail += counts[k];
    return std::min(1.0, 2.0 * tail / total);
  }
  const double N = static_cast<double>(m + n);
  const double mean = static_cast<double>(m * n) / 2.0;
  const double var = static_cast<double>(m * n) / 12.0 * ((N + 1) - tie_term / (N * (N - 1)));
  if (var <= 0) return 1.0;
  const double z = (std::abs(u - mean) - 0.5) / std::sqrt(var);  // continuity correction
  return std::min(1.0, std::erfc(std::max(0.0, z) / std::sqrt(2.0)));
}

double MannKendallP(const std::vector<double>& x) {
  const size_t n = x.size();
  if (n < 2) return 1.0;
  int64_t s = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) s += (x[j] > x[i]) - (x[j] < x[i]);
  std::vector<double> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  double tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && sorted[j] == sorted[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_term += t * (t - 1) * (2 * t + 5);
    i = j;
  }
  const int64_t pairs = static_cast<int64_t>(n * (n - 1) / 2);
  if (tie_term == 0 && n <= 50) {
    // S = pairs - 2 * inversions. The inversions of a random permutation of n: the distribution of
    // a sum of independent uniforms on 0..k-1, k = 1..n, built one k at a time (normalized, so
    // nothing overflows).
    std::vector<double> dist{1.0};
    for (size_t k = 2; k <= n; ++k) {
      std::vector<double> next(dist.size() + k - 1, 0.0);
      for (size_t v = 0; v < dist.size(); ++v)
        for (size_t add = 0; add < k; ++add) next[v + add] += dist[v] / static_cast<double>(k);
      dist = std::move(next);
    }
    const int64_t inversions = (pairs - s) / 2;  // S' >= S  <=>  inversions' <= inversions
    double p = 0;
    for (int64_t v = 0; v <= inversions && v < static_cast<int64_t>(dist.size()); ++v) p += dist[static_cast<size_t>(v)];
    return std::min(1.0, p);
  }
  const double N = static_cast<double>(n);
  const double var = (N * (N - 1) * (2 * N + 5) - tie_term) / 18.0;
  if (var <= 0) return 1.0;
  const double continuity = s > 0 ? 1.0 : s < 0 ? -1.0 : 0.0;
  const double z = (static_cast<double>(s) - continuity) / std::sqrt(var);
  return std::min(1.0, 0.5 * std::erfc(z / std::sqrt(2.0)));
}

}  // namespace trainrx::analyzers
