// `ab` (plans.h): A and B interleaved (in-process step by step where they differ only in knobs
// that switch, else in separate processes in a balanced order), compared, and explained by a diff
// of one traced run of each side when they differ.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "command_trials.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/stats.h"

namespace trainrx::experiments {

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
