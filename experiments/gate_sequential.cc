// The gate's in-process comparison decided process by process (see gate_sequential.h).
#include "trainrx/experiments/gate_sequential.h"

#include <algorithm>

#include "trainrx/experiments/sequential.h"

namespace trainrx::experiments {

namespace {
// As the fix rows' design (fix_plan.cc): Hwang-Shih-DeCani with gamma = -3 spends little at the first
// looks and ends close to the fixed design's level (6 looks: 0.0015 at the first, ~0.036 at the last).
constexpr double kSpendingGamma = -3;
// Upper bound on the processes a budget can plan (keeps the boundaries' work small; 40 processes
// are 640 paired blocks, precise to ~0.3 % on these machines).
constexpr int kMaxProcesses = 40;
}  // namespace

GateVerdict DecideLook(const MetricSamples& m, const GateRule& rule, double nominal_alpha, bool final_look,
                       std::vector<MetricDecision>* decisions) {
  GateRule at = rule;
  at.alpha = nominal_alpha;
  *decisions = DecideGate({m}, at);
  MetricDecision& d = decisions->front();
  if (d.verdict == GateVerdict::kFail || final_look) return d.verdict;
  // Before the last look, pass only a change the interval shows to be below the tolerance.
  d.verdict = d.ci_high < 1 + rule.tolerance ? GateVerdict::kPass : GateVerdict::kInconclusive;
  return d.verdict;
}

Status DecideInProcessSequentially(Launcher& launcher, const Spec& spec, const std::vector<std::string>& alt,
                                   int max_processes, const GateRule& rule, SequentialGateResult* out, double budget_s,
                                   Progress* progress) {
  return DecideSequentially([&](AltResult* r) { return launcher.AltTrial(spec, alt, r); }, spec.Label(), max_processes,
                            rule, out, budget_s, progress);
}

Status DecideSequentially(const std::function<Status(AltResult*)>& one_process, const std::string& label,
                          int max_processes, const GateRule& rule, SequentialGateResult* out, double budget_s,
                          Progress* progress) {
  *out = {};
  out->max_processes = max_processes;
  if (progress) progress->Replan(max_processes);
  stats::SequentialDesign design({stats::SpendingKind::kHwangShihDeCani, kSpendingGamma}, rule.alpha);
  for (int k = 1; k <= out->max_processes; ++k) {
    if (progress) progress->Step(label);
    if (Status st = one_process(&out->alt); !st.ok()) return st;
    out->processes = k;
    // The budget's maximum depends on the first process's time only, never on its data.
    if (k == 1 && budget_s > 0 && out->alt.seconds > 0) {
      out->max_processes = std::clamp(static_cast<int>(budget_s / out->alt.seconds), max_processes, kMaxProcesses);
      if (progress) progress->Replan(out->max_processes);
    }
    const int n = out->max_processes;
    const bool final_look = k == n;
    const stats::Look look = design.Add(final_look ? 1.0 : static_cast<double>(k) / n);
    MetricSamples m{"step time", "ms", false, out->alt.a_ms, out->alt.b_ms, out->alt.log_ratios};
    out->verdict = DecideLook(m, rule, look.nominal_alpha, final_look, &out->metrics);
    out->level = 1 - look.nominal_alpha;
    if (out->verdict != GateVerdict::kInconclusive) break;
  }
  return Status::Ok();
}

}  // namespace trainrx::experiments
