// trainrx::analyzers diff — why run B differs from run A (issue 37): two analyzed runs compared,
// the change in step time broken down so that its rows add up (phases partition a step), then by
// operator and GPU kernel (self time per step, new and vanished names), by configuration (the
// collector's block and config counters, devices, model input shape) and by findings (new in B,
// gone from B). Pure: two traces and their reports in, a plain record out (reports/ renders it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"

namespace trainrx::analyzers {

struct DiffSide {
  std::string label;   // the inputs, for the report
  int64_t steps = 0;   // steady steps (all ranks)
  double median_step_ns = 0, mean_step_ns = 0, p10_step_ns = 0, p90_step_ns = 0, stddev_step_ns = 0;
};

struct DiffRow {
  std::string name;
  double a = 0, b = 0;  // per step (ns; for config rows 0 and the text in a_text / b_text)
  std::string a_text, b_text;
  std::string note;     // "new in B", "gone from B", ...
  double delta() const { return b - a; }
};

struct RunDiff {
  DiffSide a, b;
  // The change in the mean step (B - A) and its noise: the standard error of that difference from
  // the two sides' per-step spread (a change within ~2 of these is not told apart from noise).
  double delta_mean_ns = 0, delta_median_ns = 0, noise_ns = 0;
  std::vector<DiffRow> phases;   // data wait, forward, backward, optimizer, other: sum to delta_mean_ns
  std::vector<DiffRow> gpu;      // kernel, memcpy, idle per step (GPU traces)
  std::vector<DiffRow> ops;      // by |change in self time per step|, largest first (top N)
  double ops_explained_ns = 0;   // sum of every op's self-time change per step (all ops, not the top N)
  std::vector<DiffRow> kernels;  // the same for GPU kernels (total time per step)
  std::vector<DiffRow> config;   // settings that differ (text)
  std::vector<DiffRow> findings; // ids in one run and not the other, with their estimated saving (ns per step)
  std::vector<std::string> notes;
};

// `top_n` rows of ops and kernels. Without steps on a side its per-step figures are trace totals,
// and the diff says so in its notes (a total cannot be compared with a per-step mean).
RunDiff DiffRuns(const profiler::Trace& a, const Report& ra, const std::string& label_a, const profiler::Trace& b,
                 const Report& rb, const std::string& label_b, size_t top_n = 12);

}  // namespace trainrx::analyzers
