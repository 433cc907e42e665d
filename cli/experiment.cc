#include "experiment.h"

#include <fmt/format.h>

#include <iostream>

#include "exe_dir.h"
#include "terminal.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/output.h"

namespace trainrx::cli {

namespace {

// Runs a plan with a launcher of processes next to this trainrx and a terminal progress line,
// then renders its record in the chosen format.
template <typename Record, typename Plan>
int RunAndRender(const ExperimentOptions& o, Plan plan, void (*write)(const std::string&, const Record&, std::ostream&)) {
  const auto launcher = TrialLauncher(experiments::LauncherOptionsOf(o.plan));
  reports::TerminalProgress progress;
  Record record;
  const Status status = plan(*launcher, progress, &record);
  progress.Clear();
  if (!status.ok()) return Fail(status);
  if (Status st = reports::WriteOut(o.output, [&](std::ostream& out) { write(o.format, record, out); }); !st.ok())
    return Fail(st);
  return kExitOk;
}

using experiments::Launcher;
using experiments::Progress;

}  // namespace

int RunFix(const std::string& text, const ExperimentOptions& o) {
  experiments::Spec spec;
  if (Status st = experiments::ParseSpec(text, &spec); !st.ok()) return Fail(st);
  std::cerr << fmt::format("trainrx: analyzing {} ...\n", spec.Label());
  return RunAndRender<experiments::FixReport>(
      o,
      [&](Launcher& l, Progress& p, experiments::FixReport* r) {
        return experiments::RunFix(spec, o.plan, l, p, r);
      },
      reports::WriteFix);
}

int RunSweep(const std::string& text, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  experiments::Spec spec;
  if (Status st = experiments::ParseSpec(text, &spec); !st.ok()) return Fail(st);
  return RunAndRender<experiments::SweepReport>(
      o,
      [&](Launcher& l, Progress& p, experiments::SweepReport* r) {
        return experiments::RunSweep(spec, grids, o.plan, l, p, r);
      },
      reports::WriteSweep);
}

int RunFixCommand(const std::string& command, const ExperimentOptions& o) {
  std::cerr << fmt::format("trainrx: recording and analyzing `{}` ...\n", command);
  return RunAndRender<experiments::FixReport>(
      o,
      [&](Launcher& l, Progress& p, experiments::FixReport* r) {
        return experiments::RunFixCommand(command, o.plan, l, p, r);
      },
      reports::WriteFix);
}

int RunSweepCommand(const std::string& tmpl, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  return RunAndRender<experiments::SweepReport>(
      o,
      [&](Launcher& l, Progress& p, experiments::SweepReport* r) {
        return experiments::RunSweepCommand(tmpl, grids, o.plan, l, p, r);
      },
      reports::WriteSweep);
}

int RunAb(const std::string& a, const std::string& b, bool commands, const ExperimentOptions& o) {
  return RunAndRender<experiments::AbReport>(
      o,
      [&](Launcher& l, Progress& p, experiments::AbReport* r) {
        return experiments::RunAb(a, b, commands, o.plan, l, p, r);
      },
      reports::WriteAb);
}

}  // namespace trainrx::cli
