// The environment protocol between `trainrx record` / the experiment launcher and the processes
// they start (the preload shim, the probe, the Python start-up hook, the workloads). One list of
// names, header-only and torch-free, so the torch-built probe and the torch-free launcher agree.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace trainrx::env {

// Set by `record` for the launched program.
inline constexpr const char* kOutput = "TRAINRX_OUTPUT";            // the root process's trace path
inline constexpr const char* kRootPid = "TRAINRX_ROOT_PID";         // the root's pid: others tag their traces
inline constexpr const char* kProbeLib = "TRAINRX_PROBE_LIB";       // the probe the preload shim dlopens
inline constexpr const char* kTorchLib = "TRAINRX_TORCH_LIB";       // the libtorch the probe was built against
inline constexpr const char* kTorchVersion = "TRAINRX_TORCH_VERSION";
inline constexpr const char* kCuptiLib = "TRAINRX_CUPTI_LIB";
// Other probes the shim may attach when the process's libtorch is not kTorchLib: lines
// "<libtorch_cpu path>\t<probe directory>" (experiments/record.h ProbeChoices).
inline constexpr const char* kProbeChoices = "TRAINRX_PROBE_CHOICES";
// A file the shim writes the process's libtorch_cpu path to when no probe was built for it; `record`
// then builds one into the per-user cache (experiments/probe_build.h).
inline constexpr const char* kMismatchFile = "TRAINRX_MISMATCH_FILE";
inline constexpr const char* kQuiet = "TRAINRX_QUIET";              // "1": the probes print only problems
// Read from the user's environment.
inline constexpr const char* kProbeDir = "TRAINRX_PROBE_DIR";       // where `record` finds the probe
inline constexpr const char* kProbeBuild = "TRAINRX_PROBE_BUILD";   // "0": record never builds a probe
inline constexpr const char* kMaxEvents = "TRAINRX_MAX_EVENTS";     // the collector's event cap
// The step window (probes/collector.h StepWindow; `record --skip K --steps N` sets them):
// steps run unrecorded first, then steps recorded ("all": to the end).
inline constexpr const char* kSkipSteps = "TRAINRX_SKIP_STEPS";
inline constexpr const char* kSteps = "TRAINRX_STEPS";
// `record --step NAME`: the training step as the user names it (a record_function range), written
// into the trace's config block as "step_name", which analysis reads as `analyze --step NAME` does.
inline constexpr const char* kStepName = "TRAINRX_STEP_NAME";
// A TRAINRX_STEPS value (`record --steps`): "all" (-1) or a count of 1 or more. False otherwise.
inline bool ParseStepCount(const char* v, int64_t* steps) {
  if (std::strcmp(v, "all") == 0) {
    *steps = -1;
    return true;
  }
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 1) return false;
  *steps = n;
  return true;
}
// Threads for reading and analyzing traces (profiler/parallel.h; default: the usable CPUs).
inline constexpr const char* kThreads = "TRAINRX_THREADS";
// Seconds between the collector's journal flushes (probes/journal.h; default 2, 0: no journal).
inline constexpr const char* kFlushSeconds = "TRAINRX_FLUSH_SECONDS";
// The journal's flusher priority: "idle" (default, SCHED_IDLE: never takes a core from the
// training) or "normal" (flushes on time on a saturated machine, at its share of a core).
inline constexpr const char* kJournalPriority = "TRAINRX_JOURNAL_PRIORITY";
inline constexpr const char* kRecordSpawned = "TRAINRX_RECORD_SPAWNED";  // "1": attach to spawned children too
inline constexpr const char* kTorchPython = "TRAINRX_TORCH_PYTHON";
// `fix --cmd`: fixes the Python start-up hook applies (probes/python/sitecustomize.py reads it).
inline constexpr const char* kFix = "TRAINRX_FIX";
// The Python start-up hook's nn.Module ranges ("nn.Module: features.0 (Conv2d)"): `record` sets
// "1" unless the user set it; "0" turns them off.
inline constexpr const char* kModules = "TRAINRX_MODULES";
// The Python start-up hook's marks: calls the trace cannot otherwise see become record_function
// ranges ("torch.cuda.empty_cache"). `record` sets "1" unless the user set it; "0" turns them off.
inline constexpr const char* kMarks = "TRAINRX_MARKS";
// "1": the probe records every allocation and free of c10's allocators (record --memory-events).
inline constexpr const char* kMemoryEvents = "TRAINRX_MEMORY_EVENTS";
// `fix`/`sweep`/`ab --cmd` trials and `fix --cmd`'s analysis run: the start-up hook ends the
// program after this many optimizer steps (backward passes in a script without torch.optim) (SystemExit(0): finally blocks and exit handlers run); unset or 0: the whole run.
inline constexpr const char* kStopAfterSteps = "TRAINRX_STOP_AFTER_STEPS";
// What the start-up hook prints (to stderr) when it ends a run at that limit, followed by the count.
inline constexpr const char* kStepStopLine = "trainrx: stopping after ";
// `fix --cmd`'s in-process rows (probes/python/sitecustomize.py): the start-up hook
// switches these fixes (comma-separated tokens) on and off at optimizer-step boundaries after
// kAltWarmup steps (A B B A, then B A A B), times each step between two boundaries, ends the program
// after kAltSteps timed steps (0: runs to its end) and writes the steps to kAltResult at exit
// ({"schema": "trainrx.alt/1", "steps": [{"arm", "ms"}], "stopped", "token"}).
inline constexpr const char* kAltFix = "TRAINRX_ALT_FIX";
inline constexpr const char* kAltResult = "TRAINRX_ALT_RESULT";
inline constexpr const char* kAltWarmup = "TRAINRX_ALT_WARMUP";
inline constexpr const char* kAltSteps = "TRAINRX_ALT_STEPS";
// fix / sweep / ab / gate when stderr is not a terminal (CI logs, a batch job): a progress line
// at most every this many seconds (default 30; 0: every trial; "off": none).
inline constexpr const char* kProgressSeconds = "TRAINRX_PROGRESS_SECONDS";

// Files: a process's journal is its trace path plus this (probes/journal.h writes it; `record`
// turns a killed process's journal into its trace, experiments::FinishJournals).
inline constexpr const char* kJournalSuffix = ".partial";

}  // namespace trainrx::env
