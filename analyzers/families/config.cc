// Rules on the run's configuration, read from our collector's snapshots (config_view.h):
//   debug.anomaly_detection  autograd anomaly mode on during training steps
//   debug.profiler           another profiler (torch.profiler, autograd.profiler, emit_nvtx) active
//   debug.launch_blocking    CUDA_LAUNCH_BLOCKING=1 or deterministic algorithms forced
//   cudnn.benchmark_off      cuDNN autotuner off while convolutions run on a GPU
//   cudnn.deterministic_on   deterministic cuDNN algorithms forced while convolutions run on a GPU
//   threads.oversubscribed   intra-op threads x local ranks + loader workers above the CPUs allowed
// Traces without our config (plain PyTorch-profiler files) have nothing to say here: silent,
// except for anomaly mode, whose NaN checks are ops of their own: every autograd node's outputs
// go through aten::isnan -> aten::_is_any_true / aten::any -> aten::item inside
// autograd::engine::evaluate_function (torch/csrc/autograd/engine.cpp, validate_outputs under
// AnomalyMode). Nothing else PyTorch runs puts aten::isnan inside a backward function; a user
// tensor hook that checks for NaN would, hence medium confidence on that path.
#include <fmt/format.h>

#include <algorithm>

#include "config_view.h"
#include "families.h"
#include "intervals.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

bool IsConv(std::string_view n) {
  return StartsWith(n, "aten::conv") || n == "aten::convolution" || n == "aten::_convolution" ||
         StartsWith(n, "aten::cudnn_convolution");
}

struct RankFacts {
  bool has_gpu = false;
  int64_t conv_ops = 0;
  int64_t cpu_ops = 0;
  int64_t anomaly_checks = 0;  // NaN checks anomaly mode adds inside backward
  int64_t anomaly_check_ns = 0;
  std::vector<int64_t> anomaly_check_ts;  // start of each aten::isnan inside backward
};

// Counts inside the rank's steady steps (all of the trace without steps), so that a count or a
// time divided by StepBasis's steps is a per-step mean of those same steps.
RankFacts Gather(const Trace& trace, int32_t rank, const StepModel& steps) {
  RankFacts f;
  const StepWindows in_steps(steps, rank);
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank) continue;
    if (t.kind == TrackKind::kGpuStream) {
      f.has_gpu = f.has_gpu || t.event_count > 0;
      continue;
    }
    int64_t backward_end = INT64_MIN;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind != EventKind::kCpuOp) continue;
      const std::string_view n = trace.Name(e);
      const bool backward_node = StartsWith(n, "autograd::engine::evaluate_function");
      if (backward_node) backward_end = std::max(backward_end, e.end_ns());
      if (!in_steps.Contains(e.ts_ns)) continue;
      ++f.cpu_ops;
      if (IsConv(n)) ++f.conv_ops;
      if (!backward_node && e.ts_ns < backward_end &&
          (n == "aten::isnan" || n == "aten::any" || n == "aten::_is_any_true" || n == "aten::item")) {
        if (n == "aten::isnan") {
          ++f.anomaly_checks;
          f.anomaly_check_ts.push_back(e.ts_ns);
        }
        f.anomaly_check_ns += e.dur_ns;
      }
    }
  }
  if (const auto* info = trace.FindRank(rank)) f.has_gpu = f.has_gpu || !info->devices.empty();
  return f;
}

Finding Base(const char* id, Severity severity, int32_t rank, std::string title) {
  Finding f;
  f.id = id;
  f.severity = severity;
  f.confidence = Confidence::kHigh;
  f.rank = rank;
  f.title = std::move(title);
  return f;
}

// The "% of steps" a switch was on, as a finding's measured value; without steps there is no
// share to give: the measured value is the switch itself (1 = seen on) and the title says where.
void SetStepShare(Finding& f, double pct, double threshold, int64_t steps) {
  f.measured = steps > 0 ? pct : 1.0;
  f.threshold = steps > 0 ? threshold : 0.0;
  f.measured_unit = steps > 0 ? "% of steps" : "seen on (the trace has no steps to share it over)";
}
std::string StepShareText(double pct, int64_t steps, const char* without) {
  return steps > 0 ? fmt::format("{:.0f}% of steps", pct) : std::string(without);
}

// debug.anomaly_detection on a trace without our config: from the NaN checks themselves.
void AnomalyFromOps(const AnalysisContext& ctx, int32_t rank, const RankFacts& facts, Report& out) {
  if (facts.anomaly_checks == 0) return;
  int64_t total = 0, on = 0;
  for (const auto& s : ctx.steps.steps) {
    if (s.rank != rank) continue;
    ++total;
    const bool any = std::any_of(facts.anomaly_check_ts.begin(), facts.anomaly_check_ts.end(),
                                 [&](int64_t t) { return t >= s.start_ns && t < s.start_ns + s.wall_ns; });
    on += any ? 1 : 0;
  }
  const double pct = total > 0 ? 100.0 * static_cast<double>(on) / static_cast<double>(total) : 100.0;
  const double threshold = ctx.thresholds.Get("debug.anomaly_detection.steps_pct");
  if (pct <= threshold) return;
  const StepBasis basis(ctx.steps, rank);
  Finding f = Base("debug.anomaly_detection", Severity::kHigh, rank,
                   fmt::format("Autograd anomaly detection looks on: NaN checks in backward ({})",
                               StepShareText(pct, total, "no steps in the trace")));
  f.confidence = Confidence::kMedium;
  SetStepShare(f, pct, threshold, total);
  if (total > 0) f.evidence = {{"steps_with_nan_checks", on}, {"steps", total}};
  f.evidence.push_back({"nan_checks_in_backward", facts.anomaly_checks});
  f.evidence.push_back({basis.NsKey("nan_check"), static_cast<int64_t>(basis.Per(facts.anomaly_check_ns))});
  f.evidence.push_back({"method", std::string("aten::isnan inside autograd::engine::evaluate_function (no config snapshot in this trace)")});
  SetSaving(f, basis, basis.Per(facts.anomaly_check_ns), basis.Per(facts.anomaly_check_ns), "NaN-check time");
  f.examples.push_back("lower bound: NaN checks seen in backward; the stack capture per forward node is extra");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// One rank with our collector's config: what its rules read.
struct ConfigRank {
  const AnalysisContext& ctx;
  int32_t rank;
  const ConfigView& cfg;
  const RankFacts& facts;
  const StepBasis& basis;
};

// % of this rank's steps during which `key` was on (100 / 0 when there are no steps); *on gets
// those steps, *total_steps the rank's steps.
double ShareOfSteps(const ConfigRank& r, const char* key, int64_t* on, int64_t* total_steps) {
  *on = r.cfg.StepsWhereOn(key, r.ctx.steps, total_steps);
  if (*total_steps > 0) return 100.0 * static_cast<double>(*on) / static_cast<double>(*total_steps);
  return r.cfg.Max(key).value_or(0) != 0 ? 100.0 : 0.0;
}

// debug.anomaly_detection from the config snapshots.
void RuleAnomaly(const ConfigRank& r, Report& out) {
  int64_t on = 0, total_steps = 0;
  const double pct = ShareOfSteps(r, "anomaly_mode", &on, &total_steps);
  const double threshold = r.ctx.thresholds.Get("debug.anomaly_detection.steps_pct");
  if (pct <= threshold) return;
  const StepBasis& basis = r.basis;
  const RankFacts& facts = r.facts;
  Finding f = Base("debug.anomaly_detection", Severity::kHigh, r.rank,
                   fmt::format("Autograd anomaly detection is on ({})", StepShareText(pct, total_steps, "config snapshot")));
  SetStepShare(f, pct, threshold, total_steps);
  if (total_steps > 0) f.evidence = {{"steps_with_anomaly_mode", on}, {"steps", total_steps}};
  f.evidence.push_back({"nan_checks_in_backward", facts.anomaly_checks});
  f.evidence.push_back({basis.NsKey("nan_check"), static_cast<int64_t>(basis.Per(facts.anomaly_check_ns))});
  // Lower bound: the NaN checks we can see (isnan/any/item per backward output). The
  // forward-side cost (a Python stack trace per autograd node) has no op of its own; on a
  // LibTorch CNN step on these machines anomaly mode cost 5.8x (docs/design.md).
  SetSaving(f, basis, basis.Per(facts.anomaly_check_ns), basis.Per(facts.anomaly_check_ns), "NaN-check time");
  f.examples.push_back("lower bound: NaN checks seen in backward; the stack capture per forward node is extra");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// debug.profiler: another profiler active during the steps.
void RuleOtherProfiler(const ConfigRank& r, Report& out) {
  int64_t on = 0, total_steps = 0;
  const double pct = ShareOfSteps(r, "other_profiler", &on, &total_steps);
  const double threshold = r.ctx.thresholds.Get("debug.profiler.steps_pct");
  if (pct <= threshold) return;
  const StepBasis& basis = r.basis;
  Finding f = Base("debug.profiler", Severity::kMedium, r.rank,
                   fmt::format("Another profiler is active ({})", StepShareText(pct, total_steps, "config snapshot")));
  SetStepShare(f, pct, threshold, total_steps);
  const double ops_per_step = basis.Per(r.facts.cpu_ops);
  if (total_steps > 0) f.evidence = {{"steps_with_profiler", on}, {"steps", total_steps}};
  f.evidence.push_back({basis.Key("ops"), ops_per_step});
  // LibTorch's legacy profiler added 1054 ns/op on these machines (docs/design.md); Kineto's
  // costs a similar order per op.
  // Bounded by the time of the steps it was on: its own overhead has no op to measure.
  const double on_share = static_cast<double>(on) / static_cast<double>(std::max<int64_t>(1, total_steps));
  SetSaving(f, basis, ops_per_step * 1054.0 * on_share, basis.mean_step_ns() * on_share,
            "time of the steps profiled");
  if (basis.has_steps()) f.examples.push_back("estimate: ops per step x 1.05 us (legacy profiler cost per op, measured here)");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// debug.launch_blocking: CUDA_LAUNCH_BLOCKING=1 or deterministic algorithms forced.
void RuleLaunchBlocking(const ConfigRank& r, Report& out) {
  const bool blocking = r.cfg.Max("launch_blocking").value_or(0) != 0;
  const bool deterministic = r.cfg.Max("deterministic_algorithms").value_or(0) != 0;
  if (!blocking && !deterministic) return;
  const bool has_gpu = r.facts.has_gpu;
  Finding f = Base("debug.launch_blocking", has_gpu ? Severity::kHigh : Severity::kLow, r.rank,
                   blocking ? "CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the GPU"
                            : "torch.use_deterministic_algorithms(True) forces slower kernels");
  f.measured = 1;
  f.threshold = 0;
  f.measured_unit = blocking ? "CUDA_LAUNCH_BLOCKING" : "deterministic algorithms";
  f.evidence = {{"launch_blocking", static_cast<int64_t>(blocking)},
                {"deterministic_algorithms", static_cast<int64_t>(deterministic)},
                {"gpu_activity", static_cast<int64_t>(has_gpu)}};
  if (!has_gpu) f.examples.push_back("no GPU activity in this trace: no cost here, but it will cost on a GPU");
  SetFix(f, blocking ? "blocking" : "deterministic");
  out.findings.push_back(std::move(f));
}

// cudnn.*: only where convolutions ran on a GPU (cuDNN does nothing for CPU convolutions).
void RulesCudnn(const ConfigRank& r, Report& out) {
  const RankFacts& facts = r.facts;
  if (!(facts.has_gpu && facts.conv_ops > 0)) return;
  const StepBasis& basis = r.basis;
  if (r.cfg.Max("cudnn_benchmark").has_value() && r.cfg.Max("cudnn_benchmark").value() == 0) {
    Finding f = Base("cudnn.benchmark_off", Severity::kMedium, r.rank, "cuDNN autotuner is off while convolutions run");
    f.confidence = Confidence::kMedium;  // pays off only when input shapes repeat
    f.measured = 0;
    f.threshold = 1;
    f.measured_unit = "cudnn.benchmark";
    f.evidence = {{basis.Key("conv_ops"), basis.Per(facts.conv_ops)}};
    SetFix(f);
    out.findings.push_back(std::move(f));
  }
  if (r.cfg.Max("cudnn_deterministic").value_or(0) != 0) {
    Finding f = Base("cudnn.deterministic_on", Severity::kLow, r.rank, "Deterministic cuDNN convolutions are forced");
    f.measured = 1;
    f.threshold = 0;
    f.measured_unit = "cudnn.deterministic";
    f.evidence = {{basis.Key("conv_ops"), basis.Per(facts.conv_ops)}};
    SetFix(f);
    out.findings.push_back(std::move(f));
  }
}

// threads.oversubscribed: intra-op threads x local ranks above the CPUs allowed (x the ratio), or
// more loader workers than CPUs.
// DataLoader worker processes of a Python program: the start-up hook's "trainrx::loader workers=N"
// marks (one per iterator), the most any loader of the rank started. 0 when none.
double LoaderWorkersFromMarks(const Trace& trace, int32_t rank) {
  constexpr std::string_view kMark = "trainrx::loader workers=";
  double most = 0;
  for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
    if (trace.tracks[t].rank != rank || trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
    for (const profiler::Event& e : trace.TrackEvents(t)) {
      if (e.kind != profiler::EventKind::kUserAnnotation) continue;
      const std::string_view name = trace.Name(e);
      if (name.starts_with(kMark)) most = std::max(most, std::atof(std::string(name.substr(kMark.size())).c_str()));
    }
  }
  return most;
}

void RuleOversubscribed(const ConfigRank& r, Report& out) {
  const auto threads = r.cfg.Max("intra_op_threads");
  const auto cpus = r.cfg.Static("cpu_count");
  if (!(threads && cpus && *cpus > 0)) return;
  // Our workloads state their workers; a Python program's DataLoaders are seen by the start-up hook.
  const double workers = std::max(r.cfg.Static("workers").value_or(0), LoaderWorkersFromMarks(r.ctx.trace, r.rank));
  // Ranks sharing this machine, each with its own intra-op pool.
  const double local_ranks = r.cfg.LocalRanks();
  // What competes for the CPUs all the time: the intra-op pools of the local ranks. Loader
  // workers prefetch while the pool computes, but how busy they are is not in the trace (the
  // decode work is not an op, worker processes are not recorded), so they count only when
  // there are more of them than CPUs, PyTorch's own DataLoader warning. PyTorch's default
  // (one intra-op thread per core, a few workers) is not flagged: it is what nearly every
  // job runs, and a claim about it would have to be measured (`trainrx sweep --grid threads=`).
  const double demand = *threads * local_ranks;
  const double worker_total = workers * local_ranks;
  const double ratio = r.ctx.thresholds.Get("threads.oversubscribed.ratio");
  const bool pools = demand > *cpus * ratio;
  if (!pools && !(worker_total > *cpus)) return;
  Finding f = Base("threads.oversubscribed", Severity::kMedium, r.rank,
                   pools ? fmt::format("{:.0f} intra-op threads ({:.0f} per rank x {:.0f} local ranks) for {:.0f} CPUs",
                                       demand, *threads, local_ranks, *cpus)
                         : fmt::format("{:.0f} loader worker processes and {:.0f} intra-op threads for {:.0f} CPUs", worker_total, demand,
                                       *cpus));
  f.measured = (pools ? demand : worker_total) / *cpus;
  f.threshold = pools ? ratio : 1.0;
  f.measured_unit = pools ? "intra-op threads per CPU" : "loader workers per CPU";
  f.evidence = {{"intra_op_threads", *threads}, {"local_ranks", local_ranks}, {"loader_workers", workers},
                {"cpus_allowed", *cpus}};
  SetFix(f, pools ? "threads" : "workers", {{"n", std::max(1.0, std::floor(*cpus / local_ranks))}});
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeConfig(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  for (int32_t rank : trace.RankIds()) {
    const ConfigView cfg(trace, rank);
    if (!cfg.from_collector()) {
      AnomalyFromOps(ctx, rank, Gather(trace, rank, ctx.steps), out);
      continue;
    }
    const RankFacts facts = Gather(trace, rank, ctx.steps);
    const StepBasis basis(ctx.steps, rank);
    const ConfigRank r{ctx, rank, cfg, facts, basis};
    RuleAnomaly(r, out);
    RuleOtherProfiler(r, out);
    RuleLaunchBlocking(r, out);
    RulesCudnn(r, out);
    RuleOversubscribed(r, out);
  }
}

}  // namespace trainrx::analyzers
