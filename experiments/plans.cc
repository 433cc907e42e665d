#include "trainrx/experiments/plans.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

#include "trainrx/experiments/stats.h"

namespace trainrx::experiments {

namespace {

bool NeedFourTrials(int trials, std::string* error) {
  if (trials >= 4) return true;
  *error = "--trials must be at least 4 (with 3 per side no difference can reach p < 0.05)";
  return false;
}

}  // namespace

std::vector<FixPlanRow> PlanFixes(const Spec& spec, const analyzers::Report& analysis, std::vector<std::string>* notes) {
  // Which knob fixes which finding: the finding's own knob, else the knob table's finding id.
  std::map<std::string, FixRow> by_knob;
  for (const auto& f : analysis.findings) {
    std::vector<std::string> knobs;
    if (!f.knob.empty()) knobs.push_back(KnobName(f.knob));
    for (const auto& k : workloads::Knobs())
      if (f.id == k.finding) knobs.push_back(k.name);
    bool fixable = false;
    for (const auto& name : knobs) {
      const workloads::Knob* k = workloads::FindKnob(name);
      if (!k || spec.config.Get(name) == k->default_value) continue;
      auto& row = by_knob[name];
      row.change = fmt::format("{}={} -> {}", name, spec.config.Get(name), k->default_value);
      if (std::find(row.findings.begin(), row.findings.end(), f.id) == row.findings.end()) row.findings.push_back(f.id);
      row.estimated_saving_pct = std::max(row.estimated_saving_pct, f.estimated_saving_pct);
      fixable = true;
      break;
    }
    if (!fixable) notes->push_back(fmt::format("{}: no knob of this workload is set to its bad value", f.id));
  }
  std::vector<FixPlanRow> plans;
  Spec all = spec;
  for (auto& [name, row] : by_knob) {
    const std::string fix = name + "=" + workloads::FindKnob(name)->default_value;
    FixPlanRow p{row, spec.With(fix), {}, false};
    all = all.With(fix);
    plans.push_back(std::move(p));
  }
  if (plans.size() > 1) {
    FixPlanRow p;
    p.row.change = "all of the above";
    p.row.all = true;
    for (const auto& q : plans) p.row.findings.insert(p.row.findings.end(), q.row.findings.begin(), q.row.findings.end());
    p.fixed = all;
    plans.push_back(std::move(p));
  }
  if (plans.empty()) notes->push_back("nothing to fix: no finding with a knob away from its default");
  // Fixes that only flip knobs the workload switches between steps are measured in-process,
  // paired (as `ab`): more power for small effects than separate processes.
  for (auto& p : plans) {
    p.row.fixed.label = p.fixed.Label();
    p.paired = SwitchableDifference(spec, p.fixed, &p.alt);
    p.row.paired = p.paired;
  }
  return plans;
}

bool RunFix(const Spec& spec, const PlanOptions& o, Launcher& launcher, Progress& progress, FixReport* report,
            std::string* error) {
  if (!NeedFourTrials(o.trials, error) || !launcher.CanRunWorkloads(error)) return false;
  analyzers::Report analysis;
  double seconds = 0;
  if (!launcher.Analyze(spec, &analysis, &seconds, error)) return false;

  *report = {};
  report->workload = spec.workload;
  report->baseline_label = spec.Label();
  report->baseline.label = spec.Label();
  std::vector<FixPlanRow> plans = PlanFixes(spec, analysis, &report->notes);
  int trials = o.trials;
  const size_t configs = plans.size() + 1;
  if (o.budget_s > 0 && configs * trials * seconds > o.budget_s) {
    trials = std::max(4, static_cast<int>(o.budget_s / (configs * std::max(seconds, 0.1))));
    report->notes.push_back(fmt::format("--budget {:.0f}s: {} trials per configuration instead of {} (one run takes ~{:.1f}s)",
                                        o.budget_s, trials, o.trials, seconds));
  }
  report->trials = trials;
  std::vector<size_t> process_plans, paired_plans;
  for (size_t i = 0; i < plans.size(); ++i) (plans[i].paired ? paired_plans : process_plans).push_back(i);
  // The others run in rounds: each round runs the baseline and every such fix once, in a random
  // order, so the baseline trials are interleaved with every fix's trials.
  std::mt19937_64 rng(o.seed);
  double trial_seconds = 0;  // time spent in trials so far (the budget)
  int process_trials = 0;
  double process_seconds = 0;
  const auto run_round = [&](const std::vector<size_t>& rows) {
    std::vector<size_t> order(rows.size() + 1);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;  // 0 = baseline, i = rows[i-1]
    std::shuffle(order.begin(), order.end(), rng);
    std::string round;
    for (size_t i : order) {
      const size_t plan = i == 0 ? 0 : rows[i - 1];
      const Spec& s = i == 0 ? spec : plans[plan].fixed;
      Arm& arm = i == 0 ? report->baseline : plans[plan].row.fixed;
      progress.Step(s.Label());
      TrialResult r;
      if (!launcher.Trial(s, &r, error)) return false;
      trial_seconds += r.seconds;
      process_seconds += r.seconds;
      ++process_trials;
      arm.trial_ms.push_back(r.median_ms);
      arm.samples_per_s.push_back(r.samples_per_s);
      round += i == 0 ? "A" : std::to_string(plan + 1);
    }
    report->order += (report->order.empty() ? "" : " ") + round;
    return true;
  };
  progress.Start(static_cast<int>((process_plans.empty() ? 0 : process_plans.size() + 1) + paired_plans.size()) * trials);
  for (int t = 0; t < trials && !process_plans.empty(); ++t)
    if (!run_round(process_plans)) return false;
  stats::CompareOptions co;
  co.seed = o.seed;
  for (size_t i : paired_plans) {
    auto& row = plans[i].row;
    AltResult alt;
    for (int t = 0; t < trials; ++t) {
      progress.Step(row.fixed.label + " (in-process)");
      if (!launcher.AltTrial(spec, plans[i].alt, &alt, error)) return false;
    }
    trial_seconds += alt.seconds;
    row.fixed.trial_ms = alt.b_ms;
    row.cmp = stats::ComparePaired(alt.log_ratios, co);
    row.cmp.median_a = stats::Median(alt.a_ms);
    row.cmp.median_b = stats::Median(alt.b_ms);
  }
  // Separate processes vary by +-15 % here: a row that is neither significant nor precise enough
  // to rule out an effect of `min_effect` gets more rounds (with the baseline), while the budget
  // allows (without one: up to as many again as the first rounds).
  const auto compare = [&] {
    std::vector<size_t> open;
    for (size_t i : process_plans) {
      auto& row = plans[i].row;
      row.cmp = stats::Compare(report->baseline.trial_ms, row.fixed.trial_ms, co);
      if (row.cmp.verdict == stats::Verdict::kNoDifference && row.cmp.detectable > 1 + o.min_effect) open.push_back(i);
    }
    return open;
  };
  int extra = 0;
  for (std::vector<size_t> open = compare(); !open.empty(); open = compare()) {
    const double per_trial = process_seconds / std::max(1, process_trials);
    const bool fits = o.budget_s > 0 ? trial_seconds + per_trial * static_cast<double>(open.size() + 1) <= o.budget_s
                                     : extra < trials;
    if (!fits) break;
    progress.Start(static_cast<int>(open.size() + 1));
    if (!run_round(open)) return false;
    ++extra;
  }
  if (extra > 0)
    report->notes.push_back(fmt::format("{} more round{} for the rows that were not yet conclusive (separate processes: "
                                        "until significant, or precise to {:.0f}%, or the budget)",
                                        extra, extra == 1 ? "" : "s", 100 * o.min_effect));
  for (auto& p : plans) report->rows.push_back(std::move(p.row));
  return true;
}

bool RunSweep(const Spec& base, const std::vector<std::string>& grids, const PlanOptions& o, Launcher& launcher,
              Progress& progress, SweepReport* report, std::string* error) {
  if (grids.empty()) {
    *error = "sweep needs at least one --grid knob=v1,v2,...";
    return false;
  }
  if (o.trials < 2) {
    *error = "--trials must be at least 2 for a sweep (4 or more to name a significantly best cell)";
    return false;
  }
  if (!launcher.CanRunWorkloads(error)) return false;
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  for (const auto& g : grids) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos) {
      *error = fmt::format("--grid expects knob=v1,v2,..., got '{}'", g);
      return false;
    }
    std::vector<std::string> values;
    std::stringstream ss(g.substr(eq + 1));
    workloads::Config check;
    for (std::string v; std::getline(ss, v, ',');) {
      if (!check.Set(g.substr(0, eq) + "=" + v, error)) return false;
      values.push_back(v);
    }
    if (values.empty()) {
      *error = fmt::format("--grid {}: no values", g);
      return false;
    }
    axes.push_back({g.substr(0, eq), values});
  }
  *report = {};
  report->workload = base.workload;
  report->trials = o.trials;
  for (const auto& a : axes) report->grid_keys.push_back(a.first);
  // Every combination (odometer order).
  std::vector<size_t> idx(axes.size(), 0);
  std::vector<Spec> specs;
  while (true) {
    SweepCell cell;
    Spec s = base;
    for (size_t i = 0; i < axes.size(); ++i) {
      cell.knobs.push_back({axes[i].first, axes[i].second[idx[i]]});
      s = s.With(axes[i].first + "=" + axes[i].second[idx[i]]);
    }
    cell.arm.label = s.Label();
    report->cells.push_back(cell);
    specs.push_back(s);
    size_t k = axes.size();
    while (k > 0 && ++idx[k - 1] == axes[k - 1].second.size()) idx[--k] = 0;
    if (k == 0) break;
  }
  std::mt19937_64 rng(o.seed);
  progress.Start(static_cast<int>(specs.size()) * o.trials);
  for (int t = 0; t < o.trials; ++t) {
    std::vector<size_t> order(specs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      progress.Step(specs[i].Label());
      TrialResult r;
      if (!launcher.Trial(specs[i], &r, error)) return false;
      report->cells[i].arm.trial_ms.push_back(r.median_ms);
      report->cells[i].arm.samples_per_s.push_back(r.samples_per_s);
    }
  }
  for (size_t i = 0; i < report->cells.size(); ++i) {
    auto& c = report->cells[i];
    c.median_ms = stats::Median(c.arm.trial_ms);
    c.ci = stats::MedianCi(c.arm.trial_ms, 2000, o.seed);
    c.samples_per_s = stats::Median(c.arm.samples_per_s);
    // Best = highest throughput (equal to the lowest step time when the batch is fixed; a grid
    // over batch sizes needs samples/s).
    if (c.samples_per_s > report->cells[report->best].samples_per_s) report->best = i;
  }
  stats::CompareOptions co;
  co.seed = o.seed;
  const auto& best = report->cells[report->best];
  report->best_significant = report->cells.size() > 1;
  for (size_t i = 0; i < report->cells.size(); ++i) {
    if (i == report->best) continue;
    auto& c = report->cells[i];
    // Throughput: Compare(a, b).speedup = median(a) / median(b) > 1 when the best is faster.
    c.vs_best = stats::Compare(best.arm.samples_per_s, c.arm.samples_per_s, co);
    c.tied_with_best = c.vs_best.verdict != stats::Verdict::kFaster;
    report->best_significant = report->best_significant && !c.tied_with_best;
  }
  return true;
}

bool RunAb(const std::string& a_text, const std::string& b_text, bool commands, const PlanOptions& o, Launcher& launcher,
           Progress& progress, AbReport* report, std::string* error) {
  if (!NeedFourTrials(o.trials, error)) return false;
  *report = {};
  report->trials = o.trials;
  report->order = stats::PairOrder(o.trials, o.seed);
  Spec a, b;
  if (!commands) {
    if (!ParseSpec(a_text, &a, error) || !ParseSpec(b_text, &b, error) || !launcher.CanRunWorkloads(error)) return false;
    // "slowdown=5%": a share of A's median step, measured by one calibration run of A.
    if (a.HasPercentages() || b.HasPercentages()) {
      TrialResult calib;
      if (!launcher.Trial(WithoutPercentages(a), &calib, error)) return false;
      ResolvePercentages(&a, calib.median_ms, &report->notes);
      ResolvePercentages(&b, calib.median_ms, &report->notes);
    }
    report->a.label = a.Label();
    report->b.label = b.Label();
  } else {
    report->a.label = a_text;
    report->b.label = b_text;
  }
  stats::CompareOptions co;
  co.seed = o.seed;
  // A and B that differ only in knobs the workload can switch between steps are interleaved step
  // by step inside each process (A B B A ...): that removes the process-to-process variation
  // (+-15 % between runs on these VMs), which no number of separate trials averages away cheaply.
  std::vector<std::string> alt;
  if (!commands && SwitchableDifference(a, b, &alt)) {
    report->order = fmt::format("in-process: steps A B B A ... in each of {} processes", o.trials);
    report->unit = "ms per step";
    report->paired = true;
    report->notes.push_back("A and B differ only in knobs that switch between steps: compared step by step inside "
                            "each process; each block of four steps (A B B A / B A A B) gives one paired ratio; "
                            "speedup, CI (bootstrap over blocks) and p (Wilcoxon signed-rank) are paired; "
                            "evaluation off");
    progress.Start(o.trials);
    AltResult r;
    for (int t = 0; t < o.trials; ++t) {
      progress.Step(report->a.label + " / " + report->b.label);
      if (!launcher.AltTrial(a, alt, &r, error)) return false;
    }
    report->a.trial_ms = r.a_ms;
    report->b.trial_ms = r.b_ms;
    report->cmp = stats::ComparePaired(r.log_ratios, co);
    report->cmp.median_a = stats::Median(r.a_ms);
    report->cmp.median_b = stats::Median(r.b_ms);
    return true;
  }
  progress.Start(2 * o.trials);
  std::string unit;  // commands: how the first trial was timed
  for (char side : report->order) {
    Arm& arm = side == 'A' ? report->a : report->b;
    progress.Step(arm.label);
    double value = 0, sps = 0;
    if (commands) {
      CommandResult r;
      if (!launcher.Command(side == 'A' ? a_text : b_text, &r, error)) return false;
      // Both sides must be timed the same way (steps, or the whole run).
      if (!unit.empty() && unit != r.unit) {
        *error = fmt::format("`{}` was timed in {} but an earlier trial in {}: give both commands steps "
                             "(torch.profiler's ProfilerStep, Optimizer.step, or trainrx step markers) or neither",
                             arm.label, r.unit, unit);
        return false;
      }
      unit = r.unit;
      report->unit = r.unit;
      value = r.value;
    } else {
      TrialResult r;
      if (!launcher.Trial(side == 'A' ? a : b, &r, error)) return false;
      value = r.median_ms;
      sps = r.samples_per_s;
    }
    arm.trial_ms.push_back(value);
    arm.samples_per_s.push_back(sps);
  }
  report->cmp = stats::Compare(report->a.trial_ms, report->b.trial_ms, co);
  return true;
}

}  // namespace trainrx::experiments
