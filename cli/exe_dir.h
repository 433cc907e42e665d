// Where the running trainrx binary lives: the probe libraries and trainrx-workload are built next
// to it (build/), so the CLI finds them without any install step; and what recording needs that
// only the build knows (the torch the probe was built against, trainrx's sources).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "trainrx/experiments/launcher.h"
#include "trainrx/experiments/record.h"

namespace trainrx::cli {

inline std::string ExeDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// `trainrx record`'s options as this build has them (the cli target's compile definitions).
inline experiments::RecordOptions RecordDefaults() {
  experiments::RecordOptions r;
  r.torch_lib = TRAINRX_PROBE_TORCH_LIB;
  r.torch_version = TRAINRX_PROBE_TORCH_VERSION;
  r.source_dir = TRAINRX_SOURCE_DIR;
  return r;
}

// The trials' launcher: processes next to this trainrx, recordings as `trainrx record` makes them.
inline std::unique_ptr<experiments::Launcher> TrialLauncher(experiments::LauncherOptions options = {}) {
  options.record = RecordDefaults();
  return experiments::MakeProcessLauncher(ExeDir(), options);
}

}  // namespace trainrx::cli
