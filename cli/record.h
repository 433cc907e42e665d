// `trainrx record`: the launcher half of attaching to any process (see record.cc).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace trainrx::cli {

struct RecordOptions {
  std::string output = "trainrx_trace.json";
  bool analyze = false;
  bool verbose = false;
  std::vector<std::string> command;
  std::string probe_dir;      // where libtrainrx_probe.so and its .torch sidecar are (default: next to trainrx)
  std::string torch_lib;      // the libtorch_cpu the probe was built against (build-time)
  std::string torch_version;  // its version
};

// Called with the trace files written when --analyze is given; returns an exit code.
using AnalyzeFn = std::function<int(const std::vector<std::string>&)>;

// Returns the program's exit code (128+N for signal N), or 2 when nothing could be recorded.
int RunRecord(const RecordOptions& options, const AnalyzeFn& analyze);

}  // namespace trainrx::cli
