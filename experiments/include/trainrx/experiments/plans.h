// trainrx::experiments plans — `fix`, `sweep` and `ab` as library calls: each plans its trials,
// runs them through a Launcher in a randomized, interleaved order, and returns a plain record
// (results.h) in *report for reports/ to render. An error (trainrx::Status) when a trial fails or
// the input is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/results.h"
#include "trainrx/experiments/spec.h"

namespace trainrx::experiments {

// `trainrx fix`'s budget when none is asked (the one owner of the figure; a library caller's
// PlanOptions has none unless it takes this).
inline constexpr double kFixDefaultBudgetS = 900;

struct PlanOptions {
  int trials = 5;       // per configuration (>= 4: fewer can never reach p < 0.05)
  double budget_s = 0;  // fix: cap on the total time (fewer trials, never below 4); 0 = none (kFixDefaultBudgetS: fix's CLI default)
  uint64_t seed = 1;    // interleaving order, bootstrap
  // fix: a row measured across processes that is not significant gets more rounds until it can
  // rule out a speedup of this size (0.03: 3 %), within the budget.
  double min_effect = 0.03;
  // fix: a row across processes whose conditional power (under the current trend) to reach
  // significance by the planned maximum of rounds is below this stops early (non-binding
  // futility); 0: never.
  double futility_power = 0.05;
  // sweep --cmd: samples per step of each cell, "{batch}" or "{batch}*{accum}" or "64" (filled
  // from the cell's grid values); empty: read from the recorded input shapes where they tell.
  std::string samples_per_step;
  // > 0: every trial process runs under this RLIMIT_DATA (`--memory-cap`, the CPU stand-in for a
  // device's capacity); a sweep cell that runs out of memory is a result ("out of memory"), not a
  // failed experiment.
  uint64_t memory_cap_bytes = 0;
  // --cmd trials (fix, sweep, ab): optimizer steps a trial runs before the start-up hook ends it as
  // if it had finished (its value is the median of its steps after the first; a script without
  // torch.optim counts backward passes); 0: whole runs. kAutoTrialSteps: `fix --cmd` chooses from
  // its analysis run (the warm-up it saw and the steps the spread needs), sweep and ab run
  // kDefaultTrialSteps.
  static constexpr int64_t kAutoTrialSteps = -1, kDefaultTrialSteps = 40;
  int64_t trial_steps = kAutoTrialSteps;
  // fix --cmd: its analysis run ends after this many steps (0: the whole run), so that a script
  // with no step limit of its own is analyzed in minutes; the report says when it did.
  int64_t analysis_steps = 200;
  // fix: rows whose predicted saving (the what-if replay's) cannot reach what trials detect, its
  // replayed range's high end (before the calibration margin) under kUnlikelyPct, are said in a
  // note, and skipped with this set where the transform's measured record allows it.
  bool skip_unlikely = false;
  static constexpr double kUnlikelyPct = 1.0;
  // ab: after the trials, one traced run of each side diffed to explain the verdict: "auto" when the
  // difference is significant, "always", or "never".
  std::string explain = "auto";
  // fix --cmd: outside fixes to measure beside the findings' (`--also`, the start-up hook's tokens
  // as analyzers::ResolveOutsideFix gives them), each predicted by its transform where one models it.
  std::vector<std::string> also;
};

// A transform's measured record (prediction_record.cc): its predictions checked by a rerun, and how
// many of those measured a significant saving outside the predicted interval.
struct TransformRecord {
  const char* transform;
  int rows;    // predictions measured
  int missed;  // of them, a significant measured saving outside the interval (or none predicted)
  const char* source;
  // Few rows prove nothing: a row of this transform may be skipped as unlikely only with at least
  // kRowsToSkip measured rows and none missed.
  static constexpr int kRowsToSkip = 3;
  bool AllowsSkip() const;
  std::string Text() const;
};
// nullptr: the transform's predictions were never measured.
const TransformRecord* FindTransformRecord(std::string_view transform);
// The record's text, or "<transform>: never measured against a rerun" where there is none.
std::string RecordText(const TransformRecord* record, std::string_view transform);

// The rows whose predicted interval ends under PlanOptions::kUnlikelyPct (not the all row): named in
// a note with the trials they would take; removed when `skip` (`fix --skip-unlikely`) and every
// one of the row's transforms has a record that allows it (TransformRecord::AllowsSkip); the note
// says which were kept and the record behind it. Returns how many were skipped (or, without
// `skip`, would be).
using RecordFinder = const TransformRecord* (*)(std::string_view transform);
size_t SkipUnlikelyRows(std::vector<struct FixPlanRow>* plans, bool skip, int trials, double seconds_per_trial,
                        std::vector<std::string>* notes, RecordFinder find_record = &FindTransformRecord);

// The process launcher's options for a plan's options (--memory-cap, --trial-steps, --analysis-steps).
LauncherOptions LauncherOptionsOf(const PlanOptions& options);

// What `fix` will change: one row per knob away from its default that a finding names (the
// finding's own knob, or the knob table's), then an "all fixes" row when there are several; the
// notes say which findings no knob of the workload fixes. Pure: unit-tested without trials.
struct FixPlanRow {
  FixRow row;     // change, findings, estimated saving; filled further by RunFix
  Spec fixed;     // the spec with the fix applied
  std::vector<std::string> alt;  // switchable: B's assignments for an in-process paired trial
  bool paired = false;
  std::vector<std::string> tokens;  // fix --cmd: the start-up hook's fixes (TRAINRX_FIX)
  // Planned in-process but measured across processes: why (a --cmd script that sets the flag
  // itself, too few steps, torch.compile; Launcher::CommandAlt's AltResult::unpaired).
  std::string unpaired;
};
std::vector<FixPlanRow> PlanFixes(const Spec& spec, const analyzers::Report& analysis, std::vector<std::string>* notes);

Status RunFix(const Spec& spec, const PlanOptions& options, Launcher& launcher, Progress& progress, FixReport* report);

// `fix --cmd`: fixes applied to an unmodified script from outside, by the Python start-up hook
// (probes/python/sitecustomize.py) that `trainrx record` injects when TRAINRX_FIX names them: the
// finding catalog's outside_token and outside_code (analyzers/catalog.h).
// One row per hook token a finding names, "all of the above" with 2+; notes give the code change
// for findings that cannot be applied from outside. A row whose tokens all switch between steps
// (analyzers::OutsideFixSwitches) is paired: measured in-process (Launcher::CommandAlt), unless the
// analysis run shows torch.compile or more than one rank (then a note says why not).
// `also`: outside fixes no finding needs to name (PlanOptions::also), one row each after the all
// row, predicted from the analysis's "asked" what-if of their transform (AlsoTransforms: the
// transforms the analysis run must be asked for).
std::vector<FixPlanRow> PlanCommandFixes(const std::string& command, const analyzers::Report& analysis,
                                         std::vector<std::string>* notes, const std::vector<std::string>& also = {});
std::vector<std::string> AlsoTransforms(const std::vector<std::string>& also);
Status RunFixCommand(const std::string& command, const PlanOptions& options, Launcher& launcher, Progress& progress,
                     FixReport* report);
// grids: "knob=v1,v2,..." each; every combination runs `trials` times.
Status RunSweep(const Spec& base, const std::vector<std::string>& grids, const PlanOptions& options, Launcher& launcher,
                Progress& progress, SweepReport* report);
// A user's command as a template: "python3 train.py --workers {workers}" with --grid workers=0,2,4;
// cells are timed by the command's steps (or runs). They rank by samples per second when every
// cell's samples per step is known (options.samples_per_step, else the recorded input shapes),
// else by time per step, with a note (time per step misranks cells whose batches differ).
Status RunSweepCommand(const std::string& command_template, const std::vector<std::string>& grids,
                       const PlanOptions& options, Launcher& launcher, Progress& progress, SweepReport* report);
std::string FillTemplate(const std::string& command_template, const std::vector<std::pair<std::string, std::string>>& values);

// Why B differs from A: one traced run of each side (the trials stay untraced) and their
// diff (analyzers::DiffRuns), when `mode` is "always", or "auto" and `significant`. A side that
// cannot be traced adds a note and leaves the verdict as measured.
void Explain(Launcher& launcher, const std::string& a, const std::string& b, bool commands, const std::string& mode,
             bool significant, analyzers::RunDiff* why, bool* explained, std::vector<std::string>* notes);

// a and b are workload specs, or with `commands` command lines (run under `trainrx record`).
Status RunAb(const std::string& a, const std::string& b, bool commands, const PlanOptions& options, Launcher& launcher,
             Progress& progress, AbReport* report);

}  // namespace trainrx::experiments
