// `trainrx record [-o FILE] [--analyze] -- COMMAND ARGS...`: runs COMMAND with the probe shim
// preloaded (LD_PRELOAD), waits for it, and reports what was written. The program's stdout,
// stderr and exit code are its own: the probes print nothing unless something is wrong
// (TRAINRX_QUIET=1), and we exit with the program's code (128+N when a signal ended it).
// Exception: a program that succeeded without any trace being written is an error (exit 2),
// because the user asked for a recording and got none.
#include "record.h"

#include "exe_dir.h"
#include "trainrx/experiments/launch_files.h"
#include "trainrx/experiments/process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include "trainrx/profiler/env.h"

namespace trainrx::cli {
namespace {

namespace fs = std::filesystem;

pid_t g_child = -1;

void ForwardSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

}  // namespace

int RunRecord(const RecordOptions& options, const AnalyzeFn& analyze) {
  if (options.command.empty()) {
    std::cerr << "trainrx: error: record needs a command after --, e.g. trainrx record -o run.json -- python3 train.py\n";
    return 2;
  }
  const std::string dir = !options.probe_dir.empty()          ? options.probe_dir
                          : std::getenv(env::kProbeDir) ? std::getenv(env::kProbeDir)
                                                             : ExeDir();
  const std::string preload = dir + "/libtrainrx_preload.so";
  const std::string probe = dir + "/libtrainrx_probe.so";
  const std::string cupti = dir + "/libtrainrx_cupti.so";
  if (!fs::exists(probe) || !fs::exists(preload)) {
    std::cerr << fmt::format(
        "trainrx: error: {} not found: this trainrx was built without LibTorch, so it cannot record. "
        "Install libtorch-dev (scripts/setup does) or configure with "
        "-DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)') and rebuild.\n",
        probe);
    return 2;
  }
  // The torch the probe was built against: its sidecar file, else the one this trainrx was built with.
  std::string torch_lib = options.torch_lib, torch_version = options.torch_version;
  if (std::ifstream sidecar(dir + "/libtrainrx_probe.torch"); sidecar) {
    for (std::string line; std::getline(sidecar, line);) {
      if (line.rfind("lib=", 0) == 0) torch_lib = line.substr(4);
      if (line.rfind("version=", 0) == 0) torch_version = line.substr(8);
    }
  }
  std::error_code ec;
  const fs::path output = fs::absolute(options.output, ec);
  if (!fs::is_directory(output.parent_path())) {
    std::cerr << fmt::format("trainrx: error: {}: the directory does not exist\n", output.parent_path().string());
    return 2;
  }
  if (access(output.parent_path().c_str(), W_OK) != 0) {
    std::cerr << fmt::format("trainrx: error: {}: cannot write there ({})\n", output.parent_path().string(), std::strerror(errno));
    return 2;
  }
  fs::remove(output, ec);  // so that "no trace written" is never hidden by an old file
  const auto started = fs::file_time_type::clock::now();

  experiments::ProcessSpec p;
  p.argv = options.command;
  p.search_path = true;
  p.data_limit_bytes = options.memory_cap_bytes;
  using E = experiments::EnvChange;
  p.env = {{"LD_PRELOAD", preload, E::kPrepend},
           {env::kProbeLib, probe, E::kSet},
           // Tests (and users who know better) may pin the expected libtorch themselves.
           {env::kTorchLib, torch_lib, E::kSetIfUnset},
           {env::kTorchVersion, torch_version, E::kSet},
           {env::kOutput, output.string(), E::kSet},
           // The launched process is the root (it writes `output`); its children tag theirs.
           {env::kRootPid, "", E::kOwnPid}};
  if (!options.verbose) p.env.push_back({env::kQuiet, "1", E::kSetIfUnset});
  // The step window: --steps / --skip win over the environment, the default does not.
  p.env.push_back({env::kSteps, options.steps.empty() ? kDefaultSteps : options.steps,
                   options.steps.empty() ? E::kSetIfUnset : E::kSet});
  if (options.skip > 0) p.env.push_back({env::kSkipSteps, std::to_string(options.skip), E::kSet});
  // The probe loads the CUPTI backend when it attaches (import torch, or before a LibTorch
  // program's main) and starts it before the program's first CUDA call. CUDA_INJECTION64_PATH is
  // not set: the driver would start CUPTI in every process of the launch that initializes CUDA,
  // those the probe does not observe too (spawned workers, a libtorch the probe was not built
  // for), which would then pay CUPTI's cost and hold records nobody collects.
  if (fs::exists(cupti)) p.env.push_back({env::kCuptiLib, cupti, E::kSet});
  // The Python start-up hook (probes/python/sitecustomize.py): nn.Module ranges, so findings name
  // the user's modules, and for `trainrx fix --cmd` the fixes named in TRAINRX_FIX. It acts only
  // once the program imports torch; other programs never notice it.
  const std::string hook = ExeDir() + "/trainrx_python";
  const bool have_hook = fs::exists(hook + "/sitecustomize.py");
  if (const char* fixes = std::getenv(env::kFix); fixes && *fixes && !have_hook) {
    std::cerr << fmt::format("trainrx: error: TRAINRX_FIX is set but {}/sitecustomize.py is missing (rebuild)\n", hook);
    return 2;
  }
  if (have_hook) {
    p.env.push_back({"PYTHONPATH", hook, E::kPrepend});
    p.env.push_back({env::kModules, "1", E::kSetIfUnset});
    p.env.push_back({env::kMarks, "1", E::kSetIfUnset});
  }
  std::string error;
  const pid_t child = experiments::StartProcess(p, &error);
  if (child < 0) {
    std::cerr << "trainrx: error: " << error << "\n";
    return 2;
  }
  g_child = child;
  // Like `time`: the terminal's Ctrl-C reaches the program itself (same process group); we wait
  // for it to write its trace. SIGTERM sent to us is passed on.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGTERM, ForwardSignal);
  const int code = experiments::WaitProcess(child);
  signal(SIGINT, SIG_DFL);
  signal(SIGQUIT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);

  // A process killed by SIGKILL / the OOM killer left only its journal: make its trace from it.
  const int64_t ended_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  const char* sig = code > 128 ? sigabbrev_np(code - 128) : nullptr;
  const std::string root_reason = sig ? fmt::format("SIG{}", sig) : fmt::format("exit code {} without writing its trace (os._exit?)", code);
  for (const auto& line : experiments::FinishJournals(output, started, root_reason, ended_ns)) {
    std::cerr << "trainrx: " << line << "\n";
  }
  const std::vector<std::string> traces = experiments::LaunchTraces(output, started);
  if (traces.empty()) {
    if (const auto space = fs::space(output.parent_path(), ec); !ec && space.available < (1u << 20)) {
      std::cerr << fmt::format("trainrx: no trace was written: the disk holding {} is full ({} bytes free)\n",
                               output.parent_path().string(), space.available);
      return code != 0 ? code : 2;
    }
    std::cerr << fmt::format(
        "trainrx: no trace was written: {} never loaded libtorch{} (exit code {})\n", options.command[0],
        ", ran no torch op, or ran unobserved (see the message above, if any)", code);
    return code != 0 ? code : 2;
  }
  for (const auto& t : traces) std::cerr << "trainrx: wrote " << t << "\n";
  if (options.analyze) {
    const int rc = analyze(traces);
    if (rc != 0 && code == 0) return rc;
  }
  return code;
}

}  // namespace trainrx::cli
