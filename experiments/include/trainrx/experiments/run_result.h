// trainrx::experiments run result — reading the document a reference workload writes with
// --result (schema "trainrx.run/1"; the writer is workloads/train.cc): per-step times (and, in an
// in-process A/B run, each step's arm), the median step, throughput and losses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

inline constexpr const char* kRunSchema = "trainrx.run/1";

struct RunStep {
  double ms = 0;
  char arm = 'A';  // 'B': the --alt-set configuration
  int64_t heap_bytes = -1;  // malloc's bytes in use at the step's end (-1: not in the document)
};

struct RunResult {
  int64_t rank = 0;
  std::string changed;  // knobs away from their defaults, "k=v k=v"
  std::vector<RunStep> steps;
  double median_step_ms = 0, samples_per_s = 0;
  // The mean of the timed steps: what throughput follows (0 in documents before 2026-11-26: then
  // MsPerStep() is the median).
  double mean_step_ms = 0;
  double MsPerStep() const { return mean_step_ms > 0 ? mean_step_ms : median_step_ms; }
  double first_loss = 0, last_loss = 0;
  std::string json;  // the document, minified (embedded in `run` reports)
  profiler::CpuLoad cpu;  // "cpu": what the timed steps got of the CPUs (absent: unmeasured)

  // "rank 0: median step 12.30 ms, 1300.0 samples/s, loss 2.3 -> 1.9 (knobs: workers=0)"
  std::string Summary() const;
};

// Reads *out from `path`; an error naming the file and the field when it is not a readable
// trainrx.run/1 document.
Status ReadRunResult(const std::string& path, RunResult* out);
// The same from the document's text; `path` names it in errors.
Status ParseRunResult(std::string_view text, const std::string& path, RunResult* out);

// The "cpu" object of a run result or an in-process record ({"wall_ns", "run_ns", "wait_ns",
// "involuntary", "children_ns", "others_ns", "cpus"}: the timed steps' CpuLoad) from its JSON text;
// an error naming `path` and the field when one is not a number. Absent wall_ns: unmeasured.
Status ParseCpuLoad(std::string_view object_json, const std::string& path, profiler::CpuLoad* out);

// The run's memory from its steps' heap figures: growth per step (least-squares slope,
// bytes) and the largest figure. False when any step lacks one (an older document, no glibc).
bool MemoryOfRun(const RunResult& r, double* growth, double* peak);

}  // namespace trainrx::experiments
