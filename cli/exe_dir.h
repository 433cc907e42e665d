// Where the running trainrx binary lives: the probe libraries and trainrx-workload are built next
// to it (build/), so the CLI finds them without any install step.
#pragma once

#include <filesystem>
#include <string>

namespace trainrx::cli {

inline std::string ExeDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace trainrx::cli
