// Runs of a user's command for a plan (fix --cmd, sweep --cmd, ab --cmd): one launcher Command
// each, all timed the same way. Internal to experiments/ (the plans' files).
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "trainrx/experiments/launcher.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

// One plan's runs of commands: each one timed by its steps when it writes them (ms per step), else
// as a whole run (s per run); all of them must be timed the same way, or the comparison would mix
// units. `*unit` is set by the first run.
class CommandTrials {
 public:
  CommandTrials(Launcher& launcher, std::string* unit) : launcher_(launcher), unit_(unit) {}
  StatusOr<TrialResult> Run(const std::string& command, const std::vector<std::string>& fixes) {
    StatusOr<TrialResult> run = launcher_.Command(command, fixes);
    if (!run.ok() || run->out_of_memory) return run;  // out of memory: a result only where the plan accepts it (sweeps)
    if (seen_ && run->unit != *unit_)
      return Status::Error(fmt::format("`{}`: timed in {} but an earlier run in {}: every run must write steps "
                                       "(torch.profiler's ProfilerStep, optimizer steps, trainrx step markers) or none",
                                       command, run->unit, *unit_));
    *unit_ = run->unit;
    seen_ = true;
    if (run->unit == "ms per step" && run->samples_per_step > 0 && run->value > 0)
      run->samples_per_s = run->samples_per_step * 1000 / run->value;
    return run;
  }

 private:
  Launcher& launcher_;
  std::string* unit_;
  bool seen_ = false;
};

}  // namespace trainrx::experiments
