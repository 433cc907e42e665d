// `trainrx fix`, `trainrx sweep`, `trainrx ab`: measured experiments on the reference workloads
// (or, for ab --cmd, any command). The runner lives here; statistics in reports/stats.h;
// rendering in reports/experiment.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainrx::cli {

struct ExperimentOptions {
  int trials = 5;          // per configuration (>= 4: fewer can never reach p < 0.05)
  double budget_s = 0;     // fix: cap on the total time (fewer trials, never below 4); 0 = none
  uint64_t seed = 1;       // interleaving order
  std::string format = "text";
  std::string output;      // report file ("" = stdout)
};

// "cnn workers=0 anomaly=1" / "lm preset=seeds": a workload and knob assignments.
struct WorkloadSpec {
  std::string workload;
  std::vector<std::string> sets;
  std::string preset;
  std::string Label() const;
};
// Parses a SPEC string; false with *error on an unknown workload/knob/value.
bool ParseSpec(const std::string& text, WorkloadSpec* spec, std::string* error);

int RunFix(const WorkloadSpec& spec, const ExperimentOptions& options);
int RunSweep(const WorkloadSpec& base, const std::vector<std::string>& grids, const ExperimentOptions& options);
// With `commands`, a and b are shell commands run under `trainrx record` (timed by their steps
// when the trace has them, else by wall time).
int RunAb(const std::string& a, const std::string& b, bool commands, const ExperimentOptions& options);

}  // namespace trainrx::cli
