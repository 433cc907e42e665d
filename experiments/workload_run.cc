#include "trainrx/experiments/workload_run.h"

#include <fmt/format.h>

#include <filesystem>

#include "knobs.h"
#include "trainrx/experiments/ranks.h"
#include "trainrx/experiments/run_result.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

// The workload, its preset and knobs and the rank count; "" when they are valid.
std::string CheckWorkload(const WorkloadRun& run) {
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || run.workload == w.name;
  if (!known) return fmt::format("{}: unknown workload (cnn or lm; see `trainrx workloads`)", run.workload);
  workloads::Config cfg;
  std::string error;
  if (!run.preset.empty() && !cfg.ApplyPreset(run.preset, &error)) return "--preset " + run.preset + ": " + error;
  for (const auto& s : run.sets)
    if (!cfg.Set(s, &error)) return "--set " + s + ": " + error;
  if (run.nproc < 1) return "--nproc: must be at least 1";
  return "";
}

}  // namespace

int RunWorkload(const WorkloadRun& run, const std::string& exe_dir, std::ostream& log, WorkloadTraces* out,
                std::string* error) {
  if (*error = CheckWorkload(run); !error->empty()) return 2;
  const std::string binary = exe_dir + "/trainrx-workload";
  if (!fs::exists(binary)) {
    *error = fmt::format("{}: not found: this trainrx was built without LibTorch (install "
                         "libtorch-dev, which scripts/setup does, and rebuild)",
                         binary);
    return 2;
  }
  const std::string output = run.output.empty() ? "trainrx_" + run.workload + ".json" : run.output;
  {
    std::error_code ec;
    const fs::path parent = fs::absolute(output, ec).parent_path();
    if (!fs::is_directory(parent, ec)) {
      *error = fmt::format("{}: the folder {} does not exist", output, parent.string());
      return 2;
    }
  }
  Spec spec;
  spec.workload = run.workload;
  spec.preset = run.preset;
  spec.sets = run.sets;
  std::vector<RunResult> results;
  const int code = LaunchRanks(binary, spec, run.nproc, output, &out->traces, &results, error);
  if (code != 0) return code > 0 ? code : 2;
  for (auto& r : results) {
    out->run_json.push_back(std::move(r.json));
    out->summary.push_back(r.Summary());
  }
  for (const auto& t : out->traces) log << "trainrx: wrote " << t << "\n";
  return 0;
}

}  // namespace trainrx::experiments
