// trainrx::experiments gate_sequential — the gate's in-process comparison decided process by
// process: called by SelfTest (gate_run.cc) and, through the same function, what `gate
// self-test` measures. Torch-free, pure apart from the launcher it is given; no threads.
//
// Design. Each process alternates A and B in paired blocks of steps (>= 16 blocks). After every
// process k of at most N there is a look at information fraction t = k / N, at the nominal level
// a_k of a group-sequential boundary (Hwang-Shih-DeCani, gamma = -3, alpha = the rule's alpha;
// experiments/sequential.h), and the gate's rule is applied with alpha = a_k (its test and its
// interval at that level: the intervals are repeated confidence intervals, Jennison & Turnbull
// ch. 9, whose coverage holds over all looks together):
//   fail  at any look: GateRule's fail (significant at a_k, the interval's lower end above
//         1 + fail_ci_margin, the estimate above the tolerance). Over all looks an A/A is failed
//         with probability <= alpha / 2 (one side of the two-sided boundary).
//   pass  before the last look only when the interval's upper end is below 1 + tolerance: a
//         change clearly smaller than what the gate fails, so a real slowdown above the tolerance
//         is rarely passed early (that is what keeps the power at 5 %); at the last look,
//         GateRule's pass (the upper end below 1 + max_undetected: the tolerance unless widened).
//   else  inconclusive at the last look.
// Why: today's self-test spends `trials` processes on every decision, while an A/A or a 10 %
// slowdown is clear after one or two (measured through the fake launcher in
// tests/experiments/gate_sequential_test.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "trainrx/experiments/gate.h"
#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/spec.h"

namespace trainrx::experiments {

struct SequentialGateResult {
  AltResult alt;                        // every process's steps and blocks
  std::vector<MetricDecision> metrics;  // the decision at the look it stopped at
  GateVerdict verdict = GateVerdict::kInconclusive;
  int processes = 0;                    // processes run (looks made)
  int max_processes = 0;                // the planned maximum N
  double level = 0.95;                  // 1 - the nominal alpha of that look
};

// Runs up to `max_processes` in-process trials of `spec` with `alt` (B) set, deciding after each.
// `budget_s` > 0 (gate check --budget): the maximum is what the budget fits at the first
// process's time (never below `max_processes`, at most 40), set before the first look. `progress`:
// told of each process. An error (the launcher's message) when a trial fails.
Status DecideInProcessSequentially(Launcher& launcher, const Spec& spec, const std::vector<std::string>& alt,
                                   int max_processes, const GateRule& rule, SequentialGateResult* out,
                                   double budget_s = 0, Progress* progress = nullptr);
// The same design over any in-process trial: `one_process` adds one process's steps and blocks to
// its argument (a workload's AltTrial, a command's CommandAlt), `label` names it to `progress`.
Status DecideSequentially(const std::function<Status(AltResult*)>& one_process, const std::string& label,
                          int max_processes, const GateRule& rule, SequentialGateResult* out, double budget_s = 0,
                          Progress* progress = nullptr);

// The decision of one look (pure): the paired samples so far, look k of at most n.
// `nominal_alpha`: the look's level; `final_look`: the last one (GateRule's own pass).
GateVerdict DecideLook(const MetricSamples& m, const GateRule& rule, double nominal_alpha, bool final_look,
                       std::vector<MetricDecision>* decisions);

}  // namespace trainrx::experiments
