// `trainrx workloads` and `trainrx run`: list the reference workloads and their knobs; run one
// (N local ranks with --nproc, env:// rendezvous on 127.0.0.1) under the probes, then analyze the
// trace(s) it wrote together with its per-step results.
#include "run.h"


#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "exe_dir.h"
#include "knobs.h"
#include "trainrx/experiments/ranks.h"
#include "trainrx/experiments/run_result.h"

namespace trainrx::cli {
namespace {

namespace fs = std::filesystem;

}  // namespace

int ListWorkloads(std::ostream& out) {
  out << "Workloads\n";
  for (const auto& w : workloads::Workloads()) out << fmt::format("  {:<6} {}\n", w.name, w.help);
  out << "\nKnobs (--set knob=value; defaults are the recommended setting)\n";
  out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", "knob", "default", "bad", "finding", "where", "what");
  for (const auto& k : workloads::Knobs()) {
    // A bad value that no analyzer flags yet shows "-" as its finding.
    const char* finding = *k.finding ? k.finding : *k.bad_value ? "-" : "";
    out << fmt::format("  {:<20} {:<8} {:<6} {:<26} {:<5} {}\n", k.name, k.default_value, k.bad_value, finding, k.where,
                       k.help);
  }
  out << "\nPresets (--preset NAME)\n";
  for (const auto& p : workloads::Presets()) {
    std::string settings;
    for (const auto& [k, v] : p.settings) settings += fmt::format("{}{}={}", settings.empty() ? "" : " ", k, v);
    out << fmt::format("  {:<14} {}{}\n", p.name, p.help, settings.empty() ? "" : " (" + settings + ")");
  }
  out << "\nwhere: cpu = has its effect here; gpu = only with device=cuda; dist = only with --nproc > 1\n";
  return 0;
}

int RunWorkload(const RunOptions& options, const RunAnalyzeFn& analyze) {
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || options.workload == w.name;
  if (!known) {
    std::cerr << fmt::format("trainrx: error: unknown workload '{}' (see `trainrx workloads`)\n", options.workload);
    return 2;
  }
  workloads::Config cfg;
  std::string error;
  if (!options.preset.empty() && !cfg.ApplyPreset(options.preset, &error)) {
    std::cerr << "trainrx: error: " << error << "\n";
    return 2;
  }
  for (const auto& s : options.sets) {
    if (!cfg.Set(s, &error)) {
      std::cerr << "trainrx: error: " << error << "\n";
      return 2;
    }
  }
  if (options.nproc < 1) {
    std::cerr << "trainrx: error: --nproc must be at least 1\n";
    return 2;
  }
  const std::string binary = ExeDir() + "/trainrx-workload";
  if (!fs::exists(binary)) {
    std::cerr << fmt::format("trainrx: error: {} not found: this trainrx was built without LibTorch (install "
                             "libtorch-dev, which scripts/setup does, and rebuild)\n",
                             binary);
    return 2;
  }
  const std::string output = options.output.empty() ? "trainrx_" + options.workload + ".json" : options.output;
  {
    std::error_code ec;
    const fs::path parent = fs::absolute(output, ec).parent_path();
    if (!fs::is_directory(parent, ec)) {
      std::cerr << fmt::format("trainrx: error: {}: the folder {} does not exist\n", output, parent.string());
      return 2;
    }
  }
  experiments::Spec spec;
  spec.workload = options.workload;
  spec.preset = options.preset;
  spec.sets = options.sets;
  std::vector<std::string> traces;
  std::vector<experiments::RunResult> results;
  const int code = experiments::LaunchRanks(binary, spec, options.nproc, output, &traces, &results, &error);
  if (code != 0) {
    std::cerr << "trainrx: error: " << error << "\n";
    return code > 0 ? code : 2;
  }
  std::vector<std::string> run_json, summary;
  for (auto& r : results) {
    run_json.push_back(std::move(r.json));
    summary.push_back(r.Summary());
  }
  for (const auto& t : traces) std::cerr << "trainrx: wrote " << t << "\n";
  return analyze(traces, run_json, summary);
}

}  // namespace trainrx::cli
