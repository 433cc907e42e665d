// trainrx::experiments ranks — `trainrx run --nproc N`: N local processes of a reference workload
// under the probes, with torch.distributed's env:// rendezvous on 127.0.0.1.
#pragma once

#include <string>
#include <vector>

#include "trainrx/experiments/run_result.h"
#include "trainrx/experiments/spec.h"

namespace trainrx::experiments {

// Runs `binary` (trainrx-workload) for the spec's workload, preset and sets on `nproc` ranks; rank
// R writes its trace to `output` (one rank) or profiler::RankTracePath(output, R) (trace_names.h:
// "run.rank1.json"), and its run result next to it. Returns 0 with the traces and results read;
// a rank's non-zero exit code (the others are stopped: they would wait in the rendezvous) or -1,
// with *error saying which.
int LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const std::string& output,
                std::vector<std::string>* traces, std::vector<RunResult>* results, std::string* error);

// The general form, for the experiment launcher: `extra` arguments go to every rank; with an empty
// `output` no -o is given (pass --no-trace in `extra` for an untraced trial) and rank R's result
// goes to profiler::RankTracePath(scratch, R) + ".result.json", its stdout and stderr to the same
// + ".log".
struct RankLaunch {
  std::string output;               // trace path ("" -> no trace argument)
  std::string scratch;              // results and logs when output is ""
  std::vector<std::string> extra;   // arguments for every rank
};
int LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const RankLaunch& how,
                std::vector<std::string>* traces, std::vector<RunResult>* results, std::string* error);

}  // namespace trainrx::experiments
