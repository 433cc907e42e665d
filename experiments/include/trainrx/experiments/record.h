// trainrx::experiments record — `trainrx record`: a command run with the probe shim preloaded
// (LD_PRELOAD), waited for, and the traces it wrote (a killed process's made from its journal).
// The program's stdout, stderr and exit code are its own: the probes print nothing unless
// something is wrong (TRAINRX_QUIET=1).
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "trainrx/experiments/process.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

// Steps `record` keeps when neither --steps nor TRAINRX_STEPS says: long runs stay bounded
// (a step of a small CNN is ~1 000 events; the collector's cap is 4 M).
inline constexpr const char* kDefaultSteps = "200";

struct RecordOptions {
  std::string output = "trainrx_trace.json";
  bool analyze = false;
  bool verbose = false;
  // The step window (TRAINRX_STEPS / TRAINRX_SKIP_STEPS for the probes): empty steps is the
  // default, kDefaultSteps unless the environment says otherwise; "all" records every step.
  std::string steps;
  int64_t skip = 0;
  std::string step_name;  // --step: the step as the user names it (env::kStepName)
  std::vector<std::string> command;
  std::string probe_dir;      // where libtrainrx_probe.so and its .torch sidecar are (default: next to trainrx)
  std::string torch_lib;      // the libtorch_cpu the probe was built against (build-time)
  std::string torch_version;  // its version
  // trainrx's sources, to build a probe for a torch none was built for (probe_build.h): after a
  // Python program ran another libtorch, `record` builds one into the per-user cache for the next
  // run. "" or TRAINRX_PROBE_BUILD=0: it only says how.
  std::string source_dir;
  // > 0: the program runs under this RLIMIT_DATA (`--memory-cap`): an allocation past it fails as
  // on a full device, and the probe writes it as the CPU's capacity (the stand-in for a device's memory).
  uint64_t memory_cap_bytes = 0;
  // Every allocation and free of c10's allocators (`--memory-events`; TRAINRX_MEMORY_EVENTS=1):
  // what names the op whose blocks outlive their step (memory.growth). Costs like torch.profiler's
  // profile_memory=True (docs/memory.md).
  bool memory_events = false;
};

struct RecordResult {
  int code = 0;                     // the program's exit code, 128+N when signal N ended it
  std::vector<std::string> traces;  // the traces it wrote (none: said on `log`)
};

// Runs options.command under the probes found in options.probe_dir, else $TRAINRX_PROBE_DIR, else
// `exe_dir` (where trainrx is; its trainrx_python/ holds the Python start-up hook), and waits for
// it: the terminal's Ctrl-C reaches the program (we wait for it to write its trace), a SIGTERM
// sent to us is passed on. Says on `log` the journals turned into traces, then the traces written
// ("trainrx: wrote ...") or why none was. An error when the program could not be started (no
// command, no probe, the output's folder missing or not writable, the Python hook missing).
Status RecordCommand(const RecordOptions& options, const std::string& exe_dir, std::ostream& log,
                     RecordResult* result);

// A recording made ready to start (PrepareRecord): the program with the probes' environment, and
// where its trace goes. Whoever starts it (RecordCommand in the foreground; the launcher's trials,
// with their log and limits added to `process`) hands it to FinishRecord when it ended.
struct RecordLaunch {
  ProcessSpec process;
  std::filesystem::path output;    // the root process's trace (absolute); its children's beside it
  std::filesystem::path mismatch;  // where the preload shim names a libtorch no probe was built for
  std::filesystem::file_time_type started{};
};
// The checks and environment of RecordCommand, without starting anything: an error when there is no
// command, no probe, the output's folder is missing or not writable, or the Python hook is missing
// while TRAINRX_FIX is set.
StatusOr<RecordLaunch> PrepareRecord(const RecordOptions& options, const std::string& exe_dir);
// After the program of `launch` ended with `code`: journals of killed processes made into traces, the
// launch's traces (said on `log`, or why there is none), and a probe built for the next run where the
// program loaded a libtorch none was built for.
std::vector<std::string> FinishRecord(const RecordOptions& options, const RecordLaunch& launch, int code, std::ostream& log);

// Fixes applied from outside a script (`fixes`, TRAINRX_FIX's "a,b") are the Python start-up hook's
// work (`exe_dir`/trainrx_python/sitecustomize.py): an error naming the hook when there are fixes and
// it is missing, so that they are never silently left out. `trainrx record` and the launcher's trials
// both check it.
Status CheckHookForFixes(const std::string& fixes, const std::string& exe_dir);

// The per-user probe cache: $XDG_CACHE_HOME/trainrx, else $HOME/.cache/trainrx ("" without either).
// Each probe-<name>/ in it holds a probe built for one torch (libtrainrx_probe.so, its .torch sidecar).
std::string ProbeCacheDir();

// The probes, besides `primary_dir`'s, that `record` offers the preload shim (TRAINRX_PROBE_CHOICES)
// when no --probe-dir / TRAINRX_PROBE_DIR names one: build-compat/ beside `exe_dir` (a checkout's
// build/; scripts/setup builds the probe for Debian's LibTorch 1.13 there), then each probe-*/ of
// `cache_dir` in name order. One line "<libtorch_cpu>\t<dir>" per directory that has a probe and a
// sidecar naming its libtorch; the shim attaches the first whose libtorch is the process's.
// Example: exe_dir "/src/build" with /src/build-compat/libtrainrx_probe.torch holding
// "lib=/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13" ->
// "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\t/src/build-compat\n".
std::string ProbeChoices(const std::string& primary_dir, const std::string& exe_dir, const std::string& cache_dir);

// A memory cap as given on the command line (`record --memory-cap`, `sweep --memory-cap`): "1.5G" ->
// 1610612736 (K, M, G: powers of 1024, with or without "i" / "B"; a plain number: bytes). An error
// naming --memory-cap and the text unless positive (and at most 1e18).
StatusOr<uint64_t> ParseBytes(const std::string& text);

}  // namespace trainrx::experiments
