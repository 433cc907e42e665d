#include "trainrx/reports/output.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "trainrx/profiler/env.h"

namespace trainrx::reports {

using Clock = std::chrono::steady_clock;

TerminalProgress::TerminalProgress()
    : start_(Clock::now()), terminal_(isatty(STDERR_FILENO) && std::getenv("CI") == nullptr) {
  if (terminal_) return;
  line_every_s_ = 30;
  if (const char* v = std::getenv(env::kProgressSeconds); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (std::string(v) == "off") line_every_s_ = -1;
    else if (end && *end == '\0' && s >= 0) line_every_s_ = s;
    else std::cerr << fmt::format("trainrx: {}={} is not a number of seconds (or \"off\"); using 30\n", env::kProgressSeconds, v);
  }
}
TerminalProgress::~TerminalProgress() { Clear(); }

void TerminalProgress::Clear() {
  if (terminal_ && shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

void TerminalProgress::Start(int total) {
  total_ += total;
}

void TerminalProgress::Replan(int total) {
  total_ = total;
  at_most_ = true;
}

void TerminalProgress::Deadline(double seconds) {
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  has_deadline_ = true;
}

void TerminalProgress::Note(const std::string& text) {
  Clear();
  std::cerr << "trainrx: note: " << text << "\n";
}

void TerminalProgress::Step(const std::string& what) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // Issue 40: the ETA of the plan's remaining trials at the pace so far, and never past the
  // budget's end; a sequential plan's count is a maximum ("<="), lowered as rows are decided.
  double eta = done_ > 0 ? elapsed / done_ * std::max(0, total_ - done_) : 0;
  if (has_deadline_) eta = std::min(eta, std::max(0.0, std::chrono::duration<double>(deadline_ - now).count()));
  const char* bound = at_most_ || has_deadline_ ? "<=" : "";
  const std::string line = fmt::format("trial {}/{}{} {} (ETA {}{:.0f}s)", done_ + 1, at_most_ ? "<=" : "",
                                       std::max(total_, done_ + 1), what, bound, eta);
  ++done_;
  if (terminal_) {
    std::cerr << "\r\033[K  " << line << std::flush;
    shown_ = true;
    return;
  }
  if (line_every_s_ < 0) return;
  if (done_ > 1 && std::chrono::duration<double>(now - last_line_).count() < line_every_s_) return;
  last_line_ = now;
  std::cerr << "trainrx: " << line << std::endl;
}

Status WriteOut(const std::string& path, const std::function<void(std::ostream&)>& render) {
  const auto written = [&](std::ostream& out) {
    render(out);
    out.flush();
    return out ? Status::Ok() : Status::Error(path + ": write failed");
  };
  if (path.empty() || path == "-") return written(std::cout);
  std::ofstream file(path);
  if (!file) return Status::Error(path + ": write failed");
  return written(file);
}

}  // namespace trainrx::reports
