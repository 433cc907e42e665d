// trainrx::experiments workload run — `trainrx run`: one reference workload (N local ranks with
// --nproc, env:// rendezvous on 127.0.0.1) run under the probes, its traces and per-step results
// gathered for the analysis.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

struct WorkloadRun {
  std::string workload;
  std::vector<std::string> sets;  // "knob=value"
  std::string preset;
  int nproc = 1;
  std::string output;  // trace path ("" -> trainrx_<workload>.json); per-rank suffix when nproc > 1
};

// What the run wrote: its traces, each rank's result document (trainrx.run/1) and summary line.
struct WorkloadTraces {
  std::vector<std::string> traces, run_json, summary;
  // A failed run's first failing rank's exit code (what `trainrx run` exits with); 0 when no rank
  // failed (the run worked, or the error is a usage error, a missing binary or folder).
  int rank_exit_code = 0;
};

// Checks the workload, its preset and knobs, runs `exe_dir`/trainrx-workload on run.nproc ranks
// and says the traces written on `log`. An error for a usage error, a missing workload binary or
// output folder, or a failing rank (its exit code in out->rank_exit_code).
Status RunWorkload(const WorkloadRun& run, const std::string& exe_dir, std::ostream& log, WorkloadTraces* out);

}  // namespace trainrx::experiments
