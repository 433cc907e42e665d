// `sweep` and `sweep --cmd` (plans.h): every combination of a grid, `trials` rounds in random
// order, ranked by throughput where the samples per step are known; cells that run out of memory
// are results (the batch sweep runs until memory is full).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <random>
#include <sstream>

#include "command_trials.h"
#include "trainrx/experiments/plans.h"
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

// A design whose rank test cannot reach the level (issue 51.1: 9 401 vs 59 658 samples/s, 6.35x,
// with 3 trials a cell, were "tied for best") compares its cells by the few-trials test instead,
// said up front and in the report.
void ChooseSweepTest(const PlanOptions& o, Progress& progress, SweepReport* report) {
  std::vector<double> a(static_cast<size_t>(o.trials)), b(static_cast<size_t>(o.trials));
  for (int i = 0; i < o.trials; ++i) a[static_cast<size_t>(i)] = i, b[static_cast<size_t>(i)] = o.trials + i;
  report->smallest_p = stats::MannWhitneyP(a, b);
  report->few_trials = report->smallest_p >= 0.05;
  if (report->few_trials) {
    const std::string why = fmt::format(
        "--trials {}: a rank test of the trial medians cannot reach p < 0.05 (complete separation gives p = {:.3f}); the "
        "cells are compared by Welch's t on the logs of their trial medians, each trial's noise bounded below by the "
        "spread of its own steps (log-normal process noise assumed). Only large differences can be told apart this "
        "way; 4 trials a cell use the rank test, which assumes nothing about the noise.",
        o.trials, report->smallest_p);
    report->notes.push_back(why);
    progress.Note(why);
  }
}

// The best cell among those that fit (highest throughput, or lowest time for commands) and every
// other cell against it; false when every cell ran out of memory (the report says so).
// What the cells whose input was read count (the first one's; "samples" where none was read);
// *mixed: some read as tokens, others as samples, which have no common measure (issue 81.1).
std::string ReadUnit(const std::vector<SweepCell>& cells, bool* mixed) {
  std::string unit;
  *mixed = false;
  for (const auto& c : cells) {
    if (c.out_of_memory || c.samples_per_step <= 0) continue;
    if (unit.empty()) unit = c.throughput_unit;
    else if (c.throughput_unit != unit) *mixed = true;
  }
  return unit.empty() ? "samples" : unit;
}

bool RankCells(const PlanOptions& o, bool by_time, SweepReport* report) {
  // Cells that ran out of memory are results, not rankable: the best is among the cells that fit.
  size_t fits = 0;
  for (size_t i = 0; i < report->cells.size(); ++i) {
    if (report->cells[i].out_of_memory) continue;
    if (fits++ == 0) report->best = i;
  }
  if (fits == 0) {
    report->best_significant = false;
    return false;
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
    // speedup = median(first) / median(second) > 1 when the best is better. The few-trials test
    // reads only the spread of the steps' logs, the same for times and for their throughputs.
    if (report->few_trials)
      c.vs_best = by_time ? stats::CompareFewTrials(c.arm.trial_ms, c.arm.trial_steps_ms, best.arm.trial_ms,
                                                    best.arm.trial_steps_ms, co)
                          : stats::CompareFewTrials(best.arm.samples_per_s, best.arm.trial_steps_ms, c.arm.samples_per_s,
                                                    c.arm.trial_steps_ms, co);
    else
      c.vs_best = by_time ? stats::Compare(c.arm.trial_ms, best.arm.trial_ms, co)
                          : stats::Compare(best.arm.samples_per_s, c.arm.samples_per_s, co);
    c.tied_with_best = c.vs_best.verdict != stats::Verdict::kFaster;
    report->best_significant = report->best_significant && !c.tied_with_best;
  }
  return true;
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
  ChooseSweepTest(o, progress, report);
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
        cell.arm.trial_steps_ms.clear();
        continue;
      }
      cell.arm.trial_ms.push_back(r.value);
      cell.arm.samples_per_s.push_back(r.samples_per_s);
      cell.arm.trial_steps_ms.push_back(r.step_ms);
      cell.arm.cpu.push_back(r.cpu);
      cell.ranks = std::max(cell.ranks, r.ranks);
      if (r.samples_per_step > 0)
        cell.samples_per_step = r.samples_per_step, cell.samples_from = r.samples_from, cell.throughput_unit = r.throughput_unit;
    }
  }
  // Commands: by throughput once every trial of every cell has one (samples per step known), all in
  // one unit (a cell read as tokens beside one read as samples has no common measure).
  bool mixed = false;
  report->throughput_unit = ReadUnit(report->cells, &mixed);
  if (by_time) {
    bool all_known = !mixed;
    for (const auto& c : report->cells)
      for (double sps : c.arm.samples_per_s) all_known = all_known && sps > 0;
    by_time = !all_known;
  }
  report->by_throughput = !by_time;
  if (!RankCells(o, by_time, report)) return Status::Ok();  // every cell ran out of memory: the report says so
  std::vector<const Arm*> arms;
  for (const auto& c : report->cells) arms.push_back(&c.arm);
  report->machine = SummarizeMachine(arms);
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
    bool mixed = false;
    ReadUnit(r->cells, &mixed);
    if (mixed) {
      r->notes.push_back(fmt::format("ranked by {} (lower is better): some cells' inputs read as tokens, others' as samples, "
                                     "and the two do not compare; give --samples-per-step \"{{batch}}\" to rank by samples per second",
                                     r->unit));
      return;
    }
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
  const std::string& unit = r->throughput_unit;
  r->notes.push_back(lo != hi ? fmt::format("ranked by {} per second: the cells process {:g} to {:g} {} per step "
                                            "({}), so time per step alone would misrank them",
                                            unit, lo, hi, unit, from)
                              : fmt::format("ranked by {} per second ({:g} {} per step in every cell; {})", unit, lo, unit, from));
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
    r->throughput_unit = "samples";  // the user's count, not the shapes' tokens
    r->samples_per_s = report->unit == "ms per step" && r->value > 0 ? static_cast<double>(*n) * 1000.0 / r->value : 0;
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

}  // namespace trainrx::experiments
