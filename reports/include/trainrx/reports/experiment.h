// trainrx::reports experiments — what `trainrx fix`, `sweep` and `ab` measured, and its rendering
// as text (terminal) or JSON (schema "trainrx.experiment/1", docs/json-schema.md). The runner
// (cli/experiment.cc) fills these; statistics come from stats.h. Torch-free.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainrx/reports/stats.h"

namespace trainrx::reports {

inline constexpr const char* kExperimentSchema = "trainrx.experiment/1";

// One configuration's trials: each trial's median step time (ms) and throughput.
struct Arm {
  std::string label;               // "cnn workers=0 anomaly=1"
  std::vector<double> trial_ms;    // per trial: median step time after warm-up
  std::vector<double> samples_per_s;
};

struct FixRow {
  std::vector<std::string> findings;  // finding ids this change addresses
  std::string change;                 // "anomaly=1 -> 0", or "all fixes"
  bool paired = false;                // measured in-process, paired blocks of steps (else across processes)
  double estimated_saving_pct = 0;    // from the analysis (0: no estimate)
  Arm fixed;
  stats::Comparison cmp;              // baseline vs fixed (speedup > 1: the fix is faster)
};

struct FixReport {
  std::string workload;
  std::string baseline_label;
  int trials = 0;
  std::string order;  // how trials were interleaved, e.g. "ABBA BAAB ..."
  Arm baseline;
  std::vector<FixRow> rows;
  std::vector<std::string> notes;  // e.g. findings without a knob, budget cuts
};

struct SweepCell {
  std::vector<std::pair<std::string, std::string>> knobs;
  Arm arm;
  double median_ms = 0;
  stats::Interval ci;
  double samples_per_s = 0;
};

struct SweepReport {
  std::string workload;
  std::vector<std::string> grid_keys;
  int trials = 0;
  std::vector<SweepCell> cells;
  size_t best = 0;  // highest median throughput (samples/s)
};

struct AbReport {
  Arm a, b;
  int trials = 0;
  std::string order;
  std::string unit = "ms per step";  // or "s per run" for commands without step markers
  stats::Comparison cmp;
  std::vector<std::string> notes;
};

void WriteFixText(const FixReport& r, std::ostream& out);
void WriteFixJson(const FixReport& r, std::ostream& out);
void WriteSweepText(const SweepReport& r, std::ostream& out);
void WriteSweepJson(const SweepReport& r, std::ostream& out);
void WriteAbText(const AbReport& r, std::ostream& out);
void WriteAbJson(const AbReport& r, std::ostream& out);

// "1.23x [1.10, 1.35]" and friends, shared by the renderers.
std::string FormatSpeedup(const stats::Comparison& c);

}  // namespace trainrx::reports
