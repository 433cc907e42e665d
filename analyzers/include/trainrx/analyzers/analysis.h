// trainrx::analyzers — pure functions from a Trace to Findings and Metrics.
//
// Who calls it: the CLI (trainrx analyze), experiments (fix/ab/gate), tests. Analyzers never do
// I/O or printing (rendering is reports/'s job) and never know where a trace came from.
// Threading: Analyze() reads a finalized, immutable Trace; it may run concurrently on different
// traces, and runs its own tables and families on several threads (each family into its own
// Report, merged in registry order: a family may write findings, metrics.temporal, metrics.memory,
// metrics.launch, metrics.compile, metrics.utilization and metrics.cpu_load, nothing else).
//
// Families, one per file, registered in registry.cc:
//   steps.cc     step detection and per-step phase breakdown (shared by the others)
//   gpu.cc       gpu.idle (HTA temporal + idle-time breakdown), gpu.launch_bound (HTA launch stats)
//   input.cc     input.dataloader_bound, input.workers, input.pin_memory
//   sync.cc      sync.host_device, sync.blocking_copy
//   optim.cc     optim.zero_grad, optim.single_tensor (per-parameter optimizer step, no foreach)
//   model.cc     model.bias_before_norm (exact dataflow from our collector, else shapes)
//   config.cc    debug.anomaly_detection, debug.profiler, debug.launch_blocking, cudnn.benchmark_off,
//                cudnn.deterministic_on, threads.oversubscribed (our collector's config snapshots)
//   eval.cc      eval.grad_enabled (grad mode per op, from our collector)
//   precision.cc precision.fp32_matmul (TF32 off on sm_80+), precision.matmul_alignment (16-bit
//                GEMM dims not a multiple of 8)
//   tensor.cc    tensor.cpu_then_copy (filled on the host, copied right away)
//   python.cc    python.loop_indexing (element-by-element tensor indexing in a Python loop)
//   memory.cc    memory.growth (allocated memory at step starts rising step after step),
//                memory.fragmentation (reserved far above allocated on a nearly full device),
//                memory.empty_cache (the allocator's cache emptied in most steps), batch.small (a
//                post-pass: an underused device with most of its memory free); the per-device
//                memory figures of Metrics
//   compile.cc   compile.graph_break, compile.recompiles, compile.time (torch.compile: the start-up
//                hook's marks and the compiled regions of the steps); the compile figures of Metrics
//   layout.cc    model.channels_last (an NCHW conv model whose layout-sensitive ops take much of the step)
//   machine.cc   machine.busy (the program waited for a CPU: our collector's schedstat samples);
//                the per-rank CPU figures of Metrics
//   dist.cc      dist.straggler (the rank the others wait for at collectives), dist.no_sync, Gloo's
//                dist.comm_overlap (NCCL's is in gpu.cc); dataparallel.cc: dist.data_parallel;
//                collectives.cc: collectives and their cross-rank matching, shared with clocks.cc
//                (clock alignment of a set, applied before analysis)
// The last four families are TorchTidy's patterns (torch/profiler/_pattern_matcher.py) done on
// the trace model; bench/torchtidy_compare.py compares the two.
// Not a family: op_table.cc (the per-op and per-kernel tables of Metrics).
// Shared by all: per_step.cc (StepBasis: per-step means, or trace totals without steps;
// SetSaving: every saving bounded by the measured time it removes and by the step),
// runtime_names.h (CUDA and HIP runtime calls: launches, blocking calls, graph captures),
// run_end.cc (ranks whose recording did not finish).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

// Split by concept; every includer of analysis.h still gets them all.
#include "trainrx/analyzers/clocks.h"      // RankClock, EstimateRankClocks, AlignRankClocks
#include "trainrx/analyzers/finding.h"     // Severity, Confidence, EvidenceItem, Finding, SortFindings
#include "trainrx/analyzers/metrics.h"     // the Metrics structs, Report, the tables, unfinished ranks, windows
#include "trainrx/analyzers/steps.h"       // StepRow, StepModel, BuildStepModel, SummarizeStepRows
#include "trainrx/analyzers/thresholds.h"  // Thresholds
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// What an analyzer family gets: the trace, the shared step model, thresholds.
class ScopeIndex;  // private to analyzers/ (scopes.h): which module / annotation an op ran in
class LinkIndex;   // private to analyzers/ (links.h): the dependency model, what waits for what
struct AnalysisContext {
  const profiler::Trace& trace;
  const StepModel& steps;
  const Thresholds& thresholds;
  const ScopeIndex& modules;
  const ScopeIndex& annotations;
  // Ranks whose recording did not end normally, and those recorded through a step window.
  const std::vector<UnfinishedRank>& unfinished;
  const std::vector<RecordedWindow>& windows;
  const LinkIndex& links;
};

using AnalyzerFn = void (*)(const AnalysisContext&, Report&);
struct AnalyzerInfo {
  const char* family;
  AnalyzerFn fn;
};
const std::vector<AnalyzerInfo>& Registry();
// Every finding id an analyzer can report, with its fixes: catalog.h.

// The critical path of one window [start_ns, end_ns) of one rank (an annotation's instance, a step),
// from the thread that launched most device work: the chain that set its length (metrics.h).
CriticalPath CriticalPathOf(const profiler::Trace& trace, int32_t rank, int64_t start_ns, int64_t end_ns);

// Steps first, then every registered family; findings sorted by estimated saving. The tables and
// families run on up to `threads` threads (0: one per usable CPU); the report is the same for any
// number.
// `what_if`: fixes to replay together beside the findings' own (transform names or finding ids,
// WhatIfNames()); an unknown name is the caller's to refuse (ResolveWhatIf).
Report Analyze(const profiler::Trace& trace, const Thresholds& thresholds = Thresholds(), size_t threads = 0,
               const std::vector<std::string>& what_if = {});
// Where an analysis's time went (bench/ingest_bench.cc's breakdown): per stage, in the
// order they start, its wall time and the CPU time of the thread that ran it (the tables and the
// families run side by side: their wall times overlap; the CPU times add up to the work).
struct StageTime {
  std::string name;
  int64_t wall_ns = 0, cpu_ns = 0;
  int64_t instructions = -1;  // user-space instructions of the thread that ran it (-1: no counter here)
};
Report Analyze(const profiler::Trace& trace, const Thresholds& thresholds, size_t threads,
               const std::vector<std::string>& what_if, std::vector<StageTime>* stages);
// What an experiment's trial reads of its run (experiments/: `fix --cmd`, sweeps): the steps'
// boundaries (StepDetail::kBoundaries), the recording's losses (steps past them left out), the
// memory figures and each rank's CPU load, as Analyze's report holds them; no family, no critical
// path, no what-if: a fraction of Analyze's cost.
struct Measurement {
  StepModel steps;
  std::vector<RecordingLoss> losses;
  std::vector<DeviceMemory> memory;
  std::vector<RankCpuLoad> cpu_load;
};
Measurement Measure(const profiler::Trace& trace, const Thresholds& thresholds = Thresholds());
// Every name `--what-if` takes: the transforms (docs/what-if.md).
std::vector<std::string> WhatIfNames();
// A transform name or a finding id -> the transform name; an error names the known ones.
StatusOr<std::string> ResolveWhatIf(const std::string& name);

}  // namespace trainrx::analyzers
