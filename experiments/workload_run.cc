#include "trainrx/experiments/workload_run.h"

#include <fmt/format.h>

#include <filesystem>

#include "knobs.h"
#include "trainrx/experiments/ranks.h"
#include "trainrx/experiments/run_result.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

// The workload, its preset and knobs and the rank count.
Status CheckWorkload(const WorkloadRun& run) {
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || run.workload == w.name;
  if (!known)
    return Status::Error(fmt::format("{}: unknown workload (cnn or lm; see `trainrx workloads`)", run.workload));
  workloads::Config cfg;
  if (!run.preset.empty()) {
    if (Status st = cfg.ApplyPreset(run.preset); !st.ok())
      return Status::Error("--preset " + run.preset + ": " + st.message());
  }
  for (const auto& s : run.sets)
    if (Status st = cfg.Set(s); !st.ok()) return Status::Error("--set " + s + ": " + st.message());
  if (run.nproc < 1) return Status::Error("--nproc: must be at least 1");
  return Status::Ok();
}

}  // namespace

Status RunWorkload(const WorkloadRun& run, const std::string& exe_dir, std::ostream& log, WorkloadTraces* out) {
  if (Status st = CheckWorkload(run); !st.ok()) return st;
  const std::string binary = exe_dir + "/trainrx-workload";
  if (!fs::exists(binary)) {
    return Status::Error(fmt::format("{}: not found: this trainrx was built without LibTorch (install "
                                     "libtorch-dev, which scripts/setup does, and rebuild)",
                                     binary));
  }
  const std::string output = run.output.empty() ? "trainrx_" + run.workload + ".json" : run.output;
  {
    std::error_code ec;
    const fs::path parent = fs::absolute(output, ec).parent_path();
    if (!fs::is_directory(parent, ec))
      return Status::Error(fmt::format("{}: the folder {} does not exist", output, parent.string()));
  }
  Spec spec;
  spec.workload = run.workload;
  spec.preset = run.preset;
  spec.sets = run.sets;
  std::vector<RunResult> results;
  if (Status st = LaunchRanks(binary, spec, run.nproc, output, &out->traces, &results, &out->rank_exit_code); !st.ok())
    return st;
  for (auto& r : results) {
    out->run_json.push_back(std::move(r.json));
    out->summary.push_back(r.Summary());
  }
  for (const auto& t : out->traces) log << "trainrx: wrote " << t << "\n";
  return Status::Ok();
}

}  // namespace trainrx::experiments
