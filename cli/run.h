// `trainrx workloads` / `trainrx run`: see run.cc.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace trainrx::cli {

struct RunOptions {
  std::string workload;
  std::vector<std::string> sets;  // "knob=value"
  std::string preset;
  int nproc = 1;
  std::string output;  // trace path ("" -> trainrx_<workload>.json); per-rank suffix when nproc > 1
};

// Analyzes the traces with the runs' result documents and summary lines; returns an exit code.
using RunAnalyzeFn = std::function<int(const std::vector<std::string>& traces, const std::vector<std::string>& run_json,
                                       const std::vector<std::string>& summary)>;

int ListWorkloads(std::ostream& out);
// Exit codes: 0 ok, 2 usage error or missing workload binary, else the first failing rank's code.
int RunWorkload(const RunOptions& options, const RunAnalyzeFn& analyze);

}  // namespace trainrx::cli
