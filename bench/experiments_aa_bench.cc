// The experiments' error rates, simulated through the scripted launcher of the plan tests
// (tests/experiments/fake_launcher.h: a process's own speed, log-normal with sd 5 %, shared by its
// steps, each step 1 % around it), printed side by side:
//   1. A whole `fix` table of six null rows and "all of the above" (issue 51.2): the share of tables
//      with any verdict at all, against the stated family-wise level, beside the same tables with
//      every row tested at 0.05 (what the table did before).
//   2. A sweep of two equal cells at 3 trials a cell (issue 51.1): how often a best is named, by the
//      test the sweep uses (Welch's t on log trial medians, steps as a floor) and by the other
//      candidate the issue named, a hierarchical bootstrap of steps within trials; and how often
//      each finds a 1.25x difference.
// Usage: trainrx_experiments_aa_bench [TABLES] [SWEEPS]   (defaults 200 and 400)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../tests/experiments/fake_launcher.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/stats.h"

namespace ex = trainrx::experiments;
namespace stats = trainrx::experiments::stats;

namespace {

// Hierarchical bootstrap of the ratio of medians: resample trials, then steps within each trial,
// pool, take the median; p = twice the smaller tail of the ratios around 1.
double HierarchicalBootstrapP(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                              uint64_t seed, int resamples = 1000) {
  std::mt19937_64 rng(seed);
  auto pooled_median = [&](const std::vector<std::vector<double>>& trials) {
    std::vector<double> pool;
    std::uniform_int_distribution<size_t> pick_trial(0, trials.size() - 1);
    for (size_t t = 0; t < trials.size(); ++t) {
      const auto& steps = trials[pick_trial(rng)];
      std::uniform_int_distribution<size_t> pick_step(0, steps.size() - 1);
      for (size_t s = 0; s < steps.size(); ++s) pool.push_back(steps[pick_step(rng)]);
    }
    return stats::Median(pool);
  };
  int below = 0, above = 0;
  for (int i = 0; i < resamples; ++i) {
    const double r = pooled_median(a) / pooled_median(b);
    below += r <= 1;
    above += r >= 1;
  }
  return std::min(1.0, 2.0 * std::min(below, above) / resamples);
}

struct SweepRates {
  int welch_best = 0, bootstrap_best = 0;
};

// One 2-cell sweep of 3 trials a cell with the fake launcher's noise; cell "2" takes 10 ms a step,
// cell "0" 10 * ratio. Counts a named best by each test (the sweep's own decision for Welch).
SweepRates OneSweep(uint64_t seed, double ratio) {
  ex::fake::FakeLauncher l;
  l.Reseed(seed * 104729);
  l.step_ms = [ratio](const trainrx::workloads::Config& c) { return c.Int("workers") == 0 ? 10.0 * ratio : 10.0; };
  ex::Progress quiet;
  ex::SweepReport r;
  ex::PlanOptions o;
  o.trials = 3;
  o.seed = seed;
  std::string error;
  if (!ex::RunSweep(ex::fake::MustParse("cnn"), {"workers=0,2"}, o, l, quiet, &r).ToBool(&error)) {
    fmt::print(stderr, "sweep failed: {}\n", error);
    std::exit(1);
  }
  SweepRates out;
  out.welch_best = r.best_significant ? 1 : 0;
  const auto& best = r.cells[r.best];
  const auto& other = r.cells[1 - r.best];
  out.bootstrap_best = HierarchicalBootstrapP(other.arm.trial_steps_ms, best.arm.trial_steps_ms, seed) < 0.05 ? 1 : 0;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int tables = argc > 1 ? std::atoi(argv[1]) : 200;
  const int sweeps = argc > 2 ? std::atoi(argv[2]) : 400;
  if (tables <= 0 || sweeps <= 0) {
    fmt::print(stderr, "usage: {} [TABLES > 0] [SWEEPS > 0]\n", argv[0]);
    return 2;
  }

  // 1. Fix tables of null rows.
  int false_tables = 0, rows = 0;
  for (int t = 1; t <= tables; ++t) {
    ex::fake::FakeLauncher l;
    l.Reseed(static_cast<uint64_t>(t) * 7919);
    l.step_ms = [](const trainrx::workloads::Config&) { return 10.0; };
    l.analysis.findings = {ex::fake::FindingWithKnob("debug.anomaly_detection", "anomaly"),
                           ex::fake::FindingWithKnob("model.bias_before_norm", "bias"),
                           ex::fake::FindingWithKnob("input.workers", "workers"),
                           ex::fake::FindingWithKnob("sync.host_device", "item_every_step"),
                           ex::fake::FindingWithKnob("optim.zero_grad", "zero_grad_none"),
                           ex::fake::FindingWithKnob("cudnn.benchmark_off", "cudnn_benchmark")};
    ex::Progress quiet;
    ex::FixReport r;
    ex::PlanOptions o;
    o.trials = 4;
    o.seed = static_cast<uint64_t>(t);
    std::string error;
    if (!ex::RunFix(ex::fake::MustParse("cnn anomaly=1 bias=1 workers=0 item_every_step=1 zero_grad_none=0 cudnn_benchmark=0"),
                    o, l, quiet, &r)
             .ToBool(&error)) {
      fmt::print(stderr, "fix failed: {}\n", error);
      return 1;
    }
    rows = static_cast<int>(r.rows.size());
    bool any = false;
    for (const auto& row : r.rows) any = any || row.cmp.verdict != stats::Verdict::kNoDifference;
    false_tables += any;
  }
  const auto fw = stats::WilsonInterval(false_tables, tables);
  fmt::print("fix table A/A ({} null rows, 4 trials, sequential rows at {}/rows each):\n", rows, 0.05);
  fmt::print("  tables with a false verdict: {} of {} = {:.3f} [95 % {:.3f}, {:.3f}]  (stated family-wise level 0.05)\n",
             false_tables, tables, static_cast<double>(false_tables) / tables, fw.low, fw.high);
  fmt::print("  every row at 0.05 instead: about 1 - 0.95^{} = {:.3f} of tables\n", rows, 1 - std::pow(0.95, rows));

  // 2. Sweeps of 3 trials a cell.
  SweepRates null_rates, effect_rates;
  for (int s = 1; s <= sweeps; ++s) {
    const SweepRates n = OneSweep(static_cast<uint64_t>(s), 1.0), e = OneSweep(static_cast<uint64_t>(s) + 1000003, 1.25);
    null_rates.welch_best += n.welch_best, null_rates.bootstrap_best += n.bootstrap_best;
    effect_rates.welch_best += e.welch_best, effect_rates.bootstrap_best += e.bootstrap_best;
  }
  auto line = [&](const char* name, int null_k, int effect_k) {
    const auto ci = stats::WilsonInterval(null_k, sweeps);
    fmt::print("  {:<52} A/A {:.3f} [95 % {:.3f}, {:.3f}]   1.25x found {:.3f}\n", name, static_cast<double>(null_k) / sweeps,
               ci.low, ci.high, static_cast<double>(effect_k) / sweeps);
  };
  fmt::print("sweep of 2 cells, 3 trials a cell, 20 steps a trial ({} sweeps each; level 0.05; rank test: never):\n", sweeps);
  line("Welch's t on log trial medians, steps as floor (used)", null_rates.welch_best, effect_rates.welch_best);
  line("hierarchical bootstrap of steps within trials", null_rates.bootstrap_best, effect_rates.bootstrap_best);
  return 0;
}
