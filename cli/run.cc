// `trainrx workloads` and `trainrx run`: list the reference workloads and their knobs; run one
// (N local ranks with --nproc, env:// rendezvous on 127.0.0.1) under the probes, then analyze the
// trace(s) it wrote together with its per-step results.
#include "run.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "exe_dir.h"
#include "knobs.h"
#include "trainrx/experiments/launch_files.h"
#include "trainrx/experiments/process.h"
#include "trainrx/experiments/run_result.h"

namespace trainrx::cli {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

int ListWorkloads(std::ostream& out) {
  out << "Workloads\n";
  for (const auto& w : workloads::Workloads()) out << fmt::format("  {:<6} {}\n", w.name, w.help);
  out << "\nKnobs (--set knob=value; defaults are the recommended setting)\n";
  out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", "knob", "default", "bad", "finding", "where", "what");
  for (const auto& k : workloads::Knobs()) {
    // A bad value that no analyzer flags yet shows "-" as its finding.
    const char* finding = *k.finding ? k.finding : *k.bad_value ? "-" : "";
    out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", k.name, k.default_value, k.bad_value, finding, k.where,
                       k.help);
  }
  out << "\nPresets (--preset NAME)\n";
  for (const auto& p : workloads::Presets()) {
    std::string settings;
    for (const auto& [k, v] : p.settings) settings += fmt::format("{}{}={}", settings.empty() ? "" : " ", k, v);
    out << fmt::format("  {:<14} {}{}\n", p.name, p.help, settings.empty() ? "" : " (" + settings + ")");
  }
  out << "\nwhere: cpu = has its effect here; gpu = only with device=cuda; dist = only with --nproc > 1\n";
  return 0;
}

int RunWorkload(const RunOptions& options, const RunAnalyzeFn& analyze) {
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || options.workload == w.name;
  if (!known) {
    std::cerr << fmt::format("trainrx: error: unknown workload '{}' (see `trainrx workloads`)\n", options.workload);
    return 2;
  }
  workloads::Config cfg;
  std::string error;
  if (!options.preset.empty() && !cfg.ApplyPreset(options.preset, &error)) {
    std::cerr << "trainrx: error: " << error << "\n";
    return 2;
  }
  for (const auto& s : options.sets) {
    if (!cfg.Set(s, &error)) {
      std::cerr << "trainrx: error: " << error << "\n";
      return 2;
    }
  }
  if (options.nproc < 1) {
    std::cerr << "trainrx: error: --nproc must be at least 1\n";
    return 2;
  }
  const std::string binary = ExeDir() + "/trainrx-workload";
  if (!fs::exists(binary)) {
    std::cerr << fmt::format("trainrx: error: {} not found: this trainrx was built without LibTorch (install "
                             "libtorch-dev, which scripts/setup does, and rebuild)\n",
                             binary);
    return 2;
  }
  const std::string output = options.output.empty() ? "trainrx_" + options.workload + ".json" : options.output;
  {
    std::error_code ec;
    const fs::path parent = fs::absolute(output, ec).parent_path();
    if (!fs::is_directory(parent, ec)) {
      std::cerr << fmt::format("trainrx: error: {}: the folder {} does not exist\n", output, parent.string());
      return 2;
    }
  }
  const int port = FreePort();
  std::vector<pid_t> pids;
  std::vector<std::string> traces, results;
  for (int r = 0; r < options.nproc; ++r) {
    const std::string trace = options.nproc == 1 ? output : experiments::RankTracePath(output, r);
    traces.push_back(trace);
    results.push_back(trace + ".result.json");
    std::error_code ec;
    fs::remove(trace, ec);
    fs::remove(results.back(), ec);
    experiments::ProcessSpec p;
    p.argv = {binary, options.workload, "-o", trace, "--result", results.back()};
    if (!options.preset.empty()) p.argv.insert(p.argv.end(), {"--preset", options.preset});
    for (const auto& s : options.sets) p.argv.insert(p.argv.end(), {"--set", s});
    using E = experiments::EnvChange;
    if (options.nproc > 1) {
      p.env = {{"RANK", std::to_string(r)},
               {"LOCAL_RANK", std::to_string(r)},
               {"WORLD_SIZE", std::to_string(options.nproc)},
               {"LOCAL_WORLD_SIZE", std::to_string(options.nproc)},
               {"MASTER_ADDR", "127.0.0.1", E::kSetIfUnset},
               {"MASTER_PORT", std::to_string(port)}};
    }
    p.env.push_back({"TRAINRX_QUIET", "1", E::kSetIfUnset});
    p.env.push_back({"TRAINRX_OUTPUT", "", E::kUnset});  // the workload names its own (per-rank) trace
    const pid_t pid = experiments::StartProcess(p, &error);
    if (pid < 0) {
      std::cerr << "trainrx: error: " << error << "\n";
      for (pid_t q : pids) kill(q, SIGTERM);
      return 2;
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    const int code = experiments::WaitProcess(pids[i]);
    if (code != 0) {
      std::cerr << fmt::format("trainrx: rank {} of {} exited with {}\n", i, options.workload, code);
      worst = worst ? worst : code;
      // A rank that failed leaves the others waiting in the rendezvous: stop them.
      for (size_t j = 0; j < pids.size(); ++j)
        if (j != i) kill(pids[j], SIGTERM);
    }
  }
  if (worst) return worst;
  std::vector<std::string> run_json, summary;
  for (const auto& path : results) {
    experiments::RunResult r;
    if (!experiments::ReadRunResult(path, &r, &error)) {
      std::cerr << "trainrx: error: " << error << "\n";
      return 2;
    }
    run_json.push_back(std::move(r.json));
    summary.push_back(r.Summary());
  }
  for (const auto& t : traces) std::cerr << "trainrx: wrote " << t << "\n";
  return analyze(traces, run_json, summary);
}

}  // namespace trainrx::cli
