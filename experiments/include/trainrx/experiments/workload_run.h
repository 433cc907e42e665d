// trainrx::experiments workload run — `trainrx run`: one reference workload (N local ranks with
// --nproc, env:// rendezvous on 127.0.0.1) run under the probes, its traces and per-step results
// gathered for the analysis.
#pragma once

#include <ostream>
#include <string>
#include <vector>

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
};

// Checks the workload, its preset and knobs, runs `exe_dir`/trainrx-workload on run.nproc ranks
// and says the traces written on `log`. Returns 0, or the exit code with *error: 2 for a usage
// error, a missing workload binary or output folder, else the first failing rank's code.
int RunWorkload(const WorkloadRun& run, const std::string& exe_dir, std::ostream& log, WorkloadTraces* out,
                std::string* error);

}  // namespace trainrx::experiments
