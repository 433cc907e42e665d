// trainrx::experiments probe_build — a probe built for the torch a recorded program ran, into the
// per-user cache (record.h ProbeCacheDir), so that the next `trainrx record` of it attaches the probe
// (record.h ProbeChoices) instead of falling back to torch.profiler.
//
// Who calls it: `record` (record.cc), after a run whose libtorch no probe was built for (the preload
// shim names it in the TRAINRX_MISMATCH_FILE file), when the command is a Python interpreter (its
// torch gives the CMake prefix). The build is CMake on trainrx's own sources (the checkout it was
// built or pip-installed from), the probe target only: ~2 minutes on 2 cores. Torch-free: torch is
// only ever imported in the child interpreter. Not thread-safe (one build at a time).
#pragma once

#include <ostream>
#include <string>

#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

struct ProbeBuildRequest {
  std::string python;      // the interpreter whose torch to build for ("python3", a path)
  std::string torch_lib;   // the libtorch_cpu the program loaded (the shim's report)
  std::string source_dir;  // trainrx's sources (with CMakeLists.txt)
  std::string cache_dir;   // where probe-<name>/ goes (ProbeCacheDir())
};

// "probe-<torch version>-<8 hex digits of the libtorch path's hash>": one directory per torch
// installation, two venvs with the same version kept apart. ("2.13.0+cpu", "/v/libtorch_cpu.so")
// -> "probe-2.13.0+cpu-1a2b3c4d".
std::string ProbeCacheName(const std::string& torch_version, const std::string& torch_lib);

// Asks `python` for its torch (version, CMake prefix), configures and builds the probe against it
// in <cache>/probe-<...>/build, checks the probe names the same libtorch file the program loaded,
// and places libtrainrx_probe.so and its sidecar in <cache>/probe-<...>/. Says what it does on `log`
// (a progress line, then the time it took). Returns that directory, or an error (which step failed,
// with its log's tail).
StatusOr<std::string> BuildProbe(const ProbeBuildRequest& request, std::ostream& log);

}  // namespace trainrx::experiments
