// trainrx::analyzers mann_whitney — the two-sided Mann-Whitney U test, the one implementation:
// `trainrx diff` judges each row's per-step values with it (diff.cc), and experiments::stats
// (ab, fix, sweep, the gate) forwards to it. Pure, thread-safe.
#pragma once

#include <vector>

namespace trainrx::analyzers {

// Two-sided p-value of "a and b come from one distribution". Exact (the U distribution counted by
// the recursion c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u)) for m + n <= 30 without ties; else the
// normal approximation with the tie correction and a continuity correction:
//   z = (|U - mn/2| - 1/2) / sqrt(mn/12 * ((N + 1) - sum(t^3 - t) / (N (N - 1)))),  p = erfc(z / sqrt 2).
// 1 when either sample is empty. E.g. {1..5} vs {6..10}: 2/252.
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace trainrx::analyzers
