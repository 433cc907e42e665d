// trainrx::analyzers steps — the step model every family judges by: one row per detected step with
// its phases, and the shares over the steady steps (steps.cc; analysis.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// Per-step timing, one row per detected step.
struct StepRow {
  int32_t rank = 0;
  std::string name;  // "ProfilerStep#5"
  int64_t start_ns = 0;
  int64_t wall_ns = 0;
  int64_t data_wait_ns = 0;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t optimizer_ns = 0;
  int64_t other_ns = 0;
  bool has_gpu = false;
  int64_t gpu_kernel_ns = 0;   // union of kernels in the step
  int64_t gpu_memcpy_ns = 0;   // union of memcpy + memset
  int64_t gpu_idle_ns = 0;     // wall - union of all GPU activity
  // Data wait while no GPU activity runs (GPU traces; else = data_wait_ns): loading that runs
  // while the GPU still finishes the previous step's kernels costs no throughput. The TensorBoard
  // plugin's DataLoader figure ranks kernels and memcpy above data the same way.
  int64_t data_exposed_ns = 0;
  // Forward and backward both running (on different threads: pipeline schedules such as
  // DualPipe). The phases are exclusive, backward wins: forward_ns leaves this time out.
  int64_t fwd_bwd_overlap_ns = 0;
  // Forward that trains nothing: in a step with a backward, the forward before the
  // fetch of the batch the backward trains on (the last data range before the step's first
  // backward): an evaluation or generation pass run between two optimizer steps (Hugging Face
  // Trainer's eval_steps, Lightning's validation, minGPT's sampling). Counted in other_ns. Only
  // beyond what the rank's steps do there as a rule: the median step's amount before its fetch is
  // part of the training step (Trainer's own ops, a second loader fetched mid-forward) and stays
  // forward (steps.cc, SplitUntrainedForward).
  int64_t untrained_forward_ns = 0;
  // Where such a step's training work begins (the fetch); 0: at start_ns. StepWindows start there,
  // so per-step counts and the operator tables leave the evaluation's ops out.
  int64_t trained_from_ns = 0;
};

// Each per-step figure of a StepRow, declared once: its name in every output (a step row of the
// JSON report and of a set summary, read back by ReadSummary; the HTML report's step table, drawn
// from the JSON's `steps.fields`; the `steps` table of `trainrx export`, CSV or Parquet), its
// column's label, what it is, and which rows carry it. A new per-step metric is a member above and
// one line in StepFields(); tests/sets/step_fields_test.cc holds every output to the list.
struct StepField {
  enum class When : uint8_t {
    kAlways,   // every row, warm-up steps' too
    kPhases,   // the steady steps' rows (warm-up rows have their head only)
    kNonZero,  // a steady step's row, where it is not 0
    kGpu,      // a steady step's row on a GPU trace (StepRow::has_gpu)
  };
  const char* name;  // "data_wait_ns"
  int64_t StepRow::*member;
  When when;
  const char* label;  // "data wait"
  const char* what;
  // Whether `row` carries it (`phases`: a steady step's row; a warm-up's has its head only).
  bool CarriedBy(const StepRow& row, bool phases) const {
    switch (when) {
      case When::kAlways: return true;
      case When::kPhases: return phases;
      case When::kNonZero: return phases && row.*member != 0;
      case When::kGpu: return phases && row.has_gpu;
    }
    return false;
  }
};
const std::vector<StepField>& StepFields();

struct StepModel {
  std::string source;  // "ProfilerStep", "trainrx step markers", "inferred from Optimizer.step", "none"
  std::vector<StepRow> steps;
  // Leading steps of a rank that took more than 3x its median step (cuDNN's autotuner, lazy CUDA
  // and allocator start-up, DataLoader workers starting: 6.1 s against a 17 ms median on an H100),
  // at most a quarter of the rank's steps, with 4 or more. They are left out of `steps`, so every
  // share, per-step figure and saving describes the steady state; the report lists them.
  // Not where those steps waited for a CPU and did no more work than the steady ones (our
  // collector's CPU-wait samples): that is contention, and they stay (15 of 60 steps
  // left out as warm-up beside a 48 % CPU wait); `warmup_notes` says so, one line per rank.
  std::vector<StepRow> warmup_steps;
  std::vector<std::string> warmup_notes;
  int64_t median_wall_ns = 0;
  // The mean step: what throughput follows. Apart from the median where steps are uneven (a
  // loader's workers handing batches over in bursts: long and short steps alternate), which the
  // text says (reports: UnevenSteps).
  int64_t mean_wall_ns = 0;
  // Share of the summed step time per phase (0..1).
  double data_exposed_share = 0;  // of data_exposed_ns
  double data_wait_share = 0, forward_share = 0, backward_share = 0, optimizer_share = 0, other_share = 0;
  double gpu_kernel_share = 0, gpu_memcpy_share = 0, gpu_idle_share = 0;
  double fwd_bwd_overlap_share = 0;  // of fwd_bwd_overlap_ns (a caveat on the forward share)
  double untrained_forward_share = 0;  // of untrained_forward_ns (inside other_share)
  // The data share that counts as a loader bottleneck (data_exposed: with the GPU idle, or the
  // whole wait on CPU-only ranks) without the quarter of the steps that waited longest (at least
  // one), with 3 or more steps (else the plain share). Stalls in a few steps (the first batch, a
  // worker spawn, the OS running another process for a time slice, a GC pause) are not a loader
  // that cannot keep up: on a loaded 2-core machine 3 of 11 steps of a clean script lost ~4 ms
  // each to preemption inside the loader. Waits in most steps still count.
  double data_share_without_worst = 0;
  std::vector<int32_t> data_worst_steps;  // indices into steps, longest wait first; empty below 3 steps
  bool has_gpu = false;
};

// Building blocks shared by the families (steps.cc).
// `threads` as in Analyze (0: every usable CPU); the model is the same for any count.
// kBoundaries: each row's rank, name, start and wall time only (no phases, no device time; the
// warm-up split and the median as in kFull): what an experiment's trial measures, at a tenth of
// the cost (the phases' sweep is ~90 % of the model).
enum class StepDetail { kFull, kBoundaries };
StepModel BuildStepModel(const profiler::Trace& trace, size_t threads = 0, StepDetail detail = StepDetail::kFull);
// The model's median, shares and worst data steps from its rows (steps, warm-up already split):
// the second half of BuildStepModel, also used on rows gathered from per-rank summaries.
void SummarizeStepRows(StepModel& model);

}  // namespace trainrx::analyzers
