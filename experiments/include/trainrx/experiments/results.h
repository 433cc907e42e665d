// trainrx::experiments results — what `trainrx fix`, `sweep` and `ab` measured, as plain records
// (reports/experiment.h renders them as text or JSON, schema "trainrx.experiment/1").
#pragma once

#include <algorithm>
#include <optional>

#include <string>
#include <utility>
#include <vector>

#include "trainrx/analyzers/diff.h"
#include "trainrx/experiments/stats.h"
#include "trainrx/profiler/cpu_wait.h"

namespace trainrx::experiments {

inline constexpr const char* kExperimentSchema = "trainrx.experiment/1";

// One configuration's trials: each trial's mean step time (ms) and throughput.
struct Arm {
  std::string label;               // "cnn workers=0 anomaly=1"
  std::vector<double> trial_ms;    // per trial: mean step time after warm-up (TrialResult::value)
  std::vector<double> samples_per_s;
  std::vector<double> compile_s;   // ab --cmd: per trial, torch.compile's time (outside the steps timed)
  // Per trial, its timed steps (ms) where the trials have them (sweeps: stats::CompareFewTrials).
  std::vector<std::vector<double>> trial_steps_ms;
  // Per trial, when every trial measured memory (TrialResult::has_memory): growth of the
  // process's memory a step (bytes) and its peak. Empty otherwise.
  std::vector<double> memory_growth, memory_peak;
  // Per trial (or per in-process run), what its timed steps got of the CPUs.
  std::vector<profiler::CpuLoad> cpu;
};

// The machine the trials ran on: how long the trials' threads waited for a CPU. A
// trial that waited profiler::kBusyWaitPct or more of the time its threads were ready to run while
// other programs used the CPUs is starved (CpuLoad::Starved): its time holds the other programs'
// share, and trials that differ by scheduling hide the change they compare. The machine was busy
// when a quarter of the trials were starved (2 at least, where there are 2): one trial in ten on a
// quiet machine is a blip, not a busy machine. Measured when at least one trial was.
struct MachineLoad {
  int trials = 0, measured = 0, starved = 0;
  double median_wait_pct = 0, max_wait_pct = 0;
  double median_other_cpus = -1;  // other programs' CPUs during the trials (-1: unknown)
  double median_wanted_cpus = 0;  // the trials' own threads, running and waiting (CpuLoad)
  double cpus = 0;
  bool busy() const {
    return measured > 0 && starved >= std::min(measured, std::max(2, (measured + 3) / 4));
  }
};
// Over every trial of the arms, or over trials' figures.
MachineLoad SummarizeMachine(const std::vector<const Arm*>& arms);
MachineLoad SummarizeTrials(const std::vector<profiler::CpuLoad>& trials);
// The verdict's caveat on a busy machine, with what helps; "" for a quiet one (or none measured).
std::string MachineNote(const MachineLoad& m);

// Two arms' memory compared trial by trial: growth a step and peak, each as a
// difference of medians (B - A) with its interval. `measured` is false unless both arms have
// memory for every trial (2 or more each).
struct MemoryComparison {
  bool measured = false;
  stats::Difference growth, peak;
  // Worth a line in the report: a significant change in growth of at least kMemoryGrowthFloor a
  // step, or in peak of at least kMemoryPeakFloorPct of A's.
  bool Notable() const;
};
inline constexpr double kMemoryGrowthFloor = 65536;  // bytes per step
inline constexpr double kMemoryPeakFloorPct = 5;
MemoryComparison CompareMemory(const Arm& a, const Arm& b, uint64_t seed);

struct TrialResult;
// Adds the trial's memory figures to the arm's, or, once one of its trials has none, leaves the
// arm's empty (memory is compared only over arms measured in every trial), and its CPU figures.
void AddTrialMeasures(Arm& arm, const TrialResult& r);

struct FixRow {
  std::vector<std::string> findings;  // finding ids this change addresses
  std::string change;                 // "anomaly=1 -> 0", or "all of the above"
  bool all = false;                   // the row that applies every fix at once
  bool asked = false;                 // fix --cmd --also: a fix no finding named, asked for by the user
  std::string transform;              // the what-if transform that predicts it ("" none; reports read the
                                      // first finding's catalog entry where this is empty)
  std::string code;                   // fix --cmd: the code change that makes the fix permanent
  bool paired = false;                // measured in-process, paired blocks of steps (else across processes)
  double estimated_saving_pct = 0;    // from the analysis (0: no estimate)
  // The what-if replay's prediction of the saving (% of the step) with its interval, from the
  // baseline's analysis (the largest of the row's findings'); predicted false: none.
  bool predicted = false;
  double predicted_saving_pct = 0, predicted_low_pct = 0, predicted_high_pct = 0;
  double predicted_level = 0;  // the interval's calibrated coverage (Prediction::level); 0 uncalibrated
  double predicted_margin = 0;        // Prediction::margin: points the replay's range was widened by
  std::string predicted_calibration;  // Prediction::calibration: which, and on what
  // Not predicted: why not, in plain words (never empty then: ExplainUnpredicted fills it).
  std::string not_predictable;
  Arm fixed;
  std::vector<double> paired_baseline_ms;  // in-process rows: the baseline's (A) steps beside fixed's
  stats::Comparison cmp;              // baseline vs fixed (speedup > 1: the fix is faster)
  // Why the row stopped getting trials, at which round (an in-process row: after which of its
  // processes, each a look of the same design), and at what level its test and CI were made.
  // (Rows of plans without a sequential design: kNotSequential, level 0.95.)
  enum class Stop { kNotSequential, kDecided, kPrecise, kFutile, kMaxRounds, kBudget };
  Stop stop = Stop::kNotSequential;
  int stop_round = 0;                 // the round after which it got no more trials
  double level = 0.95;                // confidence of cmp's interval (1 - the look's nominal alpha)
  // kFutile: the smallest speedup it could still have detected by the last planned round (80 %
  // power at the final look's critical value), and its conditional power when it stopped.
  double detectable_at_max = 0;
  double conditional_power = 0;
  MemoryComparison memory;            // baseline vs fixed
};
const char* StopName(FixRow::Stop s);
// Takes a finding's estimate and prediction into a row (the largest of its findings').
void AddFindingEstimate(FixRow& row, const analyzers::Finding& f);
// Every row without a prediction says why: the analysis's reason where it gave one, else
// that no transform models the fix (its bound is not a prediction), else that some of the all row's
// fixes have none.
void ExplainUnpredicted(std::vector<FixRow*> rows);
// A row's prediction held against its measurement: the measured saving inside the predicted interval,
// and within max(5 points, 25 % of the measured saving) of the point (the what-if's accuracy bar); nullopt: no
// prediction or no measurement.
struct PredictionCheck {
  bool inside = false;
  bool close = false;
};
std::optional<PredictionCheck> CheckPrediction(const FixRow& row);  // "decided", "precise", "futile", "max rounds", "budget", ""

// How the rows measured across processes were run: rounds of the baseline and every
// row still open, a look after each round from the 4th, each at the nominal level of an
// error-spending boundary, so the chance of a false "faster" or "slower" over all looks stays
// alpha (stats/sequential.h).
struct SequentialRecord {
  bool used = false;
  std::string spending;       // "Hwang-Shih-DeCani (gamma = -3)"
  double alpha = 0.05;
  int max_rounds = 0;         // the planned maximum N_max (the budget's, or 2 x trials)
  int rounds = 0;             // rounds run
  struct LookAt {
    int round = 0;
    double t = 0, z = 0, nominal_alpha = 0;
  };
  std::vector<LookAt> looks;  // the looks made (rounds where no result could be significant are skipped)
};

struct FixReport {
  std::string workload;               // "--cmd" for a user's command
  std::string unit = "ms per step";   // commands without steps: "s per run"
  std::string baseline_label;
  int trials = 0;
  std::string order;  // how trials were interleaved, e.g. "ABBA BAAB ..."
  Arm baseline;
  std::vector<FixRow> rows;
  std::vector<std::string> notes;  // e.g. findings without a knob, budget cuts
  // The table's family-wise error level and each row's (Bonferroni over the rows).
  double family_alpha = 0.05, row_alpha = 0.05;
  SequentialRecord sequential;
  MachineLoad machine;  // the trials' CPU wait
};

struct SweepCell {
  std::vector<std::pair<std::string, std::string>> knobs;
  Arm arm;
  double median_ms = 0;
  stats::Interval ci;
  double samples_per_s = 0;
  // Against the best cell's throughput trials: tied when not significantly slower.
  stats::Comparison vs_best;
  bool tied_with_best = false;
  // sweep --cmd: samples per step (0: unknown) and where the figure came from.
  double samples_per_step = 0;
  int ranks = 1;  // the most ranks a trial of the cell ran (samples_per_s: all of them for a workload, one for a command)
  std::string samples_from;
  std::string throughput_unit = "samples";  // what samples_per_step counts (TrialResult::throughput_unit)
  // The cell ran out of memory (its first such trial ends its trials): no time, the request, why.
  bool out_of_memory = false;
  int64_t oom_request_bytes = 0;
  std::string oom_message;
};

struct SweepReport {
  std::string workload;               // "--cmd" for a command template
  std::string command;                // the template
  std::string unit = "ms per step";   // commands without steps: "s per run"
  std::vector<std::string> grid_keys;
  int trials = 0;
  std::vector<SweepCell> cells;
  // Cells rank by samples/s (workloads; commands whose samples per step are known), else by the
  // median time (commands whose batch the trace does not tell).
  bool by_throughput = true;
  // What the cells' throughput counts: "samples", or "tokens" where their input is token ids (the
  // first cell whose input was read; ranked by time where the cells read in both).
  std::string throughput_unit = "samples";
  std::vector<std::string> notes;
  uint64_t memory_cap_bytes = 0;  // --memory-cap the trials ran under (0: none)
  size_t best = 0;  // highest median throughput (samples/s), or the lowest time
  // The best cell is "the best" only when every other cell is significantly slower; else the
  // cells tied with it are named instead (overlapping noise is not a winner).
  bool best_significant = false;
  // The rank test of trial medians could not separate any two cells at 0.05 (with 3
  // trials a cell the smallest Mann-Whitney p is 0.10; smallest_p is what complete separation
  // gives): the cells are compared by stats::CompareFewTrials instead, said in the notes.
  bool few_trials = false;
  double smallest_p = 0;
  MachineLoad machine;  // the trials' CPU wait
};

struct AbReport {
  Arm a, b;
  int trials = 0;
  std::string order;
  std::string unit = "ms per step";  // or "s per run" for commands without step markers
  bool paired = false;               // in-process, paired blocks of steps
  stats::Comparison cmp;
  MemoryComparison memory;           // A vs B, trial by trial
  std::vector<std::string> notes;
  // Why: after a significant difference (or --explain), one traced run of each side
  // compared by analyzers::DiffRuns; empty labels when not made.
  analyzers::RunDiff why;
  bool explained = false;
  MachineLoad machine;  // the trials' CPU wait
  // How B was measured (as a `fix` row, until decided): why it stopped, after which
  // round (in-process: process), at what level its test and CI were made; kFutile: the smallest
  // speedup it could have detected by the planned maximum, and its conditional power.
  FixRow::Stop stop = FixRow::Stop::kNotSequential;
  int stop_round = 0;
  double level = 0.95;
  double detectable_at_max = 0, conditional_power = 0;
  SequentialRecord sequential;
};

}  // namespace trainrx::experiments
