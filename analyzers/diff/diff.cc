// DiffRuns (diff.h). The noise rule, per row (docs/diff.md, "Noise"):
//
//   Each time row has a value per steady step on each side (diff_series.h): x_1..x_n in A,
//   y_1..y_m in B. What the row adds to the change is a difference of means (means add up, so the
//   rows add up to the change in the mean step): contribution = mean(y) - f mean(x), where f is 1
//   except for op rows, taken beyond the uniform speed change of all ops (f = the time-weighted
//   median of B/A over the ops in both: a busier machine slows every op alike, and so does more
//   work per step; neither is a cause in one op). Whether that change is noise is decided by the
//   two-sided Mann-Whitney U test (analyzers/mann_whitney.h) of y against x and, for op rows, of y
//   against f x too: a row is beyond noise when both give p < 0.01 (its values moved, and moved
//   beyond the uniform change) and, unless it is structural (a name in >= 3/4 of one side's steps
//   and in none of the other's, a changed input shape), its typical change median(y) - f median(x)
//   is at least 5 % of the median step.
//   Why a rank test and not the standard error of the means: on a shared machine the scheduler
//   takes the CPU from the recorded process for whole time slices (about 4 ms here), so a few steps
//   of an op get +4 ms each (seen: aten::native_batch_norm_backward 0.2-0.6 ms in 13 steps and
//   4.3-4.7 ms in 6 of 19, in a run that changed nothing in that op); the mean moves, the standard
//   error stays small enough to call that a change, while the ranks of the other 13 steps say it
//   is not one, and neither does the median. A regression that costs every step shifts every rank.
//   Why 0.01: a diff tests every name (100 or more ops); with the floor only the few ops above 5 %
//   of the step can be called at all. Why a floor, and 5 %: the per-step spread inside one
//   recording does not see what differs between two processes of the same program (allocator
//   state, cache placement, which core; +-15 % between runs on these 2-core VMs, docs/gate.md). In
//   an A/A pair recorded here (load average 10) aten::native_batch_norm_backward ran 0.21 ms
//   (median) in one process and 0.46 ms in the other, in every step: +2.7 % of a 9.6 ms step,
//   ranks fully apart. So a change of one op smaller than 5 % of the step is not called a cause
//   unless it is structural (a new op, a changed shape: no process difference makes those).
//   The standard error of each change is still reported beside it (se_ns); with fewer than 5
//   steps on a side (4 and 4 fully separated give p = 0.029 at best) it decides instead: noise
//   when |contribution| < 3 se.
//   The uniform row is a cause only when the factor is outside that +-15 % band, significant, and
//   something explains a change of every op: the first input of an op (the batch) or a setting
//   other than the command line differs. The time in no op is judged beyond the same factor. Every op
//   slower by the same factor with nothing else different is what a busier machine looks like
//   (ab and gate check tell it from a regression with interleaved trials).
#include "trainrx/analyzers/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "config_view.h"
#include "diff_series.h"
#include "trainrx/analyzers/mann_whitney.h"
#include "trainrx/analyzers/cross_rank.h"

namespace trainrx::analyzers {
namespace {

constexpr double kAlpha = 0.01;        // Mann-Whitney p a row's change must go below
constexpr double kRowZ = 3.0;          // findings, few steps: standard errors the change must exceed
// Below this many steps on a side the rank test cannot reach kAlpha (4 and 4, fully separated:
// p = 0.029), and the standard error decides instead.
constexpr size_t kRankTestSteps = 5;
constexpr double kFloorShare = 0.05;   // of the median step: smaller non-structural changes are not causes
constexpr double kUniformBand = 0.15;  // the process-to-process band of a uniform speed change
constexpr double kStructuralShare = 0.75;  // of one side's steps a name must be in (and in none of the other's)

struct Moments {
  double mean = 0, var = 0;
  size_t n = 0, nonzero = 0;
};

Moments Of(const Series* s, size_t steps) {
  Moments m;
  m.n = steps;
  if (!s || steps == 0) return m;
  double sum = 0;
  for (double x : *s) {
    sum += x;
    m.nonzero += x != 0;
  }
  m.mean = sum / static_cast<double>(steps);
  if (steps > 1) {
    double sq = 0;
    for (double x : *s) sq += (x - m.mean) * (x - m.mean);
    m.var = sq / static_cast<double>(steps - 1);
  }
  return m;
}

double Se(const Moments& a, const Moments& b, double f = 1) {
  if (a.n < 2 || b.n < 2) return 0;
  return std::sqrt(b.var / static_cast<double>(b.n) + f * f * a.var / static_cast<double>(a.n));
}

const Series* Find(const NamedSeries& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? nullptr : &it->second;
}

double Median(Series v) {
  if (v.empty()) return 0;
  const size_t k = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  if (v.size() % 2) return v[k];
  return 0.5 * (v[k] + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k)));
}

// The judge of every row: whether its change is noise, from its per-step values (y in B, x in A
// scaled by `f`).
struct NoiseRule {
  double floor_ns = 0;
  bool with_steps = true;  // without steps (or with one) there is no per-step spread: nothing is noise
  void Judge(DiffRow& r, const Series& x, const Series& y, double f = 1) const {
    if (!with_steps) return;
    const double typical = Median(y) - f * Median(x);
    if (std::min(x.size(), y.size()) < kRankTestSteps) {  // the rank test cannot reach kAlpha: the standard error decides
      const double c = std::abs(r.contribution_ns);
      r.noise = c < kRowZ * r.se_ns || (!r.structural && std::abs(typical) < floor_ns);
      return;
    }
    double p = MannWhitneyP(x, y);
    if (f != 1) {
      Series fx = x;
      for (double& v : fx) v *= f;
      p = std::max(p, MannWhitneyP(fx, y));
    }
    r.noise = !(p < kAlpha) || (!r.structural && std::abs(typical) < floor_ns);
  }
  // Rows without per-step values (findings): against the step's standard error.
  void JudgeBySe(DiffRow& r) const {
    if (!with_steps) return;
    const double c = std::abs(r.contribution_ns);
    r.noise = c < kRowZ * r.se_ns || c < floor_ns;
  }
};

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

Series PhaseSeries(const StepModel& m, int64_t StepRow::*field) {
  Series s;
  for (const auto& r : m.steps) s.push_back(static_cast<double>(r.*field));
  if (s.empty()) s.push_back(0);
  return s;
}

// The time-weighted median of b/a over the names in both (weights a), and those names' summed
// per-step series on each side; 1 when fewer than 3 names are in both.
double UniformFactor(const SideSeries& sa, const SideSeries& sb, Series* a_sum, Series* b_sum) {
  std::vector<std::pair<double, double>> ratios;  // (ratio, weight)
  a_sum->assign(sa.steps, 0.0);
  b_sum->assign(sb.steps, 0.0);
  for (const auto& [name, xa] : sa.op_self) {
    const Series* xb = Find(sb.op_self, name);
    if (!xb) continue;
    const double ma = Of(&xa, sa.steps).mean, mb = Of(xb, sb.steps).mean;
    if (ma <= 0 || mb <= 0) continue;
    ratios.push_back({mb / ma, ma});
    for (size_t i = 0; i < sa.steps; ++i) (*a_sum)[i] += xa[i];
    for (size_t i = 0; i < sb.steps; ++i) (*b_sum)[i] += (*xb)[i];
  }
  if (ratios.size() < 3) return 1;
  std::sort(ratios.begin(), ratios.end());
  double total = 0;
  for (const auto& [r, w] : ratios) total += w;
  double run = 0;
  for (const auto& [r, w] : ratios) {
    run += w;
    if (run >= total / 2) return r;
  }
  return ratios.back().first;
}

// One row per name of two per-step tables: contribution beyond `factor` (1: the plain change).
std::vector<DiffRow> NameRows(const NamedSeries& a, size_t na, const NamedSeries& b, size_t nb, double factor,
                              const char* kind, const NoiseRule& rule, const NamedSeries* calls_a,
                              const NamedSeries* calls_b) {
  std::set<std::string> names;
  for (const auto& [n, v] : a) names.insert(n);
  for (const auto& [n, v] : b) names.insert(n);
  std::vector<DiffRow> out;
  for (const auto& n : names) {
    const Series *xa = Find(a, n), *xb = Find(b, n);
    const Moments ma = Of(xa, na), mb = Of(xb, nb);
    DiffRow r;
    r.name = n;
    r.kind = kind;
    r.a = ma.mean;
    r.b = mb.mean;
    if (ma.nonzero == 0 && mb.nonzero > 0) r.note = "new in B";
    if (mb.nonzero == 0 && ma.nonzero > 0) r.note = "gone from B";
    const bool in_a = ma.nonzero > 0, in_b = mb.nonzero > 0;
    r.structural = (in_a != in_b) && static_cast<double>(std::max(ma.nonzero, mb.nonzero)) >=
                                         kStructuralShare * static_cast<double>(in_a ? na : nb);
    const double f = in_a && in_b ? factor : 1;
    r.contribution_ns = mb.mean - f * ma.mean;
    r.se_ns = Se(ma, mb, f);
    if (calls_a) r.calls_a = Of(Find(*calls_a, n), na).mean;
    if (calls_b) r.calls_b = Of(Find(*calls_b, n), nb).mean;
    const Series zeros_a(na, 0.0), zeros_b(nb, 0.0);
    rule.Judge(r, xa ? *xa : zeros_a, xb ? *xb : zeros_b, f);
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const DiffRow& x, const DiffRow& y) {
    return std::abs(x.contribution_ns) > std::abs(y.contribution_ns);
  });
  return out;
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
        k.rfind("window_", 0) == 0 || k.rfind("journal_", 0) == 0 || k == "profiler_steps_from" ||
        k.rfind("cpu_peak_", 0) == 0)  // the CPU's matmul rate measured at exit: it varies run to run
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

std::string SignatureText(const InputSignature& s) {
  std::string out;
  for (size_t i = 0; i < s.dims.size(); ++i) {
    out += i ? ", " : "";
    out += DimsText(s.dims[i]);
    if (i < s.types.size() && !s.types[i].empty()) out += " " + s.types[i];
  }
  return out;
}

// What differs between two signatures, first difference first: "input 0 [16,3,16,16] -> [8,3,16,16]",
// "input 0 float -> c10::BFloat16", "inputs 3 -> 4".
std::string SignatureChange(const InputSignature& a, const InputSignature& b) {
  std::vector<std::string> parts;
  const size_t n = std::min(a.dims.size(), b.dims.size());
  for (size_t i = 0; i < n; ++i) {
    if (a.dims[i] != b.dims[i]) parts.push_back(fmt::format("input {} {} -> {}", i, DimsText(a.dims[i]), DimsText(b.dims[i])));
    const std::string ta = i < a.types.size() ? a.types[i] : "", tb = i < b.types.size() ? b.types[i] : "";
    if (ta != tb) parts.push_back(fmt::format("input {} {} -> {}", i, ta.empty() ? "-" : ta, tb.empty() ? "-" : tb));
  }
  if (a.dims.size() != b.dims.size()) parts.push_back(fmt::format("inputs {} -> {}", a.dims.size(), b.dims.size()));
  if (parts.size() > 2) {
    parts.resize(2);
    parts.push_back("...");
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// Where an op ran: B's modules, or A's for an op B does not run in a module.
std::vector<std::string> ModulesOf(const SideSeries& sa, const SideSeries& sb, const std::string& op) {
  std::vector<std::string> m = TopModules(sb, op);
  return m.empty() ? TopModules(sa, op) : m;
}

bool BySize(const DiffRow& x, const DiffRow& y) { return std::abs(x.contribution_ns) > std::abs(y.contribution_ns); }

// A row of per-step values with no uniform factor (phases, GPU time, the time in no op).
DiffRow TimeRow(const std::string& name, const char* kind, const Series& xa, const Series& xb, const NoiseRule& rule) {
  DiffRow r;
  r.name = name;
  r.kind = kind;
  const Moments m_a = Of(&xa, xa.size()), m_b = Of(&xb, xb.size());
  r.a = m_a.mean;
  r.b = m_b.mean;
  r.contribution_ns = r.delta();
  r.se_ns = Se(m_a, m_b);
  rule.Judge(r, xa, xb);
  return r;
}

// The phases (they partition a step) and, on GPU traces, kernel / memcpy / idle time per step.
void PhaseRows(const StepModel& ma, const StepModel& mb, const NoiseRule& rule, RunDiff& d) {
  const std::pair<const char*, int64_t StepRow::*> phases[] = {{"data wait", &StepRow::data_wait_ns},
                                                                {"forward", &StepRow::forward_ns},
                                                                {"backward", &StepRow::backward_ns},
                                                                {"optimizer", &StepRow::optimizer_ns},
                                                                {"other", &StepRow::other_ns}};
  for (const auto& [name, field] : phases) {
    d.phases.push_back(TimeRow(name, "phase", PhaseSeries(ma, field), PhaseSeries(mb, field), rule));
    d.phases.back().structural = false;
  }
  d.a.data_wait_ns = d.phases[0].a, d.a.forward_ns = d.phases[1].a, d.a.backward_ns = d.phases[2].a;
  d.a.optimizer_ns = d.phases[3].a, d.a.other_ns = d.phases[4].a;
  d.b.data_wait_ns = d.phases[0].b, d.b.forward_ns = d.phases[1].b, d.b.backward_ns = d.phases[2].b;
  d.b.optimizer_ns = d.phases[3].b, d.b.other_ns = d.phases[4].b;
  if (ma.has_gpu || mb.has_gpu) {
    const std::pair<const char*, int64_t StepRow::*> gpu[] = {
        {"GPU kernels", &StepRow::gpu_kernel_ns}, {"GPU memcpy/memset", &StepRow::gpu_memcpy_ns}, {"GPU idle", &StepRow::gpu_idle_ns}};
    for (const auto& [name, field] : gpu)
      d.gpu.push_back(TimeRow(name, "gpu", PhaseSeries(ma, field), PhaseSeries(mb, field), rule));
  }
}

// The critical path's classes per step, each side's mean over its ranks (RunDiff::critical_path).
void PathRows(const Report& ra, const Report& rb, RunDiff& d) {
  const auto mean = [](const std::vector<CriticalPath>& paths, int k) {
    double sum = 0;
    for (const CriticalPath& p : paths) sum += static_cast<double>(p.class_ns[k]);
    return paths.empty() ? 0.0 : sum / static_cast<double>(paths.size());
  };
  const auto& pa = ra.metrics.critical_paths;
  const auto& pb = rb.metrics.critical_paths;
  if (pa.empty() && pb.empty()) return;
  for (int k = 0; k < kPathClasses; ++k) {
    DiffRow r;
    r.name = PathClassName(static_cast<PathClass>(k));
    r.kind = "path";
    r.a = mean(pa, k);
    r.b = mean(pb, k);
    if (r.a == 0 && r.b == 0) continue;
    r.contribution_ns = r.delta();
    if (pa.empty() || pb.empty()) r.note = pa.empty() ? "A has no critical path" : "B has no critical path";
    d.critical_path.push_back(std::move(r));
  }
  std::stable_sort(d.critical_path.begin(), d.critical_path.end(),
                   [](const DiffRow& x, const DiffRow& y) { return std::abs(x.delta()) > std::abs(y.delta()); });
}

// Hardware utilization of each side (RunDiff::utilization): model GFLOP a step, achieved TFLOP/s,
// MFU %, each the mean over the side's ranks with costed ops.
void UtilizationRows(const Report& ra, const Report& rb, RunDiff& d) {
  const auto& ua = ra.metrics.utilization;
  const auto& ub = rb.metrics.utilization;
  if (ua.empty() && ub.empty()) return;
  const auto mean = [](const std::vector<Utilization>& u, double Utilization::*field, double scale) {
    double sum = 0;
    for (const auto& x : u) sum += x.*field;
    return u.empty() ? 0.0 : scale * sum / static_cast<double>(u.size());
  };
  const auto judged = [](const std::vector<Utilization>& u) {
    return u.empty() ? std::string("no shapes") : fmt::format("{} {:g} TFLOP/s", u[0].dtype, u[0].peak_tflops);
  };
  std::string note;
  if (ua.empty() || ub.empty()) note = ua.empty() ? "A recorded no shapes" : "B recorded no shapes";
  else if (judged(ua) != judged(ub)) note = fmt::format("peaks: A {}, B {}", judged(ua), judged(ub));
  const struct {
    const char* name;
    double Utilization::*field;
    double scale;
  } kRows[] = {{"model GFLOP a step", &Utilization::model_flops, 1e-9},
               {"achieved TFLOP/s", &Utilization::achieved_tflops, 1},
               {"MFU %", &Utilization::mfu, 100}};
  for (const auto& k : kRows) {
    DiffRow r;
    r.name = k.name;
    r.kind = "utilization";
    r.a = mean(ua, k.field, k.scale);
    r.b = mean(ub, k.field, k.scale);
    r.note = note;
    d.utilization.push_back(std::move(r));
  }
}

// Operators: every name beyond the uniform speed change (all of them in *ops, the top N in d.ops),
// the uniform row's figures (judged in JudgeUniform, once shapes and settings are known: its
// Mann-Whitney p in *uniform_p), the time in no op, and the GPU kernels (all in *kernels).
void OpRows(const SideSeries& sa, const SideSeries& sb, const NoiseRule& rule, size_t top_n, RunDiff& d,
            std::vector<DiffRow>* ops, std::vector<DiffRow>* kernels, double* uniform_p) {
  Series common_a, common_b;
  d.uniform_factor = UniformFactor(sa, sb, &common_a, &common_b);
  *ops = NameRows(sa.op_self, sa.steps, sb.op_self, sb.steps, d.uniform_factor, "op", rule, &sa.op_calls, &sb.op_calls);
  for (auto& r : *ops) r.modules = ModulesOf(sa, sb, r.name);
  for (const auto& r : *ops) {
    d.ops_explained_ns += r.delta();
    if (!r.noise) d.beyond_noise_ns += r.contribution_ns;
  }
  *uniform_p = 1;
  DiffRow& u = d.uniform;
  const Moments m_a = Of(&common_a, sa.steps), m_b = Of(&common_b, sb.steps);
  u.kind = "uniform";
  u.name = fmt::format("all ops x{:.2f} (uniform speed change)", d.uniform_factor);
  u.a = m_a.mean;
  u.b = d.uniform_factor * m_a.mean;
  u.contribution_ns = u.delta();
  u.se_ns = Se(m_a, m_b);
  if (rule.with_steps)
    *uniform_p = std::min(sa.steps, sb.steps) >= kRankTestSteps ? MannWhitneyP(common_a, common_b)
                 : std::abs(u.contribution_ns) >= kRowZ * u.se_ns ? 0 : 1;
  // Python runs slower on a busier machine too: judged beyond the uniform change as well.
  d.outside = TimeRow("time in no op (Python, waits, idle)", "outside", sa.outside, sb.outside, rule);
  rule.Judge(d.outside, sa.outside, sb.outside, d.uniform_factor);
  if (!d.outside.noise) d.beyond_noise_ns += d.outside.contribution_ns;
  d.ops = *ops;
  if (d.ops.size() > top_n) d.ops.resize(top_n);
  *kernels = NameRows(sa.kernels, sa.steps, sb.kernels, sb.steps, 1, "kernel", rule, nullptr, nullptr);
  d.kernels = *kernels;
  if (d.kernels.size() > top_n) d.kernels.resize(top_n);
}

// Changed input shapes and dtypes (the op's inclusive time is the row's time), largest first.
// True when the first input of an op (the activations: the batch) changed: the work per step did.
bool ShapeRows(const SideSeries& sa, const SideSeries& sb, const NoiseRule& rule, RunDiff& d) {
  bool work_changed = false;
  for (const auto& [name, sig_a] : sa.inputs) {
    const auto it = sb.inputs.find(name);
    if (it == sb.inputs.end()) continue;
    const InputSignature& sig_b = it->second;
    if (sig_a.dims == sig_b.dims && sig_a.types == sig_b.types) continue;
    const Series *xa = Find(sa.op_total, name), *xb = Find(sb.op_total, name);
    const Moments m_a = Of(xa, sa.steps), m_b = Of(xb, sb.steps);
    DiffRow r;
    r.kind = "shape";
    r.name = name + " " + SignatureChange(sig_a, sig_b);
    r.a_text = SignatureText(sig_a);
    r.b_text = SignatureText(sig_b);
    r.a = m_a.mean;
    r.b = m_b.mean;
    r.contribution_ns = r.delta();
    r.se_ns = Se(m_a, m_b);
    r.structural = true;
    r.note = "inputs changed";
    r.modules = ModulesOf(sa, sb, name);
    rule.Judge(r, xa ? *xa : Series(sa.steps, 0.0), xb ? *xb : Series(sb.steps, 0.0));
    if (!sig_a.dims.empty() && !sig_b.dims.empty() && sig_a.dims[0] != sig_b.dims[0]) work_changed = true;
    d.shapes.push_back(std::move(r));
  }
  std::stable_sort(d.shapes.begin(), d.shapes.end(), BySize);
  return work_changed;
}

// Per rank and collective (multi-rank runs, or one rank's collectives), largest change first. One
// rank on each side, of different numbers (rank 0's trace against rank 1's): compared as one
// rank, named by both.
void CollectiveRows(const SideSeries& sa, const SideSeries& sb, const NoiseRule& rule, RunDiff& d) {
  std::set<int32_t> ranks_a, ranks_b;
  for (const auto& [k, v] : sa.collectives) ranks_a.insert(k.first);
  for (const auto& [k, v] : sb.collectives) ranks_b.insert(k.first);
  const bool one_each = ranks_a.size() == 1 && ranks_b.size() == 1 && ranks_a != ranks_b;
  std::map<std::pair<int32_t, std::string>, Series> coll_b;
  for (const auto& [k, v] : sb.collectives) coll_b[{one_each ? *ranks_a.begin() : k.first, k.second}] = v;
  std::set<std::pair<int32_t, std::string>> coll_keys;
  for (const auto& [k, v] : sa.collectives) coll_keys.insert(k);
  for (const auto& [k, v] : coll_b) coll_keys.insert(k);
  for (const auto& key : coll_keys) {
    const auto ia = sa.collectives.find(key);
    const auto ib = coll_b.find(key);
    const Series empty;
    const Series& xa = ia == sa.collectives.end() ? empty : ia->second;
    const Series& xb = ib == coll_b.end() ? empty : ib->second;
    const Moments m_a = Of(&xa, xa.size()), m_b = Of(&xb, xb.size());
    DiffRow r;
    r.kind = "collective";
    r.rank = key.first;
    r.name = one_each ? fmt::format("rank {} (B: rank {}): {}", key.first, *ranks_b.begin(), key.second)
                      : fmt::format("rank {}: {}", key.first, key.second);
    r.a = m_a.mean;
    r.b = m_b.mean;
    r.contribution_ns = r.delta();
    r.se_ns = Se(m_a, m_b);
    if (xa.empty()) r.note = "new in B";
    if (xb.empty()) r.note = "gone from B";
    r.structural = xa.empty() != xb.empty();
    rule.Judge(r, xa.empty() ? Series(xb.size(), 0.0) : xa, xb.empty() ? Series(xa.size(), 0.0) : xb);
    d.collectives.push_back(std::move(r));
  }
  std::stable_sort(d.collectives.begin(), d.collectives.end(), BySize);
}

// The settings that differ (Settings of each side), by name.
void ConfigRows(const profiler::Trace& ta, const StepModel& ma, const profiler::Trace& tb, const StepModel& mb, RunDiff& d) {
  const auto settings_a = Settings(ta, ma), settings_b = Settings(tb, mb);
  std::set<std::string> keys;
  for (const auto& [k, v] : settings_a) keys.insert(k);
  for (const auto& [k, v] : settings_b) keys.insert(k);
  for (const auto& k : keys) {
    const auto ia = settings_a.find(k), ib = settings_b.find(k);
    const std::string va = ia == settings_a.end() ? "-" : ia->second, vb = ib == settings_b.end() ? "-" : ib->second;
    if (va != vb) {
      DiffRow r;
      r.name = k;
      r.a_text = va;
      r.b_text = vb;
      r.kind = "config";
      d.config.push_back(std::move(r));
    }
  }
}

// Findings: new in B, gone from B, or in both with a saving that changed beyond the step's noise.
void FindingRows(const Report& ra, const Report& rb, const NoiseRule& rule, RunDiff& d) {
  const auto ids = [](const Report& r) {
    std::map<std::string, const Finding*> m;
    for (const auto& f : r.findings) m.emplace(f.id, &f);
    return m;
  };
  const auto fa = ids(ra), fb = ids(rb);
  std::set<std::string> fids;
  for (const auto& [id, f] : fa) fids.insert(id);
  for (const auto& [id, f] : fb) fids.insert(id);
  for (const auto& id : fids) {
    const auto ia = fa.find(id), ib = fb.find(id);
    DiffRow r;
    r.kind = "finding";
    r.name = id;
    r.a = ia == fa.end() ? 0 : static_cast<double>(ia->second->estimated_saving_ns);
    r.b = ib == fb.end() ? 0 : static_cast<double>(ib->second->estimated_saving_ns);
    r.rank = (ib == fb.end() ? ia->second : ib->second)->rank;
    r.a_text = ia == fa.end() ? "" : ia->second->title;
    r.b_text = ib == fb.end() ? "" : ib->second->title;
    r.note = ia == fa.end() ? "new in B" : ib == fb.end() ? "gone from B" : "saving changed";
    r.contribution_ns = r.delta();
    r.se_ns = d.noise_ns;  // a saving is a share of the step: the step's noise
    rule.JudgeBySe(r);
    if (r.note == "saving changed" && r.noise) continue;
    d.findings.push_back(std::move(r));
  }
}

// A's predictions against B's measured change of the median step: where B lost the finding, its fix
// is taken as applied and the change as its measured saving (with several gone at once, their
// predictions are each held against the whole change: the report says so).
void PredictionRows(const Report& ra, const Report& rb, RunDiff& d) {
  if (d.a.median_step_ns <= 0 || d.b.median_step_ns <= 0) return;
  // The median step: a few slow steps (a worker's hiccup, a checkpoint) move a few-step mean far.
  const double measured = 100.0 * (1.0 - d.b.median_step_ns / d.a.median_step_ns);
  std::set<std::string> in_b;
  for (const auto& f : rb.findings) in_b.insert(f.id);
  std::set<std::string> seen;
  for (const auto& f : ra.findings) {
    if (f.predicted.method != "replay" || !seen.insert(f.id).second) continue;
    DiffPrediction p;
    p.id = f.id;
    p.predicted = f.predicted;
    p.gone_in_b = in_b.count(f.id) == 0;
    p.measured_pct = measured;
    p.inside = measured >= f.predicted.low_pct && measured <= f.predicted.high_pct;
    p.close = std::abs(measured - f.predicted.saving_pct) <= std::max(5.0, 0.25 * std::abs(measured));
    p.undecided = !p.inside && !p.close && std::abs(measured - f.predicted.saving_pct) <= 100 * kUniformBand;
    d.predictions.push_back(std::move(p));
  }
}

// The uniform row: a cause only outside the process-to-process band, significant, and with an
// input shape or a setting that differs; with the batch's shape changed it is that change.
void JudgeUniform(const NoiseRule& rule, double uniform_p, bool work_changed, RunDiff& d) {
  DiffRow& u = d.uniform;
  const bool in_band = std::abs(d.uniform_factor - 1) <= kUniformBand;
  const bool significant = uniform_p < kAlpha && !in_band;
  // The command line differs between any two variants of a script: it is not a setting that
  // changes every op's speed (threads, devices, torch's version are).
  bool setting = false;
  for (const auto& r : d.config) setting = setting || r.name != "command";
  const bool explained = work_changed || setting;
  u.noise = !rule.with_steps || !significant || !explained;
  if (rule.with_steps && std::abs(d.uniform_factor - 1) > 0.02 && u.noise)
    d.notes.push_back(fmt::format("all ops ran x{:.2f} as long in B: {}; a machine speed change, not a cause in one op "
                                  "(each op row is judged beyond it)",
                                  d.uniform_factor,
                                  in_band ? fmt::format("within the process-to-process variation of +-{:.0f} %", 100 * kUniformBand)
                                  : !significant ? "not significant against the per-step spread"
                                                 : "neither the batch's shape nor a setting (other than the command line) differs to explain it"));
  if (!u.noise && work_changed) {
    u.kind = "shape";
    u.name = fmt::format("all ops x{:.2f}: the work per step changed with the input shapes ({})", d.uniform_factor,
                         d.shapes.front().name);
  } else if (!u.noise) {
    // At most three, values only when short (the configuration table has them all).
    std::string changed;
    int listed = 0, more = 0;
    for (const auto& r : d.config) {
      if (r.name == "command") continue;
      if (listed == 3) {
        ++more;
        continue;
      }
      changed += (listed++ ? ", " : "") + r.name;
      if (r.a_text.size() <= 24 && r.b_text.size() <= 24) changed += fmt::format(" {} -> {}", r.a_text, r.b_text);
    }
    if (more) changed += fmt::format(" and {} more", more);
    u.name = fmt::format("all ops x{:.2f}, with the settings that changed: {}", d.uniform_factor, changed);
  }
  if (!u.noise) d.beyond_noise_ns += u.contribution_ns;
}

// The causes, in three tiers, each by |contribution|: (1) what changed in the program, beyond
// noise: a name new or gone, an input shape, a finding, every op scaled with a shape or setting
// that explains it; (2) changes of the program whose time is within noise (a conv that gained a
// bias costs microseconds on a CPU, and is still what changed); (3) other rows beyond noise: an
// op that got slower with the same inputs is a symptom, whose cause is above or in the machine
// (on this loaded 2-core machine a halved batch measured slower than the full one, 6.1 -> 8.1 ms
// median step, while every changed input shape said why the ops moved). The time in no op is
// not ranked: it names nothing (on a busy machine it is mostly waiting for a CPU), and the
// findings name what it holds (a loader in Python: input.dataloader_bound).
void RankCauses(const std::vector<DiffRow>& ops, const std::vector<DiffRow>& kernels, size_t top_n, RunDiff& d) {
  std::vector<DiffRow> program, quiet, symptoms;
  // A finding about the machine (machine.busy: other programs held the CPUs) is no change of the
  // program: a side recorded beside a build put it above the planted change (e2e.diff, 2026-11-29).
  // It ranks with the symptoms, and a note says the machines differed.
  const auto about_machine = [](const DiffRow& r) { return r.kind == "finding" && r.name.rfind("machine.", 0) == 0; };
  const auto consider = [&](const DiffRow& r) {
    const bool changed = r.structural || (r.kind == "finding" && !about_machine(r)) || r.kind == "shape" || r.kind == "uniform";
    if (r.noise) {
      if (r.structural) quiet.push_back(r);
    } else if (changed) {  // a uniform row beyond noise has a shape or setting that explains it
      program.push_back(r);
    } else {
      symptoms.push_back(r);
    }
  };
  for (const auto& r : ops) consider(r);
  consider(d.uniform);
  for (const auto& r : kernels) consider(r);
  for (const auto& r : d.shapes) consider(r);
  for (const auto& r : d.collectives) consider(r);
  for (const auto& r : d.findings) {
    consider(r);
    if (about_machine(r) && !r.noise && r.note != "saving changed")
      d.notes.push_back(fmt::format("the machines differed: {} {} ({:+.3f} ms): every figure of the busier side is slowed by "
                                    "other programs; ranked with the symptoms, not as a change of the program",
                                    r.name, r.note, r.contribution_ns / 1e6));
  }
  if (!d.outside.noise)
    d.notes.push_back(fmt::format("the step time in no op changed by {} ms beyond noise: Python, waits, or on a busy "
                                  "machine waiting for a CPU; not ranked, it names no cause",
                                  fmt::format("{:+.3f}", d.outside.contribution_ns / 1e6)));
  std::stable_sort(program.begin(), program.end(), BySize);
  std::stable_sort(quiet.begin(), quiet.end(), BySize);
  std::stable_sort(symptoms.begin(), symptoms.end(), BySize);
  d.within_noise = program.empty() && symptoms.empty();
  d.ranked = std::move(program);
  d.ranked.insert(d.ranked.end(), quiet.begin(), quiet.end());
  d.ranked.insert(d.ranked.end(), symptoms.begin(), symptoms.end());
  if (d.ranked.size() > top_n) d.ranked.resize(top_n);
}

// A setting that changed and a finding about it that is new in B (or gone from B) are the cause of
// the ops that setting adds or removes (issue 51.3: with anomaly detection on in B, the diff ranked
// aten::ne, aten::any and aten::isnan first and the setting only in the configuration table). The
// setting's row goes first, its ops and the finding right under it; its time is theirs.
struct SettingCause {
  const char* setting;  // Settings()'s key
  const char* finding;  // the finding that setting turns on
  std::vector<std::string_view> ops;  // the ops it adds inside the steps
};
const std::vector<SettingCause>& SettingCauses() {
  static const std::vector<SettingCause> kCauses = {
      // Anomaly mode's checks on every backward output (torch/csrc/autograd/engine.cpp,
      // validate_outputs + the anomaly check: isnan().any().item(); newer versions ne(x, x)).
      {"config.anomaly_mode", "debug.anomaly_detection",
       {"aten::isnan", "aten::any", "aten::_is_any_true", "aten::ne", "aten::item", "aten::_local_scalar_dense", "aten::is_nonzero"}},
      {"config.other_profiler", "debug.profiler", {}},
      {"config.launch_blocking", "debug.launch_blocking", {}},
      {"config.cudnn_benchmark", "cudnn.benchmark_off", {}},
      {"config.cudnn_deterministic", "cudnn.deterministic_on", {}},
      {"config.deterministic_algorithms", "cudnn.deterministic_on", {}},
  };
  return kCauses;
}

void RankSettingCauses(const std::vector<DiffRow>& all_ops, size_t top_n, RunDiff& d) {
  for (const SettingCause& cause : SettingCauses()) {
    const auto setting = std::find_if(d.config.begin(), d.config.end(), [&](const DiffRow& r) { return r.name == cause.setting; });
    const auto finding = std::find_if(d.findings.begin(), d.findings.end(), [&](const DiffRow& r) {
      return r.name == cause.finding && (r.note == "new in B" || r.note == "gone from B");
    });
    if (setting == d.config.end() || finding == d.findings.end()) continue;
    DiffRow row;
    row.kind = "setting";
    row.name = fmt::format("{} {} -> {}: {} {}", setting->name, setting->a_text, setting->b_text, finding->name, finding->note);
    row.structural = true;
    for (const DiffRow& op : all_ops) {
      if (std::find(cause.ops.begin(), cause.ops.end(), op.name) == cause.ops.end()) continue;
      if (!op.structural && op.noise) continue;  // ran on both sides alike: not what the setting added
      row.a += op.a, row.b += op.b, row.contribution_ns += op.contribution_ns;
      row.se_ns = std::sqrt(row.se_ns * row.se_ns + op.se_ns * op.se_ns);
      row.explains.push_back(op.name);
    }
    if (row.explains.empty()) continue;  // it explains no op that changed: the finding row says the rest
    row.explains.push_back(finding->name);
    // First, then what it explains in the order they were ranked, then the rest.
    std::vector<DiffRow> ranked = {row}, rest;
    for (DiffRow& r : d.ranked) {
      const bool under = (r.kind == "op" || r.kind == "finding") &&
                         std::find(row.explains.begin(), row.explains.end(), r.name) != row.explains.end();
      if (under) r.note += std::string(r.note.empty() ? "" : ", ") + "from " + setting->name;
      (under ? ranked : rest).push_back(std::move(r));
    }
    // The finding itself is ranked only beyond noise (RankCauses); under its setting it always is.
    if (std::none_of(ranked.begin(), ranked.end(), [&](const DiffRow& r) { return r.kind == "finding" && r.name == finding->name; })) {
      ranked.push_back(*finding);
      ranked.back().note += ", from " + setting->name;
    }
    ranked.insert(ranked.end(), rest.begin(), rest.end());
    d.ranked = std::move(ranked);
    if (d.ranked.size() > top_n + 1) d.ranked.resize(top_n + 1);
    d.within_noise = false;  // a setting changed and the program with it
  }
}

}  // namespace

RunDiff DiffRuns(const profiler::Trace& ta, const Report& ra, const std::string& label_a, const profiler::Trace& tb,
                 const Report& rb, const std::string& label_b, size_t top_n) {
  RunDiff d;
  const StepModel &ma = ra.metrics.steps, &mb = rb.metrics.steps;
  d.a = SideOf(ma, label_a);
  d.b = SideOf(mb, label_b);
  const bool with_steps = d.a.steps > 0 && d.b.steps > 0;
  if (!with_steps)
    d.notes.push_back(fmt::format("{} has no steps: step figures cannot be compared; operator figures are totals over its "
                                  "trace, and no row is judged against noise",
                                  d.a.steps == 0 ? "A" : "B"));
  d.delta_mean_ns = d.b.mean_step_ns - d.a.mean_step_ns;
  d.delta_median_ns = d.b.median_step_ns - d.a.median_step_ns;
  d.residual_ns = d.delta_median_ns - d.delta_mean_ns;
  if (d.a.steps > 1 && d.b.steps > 1)
    d.noise_ns = std::sqrt(d.a.stddev_step_ns * d.a.stddev_step_ns / static_cast<double>(d.a.steps) +
                           d.b.stddev_step_ns * d.b.stddev_step_ns / static_cast<double>(d.b.steps));
  const SideSeries sa = BuildSideSeries(ta, ma), sb = BuildSideSeries(tb, mb);
  NoiseRule rule;
  rule.with_steps = with_steps && d.a.steps > 1 && d.b.steps > 1;
  d.judged = rule.with_steps;
  if (with_steps && !d.judged) d.notes.push_back("one step on a side: no per-step spread, no row is judged against noise");
  rule.floor_ns = kFloorShare * std::max(d.a.median_step_ns, d.b.median_step_ns);

  PhaseRows(ma, mb, rule, d);
  PathRows(ra, rb, d);
  UtilizationRows(ra, rb, d);
  std::vector<DiffRow> ops, kernels;
  double uniform_p = 1;
  OpRows(sa, sb, rule, top_n, d, &ops, &kernels, &uniform_p);
  const bool work_changed = ShapeRows(sa, sb, rule, d);
  CollectiveRows(sa, sb, rule, d);
  ConfigRows(ta, ma, tb, mb, d);
  FindingRows(ra, rb, rule, d);
  PredictionRows(ra, rb, d);
  JudgeUniform(rule, uniform_p, work_changed, d);
  RankCauses(ops, kernels, top_n, d);
  RankSettingCauses(ops, top_n, d);
  return d;
}

}  // namespace trainrx::analyzers
