#include "gate.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "exe_dir.h"
#include "terminal.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/html.h"

namespace trainrx::cli {
namespace {

namespace fs = std::filesystem;

bool LoadBaseline(const std::string& path, experiments::Baseline* b, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = path + ": cannot open the baseline";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return experiments::ParseBaseline(ss.str(), path, b, error);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

int GateRecordBaseline(GateOptions o) {
  if (o.spec.empty()) return Fail("record-baseline needs a SPEC after -- (a workload with knobs, or --cmd COMMAND)");
  if (o.output.empty()) return Fail("record-baseline needs -o FILE");
  // Check where the baseline goes before running any trial (the README's CI recipe writes into a
  // folder a fresh checkout may not have: it is created).
  {
    std::error_code ec;
    const auto parent = fs::absolute(o.output, ec).parent_path();
    if (!parent.empty() && !fs::exists(parent, ec) && !fs::create_directories(parent, ec))
      return Fail(fmt::format("{}: cannot create the folder {}: {}", o.output, parent.string(), ec.message()));
    const bool existed = fs::exists(o.output, ec);
    const bool writable = static_cast<bool>(std::ofstream(o.output, std::ios::app));
    if (!existed) fs::remove(o.output, ec);
    if (!writable) return Fail(o.output + ": cannot open for writing");
  }
  o.run.spec = Join(o.spec);
  const auto launcher = experiments::MakeProcessLauncher(ExeDir());
  TerminalProgress progress;
  experiments::Baseline b;
  std::string error;
  const bool ok = experiments::RecordBaseline(o.run, *launcher, progress, &b, &error);
  progress.Clear();
  if (!ok) return Fail(error);
  if (!WriteOut(o.output, [&](std::ostream& out) { experiments::WriteBaseline(b, out); }))
    return Fail(o.output + ": write failed");
  const auto ci = experiments::stats::MedianCi(b.trial_ms);
  std::cerr << fmt::format("trainrx: baseline {}: {} trials, median {:.3f} {} [{:.3f}, {:.3f}]\n", o.output,
                           b.trial_ms.size(), experiments::stats::Median(b.trial_ms), b.unit, ci.low, ci.high);
  return kExitOk;
}

int GateCheck(GateOptions o) {
  if (o.baseline.empty()) return Fail("check needs --baseline FILE");
  experiments::Baseline base;
  std::string error;
  if (!LoadBaseline(o.baseline, &base, &error)) return Fail(error);
  experiments::GateReport report;
  if (!o.current.empty()) {
    experiments::Baseline cur;
    if (!LoadBaseline(o.current, &cur, &error)) return Fail(error);
    if (!experiments::CompareBaselines(base, o.baseline, cur, o.run.rule, o.run.same_job, &report, &error))
      return Fail(error);
  } else {
    if (o.spec.empty()) return Fail("check needs a SPEC after -- or --current FILE");
    o.run.spec = Join(o.spec);
    const auto launcher = experiments::MakeProcessLauncher(ExeDir());
    TerminalProgress progress;
    const bool ok = experiments::CheckGate(base, o.baseline, o.run, *launcher, progress, &report, &error);
    progress.Clear();
    if (!ok) return Fail(error);
  }
  const auto render = [&](std::ostream& out) {
    if (o.format == "md") reports::WriteGateMarkdown(report, out);
    else if (o.format == "junit") reports::WriteGateJunit(report, out);
    else if (o.format == "json") reports::WriteGateJson(report, out);
    else if (o.format == "html") reports::WriteGateHtml(report, out);
    else reports::WriteGateText(report, out);
  };
  if (!WriteOut(o.report, render)) return Fail(o.report + ": cannot write the report");
  switch (report.verdict) {
    case experiments::GateVerdict::kPass: return kExitOk;
    case experiments::GateVerdict::kFail: return kExitFail;
    case experiments::GateVerdict::kInconclusive: break;
  }
  return o.inconclusive == "pass" ? kExitOk : o.inconclusive == "fail" ? kExitFail : kExitInconclusive;
}

int GateSelfTest(GateOptions o) {
  if (o.spec.empty()) return Fail("self-test needs a workload SPEC after --, e.g. -- cnn");
  o.run.spec = Join(o.spec);
  const auto launcher = experiments::MakeProcessLauncher(ExeDir());
  TerminalProgress progress;
  experiments::SelfTestReport r;
  std::string error;
  // Other rules judged on the same samples, side by side: what a stricter gate would have said.
  std::vector<experiments::RuleVariant> variants;
  if (o.compare_rules) {
    auto with = [&](const char* name, double alpha, double margin) {
      experiments::GateRule r = o.run.rule;
      r.alpha = alpha;
      r.fail_ci_margin = margin;
      variants.push_back({name, r});
    };
    with("CI above 1 (rule before)", o.run.rule.alpha, 0);
    with("alpha 0.01", 0.01, o.run.rule.fail_ci_margin);
    with("CI above the tolerance", o.run.rule.alpha, o.run.rule.tolerance);
  }
  const bool ok = experiments::SelfTest(o.run, o.self_test_pcts, o.repeats, o.across_processes, *launcher, progress, &r,
                                        &error, variants);
  progress.Clear();
  if (!ok) return Fail(error);
  std::cout << fmt::format("trainrx gate self-test on `{}` (median step {:.2f} ms; {} decisions per case, each {}; "
                           "tolerance {:.0f}%)\n",
                           r.spec, r.median_ms, o.repeats,
                           o.across_processes ? fmt::format("{} processes per side, interleaved", o.run.trials)
                                              : fmt::format("{} processes of paired A/B blocks", o.run.trials),
                           100 * o.run.rule.tolerance);
  for (const auto& c : r.cases) {
    const auto ci = experiments::stats::WilsonInterval(c.fail, c.repeats);
    std::cout << fmt::format("  {:<13} fail {:>3}/{}  pass {:>3}/{}  inconclusive {:>3}/{}  -> {} rate {:.1f}% "
                             "[95% CI {:.1f}-{:.1f}%]\n",
                             c.name, c.fail, c.repeats, c.pass, c.repeats, c.inconclusive, c.repeats,
                             c.pct == 0 ? "false-alarm" : "detection", 100.0 * c.fail / std::max(1, c.repeats),
                             100 * ci.low, 100 * ci.high);
    for (const auto& v : c.variants) {
      const auto vi = experiments::stats::WilsonInterval(v.fail, c.repeats);
      std::cout << fmt::format("    same samples, {:<27} fail {:>3}/{}  pass {:>3}/{}  inconclusive {:>3}/{}  -> {:.1f}% "
                               "[95% CI {:.1f}-{:.1f}%]\n",
                               v.rule, v.fail, c.repeats, v.pass, c.repeats, v.inconclusive, c.repeats,
                               100.0 * v.fail / std::max(1, c.repeats), 100 * vi.low, 100 * vi.high);
    }
  }
  return kExitOk;
}

}  // namespace trainrx::cli
