// trainrx::probes process session — one per observed process: where its trace goes, when it is
// written (exit, SIGINT/SIGTERM, crash), what happens across fork. Torch-free: the observer
// (observer.cc) plugs its torch-side snapshot in through a hook, and the unit tests drive the
// rest directly.
//
// Lifetime: Get() returns a process-wide session that is never destroyed (so that atexit and
// signal handlers can always reach it). Begin() starts recording; Finish() assembles and writes
// the trace exactly once (an atomic flag makes exit, a signal and an explicit Stop() race-free).
//
// Files: the root process (the one `trainrx record` launched, or any process that called
// Start() itself) writes to the requested path; other processes that load libtorch under the
// same launch (DDP ranks, spawned workers) write "<stem>.rank<R>.json" when RANK is set, else
// "<stem>.pid<PID>.json" (profiler::ProcessTracePath, trace_names.h). Forked children (DataLoader
// workers) stop recording at fork and write nothing; the root's trace counts them ("fork_children").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "collector.h"
#include "journal.h"

namespace trainrx::probes {

// CPUs this process may run on (sched_getaffinity), not the machine's count.
int AllowedCpus();

struct SessionConfig {
  std::string output = "trainrx_trace.json";
  CollectorOptions collector;
  bool install_signal_handlers = true;
  // Journal flush period (TRAINRX_FLUSH_SECONDS overrides; 0: no journal). See journal.h.
  double flush_seconds = 2.0;
};

class ProcessSession {
 public:
  static ProcessSession& Get();

  // Reads TRAINRX_OUTPUT / TRAINRX_MAX_EVENTS / TRAINRX_ROOT_PID from the environment over
  // `config`'s defaults (the launcher's -o wins over a program's own choice), starts the
  // collector, registers atexit / signal / fork handlers. Idempotent: a second call only keeps
  // recording. Returns false in a fork child (children do not record).
  bool Begin(SessionConfig config);
  bool active() const { return active_.load(); }

  Collector& collector() { return *collector_; }

  // Registers the exit handler once more. Exit handlers and static destructors run
  // last-registered first, so those of a library loaded after Begin() (the CUPTI backend, the
  // libcupti and CUDA runtime it brings) would run before the trace is assembled, which still
  // needs them (the last CUPTI flush). Call it after loading such a library; Finish() runs once,
  // so the earlier registration then does nothing.
  static void RegisterExitHandlerAgain();

  // Called before the trace is assembled (from the thread that finishes): the observer takes a
  // last config snapshot here.
  using FinishHook = void (*)(ProcessSession&);
  void SetFinishHook(FinishHook hook) { finish_hook_ = hook; }
  // Runs in a forked child (a DataLoader worker) right after fork: the observer unregisters its
  // callback there, so the child does not pay for an observer that records nothing.
  using ForkChildHook = void (*)();
  void SetForkChildHook(ForkChildHook hook) { fork_child_hook_ = hook; }

  // Assembles and writes the trace once; later calls return the first result. `reason` is
  // "exit", "stop", "SIGTERM", "SIGSEGV"...; any reason but exit/stop marks the trace incomplete.
  // Returns the path written, or "" (an error was printed to stderr).
  std::string Finish(const std::string& reason) noexcept;

  const std::string& output_path() const { return output_path_; }
  int rank() const { return rank_; }
  bool is_root() const { return is_root_; }
  int64_t fork_children() const { return fork_children_.load(); }

  // Messages go to stderr, prefixed "trainrx: ", unless TRAINRX_QUIET=1 (warnings always print).
  static void Info(const std::string& msg);
  static void Warn(const std::string& msg);

 private:
  ProcessSession() = default;
  static void OnFork();
  static void AfterForkParent();
  static void AfterForkChild();
  static void AtExit();
  static void OnSignal(int sig);
  void StartJournal(int64_t interval_ms);
  void JournalLoop(int64_t interval_ms);
  // Stops the flusher (bounded wait); true when it has exited and the journal may be touched.
  bool StopJournal();

  std::atomic<bool> active_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> in_fork_child_{false};
  std::atomic<int64_t> fork_children_{0};
  Collector* collector_ = nullptr;  // leaked on purpose: handlers may run during exit
  std::string output_path_;
  std::string written_;
  int rank_ = 0;
  bool is_root_ = true;
  int64_t start_ns_ = 0;
  FinishHook finish_hook_ = nullptr;
  Journal* journal_ = nullptr;  // leaked on purpose, like the collector
  std::mutex journal_mu_;
  std::condition_variable journal_cv_;
  std::atomic<bool> journal_stop_{false};
  std::atomic<bool> journal_running_{false};
  const char* journal_sched_ = "";  // the flusher's scheduling class, set by its thread before any flush
  ForkChildHook fork_child_hook_ = nullptr;
};

}  // namespace trainrx::probes
