// libtrainrx_preload.so — the shim `trainrx record` puts in LD_PRELOAD. Deliberately tiny and
// torch-free (it is loaded into every process of the launch, `sh` and `ls` included): it waits
// for libtorch to appear, checks it is the libtorch the probes were built against, and only
// then loads libtrainrx_probe.so (which links libtorch) and calls trainrx_probe_attach().
//
// How libtorch "appears": Python loads it through dlopen (import torch), which we interpose; we
// attach when the OUTERMOST dlopen returns (libraries' constructors may call dlopen while libtorch
// is mapped but not yet initialized: libGLdispatch does, during import torch). A LibTorch program
// has libtorch at start: we interpose __libc_start_main and attach just before main(), after every
// library constructor has run.
//
// Why check before loading the probe: the probe's own dependency on libtorch would otherwise load
// a second libtorch next to the program's (a pip wheel's), with two op registries and a callback
// registered in the wrong one. On mismatch we print how to rebuild and let the program run
// unobserved.
//
// Environment (set by `trainrx record`): TRAINRX_PROBE_LIB (the probe library), TRAINRX_TORCH_LIB
// (the libtorch_cpu it was built against), TRAINRX_PROBE_CHOICES (other probes `record` knows of,
// each with its libtorch: the one built for the process's libtorch is attached instead, so one
// trainrx records programs of several torches). Without TRAINRX_PROBE_LIB the shim does nothing.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <link.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "trainrx/profiler/env.h"

namespace {

std::atomic<bool> g_done{false};
void (*g_interrupted)() = nullptr;  // the probe's trainrx_probe_interrupted, once attached
int (*g_set_config)(const char*, double) = nullptr;  // the probe's trainrx_probe_set_config, once attached
using DlopenFn = void* (*)(const char*, int);

DlopenFn RealDlopen() {
  static DlopenFn real = reinterpret_cast<DlopenFn>(dlsym(RTLD_NEXT, "dlopen"));
  return real;
}

int FindTorch(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "/libtorch_cpu.so")) {
    *static_cast<std::string*>(data) = name;
    return 1;
  }
  return 0;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A child started by Python multiprocessing's spawn or forkserver method (a DataLoader worker with
// multiprocessing_context="spawn", a torch.multiprocessing.spawn rank): its command line ends in
// "--multiprocessing-fork". Such children are not observed unless TRAINRX_RECORD_SPAWNED=1 (for
// mp.spawn-launched ranks): a DataLoader worker must not pay the observer's cost, and nothing at
// attach time tells a worker from a rank. torchrun ranks are ordinary processes and are observed.
bool SpawnedMultiprocessingChild() {
  const char* opt = std::getenv(trainrx::env::kRecordSpawned);
  if (opt && std::strcmp(opt, "1") == 0) return false;
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return false;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof(buf), f);
  std::fclose(f);
  static const char kArg[] = "--multiprocessing-fork";
  for (size_t i = 0; i + sizeof(kArg) <= n + 1; ++i) {
    if ((i == 0 || buf[i - 1] == '\0') && std::memcmp(buf + i, kArg, sizeof(kArg) - 1) == 0) return true;
  }
  return false;
}

// The probe directory TRAINRX_PROBE_CHOICES names for `torch` (lines "<libtorch_cpu>\t<dir>"), or "".
// Worked example: "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\t/src/trainrx/build-compat\n" and a
// process that mapped /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13 -> "/src/trainrx/build-compat".
std::string ChooseProbeDir(const std::string& torch) {
  const char* choices = std::getenv(trainrx::env::kProbeChoices);
  if (choices == nullptr) return "";
  for (const char* line = choices; *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    const std::string entry(line, end ? static_cast<size_t>(end - line) : std::strlen(line));
    if (const size_t tab = entry.find('\t'); tab != std::string::npos && SameFile(torch, entry.substr(0, tab)))
      return entry.substr(tab + 1);
    if (end == nullptr) break;
    line = end + 1;
  }
  return "";
}

}  // namespace

// What became of the probe in this process, for the Python start-up hook (ctypes, the global
// namespace): 0 not decided (libtorch not loaded yet), 1 attached, 2 not attached: the process's
// libtorch is not the probe's (the hook then records with torch.profiler instead), 3 not attached:
// the probe could not be loaded or has no entry point (the same fallback).
extern "C" {
__attribute__((visibility("default"))) int trainrx_probe_state = 0;
}

// The probe is loaded RTLD_LOCAL (its symbols stay its own): the start-up hook reaches its
// trainrx_probe_set_config through this one (ctypes.CDLL(None).trainrx_set_config). 1 when the probe
// is not attached.
extern "C" __attribute__((visibility("default"))) int trainrx_set_config(const char* key, double value);

namespace {

void MaybeAttach() {
  const char* probe = std::getenv(trainrx::env::kProbeLib);
  if (probe == nullptr || *probe == '\0') return;
  std::string torch;
  dl_iterate_phdr(&FindTorch, &torch);
  if (torch.empty()) return;
  if (g_done.exchange(true)) return;  // one attempt per process
  if (SpawnedMultiprocessingChild()) return;
  const char* expected = std::getenv(trainrx::env::kTorchLib);
  std::string chosen;  // a probe of TRAINRX_PROBE_CHOICES built for this libtorch
  if (expected && *expected && !SameFile(torch, expected) && !(chosen = ChooseProbeDir(torch)).empty()) {
    std::fprintf(stderr, "trainrx: this process loaded libtorch from %s: attaching the probe built for it in %s\n",
                 torch.c_str(), chosen.c_str());
    const std::string cupti = chosen + "/libtrainrx_cupti.so";
    struct stat st;
    if (stat(cupti.c_str(), &st) == 0) setenv(trainrx::env::kCuptiLib, cupti.c_str(), 1);
    else unsetenv(trainrx::env::kCuptiLib);  // the primary's backend was built with another torch's flags
    chosen += "/libtrainrx_probe.so";
    probe = chosen.c_str();
  } else if (expected && *expected && !SameFile(torch, expected)) {
    const char* version = std::getenv(trainrx::env::kTorchVersion);
    std::fprintf(stderr,
                 "trainrx: this process loaded libtorch from %s, but the trainrx probe was built against %s "
                 "(torch %s). Point `trainrx record --probe-dir DIR` at a probe built for it (e.g. "
                 "build-compat/ for Debian's torch 1.13), or build one against the program's torch:\n"
                 "  TRAINRX_TORCH_PYTHON=$(command -v python3) ./scripts/setup    # or: cmake -B build "
                 "-DCMAKE_PREFIX_PATH=\"$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')\" "
                 "&& cmake --build build\n"
                 "trainrx: a Python program is recorded by torch.profiler instead (the start-up hook's fallback: "
                 "no config snapshots, no dataflow); another program runs unobserved.\n",
                 torch.c_str(), expected, version ? version : "?");
    // `record` builds a probe for this libtorch into the user's cache once the program has ended.
    if (const char* report = std::getenv(trainrx::env::kMismatchFile); report && *report) {
      if (FILE* f = std::fopen(report, "w")) {
        std::fprintf(f, "%s\n", torch.c_str());
        std::fclose(f);
      }
    }
    trainrx_probe_state = 2;
    return;
  }
  void* handle = RealDlopen()(probe, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "trainrx: could not load the probe %s: %s; a Python program is recorded by torch.profiler "
                 "instead, another runs unobserved.\n", probe, dlerror());
    trainrx_probe_state = 3;
    return;
  }
  g_interrupted = reinterpret_cast<void (*)()>(dlsym(handle, "trainrx_probe_interrupted"));
  g_set_config = reinterpret_cast<int (*)(const char*, double)>(dlsym(handle, "trainrx_probe_set_config"));
  auto attach = reinterpret_cast<int (*)()>(dlsym(handle, "trainrx_probe_attach"));
  if (attach == nullptr) {
    std::fprintf(stderr, "trainrx: %s has no trainrx_probe_attach; a Python program is recorded by torch.profiler "
                 "instead, another runs unobserved.\n", probe);
    trainrx_probe_state = 3;
    return;
  }
  trainrx_probe_state = 1;
  attach();
}

thread_local int t_dlopen_depth = 0;

using MainFn = int (*)(int, char**, char**);
MainFn g_real_main = nullptr;

// Library constructors run before main() and may call dlopen themselves (libGLdispatch does,
// while libtorch is mapped but not initialized): before main, dlopen never attaches.
std::atomic<bool> g_main_started{false};

}  // namespace

// The process's exit status, read by the probe's exit handler (dlsym "trainrx_main_status"): what
// main() returned (Python: 1 after an uncaught exception) or what exit() was called with (Python's
// sys.exit(N) calls exit(N) without returning from main), so a trace can say the run failed. -1
// while the program runs, and when it ends another way (_exit, a signal).
extern "C" {
__attribute__((visibility("default"))) int trainrx_main_status = -1;
}

extern "C" __attribute__((visibility("default"))) void exit(int status) noexcept {
  trainrx_main_status = status;
  using ExitFn = void (*)(int);
  static const ExitFn real = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "exit"));
  real(status);
  __builtin_unreachable();
}

// Ctrl-C in Python: an uncaught KeyboardInterrupt ends with CPython resetting SIGINT to its default
// and sending it to itself (exit_sigint, after Py_FinalizeEx), which skips exit() and the probe's
// exit handler. A SIGINT the process sends itself while SIGINT is at its default is that moment:
// the probe writes the trace first. Every other call passes straight through.
namespace {
bool SigintIsDefault() {
  struct sigaction sa;
  return sigaction(SIGINT, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}
// pid 0: raise() (this process), or kill(0, ...) (its process group, which includes it).
void BeforeOwnSigint(pid_t pid, int sig) {
  if (sig == SIGINT && g_interrupted != nullptr && (pid == 0 || pid == getpid()) && SigintIsDefault()) {
    g_interrupted();
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int kill(pid_t pid, int sig) noexcept {
  using KillFn = int (*)(pid_t, int);
  static const KillFn real = reinterpret_cast<KillFn>(dlsym(RTLD_NEXT, "kill"));
  BeforeOwnSigint(pid, sig);
  return real(pid, sig);
}

extern "C" __attribute__((visibility("default"))) int raise(int sig) noexcept {
  using RaiseFn = int (*)(int);
  static const RaiseFn real = reinterpret_cast<RaiseFn>(dlsym(RTLD_NEXT, "raise"));
  BeforeOwnSigint(0, sig);
  return real(sig);
}

namespace {

int MainWrapper(int argc, char** argv, char** envp) {
  g_main_started.store(true);
  MaybeAttach();
  const int status = g_real_main(argc, argv, envp);
  trainrx_main_status = status;
  return status;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  ++t_dlopen_depth;
  void* handle = RealDlopen()(file, mode);
  --t_dlopen_depth;
  if (handle != nullptr && t_dlopen_depth == 0 && g_main_started.load(std::memory_order_relaxed) &&
      !g_done.load(std::memory_order_relaxed)) {
    MaybeAttach();
  }
  return handle;
}

extern "C" __attribute__((visibility("default"))) int __libc_start_main(MainFn main, int argc, char** argv,
                                                                         void (*init)(), void (*fini)(),
                                                                         void (*rtld_fini)(), void* stack_end) {
  using StartFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
  auto real = reinterpret_cast<StartFn>(dlsym(RTLD_NEXT, "__libc_start_main"));
  g_real_main = main;
  return real(&MainWrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

extern "C" __attribute__((visibility("default"))) int trainrx_set_config(const char* key, double value) {
  return g_set_config != nullptr ? g_set_config(key, value) : 1;
}
