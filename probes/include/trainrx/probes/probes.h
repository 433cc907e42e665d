// trainrx probes — the C++ API for LibTorch programs, and the entry point the preload shim uses
// to attach to an unmodified process.
//
// Who calls it: a LibTorch training program (link trainrx::probes, call Start(), mark steps and
// phases, Stop() or just exit), and libtrainrx_preload.so (trainrx_probe_attach) when
// `trainrx record -- python3 train.py` loads libtorch. This header is torch-free on purpose.
//
// What is recorded: every ATen op, autograd node and record_function range (a global
// RecordFunction observer), our step/phase ranges, a config snapshot at every step boundary
// (anomaly mode, cudnn flags, deterministic algorithms, threads, autocast, another profiler,
// environment switches), grad mode per op, and for the first steps the inputs of conv / linear /
// norm ops with exact dataflow (this conv's output is that batch_norm's input).
//
// Threading: every function is thread-safe and noexcept. Steps and phases are per process; mark
// them from the training thread. Phases are also NVTX ranges when built with CUDA, so Nsight
// Systems shows them.
//
// Output: Kineto-compatible JSON (opens in Perfetto, TensorBoard, HTA, `trainrx analyze`), written
// at Stop(), at exit, on SIGTERM and on crashes (marked incomplete). The path is the one given to
// Start(), unless TRAINRX_OUTPUT is set (`trainrx record -o` sets it and wins).
#pragma once

#include <cstdint>
#include <string>

#define TRAINRX_PROBES_API __attribute__((visibility("default")))

namespace trainrx::probes {

struct StartOptions {
  std::string output = "trainrx_trace.json";
  // Inputs (shapes, dtypes, dataflow) are captured for this many step boundaries, then the
  // observer switches to a callback without inputs: the model's structure repeats every step,
  // and boxing every op's inputs costs ~100 ns/op.
  int input_capture_steps = 3;
  uint64_t max_events = 4'000'000;
};

// Starts recording in this process (idempotent). Returns false, with a message on stderr, when
// the observer could not be registered.
TRAINRX_PROBES_API bool Start(const StartOptions& options = {});
// Writes the trace and stops recording. Returns the path written, or "" on failure.
TRAINRX_PROBES_API std::string Stop();
TRAINRX_PROBES_API bool Recording();
// Pauses (false) or resumes (true) observation without ending the session: paused, the observer
// is unregistered and costs nothing. E.g. record only steps 100-200.
TRAINRX_PROBES_API void SetEnabled(bool enabled);
// The libtorch version the probes were compiled against ("1.13.0").
TRAINRX_PROBES_API const char* BuiltTorchVersion();

// Begins step `step` (a "trainrx::step#N" range), ending the previous one.
TRAINRX_PROBES_API void MarkStep(int64_t step);
// Ends the current step without starting another (e.g. before evaluation).
TRAINRX_PROBES_API void EndStep();

enum class Phase { kData, kForward, kBackward, kOptimizer, kEval };
TRAINRX_PROBES_API const char* PhaseName(Phase p);  // "trainrx::data", ...

// A "trainrx::<phase>" range for the scope (and an NVTX range).
class TRAINRX_PROBES_API ScopedPhase {
 public:
  explicit ScopedPhase(Phase phase) noexcept;
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  void* rec_ = nullptr;
  bool nvtx_ = false;
};

// A configuration value written into the trace's "trainrx" block (numbers), e.g. the program's
// DataLoader workers: SetConfig("workers", 4).
TRAINRX_PROBES_API void SetConfig(const std::string& key, double value);
TRAINRX_PROBES_API void SetConfigText(const std::string& key, const std::string& value);

}  // namespace trainrx::probes

// Called by libtrainrx_preload.so once libtorch is loaded in the process. Returns 0 when
// recording started.
extern "C" int trainrx_probe_attach(void);
