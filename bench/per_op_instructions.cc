// Instructions per observed op: what the trainrx probe adds to one ATen op, counted by callgrind
// (valgrind) rather than timed, so the figure does not move with the machine's load (issue 34.13:
// on the shared 2-core machines wall-clock timings of ~100 ns differences were noise).
//
// One process, under `valgrind --tool=callgrind --collect-atstart=no`, runs `ops` calls of
// at::add_out on 1-element CPU tensors (the cheapest op: nothing hides the observer's cost) in
// each mode, round by round, and dumps callgrind's counts after each loop (a client request
// labelled with the mode and the round), counting this thread only, inside the loop only:
//   plain           the probe loaded and started, paused (SetEnabled(false): its callback is removed)
//   trainrx         the probe recording (past 3 step boundaries, so no inputs are boxed: steady state)
//   torch.profiler  the probe paused; torch.profiler's own backend (Kineto, CPU activity, no shapes)
// The probe is loaded with dlopen from the path given, so one build of this program measures the
// probe of any commit (bench/per_op_instructions.sh --before). TRAINRX_PROBE_FLOOR=1 in the
// environment makes the probe's callback record nothing (what RecordFunction itself costs).
// bench/per_op_instructions.sh runs it and prints instructions per call by mode.
//
// Usage: valgrind --tool=callgrind --collect-atstart=no trainrx_per_op_instructions PROBE.so [ops] [rounds] [trace]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>

#include "torch_profiler_start.h"

namespace {

// The loop callgrind counts: noinline, so that each mode runs the same code.
__attribute__((noinline)) void Loop(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int ops) {
  for (int i = 0; i < ops; ++i) at::add_out(out, a, b);
}

void Counted(const char* mode, int round, const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int ops) {
  CALLGRIND_TOGGLE_COLLECT;
  Loop(a, b, out, ops);
  CALLGRIND_TOGGLE_COLLECT;
  const std::string label = std::string(mode) + " round " + std::to_string(round) + " ops " + std::to_string(ops);
  CALLGRIND_DUMP_STATS_AT(label.c_str());
}

template <typename F>
F Symbol(void* lib, const char* name) {
  void* s = dlsym(lib, name);
  if (s == nullptr) {
    std::fprintf(stderr, "per_op_instructions: %s not in the probe library\n", name);
    std::exit(2);
  }
  return reinterpret_cast<F>(s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROBE.so [ops=20000] [rounds=2] [trace=/tmp/per_op_instructions.json]\n", argv[0]);
    return 2;
  }
  const int ops = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 2;
  const char* trace = argc > 4 ? argv[4] : "/tmp/per_op_instructions.json";
  // No journal: its flusher thread is not the recording thread's cost (bench/journal_flush_bench.cc).
  setenv("TRAINRX_FLUSH_SECONDS", "0", 1);
  at::set_num_threads(1);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "per_op_instructions: %s\n", dlerror());
    return 2;
  }
  auto start = Symbol<int (*)(const char*)>(lib, "trainrx_probe_start_in_process");
  auto set_enabled = Symbol<void (*)(bool)>(lib, "_ZN7trainrx6probes10SetEnabledEb");
  if (start(trace) != 0) {
    std::fprintf(stderr, "per_op_instructions: the probe did not start\n");
    return 2;
  }
  // Three step boundaries, as a training loop's first optimizer steps: the probe stops boxing
  // op inputs after them (its steady state).
  for (int i = 0; i < 3; ++i) {
    RECORD_USER_SCOPE("Optimizer.step#SGD.step");
    at::ones({1}).add_(1);
  }
  at::Tensor a = at::ones({1}), b = at::ones({1}), out = at::empty({1});
  bool kineto = true;
  for (int r = 0; r < rounds; ++r) {
    set_enabled(false);
    Counted("plain", r, a, b, out, ops);
    set_enabled(true);
    Counted("trainrx", r, a, b, out, ops);
    set_enabled(false);
    if (kineto && (kineto = StartTorchProfiler())) {
      Counted("torch.profiler", r, a, b, out, ops);
      torch::autograd::profiler::disableProfiler();  // its events are post-processed and dropped here, not counted
    }
  }
  set_enabled(true);
  return 0;  // the probe writes its trace at exit
}
