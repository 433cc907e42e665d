// trainrx::experiments launcher — how a trial runs. The plans (fix, sweep, ab, gate) only talk to
// this interface: the real one (MakeProcessLauncher) starts processes; unit tests script one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/sets/analyze_set.h"
#include "trainrx/experiments/record.h"
#include "trainrx/experiments/spec.h"
#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

// One trial: an untraced run of a workload (Launcher::Trial), or a recorded run of a user's command
// (Launcher::Command): its time a step after warm-up, and throughput.
struct TrialResult {
  // The mean of the timed steps (total over count: what throughput follows), in `unit`. Not the
  // median: a loader whose k workers hand batches over in bursts makes k - 1 short steps and one long
  // one, and the median is the short ones' (an H200 run: median 18.1 ms, mean 68 ms). A
  // command whose traces have fewer than 3 steps (or none: no process loaded torch) is timed as a
  // whole run: "s per run".
  double value = 0;
  std::string unit = "ms per step";
  double samples_per_s = 0;  // 0: unknown (a command whose batch we cannot read)
  double seconds = 0;  // wall time of the trial (budgets)
  double samples_per_step = 0;  // commands: from the recorded input shapes (analyzers::SamplesPerStep); 0: unknown
  std::string samples_from;     // where samples_per_step came from, for the report
  // What samples_per_step (and samples_per_s) count: "samples", or "tokens" for a command whose
  // training input is token ids (an embedding's [B, T] indices: B x T tokens a step: a
  // token model is judged in tokens per second, and a sweep over the sequence length ranks right).
  std::string throughput_unit = "samples";
  double compile_s = 0;         // commands: torch.compile's time in the run (outside the timed steps)
  // The ranks of the run: a workload's samples_per_s is their sum; a command's samples_per_step (and
  // so its samples_per_s) is the first rank's.
  int ranks = 1;
  // The timed steps (ms) after the warm-up, when the trial has them: a comparison of few trials
  // reads their spread (stats::CompareFewTrials). Empty for runs without steps.
  std::vector<double> step_ms;
  // Memory of the run, when measured: how much what the process holds grows a step
  // (bytes, least-squares over the timed steps) and its largest figure. Workloads: malloc's bytes
  // in use at step ends (profiler::HeapInUseBytes); commands: the recorded allocator figures of
  // the first rank's device with the largest peak (analyzers' DeviceMemory).
  bool has_memory = false;
  double memory_growth = 0, memory_peak = 0;
  // The trial ran out of memory (only reported when the launcher accepts it, see
  // Launcher::AcceptOutOfMemory; else it is an error): no time, what it asked for, the message.
  bool out_of_memory = false;
  int64_t oom_request_bytes = 0;
  std::string oom_message;
  // What the timed steps got of the CPUs (a busy machine); unmeasured where the trial
  // could not tell (another OS, a run without steps).
  profiler::CpuLoad cpu;
};

// One untraced run that alternates A (the spec) and B (the spec with `alt` set) step by step.
struct AltResult {
  std::vector<double> a_ms, b_ms;   // every timed step, by arm
  std::vector<double> log_ratios;   // one per block of four steps: log(mean B / mean A)
  double seconds = 0;
  // Commands (Launcher::CommandAlt): why this run could not compare the fix in-process, in the
  // report's words ("" when it did); the row is then measured across processes. unpaired_token: the
  // fix that cannot switch (the script sets its flag itself); "" when none of this command's can
  // (too few steps, torch.compile, no steps in the command's own process).
  std::string unpaired, unpaired_token;
  std::vector<profiler::CpuLoad> cpu;  // per process, what its timed steps got of the CPUs
};

// An in-process trial times at least this many steps after its warm-up: 16 paired blocks of four.
inline constexpr int kAltMinTimedSteps = 64;

class Launcher {
 public:
  virtual ~Launcher() = default;
  // A sweep over the batch runs until memory is full: there an out-of-memory trial is a result
  // (TrialResult::out_of_memory), not a failed experiment. Everywhere else it stays an error.
  virtual void AcceptOutOfMemory(bool accept) { accept_oom_ = accept; }
  bool accepts_out_of_memory() const { return accept_oom_; }
  // An error that says why when workload trials cannot run here (a build without LibTorch).
  virtual Status CanRunWorkloads() const = 0;
  virtual StatusOr<TrialResult> Trial(const Spec& spec) = 0;
  // Appends the run's steps and ratios to *out (a row's processes pool their blocks).
  virtual Status AltTrial(const Spec& spec, const std::vector<std::string>& alt, AltResult* out) = 0;
  // One traced run, analyzed: what `fix` will try to fix, and the run's seconds.
  virtual Status Analyze(const Spec& spec, analyzers::Report* report, double* seconds) = 0;
  // `fixes`: tokens for the start-up hook that applies fixes from outside the script
  // (probes/python/sitecustomize.py: "anomaly_off", "workers=4", ...); empty: the script as is.
  virtual StatusOr<TrialResult> Command(const std::string& command, const std::vector<std::string>& fixes) = 0;
  // `fix --cmd`'s in-process rows: one run of the command whose start-up hook switches
  // `fixes` (tokens analyzers::OutsideFixSwitches accepts) on and off between optimizer steps
  // (A B B A, B A A B after a warm-up, >= kAltMinTimedSteps timed), appended to *out as AltTrial
  // does. A command that cannot be compared so is no error: out->unpaired says why. An error when
  // the command fails. This default measures nothing in-process.
  virtual Status CommandAlt(const std::string& command, const std::vector<std::string>& fixes, AltResult* out) {
    out->unpaired = "this launcher runs no in-process trials of a command";
    return Status::Ok();
  }
  // One recorded run of the command, analyzed: what `fix --cmd` will try to fix, and its seconds.
  virtual Status AnalyzeCommand(const std::string& command, analyzers::Report* report, double* seconds) = 0;
  // When the last AnalyzeCommand's (or a command's TracedRun's) run was ended by its step limit
  // (LauncherOptions::analysis_steps): that limit; 0 when it ran to its end.
  virtual int64_t AnalysisStoppedAfter() const { return 0; }
  // From now on, each Command trial ends after `steps` optimizer steps (0: whole runs): `fix --cmd`
  // sets it from the analysis run's warm-up and step-time spread when the user chose none.
  virtual void SetCommandTrialSteps(int64_t steps) {}
  // One traced run of a workload spec or (with `command`) a command, its trace and analysis kept:
  // what `ab` and `gate check` diff to explain a verdict (analyzers::DiffRuns). The trials stay
  // untraced. An error that says why where traced runs are not available.
  virtual StatusOr<sets::SetAnalysis> TracedRun(const std::string& spec, bool command) {
    return Status::Error("this launcher records no traced runs");
  }

 private:
  bool accept_oom_ = false;
};

// Trials as processes: `bin_dir`/trainrx-workload (untraced: we time the program, not the
// program under observation) and commands recorded as `trainrx record` records them (record.h:
// the probes and the Python start-up hook found in `bin_dir`; no CLI between). Scratch files go to
// a private temporary folder, removed with the launcher.
struct LauncherOptions {
  // > 0: every trial process runs under that RLIMIT_DATA (ProcessSpec), the CPU stand-in for a
  // device's capacity.
  uint64_t memory_cap_bytes = 0;
  // > 0: each trial of a command (Launcher::Command) ends after that many optimizer steps
  // (TRAINRX_STOP_AFTER_STEPS for the start-up hook), enough for its steady-state median.
  int64_t trial_steps = 0;
  // > 0: the analysis run of a command (Launcher::AnalyzeCommand) ends after that many steps, so
  // that a script with no step limit of its own (hours of epochs) is analyzed in minutes.
  int64_t analysis_steps = 0;
  // Transforms the analysis run's what-if predicts beside the findings' (`fix --cmd --also`: each
  // alone, as Analyze's `what_if`).
  std::vector<std::string> analysis_what_if;
  // The recordings' fixed options, as `trainrx record` has them: the torch the probe was built
  // against (its sidecar file wins) and trainrx's sources (to build a probe for another torch).
  RecordOptions record;
};
std::unique_ptr<Launcher> MakeProcessLauncher(const std::string& bin_dir, const LauncherOptions& options = {});

// A progress display: told how many trials a plan will run, then each one as it starts.
class Progress {
 public:
  virtual ~Progress() = default;
  // Adds `total` trials to the plan.
  virtual void Start(int total) {}
  virtual void Step(const std::string& what) {}
  // The whole plan is now at most `total` trials, those done included (a sequential plan shrinks
  // as rows are decided; it never grows past what it planned): replaces what Start added.
  virtual void Replan(int total) {}
  // The plan ends within `seconds` of trials from now at the latest (its budget).
  virtual void Deadline(double seconds) {}
  // A warning about the plan, said before its trials run (a design that cannot decide).
  virtual void Note(const std::string& text) {}
};

// Each block of four steps (two of each arm) gives one paired value, log(mean B / mean A): the
// process's own speed and slow drift cancel inside the block. `arms` is 'A' or 'B' per step.
std::vector<double> BlockLogRatios(const std::vector<char>& arms, const std::vector<double>& ms);

// The start-up hook's record of an in-process command trial (TRAINRX_ALT_RESULT, `path` for
// messages), its steps appended to *out. Example: {"schema": "trainrx.alt/1", "warmup": 5, "steps":
// [{"arm": "A", "ms": 12.5}, {"arm": "B", "ms": 9.1}, ...], "stopped": "", "token": ""} with 64 steps
// gives 16 log ratios; "stopped": "the script sets ..." with "token": "cudnn_benchmark" gives
// out->unpaired / unpaired_token and no steps; fewer than kAltMinTimedSteps steps (the script ended
// first) gives out->unpaired. An error naming the path and field when it is not such a record.
Status ParseAltSteps(std::string_view text, const std::string& path, AltResult* out);

}  // namespace trainrx::experiments
