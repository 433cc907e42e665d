// Properties every analysis must have, checked on every trace we have (issue 12: findings that
// hold on other people's traces). The traces: every file under tests/fixtures (each
// subdirectory also as one multi-file input), examples/, everything under
// TRAINRX_SHARED_DIR/external-traces, and the synthetic traces below (no steps, one step, phases
// overlapping on two threads, GPU only, HIP names on four streams, a graph capture, a crashed
// recording, an empty trace; tests/fixtures/ranks_uneven has ranks with and without steps). The invariants (docs/analyze.md, "Invariants"):
//   shares      every share is in [0, 100] %; a step's phases sum to its wall time exactly, the
//               model's phase shares to 100 %; GPU kernel / memcpy / idle time within the step;
//               the HTA breakdown's idle + compute + non-compute = 100 % of the active span
//   savings     estimated saving in [0, 100] % of the mean step, never above its bound (the
//               measured time the fix removes, named) nor the mean step; share 0 without steps
//   no steps    no finding and no rendered report says "per step" / a share of the step when the
//               rank has no steps
//   counts      a nested scalar read (aten::item in aten::item, its _local_scalar_dense) is never
//               counted twice: sync.host_device's item_calls <= the outermost reads
//   evidence    every finding carries its measured value (finite, with a unit; a % in [0, 100])
//               and evidence; a per-step evidence figure says it is a mean
//   order       a run that did not finish, or whose collector dropped records, is said before
//               any figure in text and Markdown
//   formats     the JSON report parses
//   measure     what an experiment's trial reads (Measure) is what the analysis reports: the steps,
//               the memory figures, the CPU load
// A violation names the trace, the finding and the numbers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/reports/report.h"

namespace trainrx::analyzers {
namespace {

namespace fs = std::filesystem;

struct TraceCase {
  std::string name;
  std::vector<std::string> paths;  // files or directories; empty: `json` below
  std::string json;
};
// A failing case prints its name, not its bytes.
void PrintTo(const TraceCase& c, std::ostream* os) { *os << c.name; }

// ---- Synthetic traces -------------------------------------------------------------------

std::string Ev(const char* cat, std::string_view name, int tid, double ts, double dur, const std::string& args = "",
               int pid = 1) {
  return fmt::format(R"J({{"ph":"X","cat":"{}","name":"{}","pid":{},"tid":{},"ts":{},"dur":{}{}}},)J", cat, name, pid, tid,
                     ts, dur, args.empty() ? "" : ",\"args\":{" + args + "}");
}
std::string Gpu(const char* cat, std::string_view name, int stream, double ts, double dur, int corr) {
  return Ev(cat, name, stream, ts, dur, fmt::format(R"J("device":0,"stream":{},"correlation":{})J", stream, corr), 0);
}
std::string Doc(std::string events, const std::string& top = "") {
  if (!events.empty()) events.pop_back();
  return "{" + top + "\"traceEvents\":[" + events + "]}";
}

std::vector<TraceCase> Synthetic() {
  std::vector<TraceCase> out;
  // No steps: syncs, a GPU with host waits.
  {
    std::string ev;
    for (int k = 0; k < 5; ++k) {
      ev += Ev("cpu_op", "aten::item", 1, k * 100, 10) + Ev("cpu_op", "aten::_local_scalar_dense", 1, k * 100 + 1, 8);
      ev += Ev("cuda_runtime", "cudaLaunchKernel", 1, k * 100 + 20, 5, fmt::format(R"J("correlation":{})J", k + 1));
      ev += Gpu("kernel", "gemm", 7, k * 100 + 30, 20, k + 1);
    }
    out.push_back({"synthetic/no_steps", {}, Doc(ev)});
  }
  // One step with every phase.
  {
    std::string ev = Ev("user_annotation", "ProfilerStep#1", 1, 0, 1000);
    ev += Ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 0, 100);
    ev += Ev("cpu_op", "aten::conv2d", 1, 110, 300);
    ev += Ev("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, 420, 300);
    ev += Ev("user_annotation", "Optimizer.step#SGD.step", 1, 750, 200);
    out.push_back({"synthetic/one_step", {}, Doc(ev)});
  }
  // Forward and backward overlapping on two threads (DualPipe-style), data inside the forward.
  {
    std::string ev;
    for (int i = 0; i < 3; ++i) {
      const int s = i * 1000;
      ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 1000);
      ev += Ev("user_annotation", "trainrx::forward", 1, s, 800);
      ev += Ev("user_annotation", "trainrx::data", 1, s + 100, 50);
      ev += Ev("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2, s + 200, 700);
      ev += Ev("cpu_op", "aten::item", 2, s + 300, 10);
    }
    out.push_back({"synthetic/overlapping_threads", {}, Doc(ev)});
  }
  // GPU only: kernels and copies with no CPU side, zero-length and overlapping ones.
  {
    std::string ev = Gpu("kernel", "k", 7, 0, 100, 1) + Gpu("kernel", "k", 7, 50, 0, 2) + Gpu("kernel", "k", 8, 20, 300, 3) +
                     Gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 9, 400, 10, 4);
    out.push_back({"synthetic/gpu_only", {}, Doc(ev)});
  }
  // HIP names, two steps, four streams waiting for the host at once.
  {
    std::string ev;
    int corr = 0;
    for (int i = 0; i < 2; ++i) {
      const int s = i * 400;
      ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", i), 1, s, 400);
      for (int st = 0; st < 4; ++st) {
        ev += Ev("cuda_runtime", "hipLaunchKernel", 1, s, 5, fmt::format(R"J("correlation":{})J", ++corr));
        ev += Gpu("kernel", "Cijk_gemm", 20 + st, s + 10, 100, corr);
        ev += Ev("cuda_runtime", "hipExtModuleLaunchKernel", 1, s + 150, 5, fmt::format(R"J("correlation":{})J", ++corr));
        ev += Gpu("kernel", "triton_fused", 20 + st, s + 200, 100, corr);
      }
      ev += Ev("cuda_runtime", "hipMemcpyWithStream", 1, s + 320, 60, fmt::format(R"J("correlation":{})J", ++corr));
      ev += Gpu("gpu_memcpy", "Memcpy DtoH (Device -> Host)", 20, s + 370, 5, corr);
    }
    out.push_back({"synthetic/hip_multistream", {}, Doc(ev)});
  }
  // A graph capture, then a few replays.
  {
    std::string ev = Ev("cuda_runtime", "cudaStreamBeginCapture", 1, 0, 5);
    for (int k = 0; k < 20; ++k) ev += Ev("cuda_runtime", "cudaLaunchKernel", 1, 10 + k * 100, 50);
    ev += Ev("cuda_runtime", "cudaStreamEndCapture", 1, 2100, 5);
    for (int k = 0; k < 3; ++k) {
      ev += Ev("cuda_runtime", "cudaGraphLaunch", 1, 2200 + k * 300, 10, fmt::format(R"J("correlation":{})J", k + 1));
      ev += Gpu("kernel", "gemm", 7, 2215 + k * 300, 30, k + 1);
    }
    ev += Ev("cuda_runtime", "cudaLaunchKernel", 1, 0, 2, R"J("correlation":99)J") + Gpu("kernel", "warmup", 7, 1, 1, 99);
    out.push_back({"synthetic/graph_capture", {}, Doc(ev)});
  }
  // A crashed recording of our collector.
  {
    std::string doc = Doc(Ev("user_annotation", "ProfilerStep#1", 1, 0, 1000) + Ev("cpu_op", "aten::item", 1, 10, 5));
    doc.pop_back();
    doc += R"J(,"trainrx":{"collector":"trainrx probes","incomplete":true,"end_reason":"SIGTERM"}})J";
    out.push_back({"synthetic/crashed", {}, doc});
  }
  // A recording whose collector reached its record cap 1.5 ms into a 4 ms run.
  {
    std::string ev;
    for (int k = 0; k < 3; ++k) ev += Ev("user_annotation", fmt::format("ProfilerStep#{}", k + 1), 1, k * 500, 500) + Ev("cpu_op", "aten::mm", 1, k * 500 + 10, 400);
    std::string doc = Doc(ev);
    doc.pop_back();
    doc += R"J(,"trainrx":{"collector":"trainrx probes","dropped_records":9000,"max_events":4096,"start_ns":1000,"first_dropped_ns":1501000,"duration_ns":4000000,"window_run_boundaries":8,"window_boundary":"Optimizer.step","window_steps":200,"window_opened":true}})J";
    out.push_back({"synthetic/capped", {}, doc});
  }
  out.push_back({"synthetic/empty", {}, R"J({"traceEvents":[]})J"});
  return out;
}

// ---- Every trace we have -----------------------------------------------------------------

bool IsTraceFile(const fs::path& p) {
  const std::string n = p.filename().string();
  auto ends = [&](std::string_view s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  return ends(".json") || ends(".json.gz");
}

void AddFilesUnder(const fs::path& root, const std::string& label, std::vector<TraceCase>& out) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  std::vector<fs::path> files, dirs;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory() && it->path().filename() == "grafana") {  // examples/grafana: a dashboard, not a trace
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && IsTraceFile(it->path())) files.push_back(it->path());
    if (it->is_directory()) dirs.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& f : files) out.push_back({label + "/" + fs::relative(f, root).string(), {f.string()}, ""});
  // A directory of traces is also what a user passes to `analyze DIR`.
  for (const auto& d : dirs) {
    const bool has_traces = std::any_of(files.begin(), files.end(), [&](const fs::path& f) { return f.parent_path() == d; });
    if (has_traces) out.push_back({label + "/" + fs::relative(d, root).string() + "/", {d.string()}, ""});
  }
}

std::vector<TraceCase> AllTraces() {
  const fs::path repo = fs::path(TRAINRX_SOURCE_DIR);
  std::vector<TraceCase> out = Synthetic();
  AddFilesUnder(repo / "tests" / "fixtures", "fixtures", out);
  AddFilesUnder(repo / "examples", "examples", out);
  AddFilesUnder(fs::path(TRAINRX_SHARED_DIR) / "external-traces", "shared", out);
  return out;
}

// ---- The invariants ------------------------------------------------------------------------

// Outermost scalar reads (aten::item / aten::_local_scalar_dense) per thread, by containment
// (ends included; an aten::item starting where a longer read ends is a new call): an independent
// count that sync.host_device's item_calls may never exceed.
int64_t OutermostScalarReads(const profiler::Trace& trace, int32_t rank) {
  int64_t n = 0;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].rank != rank || trace.tracks[ti].kind != profiler::TrackKind::kCpuThread) continue;
    struct Read {
      int64_t ts, end;
      bool item;
    };
    std::vector<Read> reads;
    for (const auto& e : trace.TrackEvents(ti)) {
      const auto name = trace.Name(e);
      if (e.kind == profiler::EventKind::kCpuOp && (name == "aten::item" || name == "aten::_local_scalar_dense"))
        reads.push_back({e.ts_ns, e.end_ns(), name == "aten::item"});
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      bool inside = false;
      for (size_t j = 0; j < reads.size() && !inside; ++j) {
        if (i == j) continue;
        const Read &a = reads[j], &b = reads[i];
        const bool contains = a.ts <= b.ts && b.end <= a.end && !(b.item && b.ts == a.end && a.end > a.ts);
        const bool same = a.ts == b.ts && a.end == b.end;
        inside = contains && (!same || j < i);  // of two identical reads, the first is outermost
      }
      n += inside ? 0 : 1;
    }
  }
  return n;
}

int64_t StepsOf(const StepModel& m, int32_t rank) {
  return std::count_if(m.steps.begin(), m.steps.end(), [&](const StepRow& s) { return rank < 0 || s.rank == rank; });
}
double MeanStepOf(const StepModel& m, int32_t rank) {
  double total = 0;
  int64_t n = 0;
  for (const auto& s : m.steps)
    if (rank < 0 || s.rank == rank) total += static_cast<double>(s.wall_ns), ++n;
  return n ? total / static_cast<double>(n) : 0.0;
}

constexpr std::array<const char*, 4> kPerStepWords = {"per step", "per_step", "of the step", "of steps"};

std::vector<std::string> Violations(const profiler::Trace& trace, const Report& r) {
  std::vector<std::string> v;
  auto bad = [&](std::string msg) { v.push_back(std::move(msg)); };
  const StepModel& m = r.metrics.steps;
  auto share_ok = [](double x) { return std::isfinite(x) && x >= -1e-9 && x <= 1 + 1e-9; };

  // shares: per step, exact in ns.
  for (const auto& s : m.steps) {
    const int64_t phases = s.data_wait_ns + s.forward_ns + s.backward_ns + s.optimizer_ns + s.other_ns;
    if (phases != s.wall_ns)
      bad(fmt::format("step {} rank {}: phases sum to {} ns, wall {} ns", s.name, s.rank, phases, s.wall_ns));
    for (const auto& [what, ns] : std::initializer_list<std::pair<const char*, int64_t>>{
             {"data", s.data_wait_ns}, {"forward", s.forward_ns}, {"backward", s.backward_ns}, {"optimizer", s.optimizer_ns},
             {"other", s.other_ns}, {"gpu kernel", s.gpu_kernel_ns}, {"gpu memcpy", s.gpu_memcpy_ns}, {"gpu idle", s.gpu_idle_ns},
             {"data exposed", s.data_exposed_ns}}) {
      if (ns < 0 || ns > s.wall_ns) bad(fmt::format("step {} rank {}: {} {} ns outside [0, wall {} ns]", s.name, s.rank, what, ns, s.wall_ns));
    }
    if (s.data_exposed_ns > s.data_wait_ns)
      bad(fmt::format("step {}: data with the GPU idle {} ns > data wait {} ns", s.name, s.data_exposed_ns, s.data_wait_ns));
  }
  for (const auto& [what, x] : std::initializer_list<std::pair<const char*, double>>{
           {"data_wait", m.data_wait_share}, {"data_exposed", m.data_exposed_share}, {"forward", m.forward_share},
           {"backward", m.backward_share}, {"optimizer", m.optimizer_share}, {"other", m.other_share},
           {"gpu_kernel", m.gpu_kernel_share}, {"gpu_memcpy", m.gpu_memcpy_share}, {"gpu_idle", m.gpu_idle_share}}) {
    if (!share_ok(x)) bad(fmt::format("step share {} = {} outside [0, 1]", what, x));
  }
  if (!m.steps.empty()) {
    const double sum = m.data_wait_share + m.forward_share + m.backward_share + m.optimizer_share + m.other_share;
    if (std::abs(sum - 1.0) > 1e-9) bad(fmt::format("phase shares sum to {:.12f}, not 1", sum));
  }
  for (const auto& t : r.metrics.temporal) {
    for (double p : {t.idle_pct, t.compute_pct, t.non_compute_pct})
      if (!(p >= -1e-9 && p <= 100 + 1e-9)) bad(fmt::format("rank {}: HTA breakdown share {} outside [0, 100]", t.rank, p));
    if (t.kernel_time_ns > 0 && std::abs(t.idle_pct + t.compute_pct + t.non_compute_pct - 100) > 1e-6)
      bad(fmt::format("rank {}: idle + compute + non-compute = {} %", t.rank, t.idle_pct + t.compute_pct + t.non_compute_pct));
  }
  for (const NameTable* t : {&r.metrics.op_table, &r.metrics.kernel_table, &r.metrics.module_table}) {
    const bool ops = t == &r.metrics.op_table;
    const char* what = ops ? "op" : t == &r.metrics.kernel_table ? "kernel" : "module";
    if (ops && t->steps != StepsOf(m, -1)) bad(fmt::format("op table over {} steps, the trace has {}", t->steps, StepsOf(m, -1)));
    std::vector<NameRow> rows = t->rows;
    if (t->other_names > 0) rows.push_back(t->other);
    for (const NameRow& row : rows) {
      if (!share_ok(row.share) || !share_ok(row.self_share))
        bad(fmt::format("{} table row {}: share {} / self share {} outside [0, 1]", what, row.name, row.share,
                        row.self_share));
    }
    for (const NameRow& row : t->rows)  // the op table's other row has no total
      if (row.self_ns > row.total_ns) bad(fmt::format("table row {}: self {} ns > total {} ns", row.name, row.self_ns, row.total_ns));
  }
  for (const auto& l : r.metrics.launch) {
    if (l.short_kernels > l.kernels || l.long_launches > l.kernels || l.long_delays > l.kernels)
      bad(fmt::format("rank {}: launch stats count more outliers than the {} launches", l.rank, l.kernels));
  }

  for (const Finding& f : r.findings) {
    const std::string who = fmt::format("finding {} (rank {})", f.id, f.rank);
    // evidence
    if (!std::isfinite(f.measured) || f.measured_unit.empty())
      bad(fmt::format("{}: measured {} '{}' (a finite value with a unit)", who, f.measured, f.measured_unit));
    if (!f.measured_unit.empty() && f.measured_unit[0] == '%' && !(f.measured >= 0 && f.measured <= 100))
      bad(fmt::format("{}: measured {} {} outside [0, 100]", who, f.measured, f.measured_unit));
    if (f.evidence.empty()) bad(who + ": no evidence");
    for (const auto& e : f.evidence)
      if (e.key.find("per_step") != std::string::npos && e.key.find("mean") == std::string::npos)
        bad(fmt::format("{}: evidence {} is a mean per step and does not say so", who, e.key));
    // savings
    if (!(f.estimated_saving_pct >= 0 && f.estimated_saving_pct <= 100))
      bad(fmt::format("{}: saving {} % of the step outside [0, 100]", who, f.estimated_saving_pct));
    if (f.estimated_saving_ns < 0) bad(fmt::format("{}: negative saving {} ns", who, f.estimated_saving_ns));
    if (f.estimated_saving_ns > 0 && f.saving_bound.empty())
      bad(fmt::format("{}: saving {} ns without a named bound", who, f.estimated_saving_ns));
    if (f.estimated_saving_ns > f.saving_bound_ns)
      bad(fmt::format("{}: saving {} ns > its bound {} ns ({})", who, f.estimated_saving_ns, f.saving_bound_ns, f.saving_bound));
    const int64_t steps = StepsOf(m, f.rank);
    const double mean = MeanStepOf(m, f.rank);
    if (!f.saving_bound.empty() && f.steps != steps)
      bad(fmt::format("{}: saving over {} steps, the rank has {}", who, f.steps, steps));
    if (f.steps > 0) {
      if (static_cast<double>(f.saving_bound_ns) > mean + 1)
        bad(fmt::format("{}: bound {} ns > mean step {:.0f} ns", who, f.saving_bound_ns, mean));
      const double pct = mean > 0 ? 100.0 * static_cast<double>(f.estimated_saving_ns) / mean : 0;
      if (std::abs(pct - f.estimated_saving_pct) > 100.0 / std::max(mean, 1.0) + 1e-9)
        bad(fmt::format("{}: saving {} ns is {:.4f} % of the mean step, claimed {:.4f} %", who, f.estimated_saving_ns, pct,
                        f.estimated_saving_pct));
    } else if (f.estimated_saving_pct != 0) {
      bad(fmt::format("{}: {} % of a step claimed without steps", who, f.estimated_saving_pct));
    }
    // no steps
    if (steps == 0) {
      std::string words = f.title + "\n" + f.measured_unit + "\n";
      for (const auto& e : f.evidence) {
        words += e.key + "\n";
        if (const auto* s = std::get_if<std::string>(&e.value)) words += *s + "\n";
      }
      for (const auto& x : f.examples) words += x + "\n";
      for (const char* w : kPerStepWords)
        if (words.find(w) != std::string::npos) bad(fmt::format("{}: says '{}' with no steps:\n{}", who, w, words));
    }
    // counts
    if (f.id == "sync.host_device") {
      const auto it = std::find_if(f.evidence.begin(), f.evidence.end(), [](const EvidenceItem& e) { return e.key == "item_calls"; });
      const int64_t outermost = OutermostScalarReads(trace, f.rank);
      if (it != f.evidence.end() && std::get<int64_t>(it->value) > outermost)
        bad(fmt::format("{}: {} item calls counted, {} outermost scalar reads in the trace", who, std::get<int64_t>(it->value),
                        outermost));
    }
  }

  // The rendered reports.
  const Thresholds th;
  for (int md = 0; md < 2; ++md) {
    std::ostringstream out;
    if (md) reports::WriteMarkdown(trace, r, th, {}, out);
    else reports::WriteText(trace, r, th, {}, out);
    const std::string s = out.str();
    const char* format = md ? "markdown" : "text";
    if (m.steps.empty()) {
      for (const char* w : {"per step", "of the step", "of steps"})
        if (s.find(w) != std::string::npos) bad(fmt::format("{} report says '{}' with no steps", format, w));
    }
    if (!r.metrics.unfinished.empty() && !(s.find("did not finish") < s.find("events read")))
      bad(fmt::format("{} report does not say first that the run did not finish", format));
    if (!r.metrics.losses.empty() && !(s.find("the recording is incomplete") < s.find("events read")))
      bad(fmt::format("{} report does not say first that the collector dropped records", format));
    if (!r.metrics.losses.empty() && r.findings.empty() && s.find("in the part the collector kept") == std::string::npos)
      bad(fmt::format("{} report says 'no problem' without 'in the part the collector kept'", format));
  }
  std::ostringstream json;
  reports::WriteJson(trace, r, th, {}, json);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(json.str()).get(doc)) bad("the JSON report does not parse");
  return v;
}

// Per-step savings describe the steady steps: their numerators must sum over the same steps their
// denominator counts. So a cuDNN-autotuning warm-up step (left out of the steps) or start-up work
// before the first step, however full of the same problems, changes no per-step saving. Every
// family that sums a whole-trace total and divides it by the steady steps breaks this (found on
// the H100: gpu.launch_bound, dist.comm_overlap and the config rules did).
std::string GpuStepContent(int s, int dur, int scale, int* corr) {
  std::string ev;
  ev += Ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, s, dur / 5);
  ev += Ev("cpu_op", "aten::conv2d", 1, s + dur / 5 + 10, dur / 5);
  // Launch-bound: short kernels each behind a longer launch call.
  for (int k = 0; k < 10 * scale; ++k) {
    const int t = s + dur / 5 + 20 + k * 30 / scale;
    ev += Ev("cuda_runtime", "cudaLaunchKernel", 1, t, 20 / scale + 1, fmt::format(R"J("correlation":{})J", ++*corr));
    ev += Gpu("kernel", "elementwise_kernel", 7, t + 22 / scale + 2, 3, *corr);
  }
  // Backward with anomaly mode's NaN checks.
  const int b = s + dur / 2;
  ev += Ev("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, b, dur / 5);
  for (int k = 0; k < 3 * scale; ++k) ev += Ev("cpu_op", "aten::isnan", 2, b + 5 + k * 20 / scale, 10 / scale + 1);
  // Communication not hidden behind compute, then a sync.
  ev += Ev("cuda_runtime", "ncclKernelLaunch", 2, b + dur / 5, 5, fmt::format(R"J("correlation":{})J", ++*corr));
  ev += Gpu("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, b + dur / 5 + 10, dur / 10, *corr);
  ev += Ev("cuda_runtime", "cudaStreamSynchronize", 1, b + dur / 5 + 20, dur / 10);
  ev += Ev("user_annotation", "Optimizer.step#SGD.step", 1, s + dur - dur / 8, dur / 10);
  return ev;
}

std::map<std::string, int64_t> SavingsOf(const std::string& json) {
  profiler::Trace trace;
  EXPECT_TRUE(profiler::ReadTraceBuffer(json, "warmup.json", 0, trace).ok());
  std::map<std::string, int64_t> out;
  for (const auto& f : Analyze(trace).findings) out[f.id] = f.estimated_saving_ns;
  return out;
}

TEST(SavingsInvariantTest, WarmUpAndStartUpOutsideTheStepsChangeNoPerStepSaving) {
  const int kStep = 10000;  // us
  int corr = 0;
  std::string steady;
  for (int i = 0; i < 8; ++i) {
    const int s = 1'000'000 + i * kStep;
    steady += Ev("user_annotation", fmt::format("ProfilerStep#{}", i + 1), 1, s, kStep);
    steady += GpuStepContent(s, kStep, 1, &corr);
  }
  // Both runs had GPU work before their first step (a kernel 50 us before it), so the first
  // step's leading idle is a gap after a kernel in both.
  ++corr;
  steady = Ev("cuda_runtime", "cudaLaunchKernel", 1, 1'000'000 - 60, 5, fmt::format(R"J("correlation":{})J", corr)) +
           Gpu("kernel", "elementwise_kernel", 7, 1'000'000 - 52, 2, corr) + steady;
  const auto plain = SavingsOf(Doc(steady));
  ASSERT_GE(plain.size(), 4u) << "the steady steps must show the problems for this test to mean anything";
  // The same run with a 10x warm-up step (its own problems ten times over) and start-up work
  // before any step: model init kernels, a long sync, collectives.
  std::string warm = Ev("user_annotation", "ProfilerStep#0", 1, 1'000'000 - 10 * kStep, 10 * kStep);
  warm += GpuStepContent(1'000'000 - 10 * kStep, 10 * kStep, 10, &corr);
  std::string startup = GpuStepContent(100'000, 20 * kStep, 20, &corr);
  const auto with_warmup = SavingsOf(Doc(warm + startup + steady));
  for (const auto& [id, saving] : plain) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(with_warmup.count(id)) << "the finding disappeared with a warm-up step";
    // 5 %: the one edge that may move is the first steady step's leading GPU idle (2 of 80 ms here),
    // which counts as host wait only after earlier GPU work in the analysis window. A whole-trace
    // total divided by the steady steps moves a saving by 10x here.
    EXPECT_NEAR(static_cast<double>(with_warmup.at(id)), static_cast<double>(saving), 0.05 * static_cast<double>(saving) + 1000.0)
        << "its per-step saving counts time outside the steady steps";
  }
  for (const auto& [id, saving] : with_warmup)
    EXPECT_TRUE(plain.count(id)) << id << " appears only because of the warm-up step";
}

// measure: what a trial reads (Measure: the steps' boundaries, memory figures, CPU load) is what
// the whole analysis reports of the same trace.
std::vector<std::string> MeasureDisagreements(const profiler::Trace& trace, const Report& r) {
  std::vector<std::string> out;
  const Measurement m = Measure(trace);
  const StepModel& full = r.metrics.steps;
  if (m.steps.steps.size() != full.steps.size() || m.steps.warmup_steps.size() != full.warmup_steps.size())
    out.push_back(fmt::format("measure: {} steps ({} warm-up), the analysis {} ({})", m.steps.steps.size(),
                              m.steps.warmup_steps.size(), full.steps.size(), full.warmup_steps.size()));
  for (size_t i = 0; i < std::min(m.steps.steps.size(), full.steps.size()); ++i) {
    const StepRow &a = m.steps.steps[i], &b = full.steps[i];
    if (a.rank != b.rank || a.start_ns != b.start_ns || a.wall_ns != b.wall_ns) {
      out.push_back(fmt::format("measure: step {} rank {} {} + {} ns, the analysis rank {} {} + {} ns", i, a.rank, a.start_ns,
                                a.wall_ns, b.rank, b.start_ns, b.wall_ns));
      break;
    }
  }
  if (m.steps.median_wall_ns != full.median_wall_ns)
    out.push_back(fmt::format("measure: median step {} ns, the analysis {} ns", m.steps.median_wall_ns, full.median_wall_ns));
  if (m.memory.size() != r.metrics.memory.size())
    out.push_back(fmt::format("measure: {} memory series, the analysis {}", m.memory.size(), r.metrics.memory.size()));
  for (const DeviceMemory& a : m.memory)
    for (const DeviceMemory& b : r.metrics.memory)
      if (a.rank == b.rank && a.device == b.device &&
          (a.peak_allocated != b.peak_allocated || a.growth_per_step != b.growth_per_step || a.growth_steps != b.growth_steps))
        out.push_back(fmt::format("measure: rank {} {} peak {} growth {}/step over {}, the analysis {} {} over {}", a.rank,
                                  a.device, a.peak_allocated, a.growth_per_step, a.growth_steps, b.peak_allocated,
                                  b.growth_per_step, b.growth_steps));
  if (m.cpu_load.size() != r.metrics.cpu_load.size())
    out.push_back(fmt::format("measure: {} ranks' CPU load, the analysis {}", m.cpu_load.size(), r.metrics.cpu_load.size()));
  for (size_t i = 0; i < std::min(m.cpu_load.size(), r.metrics.cpu_load.size()); ++i)
    if (m.cpu_load[i].rank != r.metrics.cpu_load[i].rank || m.cpu_load[i].load.WaitShare() != r.metrics.cpu_load[i].load.WaitShare())
      out.push_back(fmt::format("measure: rank {}'s CPU wait {}, the analysis {}", m.cpu_load[i].rank, m.cpu_load[i].load.WaitShare(),
                                r.metrics.cpu_load[i].load.WaitShare()));
  return out;
}

class InvariantsTest : public ::testing::TestWithParam<TraceCase> {};

TEST_P(InvariantsTest, HoldOnTrace) {
  const TraceCase& c = GetParam();
  profiler::Trace trace;
  const auto st = c.paths.empty() ? profiler::ReadTraceBuffer(c.json, c.name, 0, trace) : profiler::ReadTraces(c.paths, trace);
  ASSERT_TRUE(st.ok()) << c.name << ": " << st.message();
  const Report r = Analyze(trace);
  for (const std::string& violation : Violations(trace, r)) ADD_FAILURE() << c.name << ": " << violation;
  for (const std::string& violation : MeasureDisagreements(trace, r)) ADD_FAILURE() << c.name << ": " << violation;
}

// The checker itself: an analysis that breaks each invariant is caught (so a silent checker is
// not mistaken for a clean analysis).
TEST(InvariantsCheckerTest, CatchesEachKindOfViolation) {
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraceBuffer(R"J({"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":0,"dur":10}]})J", "t", 0, trace).ok());
  Report r = Analyze(trace);
  ASSERT_TRUE(Violations(trace, r).empty());
  Finding f;
  f.id = "fake";
  f.title = "3 syncs per step";
  f.measured = 150;
  f.measured_unit = "% of step";
  f.estimated_saving_pct = 120;
  f.estimated_saving_ns = 5000;
  f.saving_bound_ns = 1000;
  f.saving_bound = "something";
  f.evidence = {{"x_per_step_ns", int64_t{1}}};
  r.findings.push_back(f);
  const auto v = Violations(trace, r);
  std::string all;
  for (const auto& s : v) all += s + "\n";
  for (const char* expect : {"outside [0, 100]", "> its bound", "does not say so", "without steps", "says 'per step'"})
    EXPECT_NE(all.find(expect), std::string::npos) << expect << " not reported in:\n" << all;
}

INSTANTIATE_TEST_SUITE_P(AllTraces, InvariantsTest, ::testing::ValuesIn(AllTraces()), [](const auto& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return fmt::format("{}_{}", info.index, n);
});

}  // namespace
}  // namespace trainrx::analyzers
