// trainrx::experiments gate — the CI regression gate's decision rule, baseline file format and
// the record of one check (GateReport; reports/gate.h renders it). Torch-free, pure; the trial
// loop is gate_run.cc.
//
// Decision per metric, on trial samples of the baseline (A) and the current run (B), oriented so
// that w > 1 is worse (time: B/A; throughput: A/B), with the statistics of stats.h:
//   fail          the slowdown is significant (Holm-adjusted one-sided Mann-Whitney p < alpha and
//                 the 95 % CI of w lies above 1 + fail_ci_margin, half the tolerance) and its
//                 estimate exceeds the tolerance
//   pass          not fail, and the run rules out a regression of `max_undetected` or more
//                 (the CI's upper bound of w is below 1 + max_undetected). max_undetected is the
//                 tolerance unless the user widens it (`--pass-below`): a pass then never hides a
//                 slowdown above the tolerance (with 10 %, a real 5 % slowdown passed in 11
//                 of 40 checks). A pass says what it rules out (PassRulesOut).
//   inconclusive  otherwise: the runner adds trials up to its budget, then reports it (exit 3)
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "trainrx/analyzers/diff.h"
#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/stats.h"
#include "trainrx/profiler/status.h"
#include "trainrx/sets/analyze_set.h"

namespace trainrx::experiments {

inline constexpr const char* kBaselineSchema = "trainrx.baseline/1";
inline constexpr const char* kGateSchema = "trainrx.gate/1";

enum class GateVerdict { kPass, kFail, kInconclusive };
const char* GateVerdictName(GateVerdict v);  // "pass", "fail", "inconclusive"

struct GateRule {
  double tolerance = 0.03;       // slowdowns below 3 % are not failures
  double max_undetected = 0.03;  // pass needs the CI to rule out a regression this large (the tolerance)
  double alpha = 0.05;
  // fail also needs the CI's lower bound of w above 1 + this. Half the tolerance by default: with
  // only "above 1", 300 A/A decisions in-process gave 4 and 10 false alarms (1.3 % and 3.3 %, two
  // runs); with half the tolerance, 0 of the same 300 (bench/gate_false_alarms.sh, docs/gate.md).
  double fail_ci_margin = 0.015;
  int resamples = 2000;
  uint64_t seed = 1;
};

struct MetricSamples {
  std::string name;              // "median step time", "throughput"
  std::string unit;              // "ms", "samples/s"
  bool higher_is_better = false;
  std::vector<double> baseline, current;
  // In-process paired design: log(current / baseline) per block; when set, the decision uses
  // stats::ComparePaired (signed-rank) instead of the two-sample comparison.
  std::vector<double> paired_log_ratios;
  // False: shown, not judged (where the sides' batches differ, time a step would call the
  // larger batch slower for doing more; throughput decides).
  bool judged = true;
};

struct MetricDecision {
  std::string name, unit;
  bool higher_is_better = false;
  double baseline_median = 0, current_median = 0;
  double worse = 1, ci_low = 1, ci_high = 1;  // w and its 95 % CI (> 1: worse)
  double p_value = 1, p_holm = 1;             // one-sided, "current is worse"
  double detectable = 1;                      // smallest regression this run could detect (ratio)
  GateVerdict verdict = GateVerdict::kInconclusive;
  bool judged = true;                         // false: shown only (MetricSamples::judged); not in Overall
};

// Decides every metric, Holm-correcting the p-values across the judged ones. The overall verdict
// (over the judged metrics) is fail if any fails, else inconclusive if any is, else pass.
std::vector<MetricDecision> DecideGate(const std::vector<MetricSamples>& metrics, const GateRule& rule);
GateVerdict Overall(const std::vector<MetricDecision>& decisions);
// Workload specs whose samples a step differ (batch, grad_accum, nproc): the time metrics are shown
// and not judged, throughput decides, and a warning says so. Commands and equal batches: unchanged.
void JudgeByThroughputWhereBatchesDiffer(const std::string& baseline_spec, const std::string& current_spec, bool command,
                                         std::vector<MetricSamples>* metrics, std::vector<std::string>* warnings);

// One file of a baseline's stored trace (`gate record-baseline --keep-trace`): the baseline's
// traced run as Kineto JSON, gzip'd, one file per rank, in the baseline's folder. Kept beside the
// baseline, not in it: the baseline stays a small file to review and commit (a trace is 100 kB to
// MBs), and the trace stays a file `trainrx analyze`/`diff`, Perfetto and HTA open as it is. The
// baseline records each file's size and FNV-1a 64 checksum, so that a trace replaced, cut or
// edited since is an error, not a diff against another run.
struct StoredTrace {
  std::string file;  // as the baseline names it: relative to the baseline's folder
  std::string path;  // where it is read from (ParseBaseline: file, resolved against the baseline's folder)
  uint64_t bytes = 0;
  std::string fnv1a64;  // 16 hex digits
};

// What a baseline stores (JSON, schema trainrx.baseline/1).
struct Baseline {
  std::string spec;     // "cnn workers=2" or a command
  bool command = false;
  std::map<std::string, std::string> fingerprint;  // cpu_model, cpus, torch, device, trainrx, knobs
  std::vector<double> trial_ms;       // per trial: mean step time (or wall s for commands)
  std::vector<double> samples_per_s;  // per trial (empty for commands)
  std::string unit = "ms per step";
  std::vector<StoredTrace> trace;     // empty: no trace kept (a check re-runs the baseline to explain)
};
void WriteBaseline(const Baseline& b, std::ostream& out);
// Parses a baseline file's text into *b; an error naming the file, the field and what was expected.
Status ParseBaseline(const std::string& text, const std::string& file, Baseline* b);
// Reads and parses the baseline file `path`; an error ("PATH: cannot open the baseline", or what
// ParseBaseline says).
Status ReadBaselineFile(const std::string& path, Baseline* b);
// Checks that a baseline can be written to `path` before any trial runs: its folder is created (the
// CI recipe writes into one a fresh checkout may not have) and the file opens for writing (no file
// is left behind where there was none). An error naming the file otherwise.
Status PrepareBaselineFile(const std::string& path);

// Where `gate record-baseline --keep-trace -o B` stores the baseline's trace: B without its
// ".json" and with ".trace.json.gz" ("perf/base.json" -> "perf/base.trace.json.gz"); a run of
// several ranks one file per rank ("perf/base.trace.rank1.json.gz").
std::string BaselineTracePath(const std::string& baseline_path);
// Writes `traced` (one traced run, read merged) at `trace_path` (per rank, see BaselineTracePath)
// and records the files in b->trace. An error naming the file.
Status StoreBaselineTrace(const sets::SetAnalysis& traced, const std::string& trace_path, Baseline* b);
// Checks that every file of the baseline's stored trace is there with the size and checksum the
// baseline recorded. An error naming the baseline, the file and what differs.
Status CheckBaselineTrace(const Baseline& b, const std::string& baseline_file);

// The slowdown a passed metric rules out: its CI's upper end of w, less 1 (0.024: "rules out 2.4 % or
// more"); nullopt for a metric that is not a judged pass. Where that is above the tolerance (a user's
// wider --pass-below), a warning says which slowdowns the pass leaves possible.
std::optional<double> PassRulesOut(const MetricDecision& d);
std::string PassAboveToleranceWarning(const MetricDecision& d, const GateRule& rule);

struct GateReport {
  std::string baseline_file, spec, mode;  // mode: "interleaved re-runs" / "stored samples"
  std::vector<std::string> warnings;      // fingerprint mismatches, budget notes
  std::map<std::string, std::string> baseline_fingerprint;  // where and how the baseline was measured
  GateRule rule;
  int trials = 0;           // current trials (in-process: paired blocks)
  int baseline_trials = 0;  // the baseline's trials compared against (may differ: stored samples)
  std::vector<MetricDecision> metrics;
  GateVerdict verdict = GateVerdict::kInconclusive;
  // Why: on a fail (or --explain always), one traced run of the baseline's spec and of
  // the current one, diffed.
  analyzers::RunDiff why;
  bool explained = false;
  // How the diff's sides were made, for the report ("" : one more traced run of each side).
  std::string why_from;
};

// ---- Running the gate (gate_run.cc): trials through a Launcher, rounds until a decision. ----

struct GateRun {
  std::string spec;       // a workload spec, or with `command` a command line
  bool command = false;
  int trials = 6;         // first round; later rounds add 2 (ABBA) until a decision or the budget
  double budget_s = 0;    // 0: one round
  bool strict = false;    // a fingerprint difference is an error
  bool stored_only = false;  // never re-run the baseline spec
  // The user says the baseline's program and this one are the same job although their command
  // lines differ (the main branch's build against this one, a renamed script): see SameJob.
  bool same_job = false;
  std::string explain = "auto";  // "auto" (on a fail), "always", "never"
  std::string torch_version;
  GateRule rule;
  // record-baseline --keep-trace: after the trials, one traced run stored here (BaselineTracePath
  // of the baseline) and named in the baseline; "": none kept.
  std::string keep_trace;
};

// The machine and setup a measurement belongs to: cpu_model, cpus, torch, trainrx and, for a
// workload spec, its device and changed knobs.
std::map<std::string, std::string> Fingerprint(const std::string& spec, bool command, const std::string& torch_version);

// A gate compares one job with its own baseline. Issue 34: a baseline of the built-in `cnn` checked
// against `--cmd -- python train.py` printed "fail ... 112.9 % slower" (exit 1): the stored samples
// of one program were compared with another's. An error naming both sides when the baseline's
// program or arguments (workload spec or command line, compared word by word) differ from the
// check's, unless `same_job`; the caller exits 2.
Status SameJob(const Baseline& baseline, const std::string& baseline_file, const std::string& spec, bool command,
               bool same_job);

// `run.trials` untraced trials of run.spec (and with run.keep_trace one traced run, stored) into
// *out. An error when the spec or the trial count is refused, or a trial fails.
Status RecordBaseline(const GateRun& run, Launcher& launcher, Progress& progress, Baseline* out);

// Compares `run.spec` with the baseline: re-running the baseline spec interleaved (in-process when
// the specs differ only in switchable knobs) when it differs from the current one on the same
// machine, else fresh trials against the stored samples; rounds until pass/fail or the budget.
// Explaining a fail (run.explain): a baseline with a stored trace is diffed against one traced run
// of `run.spec` (the baseline is not traced again; its trace is checked before any trial, and a
// missing or changed one is an error unless run.explain is "never"); without one, a traced run of
// each side when the baseline spec is re-run here, else a note that it cannot be explained.
Status CheckGate(const Baseline& baseline, const std::string& baseline_file, const GateRun& run, Launcher& launcher,
                 Progress& progress, GateReport* report);
// Stored samples against stored samples (--current FILE): no trials. An error when the two files
// are of different jobs (SameJob) or units.
Status CompareBaselines(const Baseline& baseline, const std::string& baseline_file, const Baseline& current,
                        const GateRule& rule, bool same_job, GateReport* report);

// How often the rule fails on an A/A comparison (false alarms) and on injected slowdowns
// (detection), each case `repeats` times. In-process (default): up to `run.trials` processes, each
// alternating A and B blocks (the paired design the gate uses for switchable knobs), a look after
// each (DecideInProcessSequentially, gate_sequential.h: clear cases stop early). Across
// processes: `run.trials` processes per side, interleaved A B B A ..., decided by the two-sample
// rule (the gate's design for stored samples and commands).
struct SelfTestCase {
  std::string name;  // "A/A", "slowdown 5%"
  double pct = 0;
  int fail = 0, pass = 0, inconclusive = 0, repeats = 0;
  int processes = 0;  // workload processes its decisions ran (in-process: they stop when decided)
  // Each decision's estimate of the slowdown (w - 1) and its CI's half-width, at the look that decided
  // it: whether a miss is the statistic (estimates off the injected slowdown) or its precision.
  std::vector<double> estimates, half_widths;
  // The same decisions' samples judged by other rules (SelfTest's `variants`), in that order.
  struct Variant {
    std::string rule;
    int fail = 0, pass = 0, inconclusive = 0;
  };
  std::vector<Variant> variants;
};
// A rule to judge the self-test's samples by, beside the run's own (same data, side by side).
struct RuleVariant {
  std::string name;
  GateRule rule;
};
struct SelfTestReport {
  std::string spec;
  double median_ms = 0;
  std::vector<SelfTestCase> cases;
};
Status SelfTest(const GateRun& run, const std::vector<double>& pcts, int repeats, bool across_processes,
                Launcher& launcher, Progress& progress, SelfTestReport* report,
                const std::vector<RuleVariant>& variants = {});
// The other rules `gate self-test --compare-rules` judges the same samples by, beside `rule`: the CI
// only above 1 (the rule before), alpha 0.01, the CI above the tolerance.
std::vector<RuleVariant> CompareRuleVariants(const GateRule& rule);

}  // namespace trainrx::experiments
