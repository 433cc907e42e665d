// `trainrx fix`, `trainrx sweep`, `trainrx ab`: option handling and rendering around the
// experiments library (experiments/plans.h).
#pragma once

#include <string>
#include <vector>

#include "trainrx/experiments/plans.h"

namespace trainrx::cli {

struct ExperimentOptions {
  experiments::PlanOptions plan;
  std::string format = "text";  // text | md | json
  std::string output;           // report file ("" = stdout)
};

// Exit codes: 0 done (whatever the measured verdict), 2 usage/input error or a failed trial.
int RunFix(const std::string& spec, const ExperimentOptions& options);
int RunSweep(const std::string& spec, const std::vector<std::string>& grids, const ExperimentOptions& options);
int RunFixCommand(const std::string& command, const ExperimentOptions& options);
int RunSweepCommand(const std::string& command_template, const std::vector<std::string>& grids,
                    const ExperimentOptions& options);
int RunAb(const std::string& a, const std::string& b, bool commands, const ExperimentOptions& options);

}  // namespace trainrx::cli
