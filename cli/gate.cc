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
  // Where the baseline goes is checked before any trial runs.
  if (Status st = experiments::PrepareBaselineFile(o.output); !st.ok()) return Fail(st);
  o.run.spec = Join(o.spec);
  if (o.keep_trace) o.run.keep_trace = experiments::BaselineTracePath(o.output);
  const auto launcher = TrialLauncher();
  reports::TerminalProgress progress;
  experiments::Baseline b;
  const Status recorded = experiments::RecordBaseline(o.run, *launcher, progress, &b);
  progress.Clear();
  if (!recorded.ok()) return Fail(recorded);
  if (Status st = reports::WriteOut(o.output, [&](std::ostream& out) { experiments::WriteBaseline(b, out); }); !st.ok())
    return Fail(st);
  reports::WriteBaselineSummary(b, o.output, std::cerr);
  return kExitOk;
}

int GateCheck(GateOptions o) {
  if (o.baseline.empty()) return Fail("gate check", "expected --baseline FILE");
  experiments::Baseline base;
  if (Status st = experiments::ReadBaselineFile(o.baseline, &base); !st.ok()) return Fail(st);
  experiments::GateReport report;
  if (!o.current.empty()) {
    experiments::Baseline cur;
    if (Status st = experiments::ReadBaselineFile(o.current, &cur); !st.ok()) return Fail(st);
    if (Status st = experiments::CompareBaselines(base, o.baseline, cur, o.run.rule, o.run.same_job, &report); !st.ok())
      return Fail(st);
  } else {
    if (o.spec.empty()) return Fail("gate check", "expected a SPEC after -- or --current FILE");
    o.run.spec = Join(o.spec);
    const auto launcher = TrialLauncher();
    reports::TerminalProgress progress;
    const Status checked = experiments::CheckGate(base, o.baseline, o.run, *launcher, progress, &report);
    progress.Clear();
    if (!checked.ok()) return Fail(checked);
  }
  if (Status st = reports::WriteOut(o.report, [&](std::ostream& out) { reports::WriteGate(o.format, report, out); }); !st.ok())
    return Fail(st);
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
  const auto launcher = TrialLauncher();
  reports::TerminalProgress progress;
  experiments::SelfTestReport r;
  // Other rules judged on the same samples, side by side: what a stricter gate would have said.
  const std::vector<experiments::RuleVariant> variants =
      o.compare_rules ? experiments::CompareRuleVariants(o.run.rule) : std::vector<experiments::RuleVariant>{};
  const Status tested =
      experiments::SelfTest(o.run, o.self_test_pcts, o.repeats, o.across_processes, *launcher, progress, &r, variants);
  progress.Clear();
  if (!tested.ok()) return Fail(tested);
  reports::WriteSelfTestText(r, o.run, o.repeats, o.across_processes, std::cout);
  return kExitOk;
}

}  // namespace trainrx::cli
