// `ab` (plans.h): A and B interleaved (in-process step by step where they differ only in knobs
// that switch, else in separate processes in a balanced order), compared, and explained by a diff
// of one traced run of each side when they differ.
#include <fmt/format.h>

#include <algorithm>
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

// Sides that process different samples a step (`batch=32` against `batch=128`, or two commands whose
// recorded shapes say so) are compared per sample, the ratio of their throughputs, as sweep ranks
// its cells: time a step would call the larger batch slower for doing more (issue 60: b32 against
// b128 on the DDP tutorial read "0.989x, no significant difference" where B did 4x the work; sweep
// on the same knob: 3.34x). Workloads know their batch from the spec; commands from each trial's
// recorded shapes (when a side's are unknown, time a step stays, and a note says why).
Status PerSampleWhereTheBatchDiffers(bool commands, const Spec& a, const Spec& b, const std::vector<double> (&per_sample_ms)[2],
                                     const std::vector<double> (&samples)[2], AbReport* report) {
  const auto median_of = [](const std::vector<double>& v) { return v.empty() ? 0.0 : stats::Median(v); };
  double sa = 0, sb = 0;
  if (!commands) {
    sa = static_cast<double>(a.SamplesPerStep()), sb = static_cast<double>(b.SamplesPerStep());
  } else {
    if (report->unit != "ms per step") return Status::Ok();
    const auto known = [](const std::vector<double>& v) {
      return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return x > 0; });
    };
    if (!known(samples[0]) || !known(samples[1])) {
      const bool a_known = known(samples[0]), b_known = known(samples[1]);
      report->notes.push_back(fmt::format("compared by time a step: the samples a step of {} could not be read from the "
                                          "recorded shapes (if the sides differ in batch, time a step favours the smaller)",
                                          !a_known && !b_known ? "A and B" : a_known ? "B" : "A"));
      return Status::Ok();
    }
    sa = median_of(samples[0]), sb = median_of(samples[1]);
  }
  if (sa <= 0 || sb <= 0 || std::abs(sa - sb) <= 1e-9 * std::max(sa, sb)) return Status::Ok();
  for (int k = 0; k < 2; ++k)
    for (double v : per_sample_ms[k])
      if (v <= 0)
        return Status::Error(fmt::format("{}: a trial reported no throughput, so sides that differ in batch cannot be compared",
                                         k == 0 ? report->a.label : report->b.label));
  report->a.trial_ms = per_sample_ms[0];
  report->b.trial_ms = per_sample_ms[1];
  report->unit = "ms per sample";
  report->notes.push_back(fmt::format("A processes {:g} samples a step, B {:g}: every trial is timed per sample (1000 / "
                                      "samples per second), so the speedup is the ratio of throughputs{}",
                                      sa, sb, commands ? " (samples a step from the recorded input shapes)" : ""));
  return Status::Ok();
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
  std::vector<double> per_sample_ms[2];         // per trial: 1000 / samples per second (0: unknown)
  std::vector<double> samples[2];               // commands, per trial: samples a step (0: unknown)
  for (char side : report->order) {
    Arm& arm = side == 'A' ? report->a : report->b;
    progress.Step(arm.label);
    StatusOr<TrialResult> run = commands ? runs.Run(side == 'A' ? a_text : b_text, {}) : launcher.Trial(side == 'A' ? a : b);
    if (!run.ok()) return run.status();
    TrialResult& r = *run;
    const int k = side == 'A' ? 0 : 1;
    per_sample_ms[k].push_back(r.samples_per_s > 0 ? 1000 / r.samples_per_s : 0);
    samples[k].push_back(r.samples_per_step);
    if (commands) {
      arm.compile_s.push_back(r.compile_s);
      r.samples_per_s = 0;
    }
    arm.trial_ms.push_back(r.median_ms);
    arm.samples_per_s.push_back(r.samples_per_s);
    AddTrialMemory(arm, r);
  }
  if (Status st = PerSampleWhereTheBatchDiffers(commands, a, b, per_sample_ms, samples, report); !st.ok()) return st;
  report->cmp = stats::Compare(report->a.trial_ms, report->b.trial_ms, co);
  report->memory = CompareMemory(report->a, report->b, o.seed);
  if (const std::string note = CompilePayback(*report); !note.empty()) report->notes.push_back(note);
  Explain(launcher, commands ? a_text : a.Label(), commands ? b_text : b.Label(), commands, o.explain,
          report->cmp.verdict != stats::Verdict::kNoDifference, &report->why, &report->explained, &report->notes);
  return Status::Ok();
}

}  // namespace trainrx::experiments
