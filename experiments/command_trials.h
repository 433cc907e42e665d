// Runs of a user's command for a plan (fix --cmd, sweep --cmd, ab --cmd): one launcher Command
// each, as a TrialResult, all timed the same way. Internal to experiments/ (the plans' files).
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
    StatusOr<CommandResult> run = launcher_.Command(command, fixes);
    if (!run.ok()) return run.status();
    const CommandResult& c = *run;
    TrialResult out;
    if (c.out_of_memory) {  // a result only where the plan accepts it (sweeps)
      out.out_of_memory = true, out.oom_request_bytes = c.oom_request_bytes, out.oom_message = c.oom_message;
      out.seconds = c.seconds;
      return out;
    }
    if (seen_ && c.unit != *unit_)
      return Status::Error(fmt::format("`{}`: timed in {} but an earlier run in {}: every run must write steps "
                                       "(torch.profiler's ProfilerStep, optimizer steps, trainrx step markers) or none",
                                       command, c.unit, *unit_));
    *unit_ = c.unit;
    seen_ = true;
    out.ms_per_step = c.value, out.seconds = c.seconds;
    out.samples_per_step = c.samples_per_step, out.samples_from = c.samples_from;
    out.compile_s = c.compile_s;
    out.ranks = c.ranks;
    out.step_ms = c.step_ms;
    out.has_memory = c.has_memory, out.memory_growth = c.memory_growth, out.memory_peak = c.memory_peak;
    out.cpu = c.cpu;
    if (c.unit == "ms per step" && c.samples_per_step > 0 && c.value > 0) out.samples_per_s = c.samples_per_step * 1000 / c.value;
    return out;
  }

 private:
  Launcher& launcher_;
  std::string* unit_;
  bool seen_ = false;
};

}  // namespace trainrx::experiments
