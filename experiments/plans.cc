#include "trainrx/experiments/plans.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "trainrx/analyzers/catalog.h"
#include "trainrx/experiments/sequential.h"
#include "trainrx/experiments/stats.h"

namespace trainrx::experiments {

namespace {

// While a sweep runs, the launcher reports out-of-memory trials as results (a cell that does not
// fit), not as failures.
class OutOfMemoryIsAResult {
 public:
  explicit OutOfMemoryIsAResult(Launcher& l) : l_(l), before_(l.accepts_out_of_memory()) { l_.AcceptOutOfMemory(true); }
  ~OutOfMemoryIsAResult() { l_.AcceptOutOfMemory(before_); }

 private:
  Launcher& l_;
  bool before_;
};


// One plan's runs of commands: each one timed by its steps when it writes them (ms per step), else
// as a whole run (s per run); all of them must be timed the same way, or the comparison would mix
// units. `*unit` is set by the first run.
class CommandTrials {
 public:
  CommandTrials(Launcher& launcher, std::string* unit) : launcher_(launcher), unit_(unit) {}
  StatusOr<TrialResult> Run(const std::string& command, const std::vector<std::string>& fixes) {
    StatusOr<CommandResult> run = launcher_.Command(command, fixes);
    if (!run.ok()) return run.status();
    const CommandResult& c = *run;
    TrialResult out;
    if (c.out_of_memory) {  // a result only where the plan accepts it (sweeps)
      out.out_of_memory = true, out.oom_request_bytes = c.oom_request_bytes, out.oom_message = c.oom_message;
      out.seconds = c.seconds;
      return out;
    }
    if (seen_ && c.unit != *unit_)
      return Status::Error(fmt::format("`{}`: timed in {} but an earlier run in {}: every run must write steps "
                                       "(torch.profiler's ProfilerStep, optimizer steps, trainrx step markers) or none",
                                       command, c.unit, *unit_));
    *unit_ = c.unit;
    seen_ = true;
    out.median_ms = c.value, out.seconds = c.seconds;
    out.samples_per_step = c.samples_per_step, out.samples_from = c.samples_from;
    out.compile_s = c.compile_s;
    out.has_memory = c.has_memory, out.memory_growth = c.memory_growth, out.memory_peak = c.memory_peak;
    if (c.unit == "ms per step" && c.samples_per_step > 0 && c.value > 0) out.samples_per_s = c.samples_per_step * 1000 / c.value;
    return out;
  }

 private:
  Launcher& launcher_;
  std::string* unit_;
  bool seen_ = false;
};

}  // namespace

namespace {

// With two or more fixes, one more row applies them all ("all of the above", every row's
// findings); the caller says how it is applied. False with fewer.
bool AppendAllRow(std::vector<FixPlanRow>* plans) {
  if (plans->size() < 2) return false;
  FixPlanRow all;
  all.row.change = "all of the above";
  all.row.all = true;
  for (const auto& p : *plans) all.row.findings.insert(all.row.findings.end(), p.row.findings.begin(), p.row.findings.end());
  plans->push_back(std::move(all));
  return true;
}

}  // namespace

const char* StopName(FixRow::Stop s) {
  switch (s) {
    case FixRow::Stop::kNotSequential: return "";
    case FixRow::Stop::kDecided: return "decided";
    case FixRow::Stop::kPrecise: return "precise";
    case FixRow::Stop::kFutile: return "futile";
    case FixRow::Stop::kMaxRounds: return "max rounds";
    case FixRow::Stop::kBudget: return "budget";
  }
  return "";
}

std::vector<FixPlanRow> PlanFixes(const Spec& spec, const analyzers::Report& analysis, std::vector<std::string>* notes) {
  // Which knob fixes which finding: the finding's own knob, else the knob whose bad value plants it
  // (the finding catalog).
  std::map<std::string, FixRow> by_knob;
  std::map<std::string, std::string> targets;  // knob -> the value its row sets
  for (const auto& f : analysis.findings) {
    std::vector<std::string> knobs;
    if (!f.knob.empty()) knobs.push_back(KnobName(f.knob));
    const analyzers::CatalogEntry* entry = analyzers::FindCatalogEntry(f.id);
    if (entry && *entry->planted_by) knobs.push_back(entry->planted_by);
    bool fixable = false;
    for (const auto& name : knobs) {
      const workloads::Knob* k = workloads::FindKnob(name);
      if (!k) continue;
      // The finding's own value where it names one ("batch=256": the batch it estimates fits),
      // else the knob's default (the recommended setting).
      const size_t eq = f.knob.find('=');
      const std::string target = KnobName(f.knob) == name && eq != std::string::npos ? f.knob.substr(eq + 1) : k->default_value;
      if (spec.config.Get(name) == target) continue;
      targets[name] = target;
      auto& row = by_knob[name];
      row.change = fmt::format("{}={} -> {}", name, spec.config.Get(name), target);
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
    const std::string fix = name + "=" + targets[name];
    FixPlanRow p{row, spec.With(fix), {}, false, {}, {}};
    all = all.With(fix);
    plans.push_back(std::move(p));
  }
  if (AppendAllRow(&plans)) plans.back().fixed = all;
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

namespace {

// One trial of the baseline (plan -1) or of a fix.
using FixTrial = std::function<StatusOr<TrialResult>(int plan)>;

// The budget scales the trials down (never below 4) when the plan would not fit, estimated from
// the analysis run's time.
int BudgetedTrials(const PlanOptions& o, size_t configs, double seconds, std::vector<std::string>* notes) {
  int trials = o.trials;
  if (o.budget_s > 0 && static_cast<double>(configs) * trials * seconds > o.budget_s) {
    trials = std::min(o.trials, std::max(4, static_cast<int>(o.budget_s / (static_cast<double>(configs) * std::max(seconds, 0.1)))));
    // Issue 34: "4 trials per configuration instead of 4" when the budget changed nothing.
    if (trials < o.trials)
      notes->push_back(fmt::format("--budget {:.0f}s: {} trials per configuration instead of {} (one run takes ~{:.1f}s)",
                                 o.budget_s, trials, o.trials, seconds));
  }
  return trials;
}

// The sequential design of the rows measured across processes (issue 40).
//
// Spending function: Hwang-Shih-DeCani with gamma = -3. Why: the looks are Mann-Whitney tests on
// a few trials per side, whose smallest p is discrete (4 per side: 0.029, 5: 0.0079, 6: 0.0022),
// so a look can only decide a clear effect when its nominal level is above that. With today's
// default maximum (5 trials, then as many again: 10 rounds), gamma = -3 makes the first look that
// can decide anything round 5 (nominal 0.0091 >= 0.0079): a clear effect is decided after 5
// rounds, as the fixed design did, and the last look's nominal level is 0.036, close to the fixed
// design's 0.05 (so a row that needs all 10 rounds loses little power). O'Brien-Fleming type
// spending keeps 0.0375 at the end but cannot decide before round 6 (nominal 0.0076 at 6), and
// far later with a budget's larger maximum (round 15 of 100, where gamma = -3 decides at round 7
// and ends at 0.028): it spends almost nothing early. Pocock type decides at round 5 too but
// ends at 0.015. gamma = -4 ends at 0.040 but needs round 6. (Computed with
// stats::SequentialDesign and this file's rule for skipping looks; the 10-round design is checked
// in tests/experiments/sequential_test.cc.)
constexpr double kSpendingGamma = -3;
constexpr double kAlpha = 0.05;
// Looks start at round 4: with 3 trials per side no Mann-Whitney p is below 0.05.
constexpr int kFirstLook = 4;
// Upper bound on the planned rounds with a large budget (keeps the boundaries' work small; a
// row still open after 100 rounds is precise to ~1 % on these machines).
constexpr int kMaxRoundsCap = 100;

// The smallest two-sided Mann-Whitney p that n trials per side can give (complete separation).
// A look whose nominal level is below it cannot decide anything: it is not made, and its alpha
// stays for the later looks (a choice that depends on n only, never on the data).
double SmallestP(int n) {
  std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) a[static_cast<size_t>(i)] = i + 1, b[static_cast<size_t>(i)] = n + i + 1;
  return stats::MannWhitneyP(a, b);
}

// Mean and variance of the logs of the trials.
void LogMoments(const std::vector<double>& v, double* mean, double* var) {
  *mean = 0, *var = 0;
  if (v.empty()) return;
  for (double x : v) *mean += std::log(x) / static_cast<double>(v.size());
  if (v.size() < 2) return;
  for (double x : v) *var += (std::log(x) - *mean) * (std::log(x) - *mean);
  *var /= static_cast<double>(v.size() - 1);
}

// One fix plan's measurement: what its trials have cost so far and the progress line's count.
struct Measuring {
  const PlanOptions& o;
  Progress& progress;
  int done = 0;              // trials run
  double trial_seconds = 0;  // seconds spent in trials (the budget)
};

using AltTrialFn = std::function<Status(size_t plan, AltResult*)>;

// A row that is not significant stops as *precise* when it could have detected an effect of
// min_effect and the effect it measured is smaller than that. The second half matters where a look
// was not made (a round whose nominal level no result can reach): with little noise a 1.67x row was
// "precise" at round 4 (detectable 1.03x) and reported as "no significant difference".
bool Precise(const stats::Comparison& c, double min_effect) {
  return c.detectable <= 1 + min_effect && c.speedup > 0 && std::abs(std::log(c.speedup)) < std::log(1 + min_effect);
}

// The smallest two-sided signed-rank p that n paired blocks can give (every block on one side):
// as SmallestP, a look whose nominal level is below it is not made.
double SmallestSignedRankP(size_t n) {
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<double>(i + 1);
  return stats::SignedRankP(d);
}

// A row measured in-process (issue 40: these took ~12 of the 15 minutes of `fix cnn --preset
// seeds` at a fixed `trials` processes each). Each process alternates the baseline and the fix in
// paired blocks of steps (>= 16 blocks: the launcher runs >= 64 timed steps); after every process
// there is a look at the nominal level of the same error-spending boundary as the rows across
// processes (information fraction = processes / max_processes; the paired test pools the blocks
// of every process so far, as the fixed design did), and the row stops when decided, precise,
// futile or at `max_processes`. Every look can be made from the first process on: 16 blocks give a
// smallest p of 3e-5, below the first look's nominal level (0.0021 of 5 processes).
Status MeasurePairedRow(FixPlanRow& plan, size_t index, int max_processes, const AltTrialFn& alt_trial, Measuring& m) {
  auto& row = plan.row;
  const FixRow planned = row;
  stats::SequentialDesign design({stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}, kAlpha);
  stats::CompareOptions co;
  co.seed = m.o.seed;
  AltResult alt;
  for (int k = 1; k <= max_processes; ++k) {
    m.progress.Step(row.fixed.label + " (in-process)");
    ++m.done;
    const double before = alt.seconds;
    if (Status st = alt_trial(index, &alt); !st.ok()) return st;
    m.trial_seconds += alt.seconds - before;
    if (!alt.unpaired.empty()) {  // a --cmd script that cannot switch this fix: across processes instead
      row = planned;
      row.paired = plan.paired = false;
      plan.unpaired = alt.unpaired;
      return Status::Ok();
    }
    const bool final_look = k == max_processes;
    const double t = final_look ? 1.0 : static_cast<double>(k) / max_processes;
    stats::Look look = design.Preview(t);
    const bool made = final_look || look.nominal_alpha >= SmallestSignedRankP(alt.log_ratios.size());
    if (made) look = design.Add(t);
    co.alpha = look.nominal_alpha;
    row.fixed.trial_ms = alt.b_ms;
    row.cmp = stats::ComparePaired(alt.log_ratios, co);
    row.cmp.median_a = stats::Median(alt.a_ms);
    row.cmp.median_b = stats::Median(alt.b_ms);
    row.level = 1 - look.nominal_alpha;
    row.stop_round = k;
    if (made && row.cmp.verdict != stats::Verdict::kNoDifference) {
      row.stop = FixRow::Stop::kDecided;
    } else if (final_look) {
      row.stop = FixRow::Stop::kMaxRounds;
    } else if (Precise(row.cmp, m.o.min_effect)) {
      row.stop = FixRow::Stop::kPrecise;
    } else {
      double mean = 0, var = 0;
      for (double d : alt.log_ratios) mean += d / static_cast<double>(alt.log_ratios.size());
      for (double d : alt.log_ratios) var += (d - mean) * (d - mean);
      const double n = static_cast<double>(alt.log_ratios.size());
      const double se = n > 1 ? std::sqrt(var / (n - 1) / n) : 0;
      const stats::Look last = design.Preview(1.0);
      const double z_final = std::isfinite(last.z) ? last.z : stats::NormalQuantile(1 - kAlpha / 2);
      row.conditional_power = se > 0 ? stats::ConditionalPower(mean / se, t, z_final) : 1;
      if (row.conditional_power >= m.o.futility_power) continue;
      row.stop = FixRow::Stop::kFutile;
      row.detectable_at_max = std::exp((z_final + 0.8416) * se * std::sqrt(t));
    }
    return Status::Ok();
  }
  return Status::Ok();
}

// Rows planned in-process that the command could not switch (MeasurePairedRow left them unpaired)
// join the rows across processes, in plan order, each with a note that says why. True when any did.
bool FallBackToProcesses(const std::vector<FixPlanRow>& plans, std::vector<size_t>* paired, std::vector<size_t>* processes,
                         std::vector<std::string>* notes) {
  std::vector<size_t> still;
  for (size_t i : *paired) {
    if (plans[i].paired) {
      still.push_back(i);
      continue;
    }
    processes->push_back(i);
    notes->push_back(fmt::format("{}: measured across processes, not in-process: {}", plans[i].row.change, plans[i].unpaired));
  }
  if (still.size() == paired->size()) return false;
  *paired = std::move(still);
  std::sort(processes->begin(), processes->end());
  return true;
}

// The planned maximum of rounds of the rows across processes: without a budget today's maximum
// (the first `trials` rounds and as many again); with one, what the rest of the budget fits at
// `per_trial` seconds a trial with `open` rows and the baseline (never below 4, the least that can
// decide anything), at most kRoundsPerTrial x `trials`. Why that cap: the looks' nominal levels
// follow the information fraction round / maximum, so a larger maximum delays the first look that
// can decide (gamma = -3: round 5 of 10, 6 of 15, 8 of 37); measured on `fix cnn --preset seeds`,
// the default budget's 37 rounds made clear rows (bias 1.13x, all 7x) run 11 rounds where 15 planned
// decide them at 6 (issue 40: seeds in 5 minutes). A row still open at 15 rounds is reported
// undecided with the smallest effect it could detect; --trials N raises the cap.
constexpr int kRoundsPerTrial = 3;
int PlannedRounds(const PlanOptions& o, int trials, double per_trial, int rounds_done, size_t open, double spent) {
  if (o.budget_s <= 0) return 2 * trials;
  const double per_round = std::max(per_trial, 0.01) * static_cast<double>(open + 1);
  const double fit = std::floor(std::max(0.0, o.budget_s - spent) / per_round);
  const int most = std::clamp(kRoundsPerTrial * trials, kFirstLook, kMaxRoundsCap);
  return std::clamp(rounds_done + static_cast<int>(std::min(fit, 1e6)), kFirstLook, most);
}

// One round across processes: the baseline and every row of `rows` once, in a random order (so
// the baseline's trials interleave with every fix's).
Status RunRound(std::vector<FixPlanRow>& plans, const std::vector<size_t>& rows, const FixTrial& trial, std::mt19937_64& rng,
                Measuring& m, double* process_seconds, int* process_trials, FixReport* report) {
  std::vector<size_t> order(rows.size() + 1);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;  // 0 = baseline, i = rows[i-1]
  std::shuffle(order.begin(), order.end(), rng);
  std::string round;
  for (size_t i : order) {
    const size_t plan = i == 0 ? 0 : rows[i - 1];
    Arm& arm = i == 0 ? report->baseline : plans[plan].row.fixed;
    m.progress.Step(arm.label);
    ++m.done;
    StatusOr<TrialResult> run = trial(i == 0 ? -1 : static_cast<int>(plan));
    if (!run.ok()) return run.status();
    const TrialResult& r = *run;
    m.trial_seconds += r.seconds;
    *process_seconds += r.seconds;
    ++*process_trials;
    arm.trial_ms.push_back(r.median_ms);
    arm.samples_per_s.push_back(r.samples_per_s);
    AddTrialMemory(arm, r);
    round += i == 0 ? "A" : std::to_string(plan + 1);
  }
  report->order += (report->order.empty() ? "" : " ") + round;
  return Status::Ok();
}

// One row across processes at look k (round k): compared with the baseline at the look's nominal
// level. True when it stays open.
struct RoundLook {
  int k = 0, n_max = 0;
  bool made = false, final_look = false, budget_ends = false;
  stats::Look look;
  double z_final = 0;  // the final look's critical value if it came next (futility)
};
bool LookAtProcessRow(FixRow& row, const Arm& baseline, const RoundLook& at, const PlanOptions& o,
                      const stats::CompareOptions& co) {
  row.cmp = stats::Compare(baseline.trial_ms, row.fixed.trial_ms, co);
  row.level = 1 - at.look.nominal_alpha;
  row.stop_round = at.k;
  if (at.made && row.cmp.verdict != stats::Verdict::kNoDifference) {
    row.stop = FixRow::Stop::kDecided;
  } else if (at.final_look) {
    row.stop = at.budget_ends && at.k < at.n_max ? FixRow::Stop::kBudget : FixRow::Stop::kMaxRounds;
  } else if (Precise(row.cmp, o.min_effect)) {
    row.stop = FixRow::Stop::kPrecise;
  } else {
    double ma = 0, va = 0, mb = 0, vb = 0;
    LogMoments(baseline.trial_ms, &ma, &va);
    LogMoments(row.fixed.trial_ms, &mb, &vb);
    const double se = std::sqrt(va / static_cast<double>(baseline.trial_ms.size()) +
                                vb / static_cast<double>(row.fixed.trial_ms.size()));
    const double t_now = static_cast<double>(at.k) / at.n_max;
    row.conditional_power = se > 0 ? stats::ConditionalPower((ma - mb) / se, t_now, at.z_final) : 1;
    // Futility (non-binding: stopping without rejecting can only lower the type I error).
    if (row.conditional_power >= o.futility_power) return true;
    row.stop = FixRow::Stop::kFutile;
    // At n_max trials per side the standard error is se * sqrt(k / n_max).
    row.detectable_at_max = std::exp((at.z_final + 0.8416) * se * std::sqrt(t_now));
  }
  return false;
}

// Measures every plan: paired ones in-process (MeasurePairedRow: up to `trials` processes each,
// stopping when decided), the others in rounds of separate processes, each round the baseline and
// every row still open once in a random order, with a look after each round from the 4th
// (group-sequential boundaries, see above): a row stops getting trials once it is decided, precise
// enough, or cannot reach significance by the planned maximum. `estimate_s`: one trial's seconds
// before any ran (the analysis run), for the budget's plan.
Status MeasureFixes(std::vector<FixPlanRow>& plans, int trials, double estimate_s, const PlanOptions& o,
                    const FixTrial& trial, const AltTrialFn& alt_trial, Progress& progress, FixReport* report) {
  report->trials = trials;
  std::vector<size_t> process_plans, paired_plans;
  for (size_t i = 0; i < plans.size(); ++i) (plans[i].paired ? paired_plans : process_plans).push_back(i);
  Measuring m{o, progress};
  // Until trials are measured, one takes as long as the analysis run.
  const double paired_estimate_s = static_cast<double>(paired_plans.size()) * trials * estimate_s;
  int n_max = process_plans.empty() ? 0 : PlannedRounds(o, trials, estimate_s, 0, process_plans.size(), paired_estimate_s);
  if (o.budget_s > 0) progress.Deadline(o.budget_s);
  const auto planned = [&](int rounds_done, size_t open) {
    return m.done + (open == 0 ? 0 : static_cast<int>(open + 1) * std::max(0, n_max - rounds_done));
  };
  progress.Start(static_cast<int>(paired_plans.size()) * trials + planned(0, process_plans.size()));
  // In-process rows first: their time is known before the budget's rounds are planned.
  for (size_t j = 0; j < paired_plans.size(); ++j) {
    if (Status st = MeasurePairedRow(plans[paired_plans[j]], paired_plans[j], trials, alt_trial, m); !st.ok()) return st;
    progress.Replan(planned(0, process_plans.size()) + static_cast<int>(paired_plans.size() - j - 1) * trials);
  }
  if (FallBackToProcesses(plans, &paired_plans, &process_plans, &report->notes)) {
    n_max = PlannedRounds(o, trials, estimate_s, 0, process_plans.size(), m.trial_seconds);
    progress.Replan(planned(0, process_plans.size()));
  }
  if (!paired_plans.empty())
    report->notes.push_back(fmt::format(
        "rows in-process: a look after every process (at most {}, each >= 16 paired blocks; {} spending, alpha {:g}); "
        "each row stopped when decided, precise to {:.0f}% or futile, as the rows across processes",
        trials, stats::Spending{stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}.Name(), kAlpha,
        100 * o.min_effect));
  if (process_plans.empty()) {
    for (auto& p : plans) report->rows.push_back(std::move(p.row));
    return Status::Ok();
  }
  auto& seq = report->sequential;
  stats::SequentialDesign design({stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}, kAlpha);
  seq.used = true;
  seq.spending = design.spending().Name();
  seq.alpha = kAlpha;
  stats::CompareOptions co;
  co.seed = o.seed;
  std::mt19937_64 rng(o.seed);
  std::vector<size_t> open = process_plans;
  int k = 0, budget_cut = 0, process_trials = 0;
  double process_seconds = 0;
  while (!open.empty()) {
    if (Status st = RunRound(plans, open, trial, rng, m, &process_seconds, &process_trials, report); !st.ok()) return st;
    ++k;
    const double per_trial = process_seconds / std::max(1, process_trials);
    // With a budget the plan was the analysis run's guess (traced, so slower than a trial): after
    // the first round it is what the rest of the budget fits at the measured pace, once (before
    // any look used it, so the boundaries are unaffected; the progress count is revised once).
    if (k == 1 && o.budget_s > 0) n_max = std::max(k, PlannedRounds(o, trials, per_trial, k, open.size(), m.trial_seconds));
    if (k < kFirstLook) {
      progress.Replan(planned(k, open.size()));
      continue;
    }
    // The final look: the planned maximum, or (with a budget) the next round would not fit.
    RoundLook at;
    at.k = k, at.n_max = n_max;
    at.budget_ends = o.budget_s > 0 && m.trial_seconds + per_trial * static_cast<double>(open.size() + 1) > o.budget_s;
    at.final_look = k >= n_max || at.budget_ends;
    if (at.final_look && k < n_max) budget_cut = n_max;
    const double t = at.final_look ? 1.0 : static_cast<double>(k) / n_max;
    at.look = design.Preview(t);
    at.made = at.final_look || at.look.nominal_alpha >= SmallestP(k);
    if (at.made) {
      at.look = design.Add(t);
      seq.looks.push_back({k, t, at.look.z, at.look.nominal_alpha});
    }
    // Futility: the critical value the final look would have if it came next (a lower bound of
    // the real one: the test of futility is then, if anything, too lenient to stop).
    const stats::Look last = at.final_look ? at.look : design.Preview(1.0);
    at.z_final = std::isfinite(last.z) ? last.z : stats::NormalQuantile(1 - kAlpha / 2);
    co.alpha = at.look.nominal_alpha;
    std::vector<size_t> still;
    for (size_t i : open)
      if (LookAtProcessRow(plans[i].row, report->baseline, at, o, co)) still.push_back(i);
    open = std::move(still);
    progress.Replan(planned(k, open.size()));
  }
  seq.max_rounds = n_max;
  seq.rounds = k;
  report->notes.push_back(fmt::format(
      "rows across processes: a look after every round from the {}th ({} spending, alpha {:g} over at most {} rounds; "
      "{} look{} made, rounds where no result could be significant are skipped); each row stopped when decided (its "
      "test and CI at the look's nominal level), when precise to {:.0f}%, or when it could no longer reach "
      "significance (conditional power < {:.0f}%)",
      kFirstLook, seq.spending, kAlpha, n_max, seq.looks.size(), seq.looks.size() == 1 ? "" : "s",
      100 * o.min_effect, 100 * o.futility_power));
  if (budget_cut > 0)
    report->notes.push_back(fmt::format("--budget {:.0f}s: ended after round {} of the {} planned (the next round would "
                                        "not fit); that look spent the rest of alpha",
                                        o.budget_s, k, budget_cut));
  for (auto& p : plans) report->rows.push_back(std::move(p.row));
  return Status::Ok();
}

}  // namespace

namespace {

// Steps a trial needs for its median (issue 40: a trial needs only enough steady steps for its
// median, and the rows across processes spend most of `fix`'s time). From the analysis run's steady
// steps (the first left out) on its first rank: with s the robust spread of log step times (1.4826 x
// their median absolute deviation), a median of K steps has a relative standard error of about
// 1.2533 s / sqrt(K); K is the least that brings it to kTrialMedianSe (3 %: small beside the 5-15 %
// by which separate processes of one configuration differ here, so it adds little to a trial's
// variance), at least kMinTrialSteps, at most `most`. 0: too few steps to tell.
constexpr double kTrialMedianSe = 0.03;
constexpr int64_t kMinTrialSteps = 8;
int64_t StepsForMedian(const analyzers::StepModel& model, int64_t most, double* spread) {
  std::vector<double> logs;
  const auto& steps = model.steps;
  for (size_t i = 1; i < steps.size(); ++i)
    if (steps[i].rank == steps.front().rank && steps[i].wall_ns > 0) logs.push_back(std::log(static_cast<double>(steps[i].wall_ns)));
  if (logs.size() < 5) return 0;
  const double med = stats::Median(logs);
  std::vector<double> dev;
  for (double x : logs) dev.push_back(std::abs(x - med));
  *spread = 1.4826 * stats::Median(dev);
  const double k = std::ceil(std::pow(1.2533 * *spread / kTrialMedianSe, 2));
  return std::clamp(static_cast<int64_t>(std::min(k, 1e6)), std::min(kMinTrialSteps, most), most);
}

// Steps a workload trial of `fix` runs when the spec leaves `steps` at its default: StepsForMedian,
// at most the default `steps`. 0: keep the spec's steps (set by the user, or too few steps to tell).
int64_t TrialSteps(const Spec& spec, const analyzers::Report& analysis, double* spread) {
  const workloads::Knob* knob = workloads::FindKnob("steps");
  if (!knob || spec.config.Get("steps") != knob->default_value) return 0;
  return StepsForMedian(analysis.metrics.steps, spec.config.Int("steps"), spread);
}

// `fix --cmd` with no --trial-steps: each trial stops after the warm-up steps its analysis run had,
// one step more (a trial's value leaves its first steady step out), and the steps its median needs
// (StepsForMedian, at most PlanOptions::kDefaultTrialSteps); too few steps to tell: the default.
// The note says what was chosen and why.
int64_t CommandTrialSteps(const analyzers::Report& analysis, std::string* note) {
  double spread = 0;
  const analyzers::StepModel& model = analysis.metrics.steps;
  const int64_t k = StepsForMedian(model, PlanOptions::kDefaultTrialSteps, &spread);
  if (k <= 0) {
    *note = fmt::format("trials ran {} steps each (--trial-steps): the analysis run had too few steps to choose from "
                        "their spread", PlanOptions::kDefaultTrialSteps);
    return PlanOptions::kDefaultTrialSteps;
  }
  int64_t warmup = 0;
  for (const auto& w : model.warmup_steps) warmup += w.rank == model.steps.front().rank;
  warmup = std::max<int64_t>(warmup, 1);
  const int64_t stop = warmup + 1 + k;
  *note = fmt::format(
      "trials stopped after {} steps: {} of warm-up (as in the analysis run), 1 left out, {} timed: the analysis run's "
      "steady steps vary by {:.1f}% (robust sd), so the median of {} has a standard error of ~{:.0f}% (--trial-steps N "
      "to choose; 0: whole runs)",
      stop, warmup, k, 100 * spread, k, 100 * kTrialMedianSe);
  return stop;
}

}  // namespace

Status RunFix(const Spec& spec, const PlanOptions& o, Launcher& launcher, Progress& progress, FixReport* report) {
  if (Status st = stats::EnoughTrials(o.trials); !st.ok()) return st;
  if (Status st = launcher.CanRunWorkloads(); !st.ok()) return st;
  analyzers::Report analysis;
  double seconds = 0;
  if (Status st = launcher.Analyze(spec, &analysis, &seconds); !st.ok()) return st;
  *report = {};
  report->workload = spec.workload;
  report->baseline_label = spec.Label();
  report->baseline.label = spec.Label();
  std::vector<FixPlanRow> plans = PlanFixes(spec, analysis, &report->notes);
  // A row that changes the samples a step processes (the batch: batch.small's fix) is not slower
  // for taking longer a step: then every trial is timed per sample (1 / throughput), so each
  // speedup is a throughput ratio (rows with the baseline's batch get the same ratio either way).
  const auto samples = [](const Spec& s) { return s.config.Int("batch") * std::max<int64_t>(1, s.config.Int("grad_accum")) * s.nproc; };
  bool per_sample = false;
  for (const auto& p : plans) per_sample = per_sample || samples(p.fixed) != samples(spec);
  if (per_sample) {
    report->unit = "ms per sample";
    report->notes.push_back("a fix changes the samples a step processes (the batch): every trial is timed per sample "
                            "(1000 / samples per second), so each speedup is the ratio of throughputs");
  }
  double spread = 0;
  const int64_t trial_steps = TrialSteps(spec, analysis, &spread);
  const std::string steps_set = fmt::format("steps={}", trial_steps);
  if (trial_steps > 0 && trial_steps < spec.config.Int("steps")) {
    // The analysis run's time is that of a longer run: scaled to the trial's steps for the budget.
    seconds *= static_cast<double>(trial_steps + spec.config.Int("warmup")) /
               static_cast<double>(spec.config.Int("steps") + spec.config.Int("warmup"));
    report->notes.push_back(fmt::format(
        "trials across processes ran {} steps after warm-up instead of {}: the analysis run's steps vary by {:.1f}% "
        "(robust sd), so the median of {} has a standard error of ~{:.0f}% (set steps= to choose)",
        trial_steps, spec.config.Int("steps"), 100 * spread, trial_steps, 100 * kTrialMedianSe));
  }
  const FixTrial trial = [&](int plan) -> StatusOr<TrialResult> {
    const Spec& s = plan < 0 ? spec : plans[static_cast<size_t>(plan)].fixed;
    StatusOr<TrialResult> r = launcher.Trial(trial_steps > 0 ? s.With(steps_set) : s);
    if (!r.ok() || !per_sample || r->out_of_memory) return r;
    if (r->samples_per_s <= 0)
      return Status::Error(fmt::format("{}: the trial reported no throughput, so a batch change cannot be compared", s.Label()));
    r->median_ms = 1000 / r->samples_per_s;
    return r;
  };
  const int trials = BudgetedTrials(o, plans.size() + 1, seconds, &report->notes);
  const auto alt_trial = [&](size_t plan, AltResult* r) { return launcher.AltTrial(spec, plans[plan].alt, r); };
  if (Status st = MeasureFixes(plans, trials, seconds, o, trial, alt_trial, progress, report); !st.ok()) return st;
  for (auto& row : report->rows) row.memory = CompareMemory(report->baseline, row.fixed, o.seed);
  return Status::Ok();
}

namespace {

// Why no fix of this command can be switched in-process, from its analysis run; "" when they can.
// torch.compile: a graph guarded on a switched flag would recompile at every switch (the start-up
// hook checks again in every trial); ranks: they could not switch arms on the same steps together.
std::string InProcessObstacle(const analyzers::Report& analysis) {
  for (const auto& c : analysis.metrics.compile)
    if (c.compiles > 0 || c.steps_with_regions > 0)
      return "the script uses torch.compile: each switch of a flag its graphs are guarded on would recompile them";
  std::vector<int32_t> ranks;
  for (const auto& s : analysis.metrics.steps.steps)
    if (std::find(ranks.begin(), ranks.end(), s.rank) == ranks.end()) ranks.push_back(s.rank);
  if (ranks.size() > 1)
    return fmt::format("the command runs {} ranks, which cannot switch a fix on the same steps together", ranks.size());
  return "";
}

// fix --cmd (issue 40): a row whose fixes all switch between steps (analyzers::OutsideFixSwitches) is
// measured in-process, paired, as `fix` measures the workloads' switchable knobs: separate processes
// of one script differ by 5-15 % on these machines, far more than such a fix's effect.
void MarkSwitchableRows(const analyzers::Report& analysis, std::vector<FixPlanRow>* plans, std::vector<std::string>* notes) {
  const std::string obstacle = InProcessObstacle(analysis);
  bool any = false;
  for (auto& p : *plans) {
    bool switchable = !p.tokens.empty();
    for (const auto& t : p.tokens) switchable = switchable && analyzers::OutsideFixSwitches(t);
    any = any || switchable;
    p.paired = p.row.paired = switchable && obstacle.empty();
  }
  if (any && !obstacle.empty())
    notes->push_back(fmt::format("every row across processes, none in-process: {}", obstacle));
}

// fix --cmd's in-process trials (Launcher::CommandAlt), remembering what could not switch so later
// rows do not try again: the command as a whole (too few steps, torch.compile: no row can), or a fix
// whose flag the script sets itself (no row with that token can).
class CommandAltTrials {
 public:
  CommandAltTrials(Launcher& launcher, const std::string& command) : launcher_(launcher), command_(command) {}
  Status Run(const std::vector<std::string>& tokens, AltResult* out) {
    if (!command_unpaired_.empty()) {
      out->unpaired = command_unpaired_;
      return Status::Ok();
    }
    for (const auto& t : tokens) {
      if (auto it = token_unpaired_.find(t); it != token_unpaired_.end()) {
        out->unpaired = it->second, out->unpaired_token = t;
        return Status::Ok();
      }
    }
    if (Status st = launcher_.CommandAlt(command_, tokens, out); !st.ok()) return st;
    if (!out->unpaired.empty()) (out->unpaired_token.empty() ? command_unpaired_ : token_unpaired_[out->unpaired_token]) = out->unpaired;
    return Status::Ok();
  }

 private:
  Launcher& launcher_;
  std::string command_, command_unpaired_;
  std::map<std::string, std::string> token_unpaired_;
};

}  // namespace

std::vector<FixPlanRow> PlanCommandFixes(const std::string& command, const analyzers::Report& analysis,
                                         std::vector<std::string>* notes) {
  std::vector<FixPlanRow> plans;
  std::map<std::string, size_t> by_token;
  for (const auto& f : analysis.findings) {
    const analyzers::CatalogEntry* fix = analyzers::FindCatalogEntry(f.id);
    if (!fix || !*fix->outside_token) {
      notes->push_back(fmt::format("{}: cannot be applied from outside the script; change the code: {}", f.id,
                                   f.fix_python.empty() ? "see the finding" : f.fix_python));
      continue;
    }
    auto [it, added] = by_token.emplace(fix->outside_token, plans.size());
    if (added) {
      FixPlanRow p;
      p.row.change = fix->outside_token;
      p.row.code = fix->outside_code;
      p.tokens = {fix->outside_token};
      plans.push_back(std::move(p));
    }
    auto& row = plans[it->second].row;
    if (std::find(row.findings.begin(), row.findings.end(), f.id) == row.findings.end()) row.findings.push_back(f.id);
    row.estimated_saving_pct = std::max(row.estimated_saving_pct, f.estimated_saving_pct);
  }
  if (AppendAllRow(&plans))
    for (size_t i = 0; i + 1 < plans.size(); ++i) plans.back().tokens.push_back(plans[i].tokens.front());
  if (plans.empty()) notes->push_back("nothing to measure: no finding has a fix that applies from outside the script");
  for (auto& p : plans) {
    std::string joined;
    for (const auto& t : p.tokens) joined += (joined.empty() ? "" : ",") + t;
    p.row.fixed.label = command + "  [fixes: " + joined + "]";
  }
  MarkSwitchableRows(analysis, &plans, notes);
  return plans;
}

LauncherOptions LauncherOptionsOf(const PlanOptions& o) {
  LauncherOptions lo;
  lo.memory_cap_bytes = o.memory_cap_bytes;
  lo.trial_steps = o.trial_steps == PlanOptions::kAutoTrialSteps ? PlanOptions::kDefaultTrialSteps : o.trial_steps;
  lo.analysis_steps = o.analysis_steps;
  return lo;
}

Status RunFixCommand(const std::string& command, const PlanOptions& o, Launcher& launcher, Progress& progress,
                     FixReport* report) {
  if (Status st = stats::EnoughTrials(o.trials); !st.ok()) return st;
  analyzers::Report analysis;
  double seconds = 0;
  if (Status st = launcher.AnalyzeCommand(command, &analysis, &seconds); !st.ok()) return st;
  *report = {};
  report->workload = "--cmd";
  report->baseline_label = command;
  report->baseline.label = command;
  if (const int64_t stopped = launcher.AnalysisStoppedAfter(); stopped > 0)
    report->notes.push_back(fmt::format(
        "the analysis run was ended after {} steps (--analysis-steps; 0: the whole run): what the script does after them "
        "(evaluation at an epoch's end, saving) was not analyzed",
        stopped));
  std::string steps_note;  // said only when trials across processes ran (rows in-process have their own steps)
  if (o.trial_steps == PlanOptions::kAutoTrialSteps) launcher.SetCommandTrialSteps(CommandTrialSteps(analysis, &steps_note));
  std::vector<FixPlanRow> plans = PlanCommandFixes(command, analysis, &report->notes);
  const int trials = BudgetedTrials(o, plans.size() + 1, seconds, &report->notes);
  CommandTrials runs(launcher, &report->unit);
  const FixTrial trial = [&](int plan) {
    return runs.Run(command, plan < 0 ? std::vector<std::string>() : plans[static_cast<size_t>(plan)].tokens);
  };
  CommandAltTrials alts(launcher, command);
  const auto alt_trial = [&](size_t plan, AltResult* r) { return alts.Run(plans[plan].tokens, r); };
  if (Status st = MeasureFixes(plans, trials, seconds, o, trial, alt_trial, progress, report); !st.ok()) return st;
  if (!steps_note.empty() && !report->baseline.trial_ms.empty()) report->notes.push_back(steps_note);
  for (auto& row : report->rows) row.memory = CompareMemory(report->baseline, row.fixed, o.seed);
  return Status::Ok();
}

namespace {

using Axes = std::vector<std::pair<std::string, std::vector<std::string>>>;

// "knob=v1,v2,..." each; `check` validates one value of one axis.
using CheckValue = std::function<Status(const std::string& key, const std::string& value)>;
StatusOr<Axes> ParseGrids(const std::vector<std::string>& grids, const CheckValue& check) {
  if (grids.empty()) return Status::Error("sweep: expected at least one --grid knob=v1,v2,...");
  Axes axes;
  for (const auto& g : grids) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos || eq == 0) return Status::Error(fmt::format("--grid {}: expected knob=v1,v2,...", g));
    std::vector<std::string> values;
    std::stringstream ss(g.substr(eq + 1));
    for (std::string v; std::getline(ss, v, ',');) {
      if (Status st = check(g.substr(0, eq), v); !st.ok()) return st;
      values.push_back(v);
    }
    if (values.empty()) return Status::Error(fmt::format("--grid {}: no values", g));
    axes.push_back({g.substr(0, eq), values});
  }
  return axes;
}

// Cells that ran out of memory, the largest value of each grid key that still fit, and which cell
// was fastest among those that fit (issue 36: the batch sweep runs until memory is full).
void NoteOutOfMemory(SweepReport* r) {
  std::string oom;
  for (const auto& c : r->cells) {
    if (!c.out_of_memory) continue;
    std::string knobs;
    for (const auto& [k, v] : c.knobs) knobs += (knobs.empty() ? "" : " ") + k + "=" + v;
    oom += (oom.empty() ? "" : "; ") + knobs +
           (c.oom_request_bytes > 0 ? fmt::format(" (asked for {:.1f} MB)", c.oom_request_bytes / 1e6) : "");
  }
  if (oom.empty()) return;
  std::string cap = r->memory_cap_bytes > 0 ? fmt::format(" under --memory-cap {:.2f} GB", r->memory_cap_bytes / 1073741824.0) : "";
  std::string largest;
  for (size_t k = 0; k < r->grid_keys.size(); ++k) {
    double best = -1;
    std::string best_text;
    for (const auto& c : r->cells) {
      if (c.out_of_memory) continue;
      char* end = nullptr;
      const double v = std::strtod(c.knobs[k].second.c_str(), &end);
      if (end && *end == '\0' && v > best) best = v, best_text = c.knobs[k].second;
    }
    if (!best_text.empty()) largest += (largest.empty() ? "" : ", ") + r->grid_keys[k] + "=" + best_text;
  }
  bool any_fits = false;
  for (const auto& c : r->cells) any_fits = any_fits || !c.out_of_memory;
  r->notes.push_back(fmt::format("out of memory{}: {}. {}", cap, oom,
                                 !any_fits ? "No cell fit."
                                           : fmt::format("Largest that fit: {}; the ranking is among the cells that fit",
                                                         largest.empty() ? "-" : largest)));
}

// Every combination of the axes (odometer order), `trials` rounds in a random order each, then
// the best cell and the cells tied with it. `trial(cell, out)` runs one trial of a cell. Workload
// cells rank by throughput; commands (`by_time`) by throughput when every trial has one (samples
// per step known), else by their time.
Status SweepCells(const Axes& axes, const PlanOptions& o, const std::function<std::string(const SweepCell&)>& label,
                  const std::function<StatusOr<TrialResult>(size_t cell)>& trial, bool by_time, Progress& progress,
                  SweepReport* report) {
  if (o.trials < 2)
    return Status::Error("--trials: must be at least 2 for a sweep (4 or more to name a significantly best cell)");
  report->trials = o.trials;
  for (const auto& a : axes) report->grid_keys.push_back(a.first);
  std::vector<size_t> idx(axes.size(), 0);
  while (true) {
    SweepCell cell;
    for (size_t i = 0; i < axes.size(); ++i) cell.knobs.push_back({axes[i].first, axes[i].second[idx[i]]});
    cell.arm.label = label(cell);
    report->cells.push_back(cell);
    size_t k = axes.size();
    while (k > 0 && ++idx[k - 1] == axes[k - 1].second.size()) idx[--k] = 0;
    if (k == 0) break;
  }
  std::mt19937_64 rng(o.seed);
  progress.Start(static_cast<int>(report->cells.size()) * o.trials);
  for (int t = 0; t < o.trials; ++t) {
    std::vector<size_t> order(report->cells.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (report->cells[i].out_of_memory) continue;  // it did not fit once: it will not fit again
      progress.Step(report->cells[i].arm.label);
      StatusOr<TrialResult> run = trial(i);
      if (!run.ok()) return run.status();
      const TrialResult& r = *run;
      auto& cell = report->cells[i];
      if (r.out_of_memory) {
        cell.out_of_memory = true;
        cell.oom_request_bytes = r.oom_request_bytes;
        cell.oom_message = r.oom_message;
        cell.arm.trial_ms.clear();
        cell.arm.samples_per_s.clear();
        continue;
      }
      cell.arm.trial_ms.push_back(r.median_ms);
      cell.arm.samples_per_s.push_back(r.samples_per_s);
      if (r.samples_per_step > 0) cell.samples_per_step = r.samples_per_step, cell.samples_from = r.samples_from;
    }
  }
  // Commands: by throughput once every trial of every cell has one (samples per step known).
  if (by_time) {
    bool all_known = true;
    for (const auto& c : report->cells)
      for (double sps : c.arm.samples_per_s) all_known = all_known && sps > 0;
    by_time = !all_known;
  }
  report->by_throughput = !by_time;
  // Cells that ran out of memory are results, not rankable: the best is among the cells that fit.
  size_t fits = 0;
  for (size_t i = 0; i < report->cells.size(); ++i) {
    if (report->cells[i].out_of_memory) continue;
    if (fits++ == 0) report->best = i;
  }
  if (fits == 0) {
    report->best_significant = false;
    return Status::Ok();  // every cell ran out of memory: the report says so
  }
  for (size_t i = 0; i < report->cells.size(); ++i) {
    auto& c = report->cells[i];
    if (c.out_of_memory) continue;
    c.median_ms = stats::Median(c.arm.trial_ms);
    c.ci = stats::MedianCi(c.arm.trial_ms, 2000, o.seed);
    c.samples_per_s = by_time ? 0 : stats::Median(c.arm.samples_per_s);
    // Best = highest throughput (equal to the lowest step time when the batch is fixed; a grid
    // over batch sizes needs samples/s), or the lowest time for commands.
    const auto& best = report->cells[report->best];
    if (by_time ? c.median_ms < best.median_ms : c.samples_per_s > best.samples_per_s) report->best = i;
  }
  stats::CompareOptions co;
  co.seed = o.seed;
  const auto& best = report->cells[report->best];
  report->best_significant = fits > 1;
  for (size_t i = 0; i < report->cells.size(); ++i) {
    if (i == report->best || report->cells[i].out_of_memory) continue;
    auto& c = report->cells[i];
    // speedup = median(first) / median(second) > 1 when the best is better.
    c.vs_best = by_time ? stats::Compare(c.arm.trial_ms, best.arm.trial_ms, co)
                        : stats::Compare(best.arm.samples_per_s, c.arm.samples_per_s, co);
    c.tied_with_best = c.vs_best.verdict != stats::Verdict::kFaster;
    report->best_significant = report->best_significant && !c.tied_with_best;
  }
  return Status::Ok();
}

}  // namespace

Status RunSweep(const Spec& base, const std::vector<std::string>& grids, const PlanOptions& o, Launcher& launcher,
                Progress& progress, SweepReport* report) {
  *report = {};
  report->workload = base.workload;
  const auto check = [](const std::string& knob, const std::string& value) {
    workloads::Config c;
    return c.Set(knob + "=" + value);
  };
  const StatusOr<Axes> axes = ParseGrids(grids, check);
  if (!axes.ok()) return axes.status();
  if (Status st = launcher.CanRunWorkloads(); !st.ok()) return st;
  const auto spec_of = [&](const SweepCell& cell) {
    Spec s = base;
    for (const auto& [k, v] : cell.knobs) s = s.With(k + "=" + v);
    return s;
  };
  const auto trial = [&](size_t cell) { return launcher.Trial(spec_of(report->cells[cell])); };
  const OutOfMemoryIsAResult oom(launcher);
  report->memory_cap_bytes = o.memory_cap_bytes;
  const auto label = [&](const SweepCell& c) { return spec_of(c).Label(); };
  if (Status st = SweepCells(*axes, o, label, trial, false, progress, report); !st.ok()) return st;
  NoteOutOfMemory(report);
  return Status::Ok();
}

std::string FillTemplate(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out = tmpl;
  for (const auto& [k, v] : values) {
    const std::string key = "{" + k + "}";
    for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + v.size())) out.replace(at, key.size(), v);
  }
  return out;
}

namespace {

// "{batch}*{accum}" with batch=32, accum=2 -> 64. An error unless every factor is a positive
// whole number once the cell's values are filled in.
StatusOr<int64_t> SamplesOfCell(const std::string& expr, const std::vector<std::pair<std::string, std::string>>& knobs) {
  const std::string filled = FillTemplate(expr, knobs);
  int64_t product = 1;
  std::stringstream ss(filled);
  for (std::string factor; std::getline(ss, factor, '*');) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(factor, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != factor.size() || v <= 0 || product > (int64_t{1} << 40) / v)
      return Status::Error(fmt::format("--samples-per-step '{}': '{}' is not a product of positive whole numbers (e.g. "
                                       "\"{{batch}}\" or \"{{batch}}*{{accum}}\", each {{key}} a --grid key)",
                                       expr, filled));
    product *= v;
  }
  return static_cast<int64_t>(product);
}

// What the ranking rests on, in the report's words.
void NoteSweepRanking(SweepReport* r) {
  if (!r->by_throughput) {
    std::string unknown;
    for (const auto& c : r->cells)
      if (c.samples_per_step <= 0 && !c.out_of_memory) unknown += (unknown.empty() ? "" : ", ") + c.arm.label;
    r->notes.push_back(fmt::format(
        "ranked by {} (lower is better): the samples per step are not known{}{}. If the grid changes how many samples a "
        "step processes (a batch size), time per step misranks the cells: give --samples-per-step \"{{batch}}\" to rank "
        "by samples per second",
        r->unit, r->unit == "ms per step" ? " (no convolution, linear, normalization or embedding op with recorded input "
                                            "shapes in the steps)"
                                          : " (the runs have no steps)",
        unknown.empty() ? "" : " for: " + unknown));
    return;
  }
  double lo = 0, hi = 0;
  for (const auto& c : r->cells) {
    if (c.out_of_memory) continue;
    lo = lo == 0 ? c.samples_per_step : std::min(lo, c.samples_per_step);
    hi = std::max(hi, c.samples_per_step);
  }
  const std::string from = r->cells.empty() ? "" : r->cells.front().samples_from;
  r->notes.push_back(lo != hi ? fmt::format("ranked by samples per second: the cells process {:g} to {:g} samples per step "
                                            "({}), so time per step alone would misrank them",
                                            lo, hi, from)
                              : fmt::format("ranked by samples per second ({:g} samples per step in every cell; {})", lo, from));
}

}  // namespace

Status RunSweepCommand(const std::string& tmpl, const std::vector<std::string>& grids, const PlanOptions& o,
                       Launcher& launcher, Progress& progress, SweepReport* report) {
  *report = {};
  report->workload = "--cmd";
  report->command = tmpl;
  const auto check = [&](const std::string& key, const std::string& value) {
    if (tmpl.find("{" + key + "}") == std::string::npos)
      return Status::Error(fmt::format(
          "--grid {}: the command has no {{{}}} to fill in (e.g. --cmd \"python3 train.py --{} {{{}}}\")", key, key, key, key));
    if (value.empty() || value.find_first_of(" \t'\"$`;&|<>") != std::string::npos)
      return Status::Error(fmt::format("--grid {}: value '{}' must be one plain word", key, value));
    return Status::Ok();
  };
  const StatusOr<Axes> axes = ParseGrids(grids, check);
  if (!axes.ok()) return axes.status();
  // Every {placeholder} must be on a grid.
  std::vector<std::pair<std::string, std::string>> first_cell;
  for (const auto& [k, v] : *axes) first_cell.push_back({k, v.front()});
  const std::string filled = FillTemplate(tmpl, first_cell);
  if (const size_t open = filled.find('{'); open != std::string::npos && filled.find('}', open) != std::string::npos)
    return Status::Error(fmt::format("--cmd: {} has no --grid", filled.substr(open, filled.find('}', open) - open + 1)));
  // --samples-per-step: checked on the first cell before any trial runs.
  if (!o.samples_per_step.empty())
    if (StatusOr<int64_t> given = SamplesOfCell(o.samples_per_step, first_cell); !given.ok()) return given.status();
  CommandTrials runs(launcher, &report->unit);
  const auto trial = [&](size_t cell) -> StatusOr<TrialResult> {
    const auto& knobs = report->cells[cell].knobs;
    StatusOr<TrialResult> r = runs.Run(FillTemplate(tmpl, knobs), {});
    if (!r.ok() || o.samples_per_step.empty() || r->out_of_memory) return r;
    const StatusOr<int64_t> n = SamplesOfCell(o.samples_per_step, knobs);
    if (!n.ok()) return n.status();
    r->samples_per_step = static_cast<double>(*n);
    r->samples_from = "--samples-per-step " + o.samples_per_step;
    r->samples_per_s = report->unit == "ms per step" && r->median_ms > 0 ? static_cast<double>(*n) * 1000.0 / r->median_ms : 0;
    return r;
  };
  const OutOfMemoryIsAResult oom(launcher);
  const auto label = [&](const SweepCell& c) { return FillTemplate(tmpl, c.knobs); };
  if (Status st = SweepCells(*axes, o, label, trial, true, progress, report); !st.ok()) return st;
  report->memory_cap_bytes = o.memory_cap_bytes;
  NoteOutOfMemory(report);
  NoteSweepRanking(report);
  return Status::Ok();
}

void Explain(Launcher& launcher, const std::string& a, const std::string& b, bool commands, const std::string& mode,
             bool significant, analyzers::RunDiff* why, bool* explained, std::vector<std::string>* notes) {
  if (mode == "never" || (mode == "auto" && !significant)) return;
  StatusOr<sets::SetAnalysis> sa = launcher.TracedRun(a, commands);
  StatusOr<sets::SetAnalysis> sb = sa.ok() ? launcher.TracedRun(b, commands) : sa.status();
  if (!sb.ok()) {
    notes->push_back("not explained: a traced run of each side could not be made: " + sb.status().message());
    return;
  }
  *why = analyzers::DiffRuns(sa->trace, sa->report, a, sb->trace, sb->report, b, 5);
  *explained = true;
}

namespace {

// Compile time beside the steady step (issue 39): the trials time their steps after the first, so
// a compiled side's compile time is left out of the verdict; this says what it is and when it pays
// back against the other side's step. "" when neither side compiled.
std::string CompilePayback(const AbReport& r) {
  const auto median = [](const std::vector<double>& v) { return v.empty() ? 0.0 : stats::Median(v); };
  const double ca = median(r.a.compile_s), cb = median(r.b.compile_s);
  if (ca <= 0 && cb <= 0) return "";
  const bool a_more = ca >= cb;
  const char* more = a_more ? "A" : "B";
  const char* other = a_more ? "B" : "A";
  const double extra_s = std::abs(ca - cb);
  // The compiling side's gain a step, from the medians (ms per step).
  const double gain_ms = a_more ? r.cmp.median_b - r.cmp.median_a : r.cmp.median_a - r.cmp.median_b;
  std::string s = fmt::format("torch.compile: A compiled for {:.1f} s, B for {:.1f} s a run (median of trials; outside the "
                              "steps timed above)",
                              ca, cb);
  if (r.unit != "ms per step") return s;
  // Compile times within 10 % (or 0.1 s) of each other: nothing to pay back, the step decides.
  if (extra_s < std::max(0.1, 0.1 * std::max(ca, cb))) return s + ": about the same compile time, so the steady step decides";
  if (r.cmp.verdict == stats::Verdict::kNoDifference)
    return s + fmt::format(": no significant difference a step, so {}'s {:.1f} s more compiling is not shown to pay back", more, extra_s);
  if (gain_ms <= 0) return s + fmt::format(": {} compiles {:.1f} s more and is slower a step: it never pays back", more, extra_s);
  const double steps = extra_s * 1000 / gain_ms;
  return s + fmt::format(": {} saves {:.3f} ms a step against {}, so its {:.1f} s more compiling pays back after {:.0f} steps",
                         more, gain_ms, other, extra_s, std::ceil(steps));
}

}  // namespace

Status RunAb(const std::string& a_text, const std::string& b_text, bool commands, const PlanOptions& o, Launcher& launcher,
             Progress& progress, AbReport* report) {
  if (Status st = stats::EnoughTrials(o.trials); !st.ok()) return st;
  *report = {};
  report->trials = o.trials;
  report->order = stats::PairOrder(o.trials, o.seed);
  Spec a, b;
  if (!commands) {
    if (Status st = ParseSpec(a_text, &a); !st.ok()) return st;
    if (Status st = ParseSpec(b_text, &b); !st.ok()) return st;
    if (Status st = launcher.CanRunWorkloads(); !st.ok()) return st;
    // "slowdown=5%": a share of A's median step, measured by one calibration run of A.
    if (a.HasPercentages() || b.HasPercentages()) {
      const StatusOr<TrialResult> calib = launcher.Trial(WithoutPercentages(a));
      if (!calib.ok()) return calib.status();
      ResolvePercentages(&a, calib->median_ms, &report->notes);
      ResolvePercentages(&b, calib->median_ms, &report->notes);
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
      if (Status st = launcher.AltTrial(a, alt, &r); !st.ok()) return st;
    }
    report->a.trial_ms = r.a_ms;
    report->b.trial_ms = r.b_ms;
    report->cmp = stats::ComparePaired(r.log_ratios, co);
    report->cmp.median_a = stats::Median(r.a_ms);
    report->cmp.median_b = stats::Median(r.b_ms);
    Explain(launcher, a.Label(), b.Label(), false, o.explain, report->cmp.verdict != stats::Verdict::kNoDifference,
            &report->why, &report->explained, &report->notes);
    return Status::Ok();
  }
  progress.Start(2 * o.trials);
  CommandTrials runs(launcher, &report->unit);  // commands: how every trial was timed
  for (char side : report->order) {
    Arm& arm = side == 'A' ? report->a : report->b;
    progress.Step(arm.label);
    StatusOr<TrialResult> run = commands ? runs.Run(side == 'A' ? a_text : b_text, {}) : launcher.Trial(side == 'A' ? a : b);
    if (!run.ok()) return run.status();
    TrialResult& r = *run;
    if (commands) {
      arm.compile_s.push_back(r.compile_s);
      r.samples_per_s = 0;
    }
    arm.trial_ms.push_back(r.median_ms);
    arm.samples_per_s.push_back(r.samples_per_s);
    AddTrialMemory(arm, r);
  }
  report->cmp = stats::Compare(report->a.trial_ms, report->b.trial_ms, co);
  report->memory = CompareMemory(report->a, report->b, o.seed);
  if (const std::string note = CompilePayback(*report); !note.empty()) report->notes.push_back(note);
  Explain(launcher, commands ? a_text : a.Label(), commands ? b_text : b.Label(), commands, o.explain,
          report->cmp.verdict != stats::Verdict::kNoDifference, &report->why, &report->explained, &report->notes);
  return Status::Ok();
}

}  // namespace trainrx::experiments
