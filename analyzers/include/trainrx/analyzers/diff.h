// trainrx::analyzers diff — why run B differs from run A: two analyzed runs compared,
// the change in step time broken down so that its rows add up (phases partition a step; the
// operator rows, the uniform speed change and the time outside ops add up too), then by operator
// and GPU kernel (self time per step, new and vanished names, changed input shapes and dtypes),
// per rank and collective, by configuration (the collector's block and config counters, devices,
// model input shape) and by findings (new in B, gone from B, savings changed). Every time row says
// whether its change exceeds what the per-step variation of that row explains (the noise rule in
// diff.cc), and the rows beyond noise are ranked into the causes (`ranked`). Pure: two traces and
// their reports in, a plain record out (reports/ renders it).
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
  // Per step (ns), the steps' wall time and phases, for the side-by-side rendering.
  double data_wait_ns = 0, forward_ns = 0, backward_ns = 0, optimizer_ns = 0, other_ns = 0;
};

struct DiffRow {
  std::string name;
  double a = 0, b = 0;  // per step (ns; for config rows 0 and the text in a_text / b_text)
  std::string a_text, b_text;
  std::string note;     // "new in B", "gone from B", ...
  // "phase", "gpu", "path", "op", "kernel", "collective", "shape", "uniform", "outside", "finding", "config",
  // "setting" (a changed setting that a finding new in B or gone from B ties to the ops it adds).
  std::string kind;
  int32_t rank = -1;         // collective rows: the rank
  double calls_a = 0, calls_b = 0;  // op rows: calls per step
  // Op and shape rows: the nn.Modules the op ran in (the innermost "nn.Module: ..." range around
  // it), most calls first, at most three then "N more": B's, or A's for an op gone from B; empty
  // when no module range encloses it (backward, the optimizer, the loop itself, no module ranges).
  std::vector<std::string> modules;
  // Setting rows (kind "setting"): the rows it explains, ranked right under it ("aten::ne",
  // "debug.anomaly_detection"); those rows' note says "from <setting>".
  std::vector<std::string> explains;
  // What the row adds to the change: b - a, except op rows: b - factor * a, the part the uniform
  // speed change of all ops (the "uniform" row) does not explain.
  double contribution_ns = 0;
  double se_ns = 0;          // standard error of the change from the row's per-step values (0: none)
  bool noise = false;        // the change is within what per-step variation explains (diff.cc)
  bool structural = false;   // present on one side only (a name in most steps, a changed shape)
  double delta() const { return b - a; }
};

// One of A's predicted savings held against B: where B no longer has the finding (its fix
// was applied), B's change of the mean step against A's predicted interval.
struct DiffPrediction {
  std::string id;            // A's finding
  Prediction predicted;      // A's prediction (method "replay")
  bool gone_in_b = false;    // the finding is not in B: its fix is taken as applied
  double measured_pct = 0;   // 1 - B's median step / A's, in %
  bool inside = false;       // measured inside the predicted interval
  bool close = false;        // within max(5 points, 25 % of the measured) of the point
  // Neither, but the measured saving is within the process-to-process variation of one run a side
  // (+-15 % of the step, docs/diff.md "Noise") of the point: two single runs cannot decide.
  bool undecided = false;
};

struct RunDiff {
  DiffSide a, b;
  // A's predictions against B (every finding of A with a replay prediction).
  std::vector<DiffPrediction> predictions;
  // The change in the mean step (B - A) and its noise: the standard error of that difference from
  // the two sides' per-step spread (a change within ~2 of these is not told apart from noise).
  double delta_mean_ns = 0, delta_median_ns = 0, noise_ns = 0;
  // The rows add up to delta_mean_ns (means add, medians do not); what separates them from the
  // change in the median step: delta_median_ns - delta_mean_ns.
  double residual_ns = 0;
  std::vector<DiffRow> phases;   // data wait, forward, backward, optimizer, other: sum to delta_mean_ns
  std::vector<DiffRow> gpu;      // kernel, memcpy, idle per step (GPU traces)
  // The critical path's classes per step (kind "path"; docs/analyze.md), each side's mean over its
  // ranks' paths: a view of where the step's length went, not judged against noise (the paths keep
  // means only) and not ranked as a cause. Empty when neither side has device work.
  std::vector<DiffRow> critical_path;
  // Hardware utilization (kind "utilization"): each side's model GFLOP a step, achieved
  // TFLOP/s and MFU % (mean over its ranks with costed ops; a, b in those units, not ns), with the
  // dtype and peak each was judged against in the note when they differ. Not judged against noise.
  // Empty when neither side recorded shapes.
  std::vector<DiffRow> utilization;
  // Operators by |contribution|, largest first (top N). Every op's contribution + uniform.contribution
  // + outside.contribution = delta_mean_ns.
  std::vector<DiffRow> ops;
  double ops_explained_ns = 0;   // sum of every op's self-time change per step (all ops, not the top N)
  // All ops scaled by this factor (time-weighted median of B/A over the ops in both): a machine
  // speed change or more work per step; 1 when fewer than 3 ops are in both.
  double uniform_factor = 1;
  DiffRow uniform, outside;      // kind "uniform" (all ops x uniform_factor) and "outside" (step time in no op)
  std::vector<DiffRow> kernels;  // the same for GPU kernels (total time per step)
  std::vector<DiffRow> shapes;   // ops whose most frequent recorded inputs (dims, dtypes) differ
  std::vector<DiffRow> collectives;  // (rank, collective) rows of multi-rank runs, largest change first
  std::vector<DiffRow> config;   // settings that differ (text)
  std::vector<DiffRow> findings; // ids in one run and not the other, or whose saving changed (ns per step)
  // The causes, ranked in three tiers (diff.cc): what changed in the program beyond noise (names
  // new or gone, input shapes, findings, the uniform row with its shape or setting), changes of the
  // program whose time is within noise, then other rows beyond noise (symptoms); by |contribution|
  // inside each. The time in no op is not ranked. Empty: nothing changed.
  std::vector<DiffRow> ranked;
  bool within_noise = true;      // no row's change exceeds its noise
  // Whether rows were judged against noise at all: not without two or more steps on each side
  // (no per-step spread; every row is then listed, none called noise).
  bool judged = true;
  double beyond_noise_ns = 0;    // the part of delta_mean_ns in op / uniform / outside rows beyond noise
  std::vector<std::string> notes;
};

// `top_n` rows of ops and kernels. Without steps on a side its per-step figures are trace totals,
// and the diff says so in its notes (a total cannot be compared with a per-step mean).
RunDiff DiffRuns(const profiler::Trace& a, const Report& ra, const std::string& label_a, const profiler::Trace& b,
                 const Report& rb, const std::string& label_b, size_t top_n = 12);

}  // namespace trainrx::analyzers
