// input.dataloader_bound, input.workers, input.pin_memory.
#include <fmt/format.h>

#include <cstdlib>
#include <map>

#include "families.h"
#include "intervals.h"
#include "phases.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;

std::optional<double> ConfigNumber(const Trace& trace, const char* key) {
  for (const auto& r : trace.ranks) {
    auto it = r.config.find(key);
    if (it == r.config.end()) continue;
    if (const auto v = it->second.AsNumber()) return v;
  }
  return std::nullopt;
}

// The data wait over the steps, as every input rule reads it.
struct DataWait {
  // On GPU traces only the wait the GPU sits idle through costs throughput: loading while the
  // previous step's kernels still run is hidden (the TensorBoard plugin's DataLoader share ranks
  // GPU activity above data loading the same way).
  // (data_exposed is the whole data wait on CPU-only ranks.)
  double data_pct = 0;
  const char* data_bound = "";
  int64_t total_data = 0, total_wait = 0;  // exposed (GPU idle; = wait on CPU traces), all
};

DataWait DataWaitOf(const StepModel& steps) {
  DataWait d;
  d.data_pct = 100.0 * steps.data_exposed_share;
  d.data_bound = steps.has_gpu ? "data wait with the GPU idle" : "data wait";
  for (const auto& s : steps.steps) d.total_data += s.data_exposed_ns, d.total_wait += s.data_wait_ns;
  return d;
}

// Which Python DataLoaders feed the steps: in how many steps the loop's time in single-process
// iterators (num_workers=0) exceeds its time in iterators over worker processes, and in how many the
// workers' does (without steps: the whole trace's time, once). A script often has both: minGPT's
// Trainer trains from 4 workers while its evaluation, in the first step, reads through
// num_workers=0 loaders; a validation pass inside one step can read more than the training does in
// all of them, and is still one step.
struct LoaderUse {
  int64_t single_calls = 0, worker_calls = 0, single_steps = 0, worker_steps = 0;
  std::string single_name, worker_name;
  // The steps' data comes from the loop itself, or from worker processes, in most steps.
  bool InProcess() const { return single_steps > 0 && single_steps >= worker_steps; }
  bool FromWorkers() const { return worker_steps > single_steps; }
};

LoaderUse LoaderUseOf(const AnalysisContext& ctx) {
  const Trace& trace = ctx.trace;
  std::map<int32_t, StepWindows> in_steps;
  for (int32_t rank : trace.RankIds()) in_steps.emplace(rank, StepWindows(ctx.steps, rank));
  LoaderUse u;
  std::map<std::pair<int32_t, int64_t>, std::pair<int64_t, int64_t>> per_step;  // (rank, step): (single, workers) ns
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kGpuUserAnnotation) continue;
    const std::string_view name = trace.Name(e);
    const bool single = IsSingleProcessLoaderRange(name), workers = !single && IsWorkerLoaderRange(name);
    const int32_t rank = trace.tracks[e.track].rank;
    if (!(single || workers) || !in_steps.at(rank).Contains(e.ts_ns)) continue;
    (single ? u.single_calls : u.worker_calls) += 1;
    auto& [single_ns, worker_ns] = per_step[{rank, in_steps.at(rank).Index(e.ts_ns)}];  // -1: no steps
    (single ? single_ns : worker_ns) += e.dur_ns;
    std::string& example = single ? u.single_name : u.worker_name;
    if (example.empty()) example = std::string(name);
  }
  for (const auto& [step, ns] : per_step) {
    if (ns.first > ns.second) ++u.single_steps;
    if (ns.second > ns.first) ++u.worker_steps;
  }
  return u;
}

// input.dataloader_bound; returns whether the steps are loader-bound (input.workers reads it).
bool RuleDataloaderBound(const AnalysisContext& ctx, const DataWait& d, const LoaderUse& loaders, const StepBasis& basis,
                         Report& out) {
  const StepModel& steps = ctx.steps;
  const double data_pct = d.data_pct;
  const double bound_threshold = ctx.thresholds.Get("input.dataloader_bound.share_pct");
  // A loader bottleneck waits in most steps: the share must also pass without the worst quarter
  // of the steps (a few stalls, e.g. the OS running another process during a batch, are not one).
  const bool loader_bound = !steps.steps.empty() && data_pct > bound_threshold &&
                            100.0 * steps.data_share_without_worst > bound_threshold;
  if (!loader_bound) return false;
  Finding f;
  f.id = "input.dataloader_bound";
  f.severity = data_pct > 20 ? Severity::kHigh : Severity::kMedium;
  f.confidence = Confidence::kHigh;
  f.title = steps.has_gpu ? fmt::format("The GPU waits for data {:.1f}% of the time (data loading while no GPU work runs)", data_pct)
                          : fmt::format("The step waits for data {:.1f}% of the time", data_pct);
  f.measured = data_pct;
  f.threshold = bound_threshold;
  f.measured_unit = "% of step";
  f.evidence = {{"steps", static_cast<int64_t>(steps.steps.size())},
                {basis.NsKey("data_wait"), static_cast<int64_t>(basis.Per(d.total_wait))},
                {basis.NsKey("data_wait_gpu_idle"), static_cast<int64_t>(basis.Per(d.total_data))},
                {"median_step_ns", steps.median_wall_ns},
                {"data_wait_pct_without_worst_steps", 100.0 * steps.data_share_without_worst},
                {"worst_steps_left_out", static_cast<int64_t>(steps.data_worst_steps.size())},
                {"steps_source", steps.source}};
  // Upper bound: loading that overlaps compute can hide all of the wait.
  SetSaving(f, basis, basis.Per(d.total_data), basis.Per(d.total_data), d.data_bound);
  const auto cfg_workers = ConfigNumber(ctx.trace, "workers");  // our workloads' LibTorch loader
  if (loaders.FromWorkers() || (cfg_workers && *cfg_workers > 0 && !loaders.InProcess())) {
    // The loader already has workers: the loop waits for them (and for each batch to cross
    // processes), which more workers help only where CPUs are free.
    if (loaders.worker_calls > 0) {
      f.evidence.push_back({"worker_loader_calls", loaders.worker_calls});
      f.examples.push_back(loaders.worker_name);
    }
    if (cfg_workers) f.evidence.push_back({"configured_workers", *cfg_workers});
    SetFix(f, "workers_behind");
  } else {
    SetFix(f);
  }
  out.findings.push_back(std::move(f));
  return true;
}

// input.workers: single-process loading (when loading costs time), or more workers than CPUs.
void RuleWorkers(const AnalysisContext& ctx, const DataWait& d, const LoaderUse& loaders, bool loader_bound, const StepBasis& basis,
                 Report& out) {
  const Trace& trace = ctx.trace;
  const StepModel& steps = ctx.steps;
  const auto cfg_workers = ConfigNumber(trace, "workers");
  const auto cfg_cpus = ConfigNumber(trace, "cpu_count");
  // The CPUs of the machine that ran the job, from our collector's block; never the analyzing
  // machine's (an analysis is a function of the trace): without it, no "too many" verdict.
  const double cpus = cfg_cpus ? *cfg_cpus : 0.0;
  // num_workers=0 only matters when loading costs time: with cheap data, worker processes cost
  // more (IPC, startup) than they save. Without steps we cannot tell, so we say so at low severity.
  const bool loading_costs = steps.steps.empty() || loader_bound;
  // The loaders that feed the steps decide: an evaluation loader without workers beside a training
  // loader with them is not the steps' loading.
  const bool zero_workers = (loaders.InProcess() || (cfg_workers && *cfg_workers == 0)) && loading_costs;
  const double max_per_cpu = ctx.thresholds.Get("input.workers.max_per_cpu");
  const bool too_many = cfg_workers && cpus > 0 && *cfg_workers > cpus * max_per_cpu;
  if (!zero_workers && !too_many) return;
  Finding f;
  f.id = "input.workers";
  f.confidence = Confidence::kHigh;
  if (zero_workers) {
    f.severity = d.data_pct > ctx.thresholds.Get("input.dataloader_bound.share_pct") ? Severity::kHigh : Severity::kLow;
    f.title = "Data is loaded in the training process (num_workers=0)";
    f.measured = 0;
    f.threshold = 1;
    f.measured_unit = "workers";
    if (loaders.single_calls > 0) {
      f.evidence.push_back({"single_process_loader_calls", loaders.single_calls});
      f.examples.push_back(loaders.single_name);
    }
    if (loaders.worker_calls > 0) f.evidence.push_back({"worker_loader_calls", loaders.worker_calls});
    if (cfg_workers) f.evidence.push_back({"configured_workers", *cfg_workers});
    SetFix(f, "single_process");
    SetSaving(f, basis, basis.Per(d.total_data), basis.Per(d.total_data), d.data_bound);
  } else {
    f.severity = Severity::kMedium;
    f.title = fmt::format("{:.0f} loader workers for {:.0f} CPUs", *cfg_workers, cpus);
    f.measured = *cfg_workers;
    f.threshold = cpus * max_per_cpu;
    f.measured_unit = "workers";
    f.evidence = {{"configured_workers", *cfg_workers}, {"cpus", cpus}};
    SetFix(f, "too_many");
  }
  out.findings.push_back(std::move(f));
}

// input.pin_memory: host-to-device copies from pageable memory, inside the steps.
void RulePinMemory(const AnalysisContext& ctx, const StepBasis& basis, Report& out) {
  const Trace& trace = ctx.trace;
  std::map<int32_t, StepWindows> in_steps;
  for (int32_t rank : trace.RankIds()) in_steps.emplace(rank, StepWindows(ctx.steps, rank));
  int64_t pageable = 0, pageable_bytes = 0, pageable_ns = 0;
  for (const Event& e : trace.events) {
    if (e.kind != EventKind::kMemcpy || e.aux == profiler::kNoAux) continue;
    if (!in_steps.at(trace.tracks[e.track].rank).Contains(e.ts_ns)) continue;
    const auto& m = trace.memcpys[e.aux];
    if (m.copy == profiler::CopyKind::kHtoD && m.src == profiler::MemKind::kPageable) {
      ++pageable;
      pageable_bytes += std::max<int64_t>(0, m.bytes);
      pageable_ns += e.dur_ns;
    }
  }
  if (!(pageable > 0 && static_cast<double>(pageable) >= ctx.thresholds.Get("input.pin_memory.min_copies"))) return;
  Finding f;
  f.id = "input.pin_memory";
  f.confidence = Confidence::kHigh;
  const double per_step = basis.Per(pageable);
  f.title = basis.has_steps() ? fmt::format("{} host-to-device copies from pageable memory ({:.1f} per step)", pageable, per_step)
                              : fmt::format("{} host-to-device copies from pageable memory", pageable);
  f.measured = per_step;
  f.threshold = ctx.thresholds.Get("input.pin_memory.min_copies");
  f.measured_unit = std::string("pageable HtoD copies ") + basis.unit();
  f.evidence = {{"copies", pageable}, {"bytes", pageable_bytes}, {"copy_time_ns", pageable_ns}};
  // Pinned HtoD runs at roughly twice pageable bandwidth and can overlap compute with
  // non_blocking=True: half the copy time is a conservative estimate; `trainrx fix` measures it.
  SetSaving(f, basis, basis.Per(pageable_ns) / 2, basis.Per(pageable_ns), "pageable copy time");
  f.severity = SeverityForSaving(f);  // what is at stake is the copy time, however many copies
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeInput(const AnalysisContext& ctx, Report& out) {
  const StepBasis basis(ctx.steps);
  const DataWait d = DataWaitOf(ctx.steps);
  const LoaderUse loaders = LoaderUseOf(ctx);
  const bool loader_bound = RuleDataloaderBound(ctx, d, loaders, basis, out);
  RuleWorkers(ctx, d, loaders, loader_bound, basis, out);
  RulePinMemory(ctx, basis, out);
}

}  // namespace trainrx::analyzers
