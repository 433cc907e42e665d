#include "trainrx/experiments/process.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <regex>
#include <sstream>
#include <string>

namespace trainrx::experiments {
namespace {

// `NAME=value`: a shell's assignment word (a name of letters, digits and '_', not starting with a
// digit).
bool IsAssignment(const std::string& word) {
  const size_t eq = word.find('=');
  return eq != std::string::npos && eq > 0 && !std::isdigit(static_cast<unsigned char>(word[0])) &&
         std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

size_t LeadingAssignments(const std::vector<std::string>& argv) {
  size_t n = 0;
  while (n + 1 < argv.size() && IsAssignment(argv[n])) ++n;
  return n;
}

StatusOr<pid_t> StartProcess(const ProcessSpec& spec) {
  // Every caller checks the user's command first ("record: expected a command after --"): an empty
  // one here is trainrx's bug.
  if (spec.argv.empty()) return Status::Internal("StartProcess: no program to run");
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls
  // and setenv (the child is single-threaded until exec).
  // A user's command may start with assignments, as a shell (and `env`) takes them: `trainrx record --
  // CUDA_VISIBLE_DEVICES=0 python train.py` sets the variable for the program (issue 81.10: record
  // failed "cannot run CUDA_VISIBLE_DEVICES=0" where fix --cmd, through a shell, accepted it).
  const size_t assignments = spec.search_path ? LeadingAssignments(spec.argv) : 0;
  std::vector<std::pair<std::string, std::string>> assigned;
  for (size_t i = 0; i < assignments; ++i) {
    const std::string& w = spec.argv[i];
    assigned.emplace_back(w.substr(0, w.find('=')), w.substr(w.find('=') + 1));
  }
  std::vector<char*> argv;
  for (size_t i = assignments; i < spec.argv.size(); ++i) argv.push_back(const_cast<char*>(spec.argv[i].c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid > 0) return pid;
  if (!spec.log.empty()) {
    const int fd = open(spec.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
  }
  for (const auto& e : spec.env) {
    switch (e.mode) {
      case EnvChange::kSet: setenv(e.name.c_str(), e.value.c_str(), 1); break;
      case EnvChange::kSetIfUnset: setenv(e.name.c_str(), e.value.c_str(), 0); break;
      case EnvChange::kUnset: unsetenv(e.name.c_str()); break;
      case EnvChange::kOwnPid: setenv(e.name.c_str(), std::to_string(getpid()).c_str(), 1); break;
      case EnvChange::kPrepend: {
        const char* old = std::getenv(e.name.c_str());
        const std::string v = old && *old ? e.value + ":" + old : e.value;
        setenv(e.name.c_str(), v.c_str(), 1);
        break;
      }
    }
  }
  for (const auto& [name, value] : assigned) setenv(name.c_str(), value.c_str(), 1);
  if (spec.data_limit_bytes > 0) {
    const rlimit limit{spec.data_limit_bytes, spec.data_limit_bytes};
    setrlimit(RLIMIT_DATA, &limit);
  }
  if (spec.search_path) execvp(argv[0], argv.data());
  else execv(argv[0], argv.data());
  std::fprintf(stderr, "trainrx: error: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

int WaitProcess(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

bool ProcessEnded(pid_t pid, int* code) {
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) return false;
  *code = r < 0 ? 1 : WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  return true;
}

StatusOr<int> RunProcess(const ProcessSpec& spec) {
  const StatusOr<pid_t> pid = StartProcess(spec);
  if (!pid.ok()) return pid.status();
  return WaitProcess(*pid);
}

std::vector<std::string> SplitCommand(const std::string& command) {
  if (command.find_first_of("|;&<>$`(){}*?~") != std::string::npos) return {};
  wordexp_t w;
  if (wordexp(command.c_str(), &w, WRDE_NOCMD | WRDE_UNDEF) != 0) return {};
  std::vector<std::string> out(w.we_wordv, w.we_wordv + w.we_wordc);
  wordfree(&w);
  // `VAR=value python train.py` (an environment for one command) stays as words: StartProcess applies
  // leading assignments as a shell does (a search-path launch). Under /bin/sh -c the shell was the
  // launch's root process, so fix --cmd's in-process trials, which switch in the root only, never
  // switched: Lightning's GAN under `PL_USE_MOCKED_MNIST=1 python ...` ran its whole epoch (issue 79).
  return out;
}

std::string FileText(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string LogTail(const std::string& path, size_t max_bytes) {
  const std::string all = FileText(path);
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

OutOfMemory FindOutOfMemory(const std::string& log_text) {
  static const std::regex kOom(
      R"((can't allocate memory|CUDA out of memory|OutOfMemoryError|out of memory|std::bad_alloc|\bMemoryError\b))",
      std::regex::icase);
  static const std::regex kRequest(R"([Tt]ried to allocate ([0-9]+(?:\.[0-9]+)?) ?(bytes|B|KiB|MiB|GiB|KB|MB|GB)?)");
  OutOfMemory out;
  std::istringstream lines(log_text);
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, kOom)) continue;
    out.found = true;
    out.line = line.size() > 300 ? line.substr(0, 300) + "..." : line;
    std::smatch m;
    if (std::regex_search(line, m, kRequest)) {
      const double v = std::strtod(m[1].str().c_str(), nullptr);  // std::stod threw on 400 digits
      const std::string unit = m[2].str();
      const double scale = unit == "KiB" ? 1024.0 : unit == "MiB" ? 1048576.0 : unit == "GiB" ? 1073741824.0
                           : unit == "KB" ? 1e3 : unit == "MB" ? 1e6 : unit == "GB" ? 1e9 : 1.0;
      // A size past int64 (a log's 400-digit number) is kept as the largest, not cast out of range.
      const double bytes = v * scale;
      out.request_bytes = bytes < 9.2e18 ? static_cast<int64_t>(bytes) : std::numeric_limits<int64_t>::max();
    }
  }
  return out;
}

}  // namespace trainrx::experiments
