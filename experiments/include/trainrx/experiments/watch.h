// trainrx::experiments watch — `trainrx watch`: a long job run with the light Python hook
// (probes/python/trainrx_hook_watch.py: step metrics as Prometheus text, deep captures on demand or
// on a step-time regression, every thread's stack when the steps stop), and what the watcher reads
// back from its folder: finished captures, the ranks' hang stacks as one report (docs/watch.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainrx/experiments/process.h"
#include "trainrx/profiler/status.h"

namespace trainrx::experiments {

struct WatchOptions {
  std::string dir;                   // the job's folder: metrics/, capture-K/, hang stacks
  std::vector<std::string> command;  // the job (a Python program: the hook acts once it imports torch)
  int capture_steps = 20;            // steps a deep capture records
  int max_captures = 5;              // triggered captures at most (on-demand ones are not counted)
  double hang_factor = 20;           // no step for this many median steps is a hang ...
  double hang_min_seconds = 60;      // ... and at least this long
  int metrics_port = 0;              // > 0: each rank serves its metrics on port + rank
  bool regression = true;            // captures on a step-time regression ...
  double regression_min_pct = 20;    // ... of at least this much (the median step, recent vs before)
};

// The job's process, its folder made: the hook's folder first on PYTHONPATH and its settings in the
// environment. Errors: no command, a folder that cannot be made or written, the hook missing.
StatusOr<ProcessSpec> PrepareWatch(const WatchOptions& options, const std::string& exe_dir);

// A capture the ranks have finished writing (every rank that started it wrote its .done mark).
struct Capture {
  std::string folder;               // DIR/capture-K
  std::vector<std::string> traces;  // its trace-rank<R>.json files (none: every rank skipped it)
  std::string reason;               // "regression: the median of ...", "on demand", or why it was skipped
  std::string unfinished;           // after the job's end: the ranks that started it and never finished
                                    // ("rank 0 from step 812"): killed inside it, or its files not written
};
// The captures in `dir` that every rank of the job is done with (after the job ended: every one
// a rank started, the unfinished ranks named), holding no report yet (report.json), in order. Only
// finished ranks' traces are listed (a rank killed while writing leaves a partial file).
std::vector<Capture> FinishedCaptures(const std::string& dir, bool job_ended);

// The ranks' hang stacks (hang-rank<R>.txt, written by faulthandler when a rank's steps stopped) as
// one report: per rank where its main thread is (the innermost frames, the torch.distributed call it
// waits in), and which ranks are not in that collective. "" when no rank's steps stopped.
std::string HangReport(const std::string& dir);

// Prometheus text of an analyzed capture's first `top` findings (its report.json): the id, the
// severity and the estimated saving of each, and how many there are; "" without a readable report.
// The watcher writes it to DIR/metrics/findings.prom; rank 0's endpoint serves it beside its own.
std::string FindingsMetrics(const std::string& capture_folder, size_t top = 5);
// FindingsMetrics written whole to the job's metrics/findings.prom (nothing without a report).
Status PublishFindings(const std::string& capture_folder);
// Asks the job watched in `dir` for a capture of `steps` steps (none: the number its watcher was
// given, --capture-steps) in capture-request.json, from a step every rank reaches after the request
// is seen: the ranks' last step in their metrics, plus margin (two seconds of steps where there are
// several ranks).
Status RequestCapture(const std::string& dir, std::optional<int> steps = std::nullopt);
// The folder of the job a process belongs to: `pid` is a watched rank (its TRAINRX_WATCH), or the
// watcher, torchrun or a shell above one. Errors: no such process, none of it watched.
StatusOr<std::string> WatchedDirOfProcess(int64_t pid);
// `trainrx capture JOB`'s folder: JOB itself, or, where it is digits and no folder here, the folder
// of the job that process belongs to (WatchedDirOfProcess).
StatusOr<std::string> WatchedJobDir(const std::string& job);

}  // namespace trainrx::experiments
