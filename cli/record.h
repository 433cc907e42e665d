// `trainrx record`: the launcher half of attaching to any process (see record.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace trainrx::cli {

// Steps `record` keeps when neither --steps nor TRAINRX_STEPS says: long runs stay bounded
// (a step of a small CNN is ~1 000 events; the collector's cap is 4 M).
inline constexpr const char* kDefaultSteps = "200";

struct RecordOptions {
  std::string output = "trainrx_trace.json";
  bool analyze = false;
  bool verbose = false;
  // The step window (TRAINRX_STEPS / TRAINRX_SKIP_STEPS for the probes): empty steps is the
  // default, kDefaultSteps unless the environment says otherwise; "all" records every step.
  std::string steps;
  int64_t skip = 0;
  std::vector<std::string> command;
  std::string probe_dir;      // where libtrainrx_probe.so and its .torch sidecar are (default: next to trainrx)
  std::string torch_lib;      // the libtorch_cpu the probe was built against (build-time)
  std::string torch_version;  // its version
  // > 0: the program runs under this RLIMIT_DATA (`--memory-cap`): an allocation past it fails as
  // on a full device, and the probe writes it as the CPU's capacity (the stand-in for a device's memory).
  uint64_t memory_cap_bytes = 0;
};

// Called with the trace files written when --analyze is given; returns an exit code.
using AnalyzeFn = std::function<int(const std::vector<std::string>&)>;

// Returns the program's exit code (128+N for signal N), or 2 when nothing could be recorded.
int RunRecord(const RecordOptions& options, const AnalyzeFn& analyze);

}  // namespace trainrx::cli
