// trainrx::reports output — where renderings go: a report to stdout or a file, and the progress
// of a long plan (fix, sweep, ab, gate) on stderr.
#pragma once

#include <chrono>
#include <functional>
#include <ostream>
#include <string>

#include "trainrx/experiments/launcher.h"
#include "trainrx/profiler/status.h"

namespace trainrx::reports {

// "  trial 3/20 cnn workers=2 (ETA 41s)" on stderr; "trial 3/<=20 ... (ETA <=41s)" when the plan
// is a maximum (rows that stop when decided) or ends with a budget, whose end also caps the ETA. On a terminal (not under CI) one line,
// rewritten in place and cleared when the plan ends, before any report is written. Elsewhere (a
// CI log, a batch job, a device run cut off by its time limit) a plain line
// "trainrx: trial 3/20 cnn workers=2 (ETA 41s)" at most every TRAINRX_PROGRESS_SECONDS (30; 0:
// every trial; "off": none), so a long run shows how far it got.
class TerminalProgress : public experiments::Progress {
 public:
  TerminalProgress();
  ~TerminalProgress() override;
  void Start(int total) override;
  void Step(const std::string& what) override;
  void Replan(int total) override;
  void Deadline(double seconds) override;
  void Note(const std::string& text) override;
  void Clear();

 private:
  int total_ = 0, done_ = 0;
  bool at_most_ = false, has_deadline_ = false;
  std::chrono::steady_clock::time_point start_, last_line_, deadline_;
  bool terminal_, shown_ = false;
  double line_every_s_ = -1;  // < 0: no plain lines
};

// Writes the report (render(out)) to `path`, or stdout for "" or "-"; an error "<path>: write
// failed" when the file cannot be opened or written.
Status WriteOut(const std::string& path, const std::function<void(std::ostream&)>& render);

}  // namespace trainrx::reports
