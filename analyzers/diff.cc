#include "trainrx/analyzers/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "config_view.h"
#include "trainrx/analyzers/cross_rank.h"

namespace trainrx::analyzers {
namespace {

DiffSide SideOf(const StepModel& m, const std::string& label) {
  DiffSide s;
  s.label = label;
  std::vector<double> w;
  for (const auto& r : m.steps) w.push_back(static_cast<double>(r.wall_ns));
  s.steps = static_cast<int64_t>(w.size());
  if (w.empty()) return s;
  std::sort(w.begin(), w.end());
  const auto q = [&](double p) { return w[static_cast<size_t>(std::lround(p * static_cast<double>(w.size() - 1)))]; };
  s.median_step_ns = q(0.5), s.p10_step_ns = q(0.1), s.p90_step_ns = q(0.9);
  double sum = 0, sq = 0;
  for (double x : w) sum += x;
  s.mean_step_ns = sum / static_cast<double>(w.size());
  for (double x : w) sq += (x - s.mean_step_ns) * (x - s.mean_step_ns);
  s.stddev_step_ns = w.size() > 1 ? std::sqrt(sq / static_cast<double>(w.size() - 1)) : 0;
  return s;
}

// Mean per step of one phase field over the steps (all ranks).
double MeanOf(const StepModel& m, int64_t StepRow::*field) {
  if (m.steps.empty()) return 0;
  double sum = 0;
  for (const auto& r : m.steps) sum += static_cast<double>(r.*field);
  return sum / static_cast<double>(m.steps.size());
}

// name -> per-step value of a name table (self time for ops, total for kernels).
std::map<std::string, double> PerStep(const NameTable& t, bool self) {
  std::map<std::string, double> out;
  const double steps = t.steps > 0 ? static_cast<double>(t.steps) : 1.0;
  for (const auto& r : t.rows) out[r.name] = static_cast<double>(self ? r.self_ns : r.total_ns) / steps;
  return out;
}

void NameRows(const std::map<std::string, double>& a, const std::map<std::string, double>& b, size_t top_n,
              std::vector<DiffRow>* rows, double* explained) {
  std::set<std::string> names;
  for (const auto& [n, v] : a) names.insert(n);
  for (const auto& [n, v] : b) names.insert(n);
  std::vector<DiffRow> all;
  for (const auto& n : names) {
    DiffRow r;
    r.name = n;
    const auto ia = a.find(n), ib = b.find(n);
    r.a = ia == a.end() ? 0 : ia->second;
    r.b = ib == b.end() ? 0 : ib->second;
    if (ia == a.end()) r.note = "new in B";
    if (ib == b.end()) r.note = "gone from B";
    if (explained) *explained += r.delta();
    all.push_back(std::move(r));
  }
  std::stable_sort(all.begin(), all.end(), [](const DiffRow& x, const DiffRow& y) { return std::abs(x.delta()) > std::abs(y.delta()); });
  if (all.size() > top_n) all.resize(top_n);
  *rows = std::move(all);
}

// What a run was set to: the collector's block (rank 0), the config counters' values at the first
// step, devices, world size and the model's input shape.
std::map<std::string, std::string> Settings(const profiler::Trace& t, const StepModel& steps) {
  std::map<std::string, std::string> out;
  if (t.ranks.empty()) return out;
  const profiler::RankInfo& info = t.ranks.front();
  for (const auto& [k, v] : info.config) {
    if (k == "duration_ns" || k == "end_reason" || k == "pid" || k == "ppid" || k == "start_ns" || k == "hostname" ||
        k == "root_process" || k == "child_trace" ||  // a shell between (VAR=x cmd) makes the program a child
        k.rfind("window_", 0) == 0 || k.rfind("journal_", 0) == 0 || k == "profiler_steps_from")
      continue;  // about the recording, not the run's setup
    const std::string& json = v.json();
    out[k] = json.size() > 120 ? json.substr(0, 117) + "..." : json;
  }
  const ConfigView view(t, info.rank);
  const int64_t first = steps.steps.empty() ? 0 : steps.steps.front().start_ns;
  for (const char* key : {"anomaly_mode", "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms",
                          "intra_op_threads", "interop_threads", "autocast", "other_profiler", "launch_blocking"}) {
    if (const auto v = view.At(key, first)) {
      out.erase(key);  // the block's copy of the same setting
      out[std::string("config.") + key] = fmt::format("{:g}", *v);
    }
  }
  std::string devices;
  for (const auto& d : info.devices) devices += (devices.empty() ? "" : ", ") + d.name;
  if (!devices.empty()) out["devices"] = devices;
  out["ranks"] = std::to_string(t.ranks.size());
  if (!steps.steps.empty()) {
    const RankSide side = BuildRankSide(t, &steps, info.rank);
    if (!side.input_shape.empty()) out["model input"] = side.input_shape;
  }
  return out;
}

}  // namespace

RunDiff DiffRuns(const profiler::Trace& ta, const Report& ra, const std::string& label_a, const profiler::Trace& tb,
                 const Report& rb, const std::string& label_b, size_t top_n) {
  RunDiff d;
  const StepModel &ma = ra.metrics.steps, &mb = rb.metrics.steps;
  d.a = SideOf(ma, label_a);
  d.b = SideOf(mb, label_b);
  if (d.a.steps == 0 || d.b.steps == 0)
    d.notes.push_back(fmt::format("{} has no steps: step figures cannot be compared; operator figures are totals over its "
                                  "trace",
                                  d.a.steps == 0 ? "A" : "B"));
  d.delta_mean_ns = d.b.mean_step_ns - d.a.mean_step_ns;
  d.delta_median_ns = d.b.median_step_ns - d.a.median_step_ns;
  if (d.a.steps > 1 && d.b.steps > 1)
    d.noise_ns = std::sqrt(d.a.stddev_step_ns * d.a.stddev_step_ns / static_cast<double>(d.a.steps) +
                           d.b.stddev_step_ns * d.b.stddev_step_ns / static_cast<double>(d.b.steps));
  const std::pair<const char*, int64_t StepRow::*> phases[] = {{"data wait", &StepRow::data_wait_ns},
                                                                {"forward", &StepRow::forward_ns},
                                                                {"backward", &StepRow::backward_ns},
                                                                {"optimizer", &StepRow::optimizer_ns},
                                                                {"other", &StepRow::other_ns}};
  for (const auto& [name, field] : phases) d.phases.push_back({name, MeanOf(ma, field), MeanOf(mb, field), "", "", ""});
  if (ma.has_gpu || mb.has_gpu) {
    const std::pair<const char*, int64_t StepRow::*> gpu[] = {
        {"GPU kernels", &StepRow::gpu_kernel_ns}, {"GPU memcpy/memset", &StepRow::gpu_memcpy_ns}, {"GPU idle", &StepRow::gpu_idle_ns}};
    for (const auto& [name, field] : gpu) d.gpu.push_back({name, MeanOf(ma, field), MeanOf(mb, field), "", "", ""});
  }
  // Every op and kernel name, not only the reports' top rows.
  constexpr int64_t kAll = 1 << 30;
  NameRows(PerStep(BuildOpTable(ta, ma, kAll), true), PerStep(BuildOpTable(tb, mb, kAll), true), top_n, &d.ops,
           &d.ops_explained_ns);
  double kernels_explained = 0;
  NameRows(PerStep(BuildKernelTable(ta, ma, kAll), false), PerStep(BuildKernelTable(tb, mb, kAll), false), top_n,
           &d.kernels, &kernels_explained);
  const auto sa = Settings(ta, ma), sb = Settings(tb, mb);
  std::set<std::string> keys;
  for (const auto& [k, v] : sa) keys.insert(k);
  for (const auto& [k, v] : sb) keys.insert(k);
  for (const auto& k : keys) {
    const auto ia = sa.find(k), ib = sb.find(k);
    const std::string va = ia == sa.end() ? "-" : ia->second, vb = ib == sb.end() ? "-" : ib->second;
    if (va != vb) d.config.push_back({k, 0, 0, va, vb, ""});
  }
  const auto ids = [](const Report& r) {
    std::map<std::string, const Finding*> m;
    for (const auto& f : r.findings) m.emplace(f.id, &f);
    return m;
  };
  const auto fa = ids(ra), fb = ids(rb);
  for (const auto& [id, f] : fb)
    if (!fa.count(id)) d.findings.push_back({id, 0, static_cast<double>(f->estimated_saving_ns), "", f->title, "new in B"});
  for (const auto& [id, f] : fa)
    if (!fb.count(id)) d.findings.push_back({id, static_cast<double>(f->estimated_saving_ns), 0, f->title, "", "gone from B"});
  return d;
}

}  // namespace trainrx::analyzers
