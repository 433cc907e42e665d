#include "runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wordexp.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "exe_dir.h"
#include "record.h"
#include "knobs.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/reports/stats.h"

namespace trainrx::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;



int Fail(const std::string& msg) {
  std::cerr << "trainrx: error: " << msg << "\n";
  return 2;
}

// Progress with an ETA on a terminal; silent when stderr is not a TTY or under CI.
Progress::Progress(int total) : total_(total), start_(Clock::now()) {
  enabled_ = isatty(STDERR_FILENO) && std::getenv("CI") == nullptr;
}
Progress::~Progress() {
  if (enabled_) std::cerr << "\r\033[K" << std::flush;
}
void Progress::Step(const std::string& what) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : 0;
    std::cerr << fmt::format("\r\033[K  trial {}/{} {} (ETA {:.0f}s)", done_ + 1, total_, what, eta) << std::flush;
    ++done_;
}

// Runs argv with stdout/stderr to `log`; returns the exit code (128+N for a signal).
namespace {
// Splits a command line into words as a shell would, without running one: quotes and escapes
// are honoured, $(...)/`...` refused. Empty when the line needs a shell (|, ;, &, <, >, $VAR...).
std::vector<std::string> SplitCommand(const std::string& cmd) {
  if (cmd.find_first_of("|;&<>$`(){}*?~") != std::string::npos) return {};
  wordexp_t w;
  if (wordexp(cmd.c_str(), &w, WRDE_NOCMD | WRDE_UNDEF) != 0) return {};
  std::vector<std::string> out(w.we_wordv, w.we_wordv + w.we_wordc);
  wordfree(&w);
  return out;
}

int Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Tail(const std::string& path) {
  std::ifstream f(path);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return all.size() > 600 ? all.substr(all.size() - 600) : all;
}
}  // namespace

Runner::Runner() {
    dir_ = fs::temp_directory_path() / fmt::format("trainrx-exp-{}", getpid());
    fs::create_directories(dir_);
}
Runner::~Runner() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::vector<std::string> Runner::WorkloadArgs(const WorkloadSpec& s) const {
    std::vector<std::string> args = {ExeDir() + "/trainrx-workload", s.workload};
    if (!s.preset.empty()) args.insert(args.end(), {"--preset", s.preset});
    for (const auto& set : s.sets) args.insert(args.end(), {"--set", set});
    return args;
  }

  // One untraced trial: its median step time (ms) and samples/s.
bool Runner::Trial(const WorkloadSpec& s, double* ms, double* sps, std::string* error) {
    const std::string result = (dir_ / "trial.result.json").string(), log = (dir_ / "trial.log").string();
    std::error_code ec;
    fs::remove(result, ec);
    auto args = WorkloadArgs(s);
    args.insert(args.end(), {"--no-trace", "--result", result});
    const int rc = Spawn(args, log);
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.load(result).get(doc) != simdjson::SUCCESS || doc["median_step_ms"].get(*ms) != simdjson::SUCCESS ||
        doc["samples_per_s"].get(*sps) != simdjson::SUCCESS) {
      *error = fmt::format("{}: no readable result in {}", s.Label(), result);
      return false;
    }
    return true;
  }

  // One untraced run alternating A and B step by step (--alt-set): every timed step, by arm.
bool Runner::AltTrial(const WorkloadSpec& s, const std::vector<std::string>& alt_sets, std::vector<double>* a,
                      std::vector<double>* b, std::vector<double>* log_ratios, std::string* error) {
    const std::string result = (dir_ / "alt.result.json").string(), log = (dir_ / "alt.log").string();
    std::error_code ec;
    fs::remove(result, ec);
    auto args = WorkloadArgs(s);
    // No evaluation inside timed steps here: it would land in one arm's steps only. At least 64
    // timed steps (16 paired blocks) per process: power comes from the number of blocks.
    workloads::Config cfg;
    std::string ignored;
    if (!s.preset.empty()) cfg.ApplyPreset(s.preset, &ignored);
    for (const auto& x : s.sets) cfg.Set(x, &ignored);
    const int64_t min_steps = std::max<int64_t>(64, cfg.Int("steps"));
    args.insert(args.end(), {"--no-trace", "--result", result, "--set", "eval_every=0", "--set",
                             "steps=" + std::to_string(min_steps)});
    for (const auto& set : alt_sets) args.insert(args.end(), {"--alt-set", set});
    const int rc = Spawn(args, log);
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array steps;
    if (parser.load(result).get(doc) != simdjson::SUCCESS || doc["steps"].get(steps) != simdjson::SUCCESS) {
      *error = fmt::format("{}: no readable result in {}", s.Label(), result);
      return false;
    }
    // Each block of four steps (two A, two B) gives one paired value, log(mean B / mean A): the
    // process's speed (+-15 % between processes here) and slow drift cancel inside the block.
    std::vector<std::pair<char, double>> timed;
    for (auto step : steps) {
      double ms = 0;
      std::string_view arm;
      if (step["ms"].get(ms) != simdjson::SUCCESS || step["arm"].get(arm) != simdjson::SUCCESS) continue;
      timed.push_back({arm.empty() ? 'A' : arm[0], ms});
      (arm == "B" ? b : a)->push_back(ms);
    }
    for (size_t blk = 0; blk + 4 <= timed.size(); blk += 4) {
      double sa = 0, sb = 0;
      int na = 0, nb = 0;
      for (size_t i = blk; i < blk + 4; ++i) {
        if (timed[i].first == 'B') sb += timed[i].second, ++nb;
        else sa += timed[i].second, ++na;
      }
      if (na > 0 && nb > 0 && sa > 0 && sb > 0) log_ratios->push_back(std::log((sb / nb) / (sa / na)));
    }
    return true;
}

// One traced run, analyzed (what `fix` will try to fix).
bool Runner::Analyze(const WorkloadSpec& s, analyzers::Report* report, double* seconds, std::string* error) {
    const std::string trace = (dir_ / "analysis.json").string(), log = (dir_ / "analysis.log").string();
    auto args = WorkloadArgs(s);
    args.insert(args.end(), {"-o", trace, "--result", trace + ".result.json"});
    const auto t0 = Clock::now();
    const int rc = Spawn(args, log);
    *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    profiler::Trace t;
    if (const auto st = profiler::ReadTraces({trace}, t); !st.ok) {
      *error = st.error;
      return false;
    }
    *report = analyzers::Analyze(t);
    return true;
  }

  // A command under `trainrx record`: median step time (ms) when its traces have >= 3 steps (the
  // first dropped as warm-up), else its wall time (s). The command runs directly, split into
  // words as a shell would (quotes, no expansion of $(...)), unless it needs a shell (pipes,
  // redirections, `;`, `&&`, variables): then under /bin/sh -c. Either way the traces read are
  // those of every process of the launch that loaded torch (cmd.json, cmd.pid<P>.json,
  // cmd.rank<R>.json): a shell or launcher in between writes none.
bool Runner::Command(const std::string& cmd, double* value, std::string* unit, std::string* error) {
    const std::string trace = (dir_ / "cmd.json").string(), log = (dir_ / "cmd.log").string();
    std::vector<std::string> args = {ExeDir() + "/trainrx", "record", "-o", trace, "--"};
    const std::vector<std::string> words = SplitCommand(cmd);
    if (words.empty()) {
      args.insert(args.end(), {"/bin/sh", "-c", cmd});
    } else {
      args.insert(args.end(), words.begin(), words.end());
    }
    const auto started = fs::file_time_type::clock::now();
    const auto t0 = Clock::now();
    const int rc = Spawn(args, log);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
      *error = fmt::format("`{}` exited with {}: {}", cmd, rc, Tail(log));
      return false;
    }
    // This trial's traces only (earlier trials' cmd.pid<P>.json stay in the folder).
    const std::vector<std::string> traces = LaunchTraces(trace, started);
    profiler::Trace t;
    if (!traces.empty() && profiler::ReadTraces(traces, t).ok) {
      const auto steps = analyzers::BuildStepModel(t);
      // One process's steps (the lowest rank): ranks step together.
      std::vector<double> ms;
      const int32_t first_rank = steps.steps.empty() ? 0 : steps.steps.front().rank;
      for (const auto& s : steps.steps)
        if (s.rank == first_rank) ms.push_back(s.wall_ns / 1e6);
      if (ms.size() >= 3) {
        ms.erase(ms.begin());
        *value = reports::stats::Median(ms);
        *unit = "ms per step";
        return true;
      }
    }
    *value = wall;
    *unit = "s per run";
    return true;
  }



bool Emit(const ExperimentOptions& o, const std::function<void(std::ostream&)>& text,
          const std::function<void(std::ostream&)>& json) {
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!o.output.empty() && o.output != "-") {
    file.open(o.output);
    if (!file) return false;
    out = &file;
  }
  (o.format == "json" ? json : text)(*out);
  out->flush();
  return static_cast<bool>(*out);
}

std::string KnobName(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }


bool SwitchableDifference(const WorkloadSpec& a, const WorkloadSpec& b, std::vector<std::string>* alt) {
  if (a.workload != b.workload || a.preset != b.preset) return false;
  workloads::Config ca, cb;
  std::string error;
  if (!a.preset.empty()) ca.ApplyPreset(a.preset, &error), cb.ApplyPreset(b.preset, &error);
  for (const auto& x : a.sets) ca.Set(x, &error);
  for (const auto& x : b.sets) cb.Set(x, &error);
  bool switchable = true;
  alt->clear();
  for (const auto& [k, v] : ca.values()) {
    if (cb.Get(k) == v) continue;
    switchable = switchable && (k == "slowdown" || k == "item_every_step" || k == "zero_grad_none" || k == "anomaly");
    alt->push_back(k + "=" + cb.Get(k));
  }
  return switchable;
}

}  // namespace trainrx::cli
