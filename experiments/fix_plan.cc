// `fix` and `fix --cmd` (plans.h): the fixes a run's findings suggest, each measured against the
// unchanged run in a sequential design (rows in-process where the fix switches between steps, the
// others in rounds of separate processes), stopped per row when decided, precise or futile.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "command_trials.h"
#include "measure_rows.h"
#include "trainrx/analyzers/catalog.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/sequential.h"
#include "trainrx/experiments/stats.h"

namespace trainrx::experiments {

namespace {

// With two or more fixes, one more row applies them all ("all of the above", every row's
// findings); the caller says how it is applied. False with fewer.
// Its prediction: the analysis's what-if of every finding's fix together, where the rows' findings
// are those fixes' (a row whose fix the replay does not know leaves the row without one).
bool AppendAllRow(std::vector<FixPlanRow>* plans, const analyzers::Report& analysis) {
  if (plans->size() < 2) return false;
  FixPlanRow all;
  all.row.change = "all of the above";
  all.row.all = true;
  bool every_row_predicted = true;
  for (const auto& p : *plans) {
    all.row.findings.insert(all.row.findings.end(), p.row.findings.begin(), p.row.findings.end());
    every_row_predicted = every_row_predicted && p.row.predicted;
  }
  // The what-if must apply exactly the rows' fixes: its transforms are those of the rows' findings.
  const auto covered = [&](const analyzers::WhatIf& w) {
    for (const std::string& t : w.transforms) {
      bool found = false;
      for (const std::string& id : all.row.findings)
        if (const analyzers::CatalogEntry* e = analyzers::FindCatalogEntry(id); e && t == e->transform) found = true;
      if (!found) return false;
    }
    return true;
  };
  for (const analyzers::WhatIf& w : analysis.metrics.what_if)
    if (w.label == "all findings" && w.prediction.method == "replay" && every_row_predicted && covered(w)) {
      all.row.predicted = true;
      all.row.predicted_saving_pct = w.prediction.saving_pct;
      all.row.predicted_low_pct = w.prediction.low_pct;
      all.row.predicted_high_pct = w.prediction.high_pct;
    }
  plans->push_back(std::move(all));
  return true;
}

std::vector<FixRow*> RowsOf(std::vector<FixPlanRow>& plans) {
  std::vector<FixRow*> rows;
  for (FixPlanRow& p : plans) rows.push_back(&p.row);
  return rows;
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

namespace {
// A replayed prediction into a row: its point, interval and calibration.
void SetRowPrediction(FixRow& row, const analyzers::Prediction& p) {
  row.predicted = true;
  row.predicted_saving_pct = p.saving_pct;
  row.predicted_low_pct = p.low_pct;
  row.predicted_high_pct = p.high_pct;
  row.predicted_level = p.level;
  row.predicted_margin = p.margin;
  row.predicted_calibration = p.calibration;
}
}  // namespace

void AddFindingEstimate(FixRow& row, const analyzers::Finding& f) {
  row.estimated_saving_pct = std::max(row.estimated_saving_pct, f.estimated_saving_pct);
  const analyzers::Prediction& p = f.predicted;
  if (p.method == "not predictable" && row.not_predictable.empty())
    row.not_predictable = fmt::format("{}: {}", f.id, p.assumptions);
  if (p.method != "replay" || (row.predicted && row.predicted_saving_pct >= p.saving_pct)) return;
  SetRowPrediction(row, p);
}

void ExplainUnpredicted(std::vector<FixRow*> rows) {
  std::string unpredicted;  // the rows (not the all row) without a prediction
  for (const FixRow* r : rows)
    if (!r->all && !r->predicted) unpredicted += (unpredicted.empty() ? "" : ", ") + r->change;
  for (FixRow* r : rows) {
    if (r->predicted) {
      r->not_predictable.clear();
      continue;
    }
    if (!r->not_predictable.empty()) continue;
    if (r->all) {
      r->not_predictable = unpredicted.empty()
                               ? "the analysis made no prediction of these fixes together"
                               : fmt::format("not every fix is predicted ({}): their sum would leave those out", unpredicted);
      continue;
    }
    std::string without;  // the row's findings whose fix no transform models
    for (const std::string& id : r->findings)
      if (const analyzers::CatalogEntry* e = analyzers::FindCatalogEntry(id); e == nullptr || *e->transform == '\0')
        without += (without.empty() ? "" : ", ") + id;
    r->not_predictable =
        !without.empty()
            ? fmt::format("no transform in the replay models this fix ({}){}", without,
                          r->estimated_saving_pct >= 0.05
                              ? fmt::format("; the finding's bound, {:.1f} % of the step, is the most it could save, not "
                                            "a prediction",
                                            r->estimated_saving_pct)
                              : "")
            : "the analysis made no prediction for this row's findings (no steps to replay on their rank)";
  }
}

std::optional<PredictionCheck> CheckPrediction(const FixRow& row) {
  if (!row.predicted || row.cmp.speedup <= 0) return std::nullopt;
  const double measured = 100.0 * (1.0 - 1.0 / row.cmp.speedup);
  PredictionCheck c;
  c.inside = measured >= row.predicted_low_pct && measured <= row.predicted_high_pct;
  c.close = std::abs(measured - row.predicted_saving_pct) <= std::max(5.0, 0.25 * std::abs(measured));
  return c;
}

size_t SkipUnlikelyRows(std::vector<FixPlanRow>* plans, bool skip, int trials, double seconds_per_trial,
                        std::vector<std::string>* notes, RecordFinder find_record) {
  // The replay's own range, before its calibration margin: a margin says how far measurements fall
  // outside the range (zero_grad_none: 1.3 points either side of a 0.0 % prediction), not that the
  // replay expects a saving.
  const auto unlikely = [](const FixPlanRow& p) {
    return !p.row.all && p.row.predicted && p.row.predicted_high_pct - p.row.predicted_margin < PlanOptions::kUnlikelyPct;
  };
  // The records of a row's transforms, and whether all of them allow a skip (a finding without a
  // transform, or a transform never measured, does not).
  // (A row the user asked for with --also is never skipped: it is there to be measured.)
  const auto records = [find_record](const FixPlanRow& p, bool* allows) {
    std::vector<std::string> out;
    *allows = !p.row.findings.empty() && !p.row.asked;
    const auto add = [&](const std::string& transform, const std::string& what) {
      const TransformRecord* r = transform.empty() ? nullptr : find_record(transform);
      *allows = *allows && r != nullptr && r->AllowsSkip();
      const std::string text = transform.empty() ? fmt::format("{}: no transform", what) : RecordText(r, transform);
      if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
    };
    if (p.row.asked) add(p.row.transform, p.row.change);
    for (const std::string& id : p.row.findings) {
      const analyzers::CatalogEntry* e = analyzers::FindCatalogEntry(id);
      add(e != nullptr ? e->transform : "", id);
    }
    return out;
  };
  std::vector<std::string> skippable, kept_names;
  std::vector<const FixPlanRow*> skipped_rows;
  for (const FixPlanRow& p : *plans) {
    if (!unlikely(p)) continue;
    bool allows = false;
    std::string record;
    for (const std::string& r : records(p, &allows)) record += (record.empty() ? "" : "; ") + r;
    const std::string name = fmt::format("{} (predicted {:.1f} % [{:.1f}, {:.1f}]; record: {})", p.row.change,
                                         p.row.predicted_saving_pct, p.row.predicted_low_pct, p.row.predicted_high_pct,
                                         record);
    (allows ? skippable : kept_names).push_back(name);
    if (allows) skipped_rows.push_back(&p);
  }
  if (skippable.empty() && kept_names.empty()) return 0;
  const auto join = [](const std::vector<std::string>& v) {
    std::string list;
    for (const auto& n : v) list += (list.empty() ? "" : ", ") + n;
    return list;
  };
  if (!skippable.empty()) {
    const double saved = static_cast<double>(skippable.size()) * trials * seconds_per_trial;
    notes->push_back(skip ? fmt::format("skipped as unlikely to show (--skip-unlikely: the predicted saving's interval "
                                        "ends under {:.0f} %, and its transform's record has no significant saving "
                                        "outside an interval in {} or more measured rows): {}; about {:.0f} s of trials "
                                        "not run",
                                        PlanOptions::kUnlikelyPct, TransformRecord::kRowsToSkip, join(skippable), saved)
                          : fmt::format("unlikely to show (the predicted saving's interval ends under {:.0f} % and the "
                                        "transform's record holds; --skip-unlikely skips them, about {:.0f} s of "
                                        "trials): {}",
                                        PlanOptions::kUnlikelyPct, saved, join(skippable)));
  }
  if (!kept_names.empty())
    notes->push_back(fmt::format("predicted under {:.0f} % but measured{}: their transform's record has too few measured "
                                 "rows or a significant saving outside its interval (fewer than {} rows, or a miss): {}",
                                 PlanOptions::kUnlikelyPct, skip ? " all the same (not skipped)" : "",
                                 TransformRecord::kRowsToSkip, join(kept_names)));
  if (!skip) return skippable.size();
  std::vector<FixPlanRow> kept;
  for (FixPlanRow& p : *plans)
    if (std::find(skipped_rows.begin(), skipped_rows.end(), &p) == skipped_rows.end()) kept.push_back(std::move(p));
  // With the rows skipped, an all row over fewer than two fixes is one of them again.
  size_t fixes = 0;
  for (const auto& p : kept) fixes += p.row.all ? 0 : 1;
  if (fixes < 2) kept.erase(std::remove_if(kept.begin(), kept.end(), [](const FixPlanRow& p) { return p.row.all; }), kept.end());
  *plans = std::move(kept);
  return skippable.size();
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
      AddFindingEstimate(row, f);
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
  if (AppendAllRow(&plans, analysis)) plans.back().fixed = all;
  ExplainUnpredicted(RowsOf(plans));
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

// The budget scales the trials down (never below 4) when the plan would not fit, estimated from
// the analysis run's time: `rows` fixes and the baseline. No row, no trial: no note (issue 81.10).
int BudgetedTrials(const PlanOptions& o, size_t rows, double seconds, std::vector<std::string>* notes) {
  int trials = o.trials;
  const size_t configs = rows + 1;
  if (rows > 0 && o.budget_s > 0 && static_cast<double>(configs) * trials * seconds > o.budget_s) {
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
  double alpha = kAlpha;     // each row's level: the table's family-wise level over its rows
  int done = 0;              // trials run
  double trial_seconds = 0;  // seconds spent in trials (the budget)
};

// A row that is not significant stops as *precise* when it could have detected an effect of
// min_effect and the effect it measured is smaller than that. The second half matters where a look
// was not made (a round whose nominal level no result can reach): with little noise a 1.67x row was
// "precise" at round 4 (detectable 1.03x) and reported as "no significant difference".
bool Precise(const stats::Comparison& c, double min_effect) {
  return c.detectable <= 1 + min_effect && c.speedup > 0 && std::abs(std::log(c.speedup)) < std::log(1 + min_effect);
}

// The stopping rule of a row at a look, one for both designs (in-process pairs, rounds of processes):
// decided (significant at the look's level, where a look was made), the final look (`at_final`: the
// maximum of rounds or the budget), precise, or futile: the conditional power (under the current
// trend; `moments` gives the log-ratio effect and its standard error, asked only here) to reach
// significance by the final look's critical value `z_final` below the plan's futility power
// (non-binding: stopping without rejecting can only lower the type I error). `t`: the information
// fraction now. True: the row stays open.
template <typename Moments>
bool StaysOpen(FixRow& row, bool made, bool final_look, FixRow::Stop at_final, double t, double z_final,
               const PlanOptions& o, Moments moments) {
  if (made && row.cmp.verdict != stats::Verdict::kNoDifference) {
    row.stop = FixRow::Stop::kDecided;
  } else if (final_look) {
    row.stop = at_final;
  } else if (Precise(row.cmp, o.min_effect)) {
    row.stop = FixRow::Stop::kPrecise;
  } else {
    const auto [effect, se] = moments();
    row.conditional_power = se > 0 ? stats::ConditionalPower(effect / se, t, z_final) : 1;
    if (row.conditional_power >= o.futility_power) return true;
    row.stop = FixRow::Stop::kFutile;
    // At the maximum of rounds the standard error is se * sqrt(t).
    row.detectable_at_max = std::exp((z_final + 0.8416) * se * std::sqrt(t));
  }
  return false;
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
  stats::SequentialDesign design({stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}, m.alpha);
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
    row.paired_baseline_ms = alt.a_ms;
    row.fixed.cpu = alt.cpu;
    row.cmp = stats::ComparePaired(alt.log_ratios, co);
    row.cmp.median_a = stats::Median(alt.a_ms);
    row.cmp.median_b = stats::Median(alt.b_ms);
    row.level = 1 - look.nominal_alpha;
    row.stop_round = k;
    const stats::Look last = design.Preview(1.0);
    const double z_final = std::isfinite(last.z) ? last.z : stats::NormalQuantile(1 - m.alpha / 2);
    const bool open = StaysOpen(row, made, final_look, FixRow::Stop::kMaxRounds, t, z_final, m.o, [&] {
      double mean = 0, var = 0;
      for (double d : alt.log_ratios) mean += d / static_cast<double>(alt.log_ratios.size());
      for (double d : alt.log_ratios) var += (d - mean) * (d - mean);
      const double n = static_cast<double>(alt.log_ratios.size());
      return std::pair{mean, n > 1 ? std::sqrt(var / (n - 1) / n) : 0.0};
    });
    if (open) continue;
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
    arm.trial_ms.push_back(r.value);
    arm.samples_per_s.push_back(r.samples_per_s);
    AddTrialMeasures(arm, r);
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
// One table, many tests (issue 51.2: six rows each at 5 % made about one false verdict in four
// tables): the family-wise error over the table's rows is kAlpha, Bonferroni-split, each row's
// sequential design at kAlpha / rows (returned). Stated under the table.
double FamilyAlpha(size_t rows, FixReport& report) {
  const double alpha = kAlpha / static_cast<double>(std::max<size_t>(1, rows));
  report.family_alpha = kAlpha;
  report.row_alpha = alpha;
  if (rows > 1)
    report.notes.push_back(fmt::format("{} rows, one family: the chance of any false verdict in this table is at most {:g} "
                                       "(Bonferroni: each row tested at {:.4g})",
                                       rows, kAlpha, alpha));
  return alpha;
}

// What the rounds across processes did, under the table: the design, its looks, the stopping
// rules, and a budget that ended them before the planned maximum (`budget_cut`: that maximum; 0 none).
void NoteProcessRounds(const PlanOptions& o, double alpha, int budget_cut, FixReport& report) {
  const SequentialRecord& seq = report.sequential;
  report.notes.push_back(fmt::format(
      "rows across processes: a look after every round from the {}th ({} spending, alpha {:.4g} over at most {} rounds; "
      "{} look{} made, rounds where no result could be significant are skipped); each row stopped when decided (its "
      "test and CI at the look's nominal level), when precise to {:.0f}%, or when it could no longer reach "
      "significance (conditional power < {:.0f}%)",
      kFirstLook, seq.spending, alpha, seq.max_rounds, seq.looks.size(), seq.looks.size() == 1 ? "" : "s",
      100 * o.min_effect, 100 * o.futility_power));
  if (budget_cut > 0)
    report.notes.push_back(fmt::format("--budget {:.0f}s: ended after round {} of the {} planned (the next round would "
                                       "not fit); that look spent the rest of alpha",
                                       o.budget_s, seq.rounds, budget_cut));
}

// The look after round k of at most n_max: the final one at the planned maximum or where (with a
// budget) the next round would not fit; made (spending alpha, recorded in `seq`) when final or when a
// result could be significant at its level.
RoundLook LookAfterRound(stats::SequentialDesign& design, int k, int n_max, bool budget_ends, double alpha,
                         SequentialRecord& seq) {
  RoundLook at;
  at.k = k, at.n_max = n_max;
  at.budget_ends = budget_ends;
  at.final_look = k >= n_max || at.budget_ends;
  const double t = at.final_look ? 1.0 : static_cast<double>(k) / n_max;
  at.look = design.Preview(t);
  at.made = at.final_look || at.look.nominal_alpha >= SmallestP(k);
  if (at.made) {
    at.look = design.Add(t);
    seq.looks.push_back({k, t, at.look.z, at.look.nominal_alpha});
  }
  // Futility: the critical value the final look would have if it came next (a lower bound of the
  // real one: the test of futility is then, if anything, too lenient to stop).
  const stats::Look last = at.final_look ? at.look : design.Preview(1.0);
  at.z_final = std::isfinite(last.z) ? last.z : stats::NormalQuantile(1 - alpha / 2);
  return at;
}

bool LookAtProcessRow(FixRow& row, const Arm& baseline, const RoundLook& at, const PlanOptions& o,
                      const stats::CompareOptions& co) {
  row.cmp = stats::Compare(baseline.trial_ms, row.fixed.trial_ms, co);
  row.level = 1 - at.look.nominal_alpha;
  row.stop_round = at.k;
  const FixRow::Stop at_final = at.budget_ends && at.k < at.n_max ? FixRow::Stop::kBudget : FixRow::Stop::kMaxRounds;
  return StaysOpen(row, at.made, at.final_look, at_final, static_cast<double>(at.k) / at.n_max, at.z_final, o, [&] {
    double ma = 0, va = 0, mb = 0, vb = 0;
    LogMoments(baseline.trial_ms, &ma, &va);
    LogMoments(row.fixed.trial_ms, &mb, &vb);
    return std::pair{ma - mb, std::sqrt(va / static_cast<double>(baseline.trial_ms.size()) +
                                        vb / static_cast<double>(row.fixed.trial_ms.size()))};
  });
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
  m.alpha = FamilyAlpha(plans.size(), *report);
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
        "rows in-process: a look after every process (at most {}, each >= 16 paired blocks; {} spending, alpha {:.4g}); "
        "each row stopped when decided, precise to {:.0f}% or futile, as the rows across processes",
        trials, stats::Spending{stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}.Name(), m.alpha,
        100 * o.min_effect));
  if (process_plans.empty()) {
    for (auto& p : plans) report->rows.push_back(std::move(p.row));
    return Status::Ok();
  }
  auto& seq = report->sequential;
  stats::SequentialDesign design({stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}, m.alpha);
  seq.used = true;
  seq.spending = design.spending().Name();
  seq.alpha = m.alpha;
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
    const bool budget_ends =
        o.budget_s > 0 && m.trial_seconds + per_trial * static_cast<double>(open.size() + 1) > o.budget_s;
    const RoundLook at = LookAfterRound(design, k, n_max, budget_ends, m.alpha, seq);
    if (at.final_look && k < n_max) budget_cut = n_max;
    co.alpha = at.look.nominal_alpha;
    std::vector<size_t> still;
    for (size_t i : open)
      if (LookAtProcessRow(plans[i].row, report->baseline, at, o, co)) still.push_back(i);
    open = std::move(still);
    progress.Replan(planned(k, open.size()));
  }
  seq.max_rounds = n_max;
  seq.rounds = k;
  NoteProcessRounds(o, m.alpha, budget_cut, *report);
  for (auto& p : plans) report->rows.push_back(std::move(p.row));
  return Status::Ok();
}

}  // namespace

Status MeasureRows(std::vector<FixPlanRow>& plans, int trials, double estimate_s, const PlanOptions& o,
                   const FixTrial& trial, const AltTrialFn& alt_trial, Progress& progress, FixReport* report) {
  return MeasureFixes(plans, trials, estimate_s, o, trial, alt_trial, progress, report);
}

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

// After the trials: each row's memory against the baseline's, and the machine they ran on.
void FinishFixReport(const PlanOptions& o, FixReport* report) {
  std::vector<const Arm*> arms = {&report->baseline};
  for (auto& row : report->rows) {
    row.memory = CompareMemory(report->baseline, row.fixed, o.seed);
    arms.push_back(&row.fixed);
  }
  report->machine = SummarizeMachine(arms);
}

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
  SkipUnlikelyRows(&plans, o.skip_unlikely, o.trials, seconds, &report->notes);
  // A row that changes the samples a step processes (the batch: batch.small's fix) is not slower
  // for taking longer a step: then every trial is timed per sample (1 / throughput), so each
  // speedup is a throughput ratio (rows with the baseline's batch get the same ratio either way).
  bool per_sample = false;
  for (const auto& p : plans) per_sample = per_sample || p.fixed.SamplesPerStep() != spec.SamplesPerStep();
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
    r->value = 1000 / r->samples_per_s;
    return r;
  };
  const int trials = BudgetedTrials(o, plans.size(), seconds, &report->notes);
  const auto alt_trial = [&](size_t plan, AltResult* r) { return launcher.AltTrial(spec, plans[plan].alt, r); };
  if (Status st = MeasureFixes(plans, trials, seconds, o, trial, alt_trial, progress, report); !st.ok()) return st;
  FinishFixReport(o, report);
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


// The transform that predicts an --also token ("" none) and, where none does, why.
std::string AlsoTransform(const std::string& token, std::string* why) {
  const analyzers::OutsideFix* f = analyzers::FindOutsideFix(token);
  if (f == nullptr || *f->transform == '\0') {
    *why = fmt::format("no transform in the replay models {} (docs/what-if.md)", token);
    return "";
  }
  if (std::string_view(f->token) == "workers" && token != "workers=2") {
    *why = fmt::format("the replay models 2 loader workers, not {}", token.substr(token.find('=') + 1));
    return "";
  }
  return f->transform;
}

// `--also` (issue 79.6): each fix no finding named, a row measured as the findings' are and predicted
// by the analysis run's replay of its transform alone (Analyze's "asked" what-if); after the all
// row, which stays the findings' fixes together.
void AppendAlsoRows(const std::vector<std::string>& also, const analyzers::Report& analysis,
                    const std::map<std::string, size_t>& by_token, std::vector<FixPlanRow>* plans,
                    std::vector<std::string>* notes) {
  for (const std::string& token : also) {
    if (const auto it = by_token.find(token); it != by_token.end()) {
      notes->push_back(fmt::format("--also {}: already the fix of {}", token, (*plans)[it->second].row.findings.front()));
      continue;
    }
    bool twice = false;
    for (const FixPlanRow& p : *plans) twice = twice || (p.row.asked && p.row.change == token);
    if (twice) continue;
    FixPlanRow p;
    p.row.change = token;
    p.row.code = analyzers::OutsideFixCode(token);
    p.row.asked = true;
    p.tokens = {token};
    std::string why;
    p.row.transform = AlsoTransform(token, &why);
    for (const analyzers::WhatIf& w : analysis.metrics.what_if) {
      if (p.row.transform.empty() || w.label != "asked" || w.transforms != std::vector<std::string>{p.row.transform}) continue;
      if (w.prediction.method == "replay") SetRowPrediction(p.row, w.prediction);
      else why = fmt::format("{}: {}", p.row.transform, w.prediction.assumptions);
    }
    if (!p.row.predicted)
      p.row.not_predictable = !why.empty() ? why
                                           : fmt::format("the analysis made no prediction of {} (no steps to replay on its "
                                                         "first rank with steps)",
                                                         p.row.transform);
    plans->push_back(std::move(p));
  }
}

}  // namespace

std::vector<std::string> AlsoTransforms(const std::vector<std::string>& also) {
  std::vector<std::string> out;
  for (const std::string& token : also) {
    std::string why;
    if (std::string t = AlsoTransform(token, &why); !t.empty() && std::find(out.begin(), out.end(), t) == out.end())
      out.push_back(std::move(t));
  }
  return out;
}

std::vector<FixPlanRow> PlanCommandFixes(const std::string& command, const analyzers::Report& analysis,
                                         std::vector<std::string>* notes, const std::vector<std::string>& also) {
  std::vector<FixPlanRow> plans;
  std::map<std::string, size_t> by_token;
  for (const auto& f : analysis.findings) {
    const analyzers::CatalogEntry* fix = analyzers::FindCatalogEntry(f.id);
    if (fix && std::string_view(fix->family) == "machine") {  // the machine, not the code (issue 81.10)
      notes->push_back(fmt::format("{}: not a code change, and not measured here: {}", f.id,
                                   f.fix_python.empty() ? "see the finding" : f.fix_python));
      continue;
    }
    if (!fix || !*fix->outside_token || !f.outside_fix) {
      notes->push_back(fmt::format("{}: {}; change the code: {}", f.id,
                                   fix && *fix->outside_token ? fmt::format("{} from outside does not act on what was found", fix->outside_token)
                                                              : "cannot be applied from outside the script",
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
    AddFindingEstimate(row, f);
  }
  if (AppendAllRow(&plans, analysis))
    for (size_t i = 0; i + 1 < plans.size(); ++i) plans.back().tokens.push_back(plans[i].tokens.front());
  ExplainUnpredicted(RowsOf(plans));
  AppendAlsoRows(also, analysis, by_token, &plans, notes);
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
  lo.analysis_what_if = AlsoTransforms(o.also);
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
  std::vector<FixPlanRow> plans = PlanCommandFixes(command, analysis, &report->notes, o.also);
  SkipUnlikelyRows(&plans, o.skip_unlikely, o.trials, seconds, &report->notes);
  const int trials = BudgetedTrials(o, plans.size(), seconds, &report->notes);
  CommandTrials runs(launcher, &report->unit);
  const FixTrial trial = [&](int plan) {
    return runs.Run(command, plan < 0 ? std::vector<std::string>() : plans[static_cast<size_t>(plan)].tokens);
  };
  CommandAltTrials alts(launcher, command);
  const auto alt_trial = [&](size_t plan, AltResult* r) { return alts.Run(plans[plan].tokens, r); };
  if (Status st = MeasureFixes(plans, trials, seconds, o, trial, alt_trial, progress, report); !st.ok()) return st;
  if (!steps_note.empty() && !report->baseline.trial_ms.empty()) report->notes.push_back(steps_note);
  FinishFixReport(o, report);
  return Status::Ok();
}

}  // namespace trainrx::experiments
