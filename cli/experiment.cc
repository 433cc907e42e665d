// Experiments: trials are separate processes of the workload WITHOUT the probes (`--no-trace`:
// we time the program, not the program under observation), interleaved in randomized order, each
// summarized by its median step time after warm-up (the workload's own step timer, the same
// boundaries as its trainrx::step# ranges). `fix` first runs once under the probes to find what
// to fix.
#include "experiment.h"

#include "runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "exe_dir.h"
#include "knobs.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/stats.h"

namespace trainrx::cli {
namespace fs = std::filesystem;

std::string WorkloadSpec::Label() const {
  std::string s = workload;
  if (!preset.empty()) s += " preset=" + preset;
  for (const auto& set : sets) s += " " + set;
  return s;
}

bool ParseSpec(const std::string& text, WorkloadSpec* spec, std::string* error) {
  std::istringstream in(text);
  std::string tok;
  *spec = {};
  workloads::Config check;
  while (in >> tok) {
    if (spec->workload.empty()) {
      spec->workload = tok;
      continue;
    }
    if (tok.rfind("preset=", 0) == 0) {
      spec->preset = tok.substr(7);
      if (!check.ApplyPreset(spec->preset, error)) return false;
      continue;
    }
    // "slowdown=5%" is resolved against the baseline by the caller; check the rest now.
    if (!(tok.size() > 1 && tok.back() == '%') && !check.Set(tok, error)) return false;
    spec->sets.push_back(tok);
  }
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || spec->workload == w.name;
  if (!known) {
    *error = fmt::format("'{}': unknown workload '{}' (cnn or lm; see `trainrx workloads`)", text, spec->workload);
    return false;
  }
  if (!fs::exists(ExeDir() + "/trainrx-workload")) {
    *error = "trainrx-workload not found: this trainrx was built without LibTorch";
    return false;
  }
  return true;
}

int RunFix(const WorkloadSpec& spec, const ExperimentOptions& o) {
  if (o.trials < 4) return Fail("--trials must be at least 4 (with 3 per side no difference can reach p < 0.05)");
  Runner runner;
  analyzers::Report analysis;
  double seconds = 0;
  std::string error;
  std::cerr << fmt::format("trainrx: analyzing {} ...\n", spec.Label());
  if (!runner.Analyze(spec, &analysis, &seconds, &error)) return Fail(error);

  workloads::Config base;
  if (!spec.preset.empty()) base.ApplyPreset(spec.preset, &error);
  for (const auto& s : spec.sets) base.Set(s, &error);

  reports::FixReport report;
  report.workload = spec.workload;
  report.baseline_label = spec.Label();
  // Which knob fixes which finding: the finding's own knob, and the knob table's finding ids.
  std::map<std::string, reports::FixRow> by_knob;
  for (const auto& f : analysis.findings) {
    std::vector<std::string> knobs;
    if (!f.knob.empty()) knobs.push_back(KnobName(f.knob));
    for (const auto& k : workloads::Knobs())
      if (f.id == k.finding) knobs.push_back(k.name);
    bool fixable = false;
    for (const auto& name : knobs) {
      const workloads::Knob* k = workloads::FindKnob(name);
      if (!k || base.Get(name) == k->default_value) continue;
      auto& row = by_knob[name];
      row.change = fmt::format("{}={} -> {}", name, base.Get(name), k->default_value);
      if (std::find(row.findings.begin(), row.findings.end(), f.id) == row.findings.end()) row.findings.push_back(f.id);
      row.estimated_saving_pct = std::max(row.estimated_saving_pct, f.estimated_saving_pct);
      fixable = true;
      break;
    }
    if (!fixable) report.notes.push_back(fmt::format("{}: no knob of this workload is set to its bad value", f.id));
  }
  std::vector<std::pair<reports::FixRow, WorkloadSpec>> plans;
  WorkloadSpec all = spec;
  for (auto& [name, row] : by_knob) {
    WorkloadSpec fixed = spec;
    fixed.sets.push_back(name + "=" + workloads::FindKnob(name)->default_value);
    all.sets.push_back(name + "=" + workloads::FindKnob(name)->default_value);
    row.fixed.label = fixed.Label();
    plans.push_back({row, fixed});
  }
  if (!plans.empty()) {
    reports::FixRow row;
    row.change = "all fixes";
    for (const auto& [r, s] : plans) row.findings.insert(row.findings.end(), r.findings.begin(), r.findings.end());
    row.fixed.label = all.Label();
    plans.push_back({row, all});
  }
  if (plans.empty()) {
    report.notes.push_back("nothing to fix: no finding with a knob away from its default");
  }
  int trials = o.trials;
  const size_t configs = plans.size() + 1;
  if (o.budget_s > 0 && configs * trials * seconds > o.budget_s) {
    trials = std::max(4, static_cast<int>(o.budget_s / (configs * std::max(seconds, 0.1))));
    report.notes.push_back(fmt::format("--budget {:.0f}s: {} trials per configuration instead of {} (one run takes ~{:.1f}s)",
                                       o.budget_s, trials, o.trials, seconds));
  }
  report.trials = trials;
  report.baseline.label = spec.Label();
  // Fixes that only flip knobs the workload can switch between steps (anomaly, item_every_step,
  // zero_grad_none) are measured in-process, paired (as `ab`): more power for small effects.
  // The others run in rounds: each round runs the baseline and every such fix once, in a random
  // order, so the baseline trials are interleaved with every fix's trials.
  std::vector<size_t> process_plans, paired_plans;
  std::vector<std::vector<std::string>> alts(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    (SwitchableDifference(spec, plans[i].second, &alts[i]) && !alts[i].empty() ? paired_plans : process_plans).push_back(i);
  }
  std::mt19937_64 rng(o.seed);
  const size_t round_configs = process_plans.size() + 1;
  Progress progress(static_cast<int>(round_configs + paired_plans.size()) * trials);
  for (int t = 0; t < trials && !process_plans.empty(); ++t) {
    std::vector<size_t> order(round_configs);
    for (size_t i = 0; i < round_configs; ++i) order[i] = i;  // 0 = baseline, i = process_plans[i-1]
    std::shuffle(order.begin(), order.end(), rng);
    std::string round;
    for (size_t i : order) {
      const size_t plan = i == 0 ? 0 : process_plans[i - 1];
      const WorkloadSpec& s = i == 0 ? spec : plans[plan].second;
      reports::Arm& arm = i == 0 ? report.baseline : plans[plan].first.fixed;
      progress.Step(s.Label());
      double ms = 0, sps = 0;
      if (!runner.Trial(s, &ms, &sps, &error)) return Fail(error);
      arm.trial_ms.push_back(ms);
      arm.samples_per_s.push_back(sps);
      round += i == 0 ? "A" : std::to_string(plan + 1);
    }
    report.order += (report.order.empty() ? "" : " ") + round;
  }
  reports::stats::CompareOptions co;
  co.seed = o.seed;
  for (size_t i : paired_plans) {
    auto& row = plans[i].first;
    std::vector<double> base_steps, paired;
    for (int t = 0; t < trials; ++t) {
      progress.Step(row.fixed.label + " (in-process)");
      if (!runner.AltTrial(spec, alts[i], &base_steps, &row.fixed.trial_ms, &paired, &error)) return Fail(error);
    }
    row.cmp = reports::stats::ComparePaired(paired, co);
    row.cmp.median_a = reports::stats::Median(base_steps);
    row.cmp.median_b = reports::stats::Median(row.fixed.trial_ms);
    row.paired = true;
  }
  for (size_t i : process_plans) {
    auto& row = plans[i].first;
    row.cmp = reports::stats::Compare(report.baseline.trial_ms, row.fixed.trial_ms, co);
  }
  for (auto& [row, s] : plans) report.rows.push_back(row);
  if (!Emit(o, [&](std::ostream& out) { reports::WriteFixText(report, out); },
            [&](std::ostream& out) { reports::WriteFixJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

int RunSweep(const WorkloadSpec& base, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  if (grids.empty()) return Fail("sweep needs at least one --grid knob=v1,v2,...");
  if (o.trials < 2) return Fail("--trials must be at least 2 for a sweep");
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  workloads::Config check;
  std::string error;
  for (const auto& g : grids) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos) return Fail(fmt::format("--grid expects knob=v1,v2,..., got '{}'", g));
    std::vector<std::string> values;
    std::stringstream ss(g.substr(eq + 1));
    std::string v;
    while (std::getline(ss, v, ',')) {
      if (!check.Set(g.substr(0, eq) + "=" + v, &error)) return Fail(error);
      values.push_back(v);
    }
    if (values.empty()) return Fail(fmt::format("--grid {}: no values", g));
    axes.push_back({g.substr(0, eq), values});
  }
  reports::SweepReport report;
  report.workload = base.workload;
  report.trials = o.trials;
  for (const auto& a : axes) report.grid_keys.push_back(a.first);
  // Every combination (odometer order).
  std::vector<size_t> idx(axes.size(), 0);
  std::vector<WorkloadSpec> specs;
  while (true) {
    reports::SweepCell cell;
    WorkloadSpec s = base;
    for (size_t i = 0; i < axes.size(); ++i) {
      cell.knobs.push_back({axes[i].first, axes[i].second[idx[i]]});
      s.sets.push_back(axes[i].first + "=" + axes[i].second[idx[i]]);
    }
    cell.arm.label = s.Label();
    report.cells.push_back(cell);
    specs.push_back(s);
    size_t k = axes.size();
    while (k > 0 && ++idx[k - 1] == axes[k - 1].second.size()) idx[--k] = 0;
    if (k == 0) break;
  }
  Runner runner;
  std::mt19937_64 rng(o.seed);
  Progress progress(static_cast<int>(specs.size()) * o.trials);
  for (int t = 0; t < o.trials; ++t) {
    std::vector<size_t> order(specs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      progress.Step(specs[i].Label());
      double ms = 0, sps = 0;
      if (!runner.Trial(specs[i], &ms, &sps, &error)) return Fail(error);
      report.cells[i].arm.trial_ms.push_back(ms);
      report.cells[i].arm.samples_per_s.push_back(sps);
    }
  }
  for (size_t i = 0; i < report.cells.size(); ++i) {
    auto& c = report.cells[i];
    c.median_ms = reports::stats::Median(c.arm.trial_ms);
    c.ci = reports::stats::MedianCi(c.arm.trial_ms, 2000, o.seed);
    c.samples_per_s = reports::stats::Median(c.arm.samples_per_s);
    // Best = highest throughput (equal to the lowest step time when the batch is fixed; a grid
    // over batch sizes needs samples/s).
    if (c.samples_per_s > report.cells[report.best].samples_per_s) report.best = i;
  }
  if (!Emit(o, [&](std::ostream& out) { reports::WriteSweepText(report, out); },
            [&](std::ostream& out) { reports::WriteSweepJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

int RunAb(const std::string& a_text, const std::string& b_text, bool commands, const ExperimentOptions& o) {
  if (o.trials < 4) return Fail("--trials must be at least 4 (with 3 per side no difference can reach p < 0.05)");
  Runner runner;
  reports::AbReport report;
  report.trials = o.trials;
  report.order = reports::stats::PairOrder(o.trials, o.seed);
  std::string error;
  WorkloadSpec a, b;
  if (!commands) {
    if (!ParseSpec(a_text, &a, &error) || !ParseSpec(b_text, &b, &error)) return Fail(error);
    // "slowdown=5%": a share of A's median step, measured by one calibration run of A.
    for (WorkloadSpec* s : {&a, &b}) {
      for (auto& set : s->sets) {
        if (set.empty() || set.back() != '%') continue;
        if (KnobName(set) != "slowdown") return Fail(fmt::format("'{}': only slowdown accepts a percentage", set));
        double ms = 0, sps = 0;
        WorkloadSpec calib = a;
        calib.sets.erase(std::remove_if(calib.sets.begin(), calib.sets.end(), [](const std::string& x) { return !x.empty() && x.back() == '%'; }),
                         calib.sets.end());
        if (!runner.Trial(calib, &ms, &sps, &error)) return Fail(error);
        const double pct = std::strtod(set.substr(set.find('=') + 1).c_str(), nullptr);
        const std::string resolved = fmt::format("slowdown={:.0f}", ms * 1000 * pct / 100);
        report.notes.push_back(fmt::format("{} = {} us ({}% of A's calibration median {:.2f} ms)", set, resolved.substr(9), pct, ms));
        set = resolved;
      }
    }
    report.a.label = a.Label();
    report.b.label = b.Label();
  } else {
    report.a.label = a_text;
    report.b.label = b_text;
  }
  // A and B that differ only in knobs the workload can switch between steps are interleaved step
  // by step inside each process (A B B A ...): that removes the process-to-process variation
  // (+-15 % between runs on these VMs), which no number of separate trials averages away cheaply.
  std::vector<std::string> alt;
  std::vector<double> paired;
  if (!commands && SwitchableDifference(a, b, &alt)) {
    if (!alt.empty()) {
      report.order = fmt::format("in-process: steps A B B A ... in each of {} processes", o.trials);
      report.unit = "ms per step";
      report.notes.push_back("A and B differ only in knobs that switch between steps: compared step by step inside "
                             "each process; each block of four steps (A B B A / B A A B) gives one paired ratio; "
                             "speedup, CI (bootstrap over blocks) and p (Wilcoxon signed-rank) are paired; "
                             "evaluation off");
      Progress progress(o.trials);
      for (int t = 0; t < o.trials; ++t) {
        progress.Step(report.a.label + " / " + report.b.label);
        if (!runner.AltTrial(a, alt, &report.a.trial_ms, &report.b.trial_ms, &paired, &error)) return Fail(error);
      }
    }
  }
  const bool in_process = !report.a.trial_ms.empty();
  Progress progress(in_process ? 0 : 2 * o.trials);
  for (char side : in_process ? std::string() : report.order) {
    reports::Arm& arm = side == 'A' ? report.a : report.b;
    progress.Step(arm.label);
    double value = 0, sps = 0;
    bool ok;
    if (commands) {
      std::string unit;
      ok = runner.Command(side == 'A' ? a_text : b_text, &value, &unit, &error);
      report.unit = unit;
    } else {
      ok = runner.Trial(side == 'A' ? a : b, &value, &sps, &error);
    }
    if (!ok) return Fail(error);
    arm.trial_ms.push_back(value);
    arm.samples_per_s.push_back(sps);
  }
  reports::stats::CompareOptions co;
  co.seed = o.seed;
  if (in_process) {
    report.cmp = reports::stats::ComparePaired(paired, co);
    report.cmp.median_a = reports::stats::Median(report.a.trial_ms);
    report.cmp.median_b = reports::stats::Median(report.b.trial_ms);
  } else {
    report.cmp = reports::stats::Compare(report.a.trial_ms, report.b.trial_ms, co);
  }
  if (!Emit(o, [&](std::ostream& out) { reports::WriteAbText(report, out); },
            [&](std::ostream& out) { reports::WriteAbJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

}  // namespace trainrx::cli
