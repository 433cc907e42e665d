// `trainrx gate record-baseline | check | self-test`: the CI performance regression gate.
// Decision rule and file formats: reports/gate.h. Trials: runner.h.
#include "gate.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "exe_dir.h"
#include "knobs.h"
#include "runner.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/stats.h"

namespace trainrx::cli {
namespace {

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::map<std::string, std::string> Fingerprint(const std::string& spec, bool command, const std::string& torch_version) {
  std::map<std::string, std::string> fp;
  fp["cpu_model"] = CpuModel();
  fp["cpus"] = std::to_string(sysconf(_SC_NPROCESSORS_ONLN));
  fp["torch"] = torch_version;
  fp["trainrx"] = "0.1.0";
  if (!command) {
    WorkloadSpec s;
    std::string error;
    if (ParseSpec(spec, &s, &error)) {
      workloads::Config c;
      if (!s.preset.empty()) c.ApplyPreset(s.preset, &error);
      for (const auto& x : s.sets) c.Set(x, &error);
      fp["device"] = c.Get("device");
      fp["knobs"] = c.Changed();
    }
  }
  return fp;
}

// Trials of one side: workload spec or command. Per trial: median step time (or wall s) and
// samples/s (0 for commands).
bool RunSide(Runner& runner, const std::string& spec, bool command, double* value, double* sps, std::string* unit,
             std::string* error) {
  if (command) {
    *sps = 0;
    return runner.Command(spec, value, unit, error);
  }
  WorkloadSpec s;
  if (!ParseSpec(spec, &s, error)) return false;
  *unit = "ms per step";
  return runner.Trial(s, value, sps, error);
}

bool LoadBaseline(const std::string& path, reports::Baseline* b, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = path + ": cannot open the baseline";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return reports::ParseBaseline(ss.str(), path, b, error);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

int GateRecordBaseline(const GateOptions& o) {
  if (o.spec.empty()) return Fail("record-baseline needs a SPEC after -- (a workload with knobs, or --cmd COMMAND)");
  if (o.output.empty()) return Fail("record-baseline needs -o FILE");
  if (o.trials < 4) return Fail("--trials must be at least 4");
  // Check where the baseline goes before running any trial (the README's CI recipe writes into a
  // folder a fresh checkout may not have: it is created).
  {
    std::error_code ec;
    const auto parent = std::filesystem::absolute(o.output, ec).parent_path();
    if (!parent.empty() && !std::filesystem::exists(parent, ec) && !std::filesystem::create_directories(parent, ec)) {
      return Fail(fmt::format("{}: cannot create the folder {}: {}", o.output, parent.string(), ec.message()));
    }
    const bool existed = std::filesystem::exists(o.output, ec);
    const bool writable = static_cast<bool>(std::ofstream(o.output, std::ios::app));
    if (!existed) std::filesystem::remove(o.output, ec);
    if (!writable) return Fail(o.output + ": cannot open for writing");
  }
  const std::string spec = Join(o.spec);
  Runner runner;
  reports::Baseline b;
  b.spec = spec;
  b.command = o.command;
  b.fingerprint = Fingerprint(spec, o.command, o.torch_version);
  Progress progress(o.trials);
  std::string error;
  for (int t = 0; t < o.trials; ++t) {
    progress.Step(spec);
    double v = 0, sps = 0;
    if (!RunSide(runner, spec, o.command, &v, &sps, &b.unit, &error)) return Fail(error);
    b.trial_ms.push_back(v);
    if (!o.command) b.samples_per_s.push_back(sps);
  }
  std::ofstream f(o.output);
  if (!f) return Fail(o.output + ": cannot open for writing");
  reports::WriteBaseline(b, f);
  if (!f) return Fail(o.output + ": write failed");
  const auto ci = reports::stats::MedianCi(b.trial_ms);
  std::cerr << fmt::format("trainrx: baseline {}: {} trials, median {:.3f} {} [{:.3f}, {:.3f}]\n", o.output, o.trials,
                           reports::stats::Median(b.trial_ms), b.unit, ci.low, ci.high);
  return 0;
}

int GateCheck(const GateOptions& o) {
  reports::Baseline base;
  std::string error;
  if (o.baseline.empty()) return Fail("check needs --baseline FILE");
  if (!LoadBaseline(o.baseline, &base, &error)) return Fail(error);
  if (o.trials < 4) return Fail("--trials must be at least 4");
  reports::GateReport report;
  report.baseline_file = o.baseline;
  report.rule = o.rule;

  std::vector<reports::MetricSamples> metrics(2);
  metrics[0] = {"median step time", "ms", false, {}, {}, {}};
  metrics[1] = {"throughput", "samples/s", true, {}, {}, {}};
  if (!o.current.empty()) {
    reports::Baseline cur;
    if (!LoadBaseline(o.current, &cur, &error)) return Fail(error);
    report.spec = cur.spec;
    report.mode = "stored samples vs stored samples";
    metrics[0].baseline = base.trial_ms;
    metrics[0].current = cur.trial_ms;
    metrics[1].baseline = base.samples_per_s;
    metrics[1].current = cur.samples_per_s;
    report.trials = static_cast<int>(cur.trial_ms.size());
    report.baseline_trials = static_cast<int>(base.trial_ms.size());
    for (const auto& [k, v] : base.fingerprint) {
      auto it = cur.fingerprint.find(k);
      if (it != cur.fingerprint.end() && it->second != v && k != "knobs")
        report.warnings.push_back(fmt::format("fingerprint {} differs: baseline '{}', current '{}'", k, v, it->second));
    }
  } else {
    if (o.spec.empty()) return Fail("check needs a SPEC after -- or --current FILE");
    report.spec = Join(o.spec);
    const auto fp = Fingerprint(report.spec, o.command, o.torch_version);
    bool same_machine = true;
    for (const auto& [k, v] : base.fingerprint) {
      auto it = fp.find(k);
      if (it == fp.end() || it->second == v || k == "knobs") continue;
      report.warnings.push_back(fmt::format("fingerprint {} differs: baseline '{}', here '{}'", k, v, it->second));
      if (k == "cpu_model" || k == "cpus" || k == "device") same_machine = false;
    }
    if (o.strict && !report.warnings.empty()) {
      for (const auto& w : report.warnings) std::cerr << "trainrx: error: " << w << "\n";
      std::cerr << "trainrx: error: --strict: the baseline was recorded on a different setup\n";
      return 2;
    }
    Runner runner;
    WorkloadSpec bs, cs;
    std::vector<std::string> alt;
    // Re-running the baseline spec only means something when it differs from the current one (a
    // command pointing at the main branch's build, other knobs); the same spec on the same code
    // is compared with the stored samples.
    const bool rerun = same_machine && !o.stored_only && base.spec != report.spec && base.command == o.command;
    const bool in_process = rerun && !o.command && ParseSpec(base.spec, &bs, &error) &&
                            ParseSpec(report.spec, &cs, &error) && SwitchableDifference(bs, cs, &alt) && !alt.empty();
    const double budget = o.budget_s > 0 ? o.budget_s : 1e18;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    int round = 0;
    // Rounds until a decision, or the budget (inconclusive). The first round runs `trials`.
    while (true) {
      const int n = round == 0 ? o.trials : 2;
      if (in_process) {
        report.mode = "interleaved in-process (A B B A steps; the specs differ only in switchable knobs)";
        metrics.resize(1);
        metrics[0].name = "step time";
        for (int t = 0; t < n; ++t) {
          if (!runner.AltTrial(bs, alt, &metrics[0].baseline, &metrics[0].current, &metrics[0].paired_log_ratios, &error))
            return Fail(error);
        }
      } else {
        report.mode = rerun ? "interleaved re-runs of the baseline spec (ABBA)" : "fresh trials vs stored baseline samples";
        if (!rerun && round == 0) {
          metrics[0].baseline = base.trial_ms;
          metrics[1].baseline = base.samples_per_s;
          if (base.command || o.command) metrics.resize(1);
          if (metrics[0].unit == "ms" && base.unit != "ms per step") metrics[0].unit = "s";
        }
        const std::string order = reports::stats::PairOrder(n, o.rule.seed + round);
        for (char side : order) {
          if (side == 'A' && !rerun) continue;
          double v = 0, sps = 0;
          std::string unit;
          const std::string& spec = side == 'A' ? base.spec : report.spec;
          if (!RunSide(runner, spec, side == 'A' ? base.command : o.command, &v, &sps, &unit, &error)) return Fail(error);
          (side == 'A' ? metrics[0].baseline : metrics[0].current).push_back(v);
          if (metrics.size() > 1) (side == 'A' ? metrics[1].baseline : metrics[1].current).push_back(sps);
        }
      }
      report.metrics = reports::DecideGate(metrics, o.rule);
      report.verdict = reports::Overall(report.metrics);
      report.trials = static_cast<int>(metrics[0].current.size());
      report.baseline_trials = static_cast<int>(metrics[0].baseline.size());
      ++round;
      if (report.verdict != reports::GateVerdict::kInconclusive) break;
      // Another round must fit: estimate from the time per round so far.
      if (o.budget_s <= 0 || elapsed() / round * (round + 1) > budget) {
        if (o.budget_s > 0) report.warnings.push_back(fmt::format("budget {:.0f}s reached after {} rounds", o.budget_s, round));
        break;
      }
    }
  }
  report.metrics = report.metrics.empty() ? reports::DecideGate(metrics, o.rule) : report.metrics;
  report.verdict = reports::Overall(report.metrics);

  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!o.report.empty() && o.report != "-") {
    file.open(o.report);
    if (!file) return Fail(o.report + ": cannot open for writing");
    out = &file;
  }
  if (o.format == "md") reports::WriteGateMarkdown(report, *out);
  else if (o.format == "junit") reports::WriteGateJunit(report, *out);
  else if (o.format == "json") reports::WriteGateJson(report, *out);
  else reports::WriteGateText(report, *out);
  switch (report.verdict) {
    case reports::GateVerdict::kPass: return 0;
    case reports::GateVerdict::kFail: return 1;
    case reports::GateVerdict::kInconclusive:
      return o.inconclusive == "pass" ? 0 : o.inconclusive == "fail" ? 1 : 3;
  }
  return 3;
}

int GateSelfTest(const GateOptions& o) {
  if (o.spec.empty()) return Fail("self-test needs a workload SPEC after --, e.g. -- cnn");
  const std::string spec = Join(o.spec);
  WorkloadSpec s;
  std::string error;
  if (!ParseSpec(spec, &s, &error)) return Fail(error);
  Runner runner;
  // Calibrate the injected slowdowns against the spec's own median step.
  double ms = 0, sps = 0;
  if (!runner.Trial(s, &ms, &sps, &error)) return Fail(error);
  struct Case {
    std::string name;
    double pct;
  };
  std::vector<Case> cases;
  for (double pct : o.self_test_pcts) cases.push_back({pct == 0 ? "A/A" : fmt::format("slowdown {:g}%", pct), pct});
  std::cout << fmt::format("trainrx gate self-test on `{}` (median step {:.2f} ms; {} repeats x {} processes per case; "
                           "tolerance {:.0f}%)\n",
                           spec, ms, o.repeats, o.trials, 100 * o.rule.tolerance);
  Progress progress(static_cast<int>(cases.size()) * o.repeats);
  for (const auto& c : cases) {
    int fail = 0, pass = 0, inconclusive = 0;
    for (int r = 0; r < o.repeats; ++r) {
      progress.Step(c.name);
      // B = the same spec with a slowdown knob (0 for A/A): switchable, so compared in-process.
      const std::string b = fmt::format("slowdown={:.0f}", ms * 1000 * c.pct / 100);
      reports::MetricSamples m{"step time", "ms", false, {}, {}, {}};
      for (int t = 0; t < o.trials; ++t) {
        if (!runner.AltTrial(s, {b}, &m.baseline, &m.current, &m.paired_log_ratios, &error)) return Fail(error);
      }
      reports::GateRule rule = o.rule;
      rule.seed = o.rule.seed + static_cast<uint64_t>(r);
      const auto d = reports::DecideGate({m}, rule);
      const auto v = reports::Overall(d);
      fail += v == reports::GateVerdict::kFail;
      pass += v == reports::GateVerdict::kPass;
      inconclusive += v == reports::GateVerdict::kInconclusive;
    }
    std::cout << fmt::format("  {:<13} fail {:>3}/{}  pass {:>3}/{}  inconclusive {:>3}/{}  -> {} rate {:.1f}%\n", c.name,
                             fail, o.repeats, pass, o.repeats, inconclusive, o.repeats,
                             c.pct == 0 ? "false-alarm" : "detection", 100.0 * fail / o.repeats);
  }
  return 0;
}

}  // namespace trainrx::cli
