#include "session.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/env.h"
#include "trainrx/profiler/trace_names.h"

namespace trainrx::probes {

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

ProcessSession& ProcessSession::Get() {
  static ProcessSession* session = new ProcessSession();  // never destroyed: see header
  return *session;
}

void ProcessSession::Info(const std::string& msg) {
  const char* quiet = std::getenv(env::kQuiet);
  if (quiet && std::strcmp(quiet, "1") == 0) return;
  std::fprintf(stderr, "trainrx: %s\n", msg.c_str());
}

void ProcessSession::Warn(const std::string& msg) { std::fprintf(stderr, "trainrx: %s\n", msg.c_str()); }

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? static_cast<int>(x) : fallback;
}

std::string CommandLine() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0') c = ' ';
  return raw;
}

// Environment switches that change speed (docs/findings.md: debug.launch_blocking and friends).
constexpr const char* kEnvSwitches[] = {
    "CUDA_LAUNCH_BLOCKING", "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUBLAS_WORKSPACE_CONFIG", "TORCH_DISTRIBUTED_DEBUG", "NCCL_DEBUG", "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_BLOCKING_WAIT", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_CUDNN_V8_API_DISABLED", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "RANK", "LOCAL_RANK"};

constexpr struct {
  int sig;
  const char* name;
} kSignals[] = {{SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},
                {SIGFPE, "SIGFPE"},   {SIGABRT, "SIGABRT"}, {SIGILL, "SIGILL"}};

}  // namespace

bool ProcessSession::Begin(SessionConfig config) {
  if (in_fork_child_.load()) return false;
  if (active_.load()) {
    collector_->SetRecording(true);
    return true;
  }
  if (const char* out = std::getenv(env::kOutput); out && *out) config.output = out;
  if (const char* max = std::getenv(env::kMaxEvents); max && *max) {
    config.collector.max_events = std::strtoull(max, nullptr, 10);
  }
  if (const char* flush = std::getenv(env::kFlushSeconds); flush && *flush) {
    char* end = nullptr;
    const double v = std::strtod(flush, &end);
    if (end && *end == '\0' && v >= 0 && v <= 86400) config.flush_seconds = v;
    else Warn(std::string(env::kFlushSeconds) + "=" + flush + " is not a number of seconds (0..86400); using 2");
  }
  // The step window: TRAINRX_STEPS (N >= 1, or "all") and TRAINRX_SKIP_STEPS (K >= 0).
  if (const char* v = std::getenv(env::kSteps); v && *v) {
    if (!env::ParseStepCount(v, &config.collector.window.steps))
      Warn(std::string(env::kSteps) + "=" + v + " is not a step count (1 or more, or \"all\"); recording every step");
  }
  if (const char* v = std::getenv(env::kSkipSteps); v && *v) {
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (end && *end == '\0' && n >= 0) config.collector.window.skip = n;
    else Warn(std::string(env::kSkipSteps) + "=" + v + " is not a step count (0 or more); skipping none");
  }
  const int64_t pid = getpid();
  const int root_pid = EnvInt(env::kRootPid, -1);
  is_root_ = root_pid < 0 || root_pid == pid;
  rank_ = EnvInt("RANK", -1);
  output_path_ = profiler::ProcessTracePath(config.output, is_root_, rank_, pid);
  // The TSC where the kernel trusts it (tick_clock.h): the observer reads it twice per op.
  config.collector.ticks = DetectTickSource();
  collector_ = new Collector(config.collector);
  start_ns_ = NowNs();

  Collector& c = *collector_;
  c.SetStatic("collector", profiler::JsonWriter::Quote("trainrx probes"));
  c.SetStatic("pid", std::to_string(pid));
  c.SetStatic("ppid", std::to_string(getppid()));
  c.SetStatic("root_process", is_root_ ? "true" : "false");
  c.SetStatic("command", profiler::JsonWriter::Quote(CommandLine()));
  c.SetStatic("cpu_count", std::to_string(AllowedCpus()));
  c.SetStatic("start_ns", std::to_string(start_ns_));
  c.SetStatic("tick_source", profiler::JsonWriter::Quote(c.tick_source() == TickSource::kTsc ? "tsc" : "realtime"));
  {
    // Ranks on one host share its clock: analysis then never shifts one against another.
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0')
      c.SetStatic("hostname", profiler::JsonWriter::Quote(host));
  }
  {
    std::ostringstream env;
    profiler::JsonWriter w(env);
    w.BeginObject();
    for (const char* name : kEnvSwitches)
      if (const char* v = std::getenv(name)) w.Field(name, v);
    w.EndObject();
    c.SetStatic("env", env.str());
  }
  if (rank_ >= 0) c.SetStatic("rank", std::to_string(rank_));
  if (const char* v = std::getenv(env::kStepName); v && *v) c.SetStatic("step_name", profiler::JsonWriter::Quote(v));
  // With steps to skip, recording starts at the window's first step (the observer watches for it).
  c.SetRecording(c.window().starts_open());
  active_.store(true);
  if (config.flush_seconds > 0) StartJournal(static_cast<int64_t>(config.flush_seconds * 1000 + 0.5));

  static std::once_flag handlers_once;
  std::call_once(handlers_once, [&] {
    pthread_atfork(&ProcessSession::OnFork, &ProcessSession::AfterForkParent, &ProcessSession::AfterForkChild);
    std::atexit(&ProcessSession::AtExit);
    if (config.install_signal_handlers) {
      for (const auto& s : kSignals) {
        struct sigaction old;
        if (sigaction(s.sig, nullptr, &old) != 0) continue;
        // Never take a signal from the program: only where nobody handles it (Python owns SIGINT).
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
        struct sigaction sa;
        std::memset(&sa, 0, sizeof(sa));
        sa.sa_handler = &ProcessSession::OnSignal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(s.sig, &sa, nullptr);
      }
    }
  });
  return true;
}

void ProcessSession::StartJournal(int64_t interval_ms) {
  journal_ = new Journal();
  if (Status st = journal_->Open(JournalPath(output_path_), *collector_, rank_ >= 0 ? rank_ : 0, start_ns_, interval_ms);
      !st.ok()) {
    // Said at start, so that nobody learns it from a killed job; recording goes on.
    Warn("cannot write the journal " + st.message() + ": if this process is killed, what it recorded is lost "
         "(the trace is still written when it exits)");
    return;
  }
  // The flusher takes no signal: Python's SIGINT, our handlers and the program's all run elsewhere,
  // and a handler that finishes the trace never waits for the thread it interrupted.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    journal_running_.store(true);
    std::thread([this, interval_ms] { JournalLoop(interval_ms); }).detach();
  } catch (...) {
    journal_running_.store(false);
    Warn("cannot start the journal's thread: if this process is killed, what it recorded is lost");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void ProcessSession::JournalLoop(int64_t interval_ms) {
  // The flusher runs only on CPU time no other thread of the machine wants (issue 34.13: at normal
  // priority it took its share of a core from the intra-op threads): SCHED_IDLE, which any
  // process may choose for its own threads; where it is refused (an old kernel, a seccomp policy),
  // the weakest nice. A starved flusher flushes late, never blocks a training thread: what it
  // cost is the loss bound, said in the trace (journal_max_gap_ns) and on salvage.
  // TRAINRX_JOURNAL_PRIORITY=normal keeps the old behaviour: flushes on time, at a core's share.
  const char* priority = std::getenv(env::kJournalPriority);
  sched_param idle{};
  if (priority && *priority && std::strcmp(priority, "normal") != 0 && std::strcmp(priority, "idle") != 0)
    Warn(std::string(env::kJournalPriority) + "=" + priority + " is not \"idle\" or \"normal\"; using idle");
  if (priority && std::strcmp(priority, "normal") == 0) {
    journal_sched_ = "normal";
  } else if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) == 0) {
    journal_sched_ = "idle";
  } else if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) == 0) {
    journal_sched_ = "nice 19";
  } else {
    journal_sched_ = "normal";
  }
  std::unique_lock<std::mutex> lock(journal_mu_);
  while (!journal_stop_.load()) {
    journal_cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return journal_stop_.load(); });
    if (journal_stop_.load()) break;
    if (Status st = journal_->Flush(*collector_, NowNs()); !st.ok()) {
      Warn("stopped writing the journal: " + st.message() + "; if this process is killed, what it recorded since is lost");
      break;
    }
  }
  journal_running_.store(false);
}

bool ProcessSession::StopJournal() {
  journal_stop_.store(true);
  // Bounded: a flush in progress finishes (a drain and one write); a wake-up sent while the
  // flusher was between its check and its wait is sent again. At SCHED_IDLE the flusher finishes
  // only when a CPU is free: at the end of training one usually is, but on a machine other
  // programs keep busy it may not be, so the exit waits at most 2 s; then the trace is written
  // without the journal's statistics and the journal's file is unlinked under it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (journal_running_.load() && std::chrono::steady_clock::now() < deadline) {
    journal_cv_.notify_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return !journal_running_.load();
}

void ProcessSession::OnFork() {}

void ProcessSession::AfterForkParent() {
  ProcessSession& s = Get();
  if (s.active_.load()) s.fork_children_.fetch_add(1);
}

void ProcessSession::AfterForkChild() {
  // A forked child (DataLoader worker) shares our buffers copy-on-write; it neither records nor
  // writes: the root's trace counts it instead.
  ProcessSession& s = Get();
  s.in_fork_child_.store(true);
  if (s.collector_) s.collector_->SetRecording(false);
  s.finished_.store(true);
  if (s.fork_child_hook_) s.fork_child_hook_();
}

void ProcessSession::AtExit() {
  ProcessSession& s = Get();
  if (s.active_.load() && !s.in_fork_child_.load()) s.Finish("exit");
}

void ProcessSession::RegisterExitHandlerAgain() { std::atexit(&ProcessSession::AtExit); }

void ProcessSession::OnSignal(int sig) {
  // Writing a file from a signal handler is not async-signal-safe: if the interrupted code held
  // a lock we need (malloc's), we could block. alarm() bounds that: SIGALRM's default action ends
  // the process after 10 s, so the observed program is never left hanging.
  alarm(10);
  const char* name = "signal";
  for (const auto& s : kSignals)
    if (s.sig == sig) name = s.name;
  ProcessSession& session = Get();
  if (session.active_.load() && !session.in_fork_child_.load()) session.Finish(name);
  alarm(0);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string ProcessSession::Finish(const std::string& reason) noexcept {
  if (finished_.exchange(true)) return written_;
  const char* stage = "collecting GPU records";  // said with any error below
  try {
    if (finish_hook_) finish_hook_(*this);
    stage = "stopping the journal";
    Collector& c = *collector_;
    const int64_t stop_ns = NowNs();
    const bool incomplete = reason != "exit" && reason != "stop";
    c.SetStatic("end_reason", profiler::JsonWriter::Quote(reason));
    // The program's own exit code when main() returned (set by the preload shim): a Python script
    // that died of an exception returns 1. The trace is complete, but the run failed.
    if (reason == "exit") {
      if (const auto* status = reinterpret_cast<const int*>(dlsym(RTLD_DEFAULT, "trainrx_main_status")); status && *status >= 0) {
        c.SetStatic("exit_code", std::to_string(*status));
      }
    }
    c.SetStatic("incomplete", incomplete ? "true" : "false");
    const bool journal_idle = StopJournal();
    if (journal_ && journal_idle) {
      const Journal::Stats& js = journal_->stats();
      c.SetStatic("journal_flushes", std::to_string(js.flushes));
      c.SetStatic("journal_bytes", std::to_string(js.bytes));
      c.SetStatic("journal_busy_ns", std::to_string(js.busy_ns));
      c.SetStatic("journal_cpu_ns", std::to_string(js.cpu_ns));
      c.SetStatic("journal_max_gap_ns", std::to_string(js.max_gap_ns));
      c.SetStatic("journal_sched", profiler::JsonWriter::Quote(journal_sched_));
    }
    // The journal goes once this process's trace is written (or it has none to write).
    auto drop_journal = [&] {
      if (journal_ && journal_idle) journal_->Remove();
      else if (journal_) ::unlink(JournalPath(output_path_).c_str());
    };
    c.SetStatic("fork_children", std::to_string(fork_children_.load()));
    c.SetStatic("fork_children_recorded", "false");
    c.SetStatic("duration_ns", std::to_string(stop_ns - start_ns_));
    if (!is_root_) c.SetStatic("child_trace", "true");
    stage = "assembling the trace";
    profiler::Trace trace = c.Assemble(rank_ >= 0 ? rank_ : 0, stop_ns);
    stage = "writing the trace";
    // A launcher (torchrun, a shell script running python) loads torch, runs no op and starts the
    // ranks: its trace would be one more "rank" with nothing in it. Its children's traces are the run.
    const bool ran_ops = std::any_of(trace.events.begin(), trace.events.end(), [](const profiler::Event& e) {
      return e.kind == profiler::EventKind::kCpuOp || e.kind == profiler::EventKind::kUserAnnotation;
    });
    // (Python starts children with posix_spawn/vfork, which bypass fork handlers: no child count.)
    // A run shorter than the step window's skip recorded nothing, and its trace says why.
    const StepWindow::State window = c.window().state();
    const bool window_unopened = c.window().options().bounded() && !window.opened && window.boundaries > 0;
    if (window_unopened && rank_ <= 0)
      Warn("the run had " + std::to_string(window.boundaries) + " steps, fewer than the " +
           std::to_string(c.window().options().skip) + " to skip (record --skip): no step was recorded");
    // The same for any process that ran no op (issue 34: torch.compile's helper processes load
    // libtorch only to load a compiled library; their traces read as 3 more "ranks" claiming rank
    // 0). One that ended otherwise (a signal, a crash) keeps its trace: it says how it ended.
    if (!ran_ops && reason == "exit" && !window_unopened) {
      Info(is_root_ ? "no op ran in this process (a launcher); its children's traces are the recording"
                    : "no op ran in this process (a helper such as torch.compile's); no trace written");
      drop_journal();
      return written_;
    }
    if (journal_ && journal_idle && !journal_->stats().spans.empty()) {
      // The flushes on the process's main thread: 1 while the flusher worked, 0 after.
      const uint32_t main = trace.GetOrAddTrack(trace.ranks[0].rank, profiler::TrackKind::kCpuThread, getpid(), getpid());
      const profiler::StrId busy = trace.strings.Intern("trainrx.journal_busy");
      for (const auto& [from, to] : journal_->stats().spans) {
        trace.counters.push_back({main, busy, from, 1});
        trace.counters.push_back({main, busy, to, 0});
      }
    }
    auto& info = trace.ranks[0];
    info.base_time_ns = start_ns_;
    if (rank_ >= 0) {
      info.world_size = EnvInt("WORLD_SIZE", 1);
    }
    if (const auto status = profiler::ReplaceKinetoFile(trace, info.rank, output_path_); !status.ok()) {
      // Nothing is left half-written: neither the temporary file nor the journal.
      Warn("could not write the trace: " + status.message() + "; nothing was written");
      drop_journal();
      return written_;
    }
    written_ = output_path_;
    drop_journal();
    Info("wrote " + output_path_ + " (" + std::to_string(trace.events.size()) + " events, " +
         std::to_string(trace.tracks.size()) + " tracks" + (incomplete ? ", incomplete: " + reason : "") + ")");
  } catch (const std::exception& e) {
    Warn(std::string("could not write the trace: ") + e.what() + " (while " + stage + ")");
  } catch (...) {
    Warn(std::string("could not write the trace (unknown error while ") + stage + ")");
  }
  return written_;
}

}  // namespace trainrx::probes
