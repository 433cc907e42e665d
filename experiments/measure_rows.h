// Internal to experiments/: how `fix` measures its rows (fix_plan.cc), also `ab`'s one row (B
// against A, issue 60.6): in-process rows a look after every process, the others in rounds of
// separate processes with a look after each from the 4th, each row until it is decided, precise,
// futile, at its planned maximum or out of budget (group-sequential, error-spending boundaries).
#pragma once

#include <functional>
#include <vector>

#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/results.h"

namespace trainrx::experiments {

// One trial of the baseline (plan -1) or of a row's configuration (plan i).
using FixTrial = std::function<StatusOr<TrialResult>(int plan)>;
// One in-process run of row `plan`, appended to *out.
using AltTrialFn = std::function<Status(size_t plan, AltResult*)>;

// Measures every row of `plans` (paired ones in-process, up to `trials` processes each; the others
// in rounds, at most twice `trials` without a budget) into report->baseline, report->rows (moved
// from the plans), report->order, report->sequential and report->notes. `estimate_s`: one trial's
// seconds before any ran, for the budget's plan.
Status MeasureRows(std::vector<FixPlanRow>& plans, int trials, double estimate_s, const PlanOptions& o,
                   const FixTrial& trial, const AltTrialFn& alt_trial, Progress& progress, FixReport* report);

}  // namespace trainrx::experiments
