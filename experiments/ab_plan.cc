// `ab` (plans.h): A and B interleaved (in-process step by step where they differ only in knobs
// that switch, else in separate processes in a balanced order), compared, and explained by a diff
// of one traced run of each side when they differ.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "command_trials.h"
#include "measure_rows.h"
#include "trainrx/experiments/plans.h"
#include "trainrx/experiments/stats.h"

namespace trainrx::experiments {

void Explain(Launcher& launcher, const std::string& a, const std::string& b, bool commands, const std::string& mode,
             bool significant, analyzers::RunDiff* why, bool* explained, std::vector<std::string>* notes) {
  if (mode == "never" || (mode == "auto" && !significant)) return;
  StatusOr<sets::SetAnalysis> sa = launcher.TracedRun(a, commands);
  const int64_t a_stopped = launcher.AnalysisStoppedAfter();
  StatusOr<sets::SetAnalysis> sb = sa.ok() ? launcher.TracedRun(b, commands) : sa.status();
  if (!sb.ok()) {
    notes->push_back("not explained: a traced run of each side could not be made: " + sb.status().message());
    return;
  }
  if (const int64_t stopped = std::max(a_stopped, launcher.AnalysisStoppedAfter()); commands && stopped > 0)
    notes->push_back(fmt::format("explained from each side's first {} optimizer steps: its recorded run was ended there "
                                 "(--analysis-steps; 0: the whole run)",
                                 stopped));
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
// recorded shapes, decided once each side has run once (the first round, before any look), the
// values so far rewritten in the unit chosen. Where a side's samples are unknown, time a step stays
// and a note says why.
class SideUnits {
 public:
  SideUnits(bool commands, const Spec& a, const Spec& b) : commands_(commands) {
    if (commands) return;
    samples_[0] = static_cast<double>(a.SamplesPerStep()), samples_[1] = static_cast<double>(b.SamplesPerStep());
    decided_ = true;
    per_sample_ = Differ(samples_[0], samples_[1]);
  }
  // The value a trial of `side` (0: A) enters the comparison with; `arms` hold the trials so far.
  StatusOr<double> Value(int side, const TrialResult& r, const std::string& label, Arm* const (&arms)[2]) {
    seen_[side].push_back({r.value, r.samples_per_step, r.samples_per_s, r.throughput_unit});
    if (!decided_ && !seen_[0].empty() && !seen_[1].empty()) {
      decided_ = true;
      known_[0] = Known(0), known_[1] = Known(1);
      // A token model's sides count tokens (issue 81.1); sides read in different units do not compare.
      same_unit_ = seen_[0].front().unit == seen_[1].front().unit;
      if (known_[0] && known_[1]) samples_[0] = seen_[0].front().samples, samples_[1] = seen_[1].front().samples;
      per_sample_ = known_[0] && known_[1] && same_unit_ && Differ(samples_[0], samples_[1]);
      if (same_unit_) unit_ = seen_[0].front().unit;
      if (per_sample_)  // the other side's first trial was entered as time a step
        for (int s = 0; s < 2; ++s)
          for (size_t i = 0; i < arms[s]->trial_ms.size() && i < seen_[s].size(); ++i)
            arms[s]->trial_ms[i] = 1000 / seen_[s][i].samples_per_s;
    }
    if (!per_sample_) return r.value;
    if (r.samples_per_s <= 0)
      return Status::Error(fmt::format("{}: a trial reported no throughput, so sides that differ in batch cannot be compared", label));
    return 1000 / r.samples_per_s;
  }
  void Notes(AbReport* report) const {
    const std::string one = unit_ == "tokens" ? "token" : "sample";
    if (per_sample_) {
      report->unit = "ms per " + one;
      report->notes.push_back(fmt::format("A processes {:g} {} a step, B {:g}: every trial is timed per {} (1000 / "
                                          "{} per second), so the speedup is the ratio of throughputs{}",
                                          samples_[0], unit_, samples_[1], one, unit_,
                                          commands_ ? fmt::format(" ({} a step from the recorded input shapes)", unit_) : ""));
    } else if (commands_ && decided_ && !same_unit_) {
      report->notes.push_back(fmt::format("compared by time a step: A's input reads as {} and B's as {}, which do not "
                                          "compare (if the sides differ in batch, time a step favours the smaller)",
                                          seen_[0].front().unit, seen_[1].front().unit));
    } else if (commands_ && decided_ && report->unit == "ms per step" && !(known_[0] && known_[1])) {
      report->notes.push_back(fmt::format("compared by time a step: the samples a step of {} could not be read from the "
                                          "recorded shapes (if the sides differ in batch, time a step favours the smaller)",
                                          !known_[0] && !known_[1] ? "A and B" : known_[0] ? "B" : "A"));
    }
  }

 private:
  struct Seen {
    double ms, samples, samples_per_s;
    std::string unit;  // what `samples` counts: samples or tokens
  };
  static bool Differ(double x, double y) { return x > 0 && y > 0 && std::abs(x - y) > 1e-9 * std::max(x, y); }
  bool Known(int side) const {
    return std::all_of(seen_[side].begin(), seen_[side].end(), [](const Seen& s) { return s.samples > 0 && s.samples_per_s > 0; });
  }
  bool commands_;
  bool decided_ = false, per_sample_ = false, same_unit_ = true;
  std::string unit_ = "samples";
  bool known_[2] = {false, false};
  double samples_[2] = {0, 0};
  std::vector<Seen> seen_[2];
};

// The report of an A/B from its one measured row: the arms, the comparison and its stop, the order
// of the trials, the notes, memory, the machine and torch.compile's payback.
void FinishAbReport(FixReport& measured, const SideUnits& units, uint64_t seed, AbReport* report) {
  FixRow& m = measured.rows.front();
  report->a = std::move(measured.baseline);
  report->b = std::move(m.fixed);
  if (report->paired) report->a.trial_ms = m.paired_baseline_ms;
  report->cmp = m.cmp;
  report->stop = m.stop, report->stop_round = m.stop_round, report->level = m.level;
  report->detectable_at_max = m.detectable_at_max, report->conditional_power = m.conditional_power;
  report->sequential = measured.sequential;
  if (report->paired) {
    report->order = fmt::format("in-process: steps A B B A ... in each of {} processes", m.stop_round);
    report->trials = m.stop_round;
  } else {
    report->order = measured.order;
    std::replace(report->order.begin(), report->order.end(), '1', 'B');
    report->trials = static_cast<int>(report->b.trial_ms.size());
  }
  report->notes.insert(report->notes.end(), measured.notes.begin(), measured.notes.end());
  units.Notes(report);
  report->memory = CompareMemory(report->a, report->b, seed);
  report->machine = SummarizeMachine({&report->a, &report->b});
  if (const std::string note = CompilePayback(*report); !note.empty()) report->notes.push_back(note);
}

}  // namespace

Status RunAb(const std::string& a_text, const std::string& b_text, bool commands, const PlanOptions& o, Launcher& launcher,
             Progress& progress, AbReport* report) {
  if (Status st = stats::EnoughTrials(o.trials); !st.ok()) return st;
  *report = {};
  Spec a, b;
  if (!commands) {
    if (Status st = ParseSpec(a_text, &a); !st.ok()) return st;
    if (Status st = ParseSpec(b_text, &b); !st.ok()) return st;
    if (Status st = launcher.CanRunWorkloads(); !st.ok()) return st;
    // "slowdown=5%": a share of A's median step, measured by one calibration run of A.
    if (a.HasPercentages() || b.HasPercentages()) {
      const StatusOr<TrialResult> calib = launcher.Trial(WithoutPercentages(a));
      if (!calib.ok()) return calib.status();
      ResolvePercentages(&a, calib->value, &report->notes);
      ResolvePercentages(&b, calib->value, &report->notes);
    }
    report->a.label = a.Label();
    report->b.label = b.Label();
  } else {
    report->a.label = a_text;
    report->b.label = b_text;
  }
  // A and B that differ only in knobs the workload can switch between steps are interleaved step
  // by step inside each process (A B B A ...): that removes the process-to-process variation
  // (+-15 % between runs on these VMs), which no number of separate trials averages away cheaply.
  // Either way B is measured as `fix` measures a row (issue 60.6: a fixed 5 trials a side stopped at
  // p = 0.056 on a 1.28x effect that `fix` decides): a look after every process, or after every
  // round from the 4th, until decided, precise, futile, the planned maximum or the budget.
  std::vector<FixPlanRow> plans(1);
  FixPlanRow& row = plans[0];
  row.fixed = b;
  row.row.change = "B";
  row.row.fixed.label = report->b.label;
  if (!commands && SwitchableDifference(a, b, &row.alt)) {
    row.paired = row.row.paired = true;
    report->paired = true;
    report->unit = "ms per step";
    report->notes.push_back("A and B differ only in knobs that switch between steps: compared step by step inside "
                            "each process; each block of four steps (A B B A / B A A B) gives one paired ratio; "
                            "speedup, CI (bootstrap over blocks) and p (Wilcoxon signed-rank) are paired; "
                            "evaluation off");
  }
  FixReport measured;
  measured.baseline.label = report->a.label;
  CommandTrials runs(launcher, &report->unit);  // commands: how every trial was timed
  SideUnits units(commands, a, b);
  const FixTrial trial = [&](int plan) -> StatusOr<TrialResult> {
    const int side = plan < 0 ? 0 : 1;
    StatusOr<TrialResult> r = commands ? runs.Run(side == 0 ? a_text : b_text, {}) : launcher.Trial(side == 0 ? a : b);
    if (!r.ok()) return r;
    Arm* const arms[2] = {&measured.baseline, &plans[0].row.fixed};
    if (commands) arms[side]->compile_s.push_back(r->compile_s);
    const StatusOr<double> value = units.Value(side, *r, arms[side]->label, arms);
    if (!value.ok()) return value.status();
    r->value = *value;
    if (commands) r->samples_per_s = 0;  // a command's throughput is not compared (gate has its own)
    return r;
  };
  const AltTrialFn alt_trial = [&](size_t, AltResult* out) { return launcher.AltTrial(a, plans[0].alt, out); };
  if (Status st = MeasureRows(plans, o.trials, 0, o, trial, alt_trial, progress, &measured); !st.ok()) return st;
  FinishAbReport(measured, units, o.seed, report);
  Explain(launcher, commands ? a_text : a.Label(), commands ? b_text : b.Label(), commands, o.explain,
          report->cmp.verdict != stats::Verdict::kNoDifference, &report->why, &report->explained, &report->notes);
  return Status::Ok();
}

}  // namespace trainrx::experiments
