#include "trainrx/experiments/ranks.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>

#include "trainrx/experiments/process.h"
#include "trainrx/profiler/env.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::experiments {

namespace {

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

Status LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const std::string& output,
                   std::vector<std::string>* traces, std::vector<RunResult>* results, int* rank_exit_code) {
  RankLaunch how;
  how.output = output;
  return LaunchRanks(binary, spec, nproc, how, traces, results, rank_exit_code);
}

Status LaunchRanks(const std::string& binary, const Spec& spec, int nproc, const RankLaunch& how,
                   std::vector<std::string>* traces, std::vector<RunResult>* results, int* rank_exit_code) {
  namespace fs = std::filesystem;
  *rank_exit_code = 0;
  const int port = FreePort();
  std::vector<pid_t> pids;
  std::vector<std::string> result_paths;
  for (int r = 0; r < nproc; ++r) {
    const bool traced = !how.output.empty();
    const std::string base = traced ? how.output : how.scratch;
    const std::string trace = nproc == 1 ? base : profiler::RankTracePath(base, r);
    if (traced) traces->push_back(trace);
    result_paths.push_back(trace + ".result.json");
    std::error_code ec;
    if (traced) fs::remove(trace, ec);
    fs::remove(result_paths.back(), ec);
    ProcessSpec p;
    p.argv = {binary, spec.workload};
    if (traced) p.argv.insert(p.argv.end(), {"-o", trace});
    p.argv.insert(p.argv.end(), {"--result", result_paths.back()});
    if (!spec.preset.empty()) p.argv.insert(p.argv.end(), {"--preset", spec.preset});
    for (const auto& s : spec.sets) p.argv.insert(p.argv.end(), {"--set", s});
    p.argv.insert(p.argv.end(), how.extra.begin(), how.extra.end());
    if (!traced) p.log = trace + ".log";
    using E = EnvChange;
    if (nproc > 1) {
      p.env = {{"RANK", std::to_string(r)},
               {"LOCAL_RANK", std::to_string(r)},
               {"WORLD_SIZE", std::to_string(nproc)},
               {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
               {"MASTER_ADDR", "127.0.0.1", E::kSetIfUnset},
               {"MASTER_PORT", std::to_string(port)}};
    }
    p.env.push_back({env::kQuiet, "1", E::kSetIfUnset});
    p.env.push_back({env::kOutput, "", E::kUnset});  // the workload names its own (per-rank) trace
    const StatusOr<pid_t> pid = StartProcess(p);
    if (!pid.ok()) {
      for (pid_t q : pids) kill(q, SIGTERM);
      for (pid_t q : pids) WaitProcess(q);
      return pid.status();
    }
    pids.push_back(*pid);
  }
  Status failed;
  for (size_t i = 0; i < pids.size(); ++i) {
    const int code = WaitProcess(pids[i]);
    if (code != 0 && *rank_exit_code == 0) {
      *rank_exit_code = code;
      failed = Status::Error(fmt::format("rank {} of {}: exited with {}", i, spec.workload, code));
      // A rank that failed leaves the others waiting in the rendezvous: stop them.
      for (size_t j = 0; j < pids.size(); ++j)
        if (j != i) kill(pids[j], SIGTERM);
    }
  }
  if (!failed.ok()) return failed;
  for (const auto& path : result_paths) {
    RunResult r;
    if (Status st = ReadRunResult(path, &r); !st.ok()) return st;
    results->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace trainrx::experiments
