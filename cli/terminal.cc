#include "terminal.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

namespace trainrx::cli {

using Clock = std::chrono::steady_clock;

int Fail(const std::string& msg) {
  std::cerr << "trainrx: error: " << msg << "\n";
  return kExitInputError;
}

TerminalProgress::TerminalProgress()
    : start_(Clock::now()), enabled_(isatty(STDERR_FILENO) && std::getenv("CI") == nullptr) {}
TerminalProgress::~TerminalProgress() { Clear(); }

void TerminalProgress::Clear() {
  if (enabled_ && shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

void TerminalProgress::Start(int total) {
  total_ += total;
}

void TerminalProgress::Step(const std::string& what) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double eta = done_ > 0 ? elapsed / done_ * std::max(0, total_ - done_) : 0;
  std::cerr << fmt::format("\r\033[K  trial {}/{} {} (ETA {:.0f}s)", done_ + 1, std::max(total_, done_ + 1), what, eta)
            << std::flush;
  shown_ = true;
  ++done_;
}

bool WriteOut(const std::string& path, const std::function<void(std::ostream&)>& render) {
  if (path.empty() || path == "-") {
    render(std::cout);
    std::cout.flush();
    return static_cast<bool>(std::cout);
  }
  std::ofstream file(path);
  if (!file) return false;
  render(file);
  file.flush();
  return static_cast<bool>(file);
}

}  // namespace trainrx::cli
