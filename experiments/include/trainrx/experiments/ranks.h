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
// "run.rank1.json"), and its run result next to it. Ok with the traces and results read; else an
// error saying which rank or file failed. A rank that exits non-zero (the others are then stopped:
// they would wait in the rendezvous) is an error with its exit code in *rank_exit_code (left 0
// otherwise: a rank that could not start, a result that cannot be read).
Status LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const std::string& output,
                   std::vector<std::string>* traces, std::vector<RunResult>* results, int* rank_exit_code);

// The general form, for the experiment launcher: `extra` arguments go to every rank; with an empty
// `output` no -o is given (pass --no-trace in `extra` for an untraced trial) and rank R's result
// goes to profiler::RankTracePath(scratch, R) + ".result.json", its stdout and stderr to the same
// + ".log".
struct RankLaunch {
  std::string output;               // trace path ("" -> no trace argument)
  std::string scratch;              // results and logs when output is ""
  std::vector<std::string> extra;   // arguments for every rank
};
Status LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const RankLaunch& how,
                   std::vector<std::string>* traces, std::vector<RunResult>* results, int* rank_exit_code);

}  // namespace trainrx::experiments
