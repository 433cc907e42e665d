// The gate's trial loop (see gate.h for the decision rule).
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "trainrx/experiments/gate.h"
#include "trainrx/experiments/gate_sequential.h"
#include "trainrx/experiments/plans.h"

namespace trainrx::experiments {

namespace {

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

// One trial of one side: a workload spec (median step ms, samples/s) or a command (its unit).
// `cpu` (when given) gets what the trial's steps got of the CPUs (issue 60.5).
Status RunSide(Launcher& launcher, const std::string& spec, bool command, double* value, double* sps, std::string* unit,
               double* seconds, std::vector<profiler::CpuLoad>* cpu = nullptr) {
  if (command) {
    const StatusOr<TrialResult> r = launcher.Command(spec, {});
    if (!r.ok()) return r.status();
    *value = r->value, *sps = 0, *unit = r->unit, *seconds += r->seconds;
    if (cpu) cpu->push_back(r->cpu);
    return Status::Ok();
  }
  Spec s;
  if (Status st = ParseSpec(spec, &s); !st.ok()) return st;
  const StatusOr<TrialResult> r = launcher.Trial(s);
  if (!r.ok()) return r.status();
  *value = r->value, *sps = r->samples_per_s, *unit = "ms per step", *seconds += r->seconds;
  if (cpu) cpu->push_back(r->cpu);
  return Status::Ok();
}

// The busy machine's warning (issue 60.5), when any of the check's trials was starved.
void WarnIfBusy(const std::vector<profiler::CpuLoad>& cpu, GateReport* report) {
  if (const std::string note = MachineNote(SummarizeTrials(cpu)); !note.empty()) report->warnings.push_back(note);
}

// Words of a spec or command line: "cnn  workers=2" and "cnn workers=2" are the same job.
std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string Describe(const std::string& spec, bool command) {
  return fmt::format("{} `{}`", command ? "the command" : "the built-in workload", spec);
}

}  // namespace

Status SameJob(const Baseline& base, const std::string& baseline_file, const std::string& spec, bool command,
               bool same_job) {
  if (same_job || (base.command == command && Words(base.spec) == Words(spec))) return Status::Ok();
  return Status::Error(fmt::format(
      "{}: the baseline measured {}, but this check runs {}: a gate compares a job with its own baseline, and "
      "these differ in {}. Record a baseline of this job (trainrx gate record-baseline{} -o FILE -- ...), or pass "
      "--same-job if they are one job (e.g. the main branch's build against this one)",
      baseline_file, Describe(base.spec, base.command), Describe(spec, command),
      base.command != command ? "kind (workload vs command)" : "program or arguments", command ? " --cmd" : ""));
}

std::map<std::string, std::string> Fingerprint(const std::string& spec, bool command, const std::string& torch_version) {
  std::map<std::string, std::string> fp;
  fp["cpu_model"] = CpuModel();
  fp["cpus"] = std::to_string(sysconf(_SC_NPROCESSORS_ONLN));
  fp["torch"] = torch_version;
  fp["trainrx"] = TRAINRX_VERSION;
  Spec s;
  if (!command && ParseSpec(spec, &s).ok()) {
    fp["device"] = s.config.Get("device");
    fp["knobs"] = s.config.Changed();
  }
  return fp;
}

Status RecordBaseline(const GateRun& run, Launcher& launcher, Progress& progress, Baseline* b) {
  if (Status st = stats::EnoughTrials(run.trials); !st.ok()) return st;
  if (!run.command) {
    Spec s;
    if (Status st = ParseSpec(run.spec, &s); !st.ok()) return st;
    if (s.HasPercentages()) {
      return Status::Error(fmt::format("'{}': a percentage is relative to a baseline; a baseline itself needs slowdown "
                                       "in microseconds (slowdown=500)",
                                       run.spec));
    }
  }
  *b = {};
  b->spec = run.spec;
  b->command = run.command;
  b->fingerprint = Fingerprint(run.spec, run.command, run.torch_version);
  progress.Start(run.trials + (run.keep_trace.empty() ? 0 : 1));
  double seconds = 0;
  for (int t = 0; t < run.trials; ++t) {
    progress.Step(run.spec);
    double v = 0, sps = 0;
    if (Status st = RunSide(launcher, run.spec, run.command, &v, &sps, &b->unit, &seconds); !st.ok()) return st;
    b->trial_ms.push_back(v);
    if (!run.command) b->samples_per_s.push_back(sps);
  }
  if (run.keep_trace.empty()) return Status::Ok();
  // --keep-trace: one traced run after the untraced trials, stored for later checks to diff against.
  progress.Step(run.spec + " (traced, kept)");
  const StatusOr<sets::SetAnalysis> traced = launcher.TracedRun(run.spec, run.command);
  if (!traced.ok())
    return Status::Error("--keep-trace: a traced run of `" + run.spec +
                         "` could not be made: " + traced.status().message());
  return StoreBaselineTrace(*traced, run.keep_trace, b);
}

namespace {

// Why the check differs from a baseline that kept its trace: that trace against one traced run of
// the check's spec (the baseline is not run again). A trace that cannot be read leaves a note.
void ExplainAgainstStored(const Baseline& base, const GateRun& run, Launcher& launcher, GateReport* report) {
  std::vector<std::string> paths;
  for (const auto& t : base.trace) paths.push_back(t.path);
  sets::SetAnalysis sa;
  if (Status st = sets::AnalyzeSet(paths, {}, &sa); !st.ok()) {
    report->warnings.push_back("not explained: the baseline's stored trace could not be read: " + st.message());
    return;
  }
  const StatusOr<sets::SetAnalysis> sb = launcher.TracedRun(run.spec, run.command);
  if (!sb.ok()) {
    report->warnings.push_back("not explained: a traced run of this check's side could not be made: " +
                               sb.status().message());
    return;
  }
  report->why = analyzers::DiffRuns(sa.trace, sa.report, base.spec + " (the baseline's stored trace)", sb->trace,
                                    sb->report, run.spec, 5);
  report->explained = true;
  report->why_from = "the baseline's stored trace against one more run of this check, recorded and compared";
}

// Trials across processes in rounds (the first of run.trials pairs, then 2 more at a time): side A
// re-runs the baseline spec when `rerun`, else its stored samples stand; decided after each round
// until pass/fail or run.budget_s (0: one round).
Status RunRounds(const Baseline& base, const GateRun& run, bool rerun, Launcher& launcher, Progress& progress,
                 std::vector<MetricSamples>* samples, std::vector<profiler::CpuLoad>* cpu, GateReport* report) {
  std::vector<MetricSamples>& metrics = *samples;
  double seconds = 0;  // trial time so far: the budget
  const int sides = rerun ? 2 : 1;  // trials a pair runs: the progress line counts each (issue 81.10)
  int planned = run.trials * sides;
  for (int round = 0;; ++round) {
    const int n = round == 0 ? run.trials : 2;
    if (round > 0) progress.Replan(planned += n * sides);
    for (char side : stats::PairOrder(n, run.rule.seed + static_cast<uint64_t>(round))) {
      if (side == 'A' && !rerun) continue;
      progress.Step(side == 'A' ? base.spec : run.spec);
      double v = 0, sps = 0;
      std::string unit;
      const std::string& spec = side == 'A' ? base.spec : run.spec;
      if (Status st = RunSide(launcher, spec, side == 'A' ? base.command : run.command, &v, &sps, &unit, &seconds, cpu);
          !st.ok())
        return st;
      if (side == 'B' && unit != base.unit)
        return Status::Error(fmt::format("`{}`: timed in {} but the baseline is in {}", run.spec, unit, base.unit));
      (side == 'A' ? metrics[0].baseline : metrics[0].current).push_back(v);
      if (metrics.size() > 1) (side == 'A' ? metrics[1].baseline : metrics[1].current).push_back(sps);
    }
    report->metrics = DecideGate(metrics, run.rule);
    report->verdict = Overall(report->metrics);
    report->trials = static_cast<int>(metrics[0].current.size());
    report->baseline_trials = static_cast<int>(metrics[0].baseline.size());
    if (report->verdict != GateVerdict::kInconclusive || run.budget_s <= 0) return Status::Ok();
    // Another round must fit: estimated from the trial time per round so far.
    if (seconds / (round + 1) * (round + 2) > run.budget_s) {
      report->warnings.push_back(
          fmt::format("budget {:.0f}s reached after {} round{}", run.budget_s, round + 1, round == 0 ? "" : "s"));
      return Status::Ok();
    }
  }
}

}  // namespace

Status CompareBaselines(const Baseline& base, const std::string& baseline_file, const Baseline& cur,
                        const GateRule& rule, bool same_job, GateReport* out) {
  if (Status st = SameJob(base, baseline_file, cur.spec, cur.command, same_job); !st.ok()) return st;
  if (base.unit != cur.unit) {
    return Status::Error(fmt::format("{}: the baseline is in {} but the current samples in {}: they cannot be compared",
                                     baseline_file, base.unit, cur.unit));
  }
  GateReport& report = *out;
  report = {};
  report.baseline_file = baseline_file;
  report.baseline_fingerprint = base.fingerprint;
  report.rule = rule;
  report.spec = cur.spec;
  report.mode = "stored samples vs stored samples";
  std::vector<MetricSamples> metrics = {{"median step time", "ms", false, base.trial_ms, cur.trial_ms, {}}};
  if (base.unit != "ms per step") metrics[0].unit = "s";
  if (!base.samples_per_s.empty() && !cur.samples_per_s.empty())
    metrics.push_back({"throughput", "samples/s", true, base.samples_per_s, cur.samples_per_s, {}});
  report.trials = static_cast<int>(cur.trial_ms.size());
  report.baseline_trials = static_cast<int>(base.trial_ms.size());
  for (const auto& [k, v] : base.fingerprint) {
    auto it = cur.fingerprint.find(k);
    if (it != cur.fingerprint.end() && it->second != v && k != "knobs")
      report.warnings.push_back(fmt::format("fingerprint {} differs: baseline '{}', current '{}'", k, v, it->second));
  }
  if (same_job && Words(base.spec) != Words(cur.spec))
    report.warnings.push_back(fmt::format("--same-job: the baseline's `{}` taken as the same job", base.spec));
  JudgeByThroughputWhereBatchesDiffer(base.spec, cur.spec, base.command || cur.command, &metrics, &report.warnings);
  report.metrics = DecideGate(metrics, rule);
  report.verdict = Overall(report.metrics);
  return Status::Ok();
}

Status CheckGate(const Baseline& base, const std::string& baseline_file, const GateRun& given, Launcher& launcher,
                 Progress& progress, GateReport* report) {
  if (Status st = stats::EnoughTrials(given.trials); !st.ok()) return st;
  if (Status st = SameJob(base, baseline_file, given.spec, given.command, given.same_job); !st.ok()) return st;
  // A stored trace that is not the one the baseline recorded is found before any trial runs.
  if (!base.trace.empty() && given.explain != "never") {
    if (Status st = CheckBaselineTrace(base, baseline_file); !st.ok()) return st;
  }
  *report = {};
  if (given.same_job && Words(base.spec) != Words(given.spec))
    report->warnings.push_back(fmt::format("--same-job: the baseline's `{}` taken as the same job", base.spec));
  // "slowdown=5%": a share of the baseline's stored median step.
  GateRun run = given;
  Spec current;
  if (!run.command && ParseSpec(run.spec, &current).ok() && current.HasPercentages()) {
    if (base.unit != "ms per step" || base.trial_ms.empty())
      return Status::Error(fmt::format("'{}': a percentage needs a baseline timed in ms per step", run.spec));
    ResolvePercentages(&current, stats::Median(base.trial_ms), &report->warnings);
    run.spec = current.Label();
  }
  report->baseline_file = baseline_file;
  report->baseline_fingerprint = base.fingerprint;
  report->rule = run.rule;
  report->spec = run.spec;
  const auto fp = Fingerprint(run.spec, run.command, run.torch_version);
  bool same_machine = true;
  std::string first_difference;
  for (const auto& [k, v] : base.fingerprint) {
    auto it = fp.find(k);
    if (it == fp.end() || it->second == v || k == "knobs") continue;
    report->warnings.push_back(fmt::format("fingerprint {} differs: baseline '{}', here '{}'", k, v, it->second));
    if (first_difference.empty()) first_difference = report->warnings.back();
    if (k == "cpu_model" || k == "cpus" || k == "device") same_machine = false;
  }
  if (run.strict && !first_difference.empty())
    return Status::Error(first_difference + " (--strict: the baseline was recorded on a different setup)");
  // Re-running the baseline spec only means something when it differs from the current one (a
  // command pointing at the main branch's build, other knobs); the same spec on the same code is
  // compared with the stored samples.
  const bool rerun = same_machine && !run.stored_only && base.spec != run.spec && base.command == run.command;
  Spec bs, cs;
  std::vector<std::string> alt;
  const bool in_process = rerun && !run.command && ParseSpec(base.spec, &bs).ok() && ParseSpec(run.spec, &cs).ok() &&
                          SwitchableDifference(bs, cs, &alt);
  std::vector<MetricSamples> metrics;
  if (in_process) {
    report->mode = "interleaved in-process (A B B A steps; the specs differ only in switchable knobs)";
    metrics = {{"step time", "ms", false, {}, {}, {}}};
  } else {
    report->mode = rerun ? "interleaved re-runs of the baseline spec (ABBA)" : "fresh trials vs stored baseline samples";
    metrics = {{"median step time", base.unit == "ms per step" ? "ms" : "s", false, {}, {}, {}}};
    if (!base.command && !run.command) metrics.push_back({"throughput", "samples/s", true, {}, {}, {}});
    if (!rerun) {
      metrics[0].baseline = base.trial_ms;
      if (metrics.size() > 1) metrics[1].baseline = base.samples_per_s;
    }
    JudgeByThroughputWhereBatchesDiffer(base.spec, run.spec, base.command || run.command, &metrics, &report->warnings);
  }
  progress.Start(in_process || !rerun ? run.trials : 2 * run.trials);
  if (in_process) {  // a look after every process (gate_sequential.h), not rounds each at 0.05
    SequentialGateResult seq;
    if (Status st = DecideInProcessSequentially(launcher, bs, alt, run.trials, run.rule, &seq, run.budget_s, &progress);
        !st.ok())
      return st;
    report->metrics = seq.metrics;
    report->verdict = seq.verdict;
    report->trials = report->baseline_trials = static_cast<int>(seq.alt.log_ratios.size());
    report->mode += fmt::format("; {} of at most {} processes, a look after each (group-sequential: its last look's "
                                "test and interval at {:.1f}%)",
                                seq.processes, seq.max_processes, 100 * seq.level);
    if (seq.verdict == GateVerdict::kInconclusive && run.budget_s > 0)
      report->warnings.push_back(fmt::format("budget {:.0f}s reached after {} processes", run.budget_s, seq.processes));
    WarnIfBusy(seq.alt.cpu, report);
  } else {
    std::vector<profiler::CpuLoad> cpu;
    if (Status st = RunRounds(base, run, rerun, launcher, progress, &metrics, &cpu, report); !st.ok()) return st;
    WarnIfBusy(cpu, report);
  }
  for (const MetricDecision& d : report->metrics)
    if (std::string w = PassAboveToleranceWarning(d, run.rule); !w.empty()) report->warnings.push_back(std::move(w));
  // Explaining needs the baseline's trace (kept with it) or its code run here (re-runs); with
  // stored samples alone the baseline's code is not here.
  const bool explain = run.explain == "always" || (run.explain == "auto" && report->verdict == GateVerdict::kFail);
  if (explain && !base.trace.empty()) {
    ExplainAgainstStored(base, run, launcher, report);
  } else if (rerun) {
    Explain(launcher, base.spec, run.spec, run.command, run.explain, report->verdict == GateVerdict::kFail, &report->why,
            &report->explained, &report->warnings);
  } else if (explain) {
    report->warnings.push_back("not explained: the baseline is stored samples, so its code cannot be traced here; record "
                               "the baseline with --keep-trace, or check the main branch's copy with --same-job "
                               "(interleaved re-runs) to get the diff, or record both and run trainrx diff");
  }
  return Status::Ok();
}

Status SelfTest(const GateRun& run, const std::vector<double>& pcts, int repeats, bool across_processes,
                Launcher& launcher, Progress& progress, SelfTestReport* report,
                const std::vector<RuleVariant>& variants) {
  Spec s;
  if (run.command && across_processes)
    return Status::Error("gate self-test --cmd: --across-processes is for workloads (a command's slowdown is planted "
                         "in-process by the start-up hook)");
  if (!run.command) {
    if (Status st = ParseSpec(run.spec, &s); !st.ok()) return st;
    if (Status st = launcher.CanRunWorkloads(); !st.ok()) return st;
  }
  *report = {};
  report->spec = run.spec;
  // Calibrate the injected slowdowns against the spec's own median step.
  const StatusOr<TrialResult> calibration = run.command ? launcher.Command(run.spec, {}) : launcher.Trial(s);
  if (!calibration.ok()) return calibration.status();
  const TrialResult& calib = *calibration;
  report->median_ms = calib.value;
  progress.Start(static_cast<int>(pcts.size()) * repeats);
  for (double pct : pcts) {
    SelfTestCase c;
    c.name = pct == 0 ? "A/A" : fmt::format("slowdown {:g}%", pct);
    c.pct = pct;
    c.repeats = repeats;
    for (const auto& v : variants) c.variants.push_back({v.name, 0, 0, 0});
    for (int r = 0; r < repeats; ++r) {
      progress.Step(c.name);
      // B = the same spec with a slowdown knob (0 for A/A): switchable, so compared in-process; a
      // command's B steps busy-wait that long inside the step (the start-up hook's slowdown_us).
      const std::string b = fmt::format("{}={:.0f}", run.command ? "slowdown_us" : "slowdown", calib.value * 1000 * pct / 100);
      GateRule rule = run.rule;
      rule.seed = run.rule.seed + static_cast<uint64_t>(r);
      MetricSamples m{"step time", "ms", false, {}, {}, {}};
      if (across_processes) {
        const Spec sb = s.With(b);
        const std::string order = stats::PairOrder(run.trials, rule.seed);
        for (const char side : order) {
          const StatusOr<TrialResult> t = launcher.Trial(side == 'A' ? s : sb);
          if (!t.ok()) return t.status();
          (side == 'A' ? m.baseline : m.current).push_back(t->value);
        }
      }
      GateVerdict v = GateVerdict::kInconclusive;
      std::vector<MetricDecision> decided;
      if (across_processes) {
        decided = DecideGate({m}, rule);
        v = Overall(decided);
        c.processes += 2 * run.trials;
      } else {  // a look after every process, as the gate's in-process check (gate_sequential.h)
        SequentialGateResult seq;
        const auto command_process = [&](AltResult* out) {
          if (Status st = launcher.CommandAlt(run.spec, {b}, out); !st.ok()) return st;
          if (!out->unpaired.empty())
            return Status::Error(fmt::format("gate self-test --cmd: `{}` cannot plant a slowdown in-process: {}", run.spec,
                                             out->unpaired));
          return Status::Ok();
        };
        if (Status st = run.command ? DecideSequentially(command_process, run.spec, run.trials, rule, &seq)
                                    : DecideInProcessSequentially(launcher, s, {b}, run.trials, rule, &seq);
            !st.ok())
          return st;
        m.baseline = seq.alt.a_ms, m.current = seq.alt.b_ms, m.paired_log_ratios = seq.alt.log_ratios;
        v = seq.verdict;
        decided = seq.metrics;
        c.processes += seq.processes;
      }
      if (!decided.empty()) {
        c.estimates.push_back(decided.front().worse - 1);
        c.half_widths.push_back((decided.front().ci_high - decided.front().ci_low) / 2);
      }
      c.fail += v == GateVerdict::kFail;
      c.pass += v == GateVerdict::kPass;
      c.inconclusive += v == GateVerdict::kInconclusive;
      for (size_t k = 0; k < variants.size(); ++k) {
        GateRule other = variants[k].rule;
        other.seed = rule.seed;
        const auto w = Overall(DecideGate({m}, other));
        c.variants[k].fail += w == GateVerdict::kFail;
        c.variants[k].pass += w == GateVerdict::kPass;
        c.variants[k].inconclusive += w == GateVerdict::kInconclusive;
      }
    }
    report->cases.push_back(c);
  }
  return Status::Ok();
}

std::vector<RuleVariant> CompareRuleVariants(const GateRule& rule) {
  std::vector<RuleVariant> variants;
  auto with = [&](const char* name, double alpha, double margin) {
    GateRule r = rule;
    r.alpha = alpha;
    r.fail_ci_margin = margin;
    variants.push_back({name, r});
  };
  with("CI above 1 (rule before)", rule.alpha, 0);
  with("alpha 0.01", 0.01, rule.fail_ci_margin);
  with("CI above the tolerance", rule.alpha, rule.tolerance);
  return variants;
}

}  // namespace trainrx::experiments
