// Experiments: trials are separate processes of the workload WITHOUT the probes (`--no-trace`:
// we time the program, not the program under observation), interleaved in randomized order, each
// summarized by its median step time after warm-up (the workload's own step timer, the same
// boundaries as its trainrx::step# ranges). `fix` first runs once under the probes to find what
// to fix.
#include "experiment.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "exe_dir.h"
#include "knobs.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/stats.h"

namespace trainrx::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int Fail(const std::string& msg) {
  std::cerr << "trainrx: error: " << msg << "\n";
  return 2;
}

// Progress with an ETA on a terminal; silent when stderr is not a TTY or under CI.
class Progress {
 public:
  explicit Progress(int total) : total_(total), start_(Clock::now()) {
    enabled_ = isatty(STDERR_FILENO) && std::getenv("CI") == nullptr;
  }
  ~Progress() {
    if (enabled_) std::cerr << "\r\033[K" << std::flush;
  }
  void Step(const std::string& what) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : 0;
    std::cerr << fmt::format("\r\033[K  trial {}/{} {} (ETA {:.0f}s)", done_ + 1, total_, what, eta) << std::flush;
    ++done_;
  }

 private:
  int total_, done_ = 0;
  Clock::time_point start_;
  bool enabled_;
};

// Runs argv with stdout/stderr to `log`; returns the exit code (128+N for a signal).
int Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Tail(const std::string& path) {
  std::ifstream f(path);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return all.size() > 600 ? all.substr(all.size() - 600) : all;
}

class Runner {
 public:
  Runner() {
    dir_ = fs::temp_directory_path() / fmt::format("trainrx-exp-{}", getpid());
    fs::create_directories(dir_);
  }
  ~Runner() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }

  std::vector<std::string> WorkloadArgs(const WorkloadSpec& s) const {
    std::vector<std::string> args = {ExeDir() + "/trainrx-workload", s.workload};
    if (!s.preset.empty()) args.insert(args.end(), {"--preset", s.preset});
    for (const auto& set : s.sets) args.insert(args.end(), {"--set", set});
    return args;
  }

  // One untraced trial: its median step time (ms) and samples/s.
  bool Trial(const WorkloadSpec& s, double* ms, double* sps, std::string* error) {
    const std::string result = (dir_ / "trial.result.json").string(), log = (dir_ / "trial.log").string();
    std::error_code ec;
    fs::remove(result, ec);
    auto args = WorkloadArgs(s);
    args.insert(args.end(), {"--no-trace", "--result", result});
    const int rc = Spawn(args, log);
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.load(result).get(doc) != simdjson::SUCCESS || doc["median_step_ms"].get(*ms) != simdjson::SUCCESS ||
        doc["samples_per_s"].get(*sps) != simdjson::SUCCESS) {
      *error = fmt::format("{}: no readable result in {}", s.Label(), result);
      return false;
    }
    return true;
  }

  // One untraced run alternating A and B step by step (--alt-set): every timed step, by arm.
  bool AltTrial(const WorkloadSpec& s, const std::vector<std::string>& alt_sets, std::vector<double>* a,
                std::vector<double>* b, std::string* error) {
    const std::string result = (dir_ / "alt.result.json").string(), log = (dir_ / "alt.log").string();
    std::error_code ec;
    fs::remove(result, ec);
    auto args = WorkloadArgs(s);
    // No evaluation inside timed steps here: it would land in one arm's steps only.
    args.insert(args.end(), {"--no-trace", "--result", result, "--set", "eval_every=0"});
    for (const auto& set : alt_sets) args.insert(args.end(), {"--alt-set", set});
    const int rc = Spawn(args, log);
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array steps;
    if (parser.load(result).get(doc) != simdjson::SUCCESS || doc["steps"].get(steps) != simdjson::SUCCESS) {
      *error = fmt::format("{}: no readable result in {}", s.Label(), result);
      return false;
    }
    // Each block of four steps (A B B A) is divided by its own mean: what remains is the A/B
    // difference, without the process's speed (+-15 % between processes here) or slow drift.
    std::vector<std::pair<char, double>> timed;
    for (auto step : steps) {
      double ms = 0;
      std::string_view arm;
      if (step["ms"].get(ms) != simdjson::SUCCESS || step["arm"].get(arm) != simdjson::SUCCESS) continue;
      timed.push_back({arm.empty() ? 'A' : arm[0], ms});
    }
    for (size_t blk = 0; blk + 4 <= timed.size(); blk += 4) {
      double mean = 0;
      for (size_t i = blk; i < blk + 4; ++i) mean += timed[i].second / 4;
      if (mean <= 0) continue;
      for (size_t i = blk; i < blk + 4; ++i) (timed[i].first == 'B' ? b : a)->push_back(timed[i].second / mean);
    }
    return true;
  }

  // One traced run, analyzed (what `fix` will try to fix).
  bool Analyze(const WorkloadSpec& s, analyzers::Report* report, double* seconds, std::string* error) {
    const std::string trace = (dir_ / "analysis.json").string(), log = (dir_ / "analysis.log").string();
    auto args = WorkloadArgs(s);
    args.insert(args.end(), {"-o", trace, "--result", trace + ".result.json"});
    const auto t0 = Clock::now();
    const int rc = Spawn(args, log);
    *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
      *error = fmt::format("{} exited with {}: {}", s.Label(), rc, Tail(log));
      return false;
    }
    profiler::Trace t;
    if (const auto st = profiler::ReadTraces({trace}, t); !st.ok) {
      *error = st.error;
      return false;
    }
    *report = analyzers::Analyze(t);
    return true;
  }

  // A command under `trainrx record`: median step time (ms) when its trace has >= 3 steps (the
  // first dropped as warm-up), else its wall time (s).
  bool Command(const std::string& cmd, double* value, std::string* unit, std::string* error) {
    const std::string trace = (dir_ / "cmd.json").string(), log = (dir_ / "cmd.log").string();
    const auto t0 = Clock::now();
    const int rc = Spawn({ExeDir() + "/trainrx", "record", "-o", trace, "--", "/bin/sh", "-c", cmd}, log);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
      *error = fmt::format("`{}` exited with {}: {}", cmd, rc, Tail(log));
      return false;
    }
    profiler::Trace t;
    if (fs::exists(trace) && profiler::ReadTraces({trace}, t).ok) {
      const auto steps = analyzers::BuildStepModel(t);
      if (steps.steps.size() >= 3) {
        std::vector<double> ms;
        for (size_t i = 1; i < steps.steps.size(); ++i) ms.push_back(steps.steps[i].wall_ns / 1e6);
        *value = reports::stats::Median(ms);
        *unit = "ms per step";
        return true;
      }
    }
    *value = wall;
    *unit = "s per run";
    return true;
  }

 private:
  fs::path dir_;
};

bool Emit(const ExperimentOptions& o, const std::function<void(std::ostream&)>& text,
          const std::function<void(std::ostream&)>& json) {
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!o.output.empty() && o.output != "-") {
    file.open(o.output);
    if (!file) return false;
    out = &file;
  }
  (o.format == "json" ? json : text)(*out);
  out->flush();
  return static_cast<bool>(*out);
}

std::string KnobName(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

}  // namespace

std::string WorkloadSpec::Label() const {
  std::string s = workload;
  if (!preset.empty()) s += " preset=" + preset;
  for (const auto& set : sets) s += " " + set;
  return s;
}

bool ParseSpec(const std::string& text, WorkloadSpec* spec, std::string* error) {
  std::istringstream in(text);
  std::string tok;
  *spec = {};
  workloads::Config check;
  while (in >> tok) {
    if (spec->workload.empty()) {
      spec->workload = tok;
      continue;
    }
    if (tok.rfind("preset=", 0) == 0) {
      spec->preset = tok.substr(7);
      if (!check.ApplyPreset(spec->preset, error)) return false;
      continue;
    }
    // "slowdown=5%" is resolved against the baseline by the caller; check the rest now.
    if (!(tok.size() > 1 && tok.back() == '%') && !check.Set(tok, error)) return false;
    spec->sets.push_back(tok);
  }
  bool known = false;
  for (const auto& w : workloads::Workloads()) known = known || spec->workload == w.name;
  if (!known) {
    *error = fmt::format("'{}': unknown workload '{}' (cnn or lm; see `trainrx workloads`)", text, spec->workload);
    return false;
  }
  if (!fs::exists(ExeDir() + "/trainrx-workload")) {
    *error = "trainrx-workload not found: this trainrx was built without LibTorch";
    return false;
  }
  return true;
}

int RunFix(const WorkloadSpec& spec, const ExperimentOptions& o) {
  if (o.trials < 4) return Fail("--trials must be at least 4 (with 3 per side no difference can reach p < 0.05)");
  Runner runner;
  analyzers::Report analysis;
  double seconds = 0;
  std::string error;
  std::cerr << fmt::format("trainrx: analyzing {} ...\n", spec.Label());
  if (!runner.Analyze(spec, &analysis, &seconds, &error)) return Fail(error);

  workloads::Config base;
  if (!spec.preset.empty()) base.ApplyPreset(spec.preset, &error);
  for (const auto& s : spec.sets) base.Set(s, &error);

  reports::FixReport report;
  report.workload = spec.workload;
  report.baseline_label = spec.Label();
  // Which knob fixes which finding: the finding's own knob, and the knob table's finding ids.
  std::map<std::string, reports::FixRow> by_knob;
  for (const auto& f : analysis.findings) {
    std::vector<std::string> knobs;
    if (!f.knob.empty()) knobs.push_back(KnobName(f.knob));
    for (const auto& k : workloads::Knobs())
      if (f.id == k.finding) knobs.push_back(k.name);
    bool fixable = false;
    for (const auto& name : knobs) {
      const workloads::Knob* k = workloads::FindKnob(name);
      if (!k || base.Get(name) == k->default_value) continue;
      auto& row = by_knob[name];
      row.change = fmt::format("{}={} -> {}", name, base.Get(name), k->default_value);
      if (std::find(row.findings.begin(), row.findings.end(), f.id) == row.findings.end()) row.findings.push_back(f.id);
      row.estimated_saving_pct = std::max(row.estimated_saving_pct, f.estimated_saving_pct);
      fixable = true;
      break;
    }
    if (!fixable) report.notes.push_back(fmt::format("{}: no knob of this workload is set to its bad value", f.id));
  }
  std::vector<std::pair<reports::FixRow, WorkloadSpec>> plans;
  WorkloadSpec all = spec;
  for (auto& [name, row] : by_knob) {
    WorkloadSpec fixed = spec;
    fixed.sets.push_back(name + "=" + workloads::FindKnob(name)->default_value);
    all.sets.push_back(name + "=" + workloads::FindKnob(name)->default_value);
    row.fixed.label = fixed.Label();
    plans.push_back({row, fixed});
  }
  if (!plans.empty()) {
    reports::FixRow row;
    row.change = "all fixes";
    for (const auto& [r, s] : plans) row.findings.insert(row.findings.end(), r.findings.begin(), r.findings.end());
    row.fixed.label = all.Label();
    plans.push_back({row, all});
  }
  if (plans.empty()) {
    report.notes.push_back("nothing to fix: no finding with a knob away from its default");
  }
  int trials = o.trials;
  const size_t configs = plans.size() + 1;
  if (o.budget_s > 0 && configs * trials * seconds > o.budget_s) {
    trials = std::max(4, static_cast<int>(o.budget_s / (configs * std::max(seconds, 0.1))));
    report.notes.push_back(fmt::format("--budget {:.0f}s: {} trials per configuration instead of {} (one run takes ~{:.1f}s)",
                                       o.budget_s, trials, o.trials, seconds));
  }
  report.trials = trials;
  report.baseline.label = spec.Label();
  // Rounds: each runs the baseline and every fixed configuration once, in a random order, so the
  // baseline trials are interleaved with every fix's trials (cheaper than one baseline per fix).
  std::mt19937_64 rng(o.seed);
  Progress progress(static_cast<int>(configs) * trials);
  for (int t = 0; t < trials; ++t) {
    std::vector<size_t> order(configs);
    for (size_t i = 0; i < configs; ++i) order[i] = i;  // 0 = baseline, i = plans[i-1]
    std::shuffle(order.begin(), order.end(), rng);
    std::string round;
    for (size_t i : order) {
      const WorkloadSpec& s = i == 0 ? spec : plans[i - 1].second;
      reports::Arm& arm = i == 0 ? report.baseline : plans[i - 1].first.fixed;
      progress.Step(s.Label());
      double ms = 0, sps = 0;
      if (!runner.Trial(s, &ms, &sps, &error)) return Fail(error);
      arm.trial_ms.push_back(ms);
      arm.samples_per_s.push_back(sps);
      round += i == 0 ? "A" : std::to_string(i);
    }
    report.order += (report.order.empty() ? "" : " ") + round;
  }
  reports::stats::CompareOptions co;
  co.seed = o.seed;
  for (auto& [row, s] : plans) {
    row.cmp = reports::stats::Compare(report.baseline.trial_ms, row.fixed.trial_ms, co);
    report.rows.push_back(row);
  }
  if (!Emit(o, [&](std::ostream& out) { reports::WriteFixText(report, out); },
            [&](std::ostream& out) { reports::WriteFixJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

int RunSweep(const WorkloadSpec& base, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  if (grids.empty()) return Fail("sweep needs at least one --grid knob=v1,v2,...");
  if (o.trials < 2) return Fail("--trials must be at least 2 for a sweep");
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  workloads::Config check;
  std::string error;
  for (const auto& g : grids) {
    const size_t eq = g.find('=');
    if (eq == std::string::npos) return Fail(fmt::format("--grid expects knob=v1,v2,..., got '{}'", g));
    std::vector<std::string> values;
    std::stringstream ss(g.substr(eq + 1));
    std::string v;
    while (std::getline(ss, v, ',')) {
      if (!check.Set(g.substr(0, eq) + "=" + v, &error)) return Fail(error);
      values.push_back(v);
    }
    if (values.empty()) return Fail(fmt::format("--grid {}: no values", g));
    axes.push_back({g.substr(0, eq), values});
  }
  reports::SweepReport report;
  report.workload = base.workload;
  report.trials = o.trials;
  for (const auto& a : axes) report.grid_keys.push_back(a.first);
  // Every combination (odometer order).
  std::vector<size_t> idx(axes.size(), 0);
  std::vector<WorkloadSpec> specs;
  while (true) {
    reports::SweepCell cell;
    WorkloadSpec s = base;
    for (size_t i = 0; i < axes.size(); ++i) {
      cell.knobs.push_back({axes[i].first, axes[i].second[idx[i]]});
      s.sets.push_back(axes[i].first + "=" + axes[i].second[idx[i]]);
    }
    cell.arm.label = s.Label();
    report.cells.push_back(cell);
    specs.push_back(s);
    size_t k = axes.size();
    while (k > 0 && ++idx[k - 1] == axes[k - 1].second.size()) idx[--k] = 0;
    if (k == 0) break;
  }
  Runner runner;
  std::mt19937_64 rng(o.seed);
  Progress progress(static_cast<int>(specs.size()) * o.trials);
  for (int t = 0; t < o.trials; ++t) {
    std::vector<size_t> order(specs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      progress.Step(specs[i].Label());
      double ms = 0, sps = 0;
      if (!runner.Trial(specs[i], &ms, &sps, &error)) return Fail(error);
      report.cells[i].arm.trial_ms.push_back(ms);
      report.cells[i].arm.samples_per_s.push_back(sps);
    }
  }
  for (size_t i = 0; i < report.cells.size(); ++i) {
    auto& c = report.cells[i];
    c.median_ms = reports::stats::Median(c.arm.trial_ms);
    c.ci = reports::stats::MedianCi(c.arm.trial_ms, 2000, o.seed);
    c.samples_per_s = reports::stats::Median(c.arm.samples_per_s);
    // Best = highest throughput (equal to the lowest step time when the batch is fixed; a grid
    // over batch sizes needs samples/s).
    if (c.samples_per_s > report.cells[report.best].samples_per_s) report.best = i;
  }
  if (!Emit(o, [&](std::ostream& out) { reports::WriteSweepText(report, out); },
            [&](std::ostream& out) { reports::WriteSweepJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

int RunAb(const std::string& a_text, const std::string& b_text, bool commands, const ExperimentOptions& o) {
  if (o.trials < 4) return Fail("--trials must be at least 4 (with 3 per side no difference can reach p < 0.05)");
  Runner runner;
  reports::AbReport report;
  report.trials = o.trials;
  report.order = reports::stats::PairOrder(o.trials, o.seed);
  std::string error;
  WorkloadSpec a, b;
  if (!commands) {
    if (!ParseSpec(a_text, &a, &error) || !ParseSpec(b_text, &b, &error)) return Fail(error);
    // "slowdown=5%": a share of A's median step, measured by one calibration run of A.
    for (WorkloadSpec* s : {&a, &b}) {
      for (auto& set : s->sets) {
        if (set.empty() || set.back() != '%') continue;
        if (KnobName(set) != "slowdown") return Fail(fmt::format("'{}': only slowdown accepts a percentage", set));
        double ms = 0, sps = 0;
        WorkloadSpec calib = a;
        calib.sets.erase(std::remove_if(calib.sets.begin(), calib.sets.end(), [](const std::string& x) { return !x.empty() && x.back() == '%'; }),
                         calib.sets.end());
        if (!runner.Trial(calib, &ms, &sps, &error)) return Fail(error);
        const double pct = std::strtod(set.substr(set.find('=') + 1).c_str(), nullptr);
        const std::string resolved = fmt::format("slowdown={:.0f}", ms * 1000 * pct / 100);
        report.notes.push_back(fmt::format("{} = {} us ({}% of A's calibration median {:.2f} ms)", set, resolved.substr(9), pct, ms));
        set = resolved;
      }
    }
    report.a.label = a.Label();
    report.b.label = b.Label();
  } else {
    report.a.label = a_text;
    report.b.label = b_text;
  }
  // A and B that differ only in knobs the workload can switch between steps are interleaved step
  // by step inside each process (A B B A ...): that removes the process-to-process variation
  // (+-15 % between runs on these VMs), which no number of separate trials averages away cheaply.
  if (!commands && a.workload == b.workload && a.preset == b.preset) {
    workloads::Config ca, cb;
    if (!a.preset.empty()) ca.ApplyPreset(a.preset, &error), cb.ApplyPreset(b.preset, &error);
    for (const auto& x : a.sets) ca.Set(x, &error);
    for (const auto& x : b.sets) cb.Set(x, &error);
    std::vector<std::string> alt;
    bool switchable = true;
    for (const auto& [k, v] : ca.values()) {
      if (cb.Get(k) == v) continue;
      switchable = switchable && (k == "slowdown" || k == "item_every_step" || k == "zero_grad_none" || k == "anomaly");
      alt.push_back(k + "=" + cb.Get(k));
    }
    if (switchable && !alt.empty()) {
      report.order = fmt::format("in-process: steps A B B A ... in each of {} processes", o.trials);
      report.unit = "relative step time (1 = block mean)";
      report.notes.push_back("A and B differ only in knobs that switch between steps: compared step by step inside "
                             "each process, each A B B A block normalized by its mean (unit: one step; p and CI over "
                             "steps; evaluation off)");
      Progress progress(o.trials);
      for (int t = 0; t < o.trials; ++t) {
        progress.Step(report.a.label + " / " + report.b.label);
        if (!runner.AltTrial(a, alt, &report.a.trial_ms, &report.b.trial_ms, &error)) return Fail(error);
      }
      reports::stats::CompareOptions co;
      co.seed = o.seed;
      report.cmp = reports::stats::Compare(report.a.trial_ms, report.b.trial_ms, co);
      if (!Emit(o, [&](std::ostream& out) { reports::WriteAbText(report, out); },
                [&](std::ostream& out) { reports::WriteAbJson(report, out); })) {
        return Fail(o.output + ": write failed");
      }
      return 0;
    }
  }
  Progress progress(2 * o.trials);
  for (char side : report.order) {
    reports::Arm& arm = side == 'A' ? report.a : report.b;
    progress.Step(arm.label);
    double value = 0, sps = 0;
    bool ok;
    if (commands) {
      std::string unit;
      ok = runner.Command(side == 'A' ? a_text : b_text, &value, &unit, &error);
      report.unit = unit;
    } else {
      ok = runner.Trial(side == 'A' ? a : b, &value, &sps, &error);
    }
    if (!ok) return Fail(error);
    arm.trial_ms.push_back(value);
    arm.samples_per_s.push_back(sps);
  }
  reports::stats::CompareOptions co;
  co.seed = o.seed;
  report.cmp = reports::stats::Compare(report.a.trial_ms, report.b.trial_ms, co);
  if (!Emit(o, [&](std::ostream& out) { reports::WriteAbText(report, out); },
            [&](std::ostream& out) { reports::WriteAbJson(report, out); })) {
    return Fail(o.output + ": write failed");
  }
  return 0;
}

}  // namespace trainrx::cli
