#include "trainrx/experiments/record.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trainrx/experiments/launch_files.h"
#include "trainrx/experiments/probe_build.h"
#include "trainrx/experiments/process.h"
#include "trainrx/profiler/env.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

pid_t g_child = -1;

void ForwardSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// The libtorch_cpu a probe directory's sidecar names ("" without one).
std::string SidecarTorchLib(const fs::path& dir) {
  std::ifstream sidecar(dir / "libtrainrx_probe.torch");
  for (std::string line; std::getline(sidecar, line);)
    if (line.rfind("lib=", 0) == 0) return line.substr(4);
  return "";
}

// The probe's environment: the preload shim, the probe and the torch it was built for, the
// output, the step window, the CUPTI backend and the Python start-up hook when they are there.
std::vector<EnvChange> ProbeEnv(const RecordOptions& options, const std::string& dir, const std::string& hook,
                                bool have_hook, const fs::path& output) {
  const std::string preload = dir + "/libtrainrx_preload.so";
  const std::string probe = dir + "/libtrainrx_probe.so";
  const std::string cupti = dir + "/libtrainrx_cupti.so";
  // The torch the probe was built against: its sidecar file, else the one this trainrx was built with.
  std::string torch_lib = options.torch_lib, torch_version = options.torch_version;
  if (std::ifstream sidecar(dir + "/libtrainrx_probe.torch"); sidecar) {
    for (std::string line; std::getline(sidecar, line);) {
      if (line.rfind("lib=", 0) == 0) torch_lib = line.substr(4);
      if (line.rfind("version=", 0) == 0) torch_version = line.substr(8);
    }
  }
  using E = EnvChange;
  std::vector<EnvChange> env = {{"LD_PRELOAD", preload, E::kPrepend},
                                {env::kProbeLib, probe, E::kSet},
                                // Tests (and users who know better) may pin the expected libtorch themselves.
                                {env::kTorchLib, torch_lib, E::kSetIfUnset},
                                {env::kTorchVersion, torch_version, E::kSet},
                                {env::kOutput, output.string(), E::kSet},
                                // The launched process is the root (it writes `output`); its children tag theirs.
                                {env::kRootPid, "", E::kOwnPid}};
  if (!options.verbose) env.push_back({env::kQuiet, "1", E::kSetIfUnset});
  // The step window: --steps / --skip win over the environment, the default does not.
  env.push_back({env::kSteps, options.steps.empty() ? kDefaultSteps : options.steps,
                 options.steps.empty() ? E::kSetIfUnset : E::kSet});
  if (options.skip > 0) env.push_back({env::kSkipSteps, std::to_string(options.skip), E::kSet});
  if (!options.step_name.empty()) env.push_back({env::kStepName, options.step_name, E::kSet});
  if (options.memory_events) env.push_back({env::kMemoryEvents, "1", E::kSet});
  // The probe loads the CUPTI backend when it attaches (import torch, or before a LibTorch
  // program's main) and starts it before the program's first CUDA call. CUDA_INJECTION64_PATH is
  // not set: the driver would start CUPTI in every process of the launch that initializes CUDA,
  // those the probe does not observe too (spawned workers, a libtorch the probe was not built
  // for), which would then pay CUPTI's cost and hold records nobody collects.
  if (fs::exists(cupti)) env.push_back({env::kCuptiLib, cupti, E::kSet});
  // The Python start-up hook (probes/python/sitecustomize.py): nn.Module ranges, so findings name
  // the user's modules, and for `trainrx fix --cmd` the fixes named in TRAINRX_FIX. It acts only
  // once the program imports torch; other programs never notice it.
  if (have_hook) {
    env.push_back({"PYTHONPATH", hook, E::kPrepend});
    env.push_back({env::kModules, "1", E::kSetIfUnset});
    env.push_back({env::kMarks, "1", E::kSetIfUnset});
  }
  return env;
}

// Waits for the program as `time` does: the terminal's Ctrl-C reaches the program itself (same
// process group) and we wait for it to write its trace; SIGTERM sent to us is passed on.
int WaitForeground(pid_t child) {
  g_child = child;
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGTERM, ForwardSignal);
  const int code = WaitProcess(child);
  signal(SIGINT, SIG_DFL);
  signal(SIGQUIT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  return code;
}

// After the program ended: a killed process's journal made into its trace, then the traces the
// launch wrote, said on `log` (or why there is none).
std::vector<std::string> CollectTraces(const RecordOptions& options, const fs::path& output, fs::file_time_type started,
                                       int code, std::ostream& log) {
  // A process killed by SIGKILL / the OOM killer left only its journal: make its trace from it.
  const int64_t ended_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  const char* sig = code > 128 ? sigabbrev_np(code - 128) : nullptr;
  const std::string root_reason = sig ? fmt::format("SIG{}", sig) : fmt::format("exit code {} without writing its trace (os._exit?)", code);
  for (const auto& line : FinishJournals(output, started, root_reason, ended_ns)) {
    log << "trainrx: " << line << "\n";
  }
  std::vector<std::string> traces = LaunchTraces(output, started);
  if (traces.empty()) {
    std::error_code ec;
    if (const auto space = fs::space(output.parent_path(), ec); !ec && space.available < (1u << 20)) {
      log << fmt::format("trainrx: no trace was written: the disk holding {} is full ({} bytes free)\n",
                         output.parent_path().string(), space.available);
      return traces;
    }
    // A journal left behind is one that could not be read back (FinishJournals said why above): the
    // program did record, so "never loaded libtorch" would be wrong.
    if (const fs::path journal = output.string() + env::kJournalSuffix; fs::exists(journal, ec)) {
      log << fmt::format("trainrx: no trace was written: {}'s journal {} could not be read back (see above; it is kept) "
                         "(exit code {})\n",
                         options.command[LeadingAssignments(options.command)], journal.string(), code);
      return traces;
    }
    log << fmt::format(
        "trainrx: no trace was written: {} never loaded libtorch{} (exit code {})\n", options.command[LeadingAssignments(options.command)],
        ", ran no torch op, or ran unobserved (see the message above, if any)", code);
    return traces;
  }
  for (const auto& t : traces) log << "trainrx: wrote " << t << "\n";
  return traces;
}

// After a run in which a process loaded a libtorch no probe was built for (the shim wrote its path
// to `report`): a probe built for it into the per-user cache, when the command is a Python
// interpreter (its torch's CMake prefix is asked from it), so that the next record attaches it.
void BuildProbeForNextRun(const RecordOptions& options, const fs::path& report, std::ostream& log) {
  std::error_code ec;
  if (!fs::exists(report, ec)) return;
  std::string torch_lib;
  std::getline(std::ifstream(report) >> std::ws, torch_lib);
  fs::remove(report, ec);
  if (torch_lib.empty()) return;
  const std::string& interpreter = options.command[LeadingAssignments(options.command)];  // past VAR=value words
  const std::string program = fs::path(interpreter).filename().string();
  const char* build = std::getenv(env::kProbeBuild);
  if ((build && std::strcmp(build, "0") == 0) || options.source_dir.empty() || program.rfind("python", 0) != 0) {
    log << fmt::format("trainrx: no probe was built for {}: to attach one next time, build it against that torch "
                       "(docs/setup.md#your-own-torch) and pass --probe-dir, or record the Python script with its "
                       "interpreter as the command (record builds the probe itself){}\n",
                       torch_lib, build && std::strcmp(build, "0") == 0 ? " without TRAINRX_PROBE_BUILD=0" : "");
    return;
  }
  ProbeBuildRequest request{interpreter, torch_lib, options.source_dir, ProbeCacheDir()};
  if (const StatusOr<std::string> built = BuildProbe(request, log); !built.ok())
    log << "trainrx: could not build a probe for " << torch_lib << ": " << built.status().message()
        << "\ntrainrx: the torch.profiler fallback keeps recording such runs\n";
  else
    log << "trainrx: the next `trainrx record` of this torch attaches it\n";
}

}  // namespace

Status CheckHookForFixes(const std::string& fixes, const std::string& exe_dir) {
  const std::string hook = exe_dir + "/trainrx_python/sitecustomize.py";
  if (fixes.empty() || fs::exists(hook)) return Status::Ok();
  return Status::Error(fmt::format("{}: missing, and the fixes ({}) are applied by it (rebuild)", hook, fixes));
}

StatusOr<RecordLaunch> PrepareRecord(const RecordOptions& options, const std::string& exe_dir) {
  if (options.command.empty())
    return Status::Error("record: expected a command after --, e.g. trainrx record -o run.json -- python3 train.py");
  const std::string dir = !options.probe_dir.empty()    ? options.probe_dir
                          : std::getenv(env::kProbeDir) ? std::getenv(env::kProbeDir)
                                                        : exe_dir;
  const bool dir_named = !options.probe_dir.empty() || std::getenv(env::kProbeDir) != nullptr;
  const std::string probe = dir + "/libtrainrx_probe.so";
  if (!fs::exists(probe) || !fs::exists(dir + "/libtrainrx_preload.so")) {
    return Status::Error(fmt::format(
        "{}: not found: this trainrx was built without LibTorch, so it cannot record. "
        "Installed with pip: install torch into that environment first, then "
        "`pip install --no-build-isolation <trainrx checkout>` (docs/setup.md). From a checkout: "
        "./scripts/setup, or configure with "
        "-DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)') and rebuild.",
        probe));
  }
  std::error_code ec;
  RecordLaunch launch;
  launch.output = fs::absolute(options.output, ec);
  const fs::path& output = launch.output;
  if (!fs::is_directory(output.parent_path()))
    return Status::Error(fmt::format("{}: the directory does not exist", output.parent_path().string()));
  if (access(output.parent_path().c_str(), W_OK) != 0) {
    return Status::Error(
        fmt::format("{}: cannot write there ({})", output.parent_path().string(), std::strerror(errno)));
  }
  const std::string hook = exe_dir + "/trainrx_python";
  const bool have_hook = fs::exists(hook + "/sitecustomize.py");
  if (const char* fixes = std::getenv(env::kFix); fixes != nullptr)
    if (Status st = CheckHookForFixes(fixes, exe_dir); !st.ok()) return st;
  ProcessSpec& p = launch.process;
  p.argv = options.command;
  p.search_path = true;
  p.data_limit_bytes = options.memory_cap_bytes;
  p.env = ProbeEnv(options, dir, hook, have_hook, output);
  // A probe named by --probe-dir / TRAINRX_PROBE_DIR is the one to use; otherwise the shim may pick,
  // among the probes we know of, the one built for the libtorch the program loads.
  if (dir_named) p.env.push_back({env::kProbeChoices, "", EnvChange::kUnset});
  else p.env.push_back({env::kProbeChoices, ProbeChoices(dir, exe_dir, ProbeCacheDir()), EnvChange::kSet});
  launch.mismatch = output.string() + ".no-probe";
  p.env.push_back({env::kMismatchFile, launch.mismatch.string(), EnvChange::kSet});
  fs::remove(output, ec);  // so that "no trace written" is never hidden by an old file
  fs::remove(launch.mismatch, ec);
  launch.started = fs::file_time_type::clock::now();
  return launch;
}

std::vector<std::string> FinishRecord(const RecordOptions& options, const RecordLaunch& launch, int code, std::ostream& log) {
  std::vector<std::string> traces = CollectTraces(options, launch.output, launch.started, code, log);
  BuildProbeForNextRun(options, launch.mismatch, log);
  return traces;
}

Status RecordCommand(const RecordOptions& options, const std::string& exe_dir, std::ostream& log,
                     RecordResult* result) {
  StatusOr<RecordLaunch> launch = PrepareRecord(options, exe_dir);
  if (!launch.ok()) return launch.status();
  const StatusOr<pid_t> child = StartProcess(launch->process);
  if (!child.ok()) return child.status();
  result->code = WaitForeground(*child);
  result->traces = FinishRecord(options, *launch, result->code, log);
  return Status::Ok();
}

std::string ProbeCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/trainrx";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/trainrx";
  return "";
}

std::string ProbeChoices(const std::string& primary_dir, const std::string& exe_dir, const std::string& cache_dir) {
  std::vector<fs::path> dirs = {fs::path(exe_dir).parent_path() / "build-compat"};
  std::error_code ec;
  if (!cache_dir.empty() && fs::is_directory(cache_dir, ec)) {
    std::vector<fs::path> cached;
    for (const auto& e : fs::directory_iterator(cache_dir, ec))
      if (e.path().filename().string().rfind("probe-", 0) == 0) cached.push_back(e.path());
    std::sort(cached.begin(), cached.end());
    dirs.insert(dirs.end(), cached.begin(), cached.end());
  }
  std::string out;
  for (const auto& d : dirs) {
    if (fs::equivalent(d, primary_dir, ec) || !fs::exists(d / "libtrainrx_probe.so", ec)) continue;
    const std::string lib = SidecarTorchLib(d);
    if (!lib.empty()) out += lib + "\t" + fs::absolute(d, ec).lexically_normal().string() + "\n";
  }
  return out;
}

StatusOr<uint64_t> ParseBytes(const std::string& text) {
  const auto refuse = [&] { return Status::Error("--memory-cap " + text + ": not a size (e.g. 1.5G, 800M, 1048576)"); };
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE) return refuse();  // as std::stod: no number, or out of range
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && (unit.back() == 'i')) unit.pop_back();
  const double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" || unit == "m" ? 1048576.0
                                       : unit == "G" || unit == "g" ? 1073741824.0 : 0;
  if (scale == 0 || !(v > 0) || v * scale > 1e18) return refuse();
  return static_cast<uint64_t>(v * scale);
}

}  // namespace trainrx::experiments
