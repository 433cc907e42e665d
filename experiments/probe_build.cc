#include "trainrx/experiments/probe_build.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "trainrx/experiments/process.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Runs argv with its output in `log_path`: ok, else what failed and the log's tail.
Status Run(const std::vector<std::string>& argv, const fs::path& log_path, const std::string& what) {
  ProcessSpec p;
  p.argv = argv;
  p.search_path = true;
  p.log = log_path.string();
  p.env = {{"LD_PRELOAD", "", EnvChange::kUnset}};  // never build under our own shim
  const StatusOr<int> code = RunProcess(p);
  if (!code.ok()) return Status::Error(fmt::format("{}: {}", what, code.status().message()));
  if (*code == 0) return Status::Ok();
  return Status::Error(fmt::format("{} failed (exit {}; log {}):\n{}", what, *code, log_path.string(),
                                   LogTail(log_path.string(), 1200)));
}

}  // namespace

std::string ProbeCacheName(const std::string& torch_version, const std::string& torch_lib) {
  // FNV-1a, 32 bits: stable across runs and builds (std::hash is not promised to be).
  uint32_t h = 2166136261u;
  for (unsigned char c : torch_lib) h = (h ^ c) * 16777619u;
  std::string version;
  for (char c : torch_version) version += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+') ? c : '_';
  return fmt::format("probe-{}-{:08x}", version, h);
}

StatusOr<std::string> BuildProbe(const ProbeBuildRequest& r, std::ostream& log) {
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  if (r.cache_dir.empty()) return Status::Error("no cache directory (set HOME or XDG_CACHE_HOME)");
  if (!fs::exists(fs::path(r.source_dir) / "probes" / "observer.cc", ec)) {
    return Status::Error(fmt::format("trainrx's sources are not at '{}' (the checkout this trainrx was built from): "
                                     "build a probe by hand (docs/setup.md#your-own-torch) and pass record --probe-dir",
                                     r.source_dir));
  }
  fs::create_directories(r.cache_dir, ec);
  // 1. The interpreter's torch: its version and CMake prefix.
  const fs::path query_log = fs::path(r.cache_dir) / fmt::format("query-{}.log", getpid());
  if (Status st = Run({r.python, "-c", "import torch; print(torch.__version__); print(torch.utils.cmake_prefix_path)"},
                     query_log, fmt::format("import torch with {}", r.python));
      !st.ok())
    return st;
  std::istringstream answer(FileText(query_log));
  fs::remove(query_log, ec);
  std::string version, prefix, line;
  // The last two lines: the program's own start-up output (a sitecustomize) may come first.
  std::vector<std::string> lines;
  while (std::getline(answer, line)) lines.push_back(line);
  if (lines.size() < 2)
    return Status::Error(fmt::format("{} did not say its torch's version and CMake prefix", r.python));
  version = lines[lines.size() - 2];
  prefix = lines.back();
  const fs::path dir = fs::path(r.cache_dir) / ProbeCacheName(version, r.torch_lib);
  const fs::path build = dir / "build";
  // Afresh: a folder left by an earlier try is one whose build failed (a built probe is chosen, never
  // rebuilt), and its CMake cache may hold what made it fail.
  fs::remove_all(build, ec);
  fs::create_directories(build, ec);
  const fs::path configure_log = dir / "configure.log", build_log = dir / "build.log";
  log << fmt::format("trainrx: building a probe for torch {} ({}) into {} (log: {}) ...\n", version, r.torch_lib,
                     dir.string(), build_log.string())
      << std::flush;
  // 2. Configure and build the probe target alone (no tests, no workloads' dependencies).
  std::vector<std::string> configure = {"cmake", "-S", r.source_dir, "-B", build.string(),
                                        "-DCMAKE_BUILD_TYPE=Release", "-DTRAINRX_WITH_TESTS=OFF",
                                        "-DTRAINRX_WITH_BENCHMARKS=OFF", "-DTRAINRX_WITH_NCCL=OFF",
                                        "-DTRAINRX_WITH_TORCH=ON", "-DCMAKE_PREFIX_PATH=" + prefix};
  if (access("/usr/bin/ninja", X_OK) == 0 || access("/usr/local/bin/ninja", X_OK) == 0)
    configure.insert(configure.begin() + 1, {"-G", "Ninja"});
  if (Status st = Run(configure, configure_log, "configuring the probe (cmake)"); !st.ok()) return st;
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  // The CUPTI backend too where the configure found a CUDA toolkit with CUPTI (a CUDA build of torch).
  const bool cuda = FileText(configure_log).find(" cuda=ON ") != std::string::npos;
  std::vector<std::string> targets = {"trainrx_probe"};
  if (cuda) targets.push_back("trainrx_cupti");
  std::vector<std::string> build_cmd = {"cmake", "--build", build.string(), "--parallel", std::to_string(cpus), "--target"};
  build_cmd.insert(build_cmd.end(), targets.begin(), targets.end());
  if (Status st = Run(build_cmd, build_log, cuda ? "building the probe and the CUPTI backend" : "building the probe");
      !st.ok())
    return st;
  // 3. The probe must name the libtorch the program loaded, or the shim would never choose it.
  std::string built_lib;
  {
    std::istringstream sidecar(FileText(build / "libtrainrx_probe.torch"));
    while (std::getline(sidecar, line))
      if (line.rfind("lib=", 0) == 0) built_lib = line.substr(4);
  }
  if (!SameFile(built_lib, r.torch_lib)) {
    return Status::Error(fmt::format("the probe was built against {} (CMake's Torch package under {}), but the program "
                                     "loaded {}",
                                     built_lib.empty() ? "no libtorch" : built_lib, prefix, r.torch_lib));
  }
  std::vector<std::string> files = {"libtrainrx_probe.so", "libtrainrx_probe.torch"};
  if (cuda) files.push_back("libtrainrx_cupti.so");
  for (const std::string& f : files) {
    fs::copy_file(build / f, dir / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::Error(fmt::format("copying {} into {}: {}", f, dir.string(), ec.message()));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log << fmt::format("trainrx: built {} in {:.0f} s\n", (dir / "libtrainrx_probe.so").string(), seconds);
  return dir.string();
}

}  // namespace trainrx::experiments
