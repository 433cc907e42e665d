// trainrx::analyzers mann_whitney — the rank tests, one implementation each: the two-sided
// Mann-Whitney U test (`trainrx diff` judges each row's per-step values with it, diff.cc, and
// experiments::stats — ab, fix, sweep, the gate — forwards to it), and the Mann-Kendall trend test
// (memory.growth: is allocated memory rising step after step). Pure, thread-safe.
#pragma once

#include <vector>

namespace trainrx::analyzers {

// Two-sided p-value of "a and b come from one distribution". Exact (the U distribution counted by
// the recursion c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u)) for m + n <= 30 without ties; else the
// normal approximation with the tie correction and a continuity correction:
//   z = (|U - mn/2| - 1/2) / sqrt(mn/12 * ((N + 1) - sum(t^3 - t) / (N (N - 1)))),  p = erfc(z / sqrt 2).
// 1 when either sample is empty. E.g. {1..5} vs {6..10}: 2/252.
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

// One-sided p-value of "the series rises over its order" (Mann-Kendall): S = the number of pairs
// i < j with x[j] > x[i] minus those with x[j] < x[i]; p = P(S' >= S) for S' of a random order.
// Exact (the distribution of inversions of a random permutation) for n <= 50 without ties; else the
// normal approximation with the tie correction and a continuity correction:
//   var = (n(n-1)(2n+5) - sum t(t-1)(2t+5)) / 18,  z = (S - 1) / sqrt(var),  p = erfc(z / sqrt 2) / 2.
// 1 for fewer than 2 values. E.g. 1, 2, 3, 4, 5: 1/120; five equal values: 1.
double MannKendallP(const std::vector<double>& x);

}  // namespace trainrx::analyzers
