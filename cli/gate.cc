#include "gate.h"

#include <iostream>

#include "exe_dir.h"
#include "terminal.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/output.h"

namespace trainrx::cli {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

int GateRecordBaseline(GateOptions o) {
  if (o.spec.empty()) return Fail("gate record-baseline", "expected a SPEC after -- (a workload with knobs, or --cmd COMMAND)");
  if (o.output.empty()) return Fail("gate record-baseline", "expected -o FILE");
  std::string error;
  // Where the baseline goes is checked before any trial runs.
  if (!experiments::PrepareBaselineFile(o.output, &error)) return Fail(error);
  o.run.spec = Join(o.spec);
  if (o.keep_trace) o.run.keep_trace = experiments::BaselineTracePath(o.output);
  const auto launcher = experiments::MakeProcessLauncher(ExeDir());
  reports::TerminalProgress progress;
  experiments::Baseline b;
  const bool ok = experiments::RecordBaseline(o.run, *launcher, progress, &b, &error);
  progress.Clear();
  if (!ok) return Fail(error);
  if (Status st = reports::WriteOut(o.output, [&](std::ostream& out) { experiments::WriteBaseline(b, out); }); !st.ok())
    return Fail(st);
  reports::WriteBaselineSummary(b, o.output, std::cerr);
  return kExitOk;
}

int GateCheck(GateOptions o) {
  if (o.baseline.empty()) return Fail("gate check", "expected --baseline FILE");
  experiments::Baseline base;
  std::string error;
  if (!experiments::ReadBaselineFile(o.baseline, &base, &error)) return Fail(error);
  experiments::GateReport report;
  if (!o.current.empty()) {
    experiments::Baseline cur;
    if (!experiments::ReadBaselineFile(o.current, &cur, &error)) return Fail(error);
    if (!experiments::CompareBaselines(base, o.baseline, cur, o.run.rule, o.run.same_job, &report, &error))
      return Fail(error);
  } else {
    if (o.spec.empty()) return Fail("gate check", "expected a SPEC after -- or --current FILE");
    o.run.spec = Join(o.spec);
    const auto launcher = experiments::MakeProcessLauncher(ExeDir());
    reports::TerminalProgress progress;
    const bool ok = experiments::CheckGate(base, o.baseline, o.run, *launcher, progress, &report, &error);
    progress.Clear();
    if (!ok) return Fail(error);
  }
  if (!reports::WriteOut(o.report, [&](std::ostream& out) { reports::WriteGate(o.format, report, out); }).ok())
    return Fail(o.report, "cannot write the report");
  switch (report.verdict) {
    case experiments::GateVerdict::kPass: return kExitOk;
    case experiments::GateVerdict::kFail: return kExitFail;
    case experiments::GateVerdict::kInconclusive: break;
  }
  return o.inconclusive == "pass" ? kExitOk : o.inconclusive == "fail" ? kExitFail : kExitInconclusive;
}

int GateSelfTest(GateOptions o) {
  if (o.spec.empty()) return Fail("gate self-test", "expected a workload SPEC after --, e.g. -- cnn");
  o.run.spec = Join(o.spec);
  const auto launcher = experiments::MakeProcessLauncher(ExeDir());
  reports::TerminalProgress progress;
  experiments::SelfTestReport r;
  std::string error;
  // Other rules judged on the same samples, side by side: what a stricter gate would have said.
  const std::vector<experiments::RuleVariant> variants =
      o.compare_rules ? experiments::CompareRuleVariants(o.run.rule) : std::vector<experiments::RuleVariant>{};
  const bool ok = experiments::SelfTest(o.run, o.self_test_pcts, o.repeats, o.across_processes, *launcher, progress, &r,
                                        &error, variants);
  progress.Clear();
  if (!ok) return Fail(error);
  reports::WriteSelfTestText(r, o.run, o.repeats, o.across_processes, std::cout);
  return kExitOk;
}

}  // namespace trainrx::cli
