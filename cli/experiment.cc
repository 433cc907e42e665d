#include "experiment.h"

#include <fmt/format.h>

#include <iostream>

#include "exe_dir.h"
#include "terminal.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/html.h"

namespace trainrx::cli {

namespace {

// Runs a plan with a launcher of processes next to this trainrx and a terminal progress line,
// then renders its record as text or JSON.
template <typename Record, typename Plan>
int RunAndRender(const ExperimentOptions& o, Plan plan, void (*text)(const Record&, std::ostream&, bool),
                 void (*json)(const Record&, std::ostream&), void (*html)(const Record&, std::ostream&)) {
  const auto launcher = experiments::MakeProcessLauncher(ExeDir(), o.plan.memory_cap_bytes);
  TerminalProgress progress;
  Record record;
  std::string error;
  const bool ok = plan(*launcher, progress, &record, &error);
  progress.Clear();
  if (!ok) return Fail(error);
  const auto render = [&](std::ostream& out) {
    if (o.format == "json") json(record, out);
    else if (o.format == "html") html(record, out);
    else text(record, out, o.format == "md");
  };
  if (!WriteOut(o.output, render))
    return Fail(o.output + ": write failed");
  return kExitOk;
}

}  // namespace

int RunFix(const std::string& text, const ExperimentOptions& o) {
  experiments::Spec spec;
  std::string error;
  if (!experiments::ParseSpec(text, &spec, &error)) return Fail(error);
  std::cerr << fmt::format("trainrx: analyzing {} ...\n", spec.Label());
  return RunAndRender<experiments::FixReport>(
      o,
      [&](experiments::Launcher& l, experiments::Progress& p, experiments::FixReport* r, std::string* e) {
        return experiments::RunFix(spec, o.plan, l, p, r, e);
      },
      reports::WriteFixText, reports::WriteFixJson, reports::WriteFixHtml);
}

int RunSweep(const std::string& text, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  experiments::Spec spec;
  std::string error;
  if (!experiments::ParseSpec(text, &spec, &error)) return Fail(error);
  return RunAndRender<experiments::SweepReport>(
      o,
      [&](experiments::Launcher& l, experiments::Progress& p, experiments::SweepReport* r, std::string* e) {
        return experiments::RunSweep(spec, grids, o.plan, l, p, r, e);
      },
      reports::WriteSweepText, reports::WriteSweepJson, reports::WriteSweepHtml);
}

int RunFixCommand(const std::string& command, const ExperimentOptions& o) {
  std::cerr << fmt::format("trainrx: recording and analyzing `{}` ...\n", command);
  return RunAndRender<experiments::FixReport>(
      o,
      [&](experiments::Launcher& l, experiments::Progress& p, experiments::FixReport* r, std::string* e) {
        return experiments::RunFixCommand(command, o.plan, l, p, r, e);
      },
      reports::WriteFixText, reports::WriteFixJson, reports::WriteFixHtml);
}

int RunSweepCommand(const std::string& tmpl, const std::vector<std::string>& grids, const ExperimentOptions& o) {
  return RunAndRender<experiments::SweepReport>(
      o,
      [&](experiments::Launcher& l, experiments::Progress& p, experiments::SweepReport* r, std::string* e) {
        return experiments::RunSweepCommand(tmpl, grids, o.plan, l, p, r, e);
      },
      reports::WriteSweepText, reports::WriteSweepJson, reports::WriteSweepHtml);
}

int RunAb(const std::string& a, const std::string& b, bool commands, const ExperimentOptions& o) {
  return RunAndRender<experiments::AbReport>(
      o,
      [&](experiments::Launcher& l, experiments::Progress& p, experiments::AbReport* r, std::string* e) {
        return experiments::RunAb(a, b, commands, o.plan, l, p, r, e);
      },
      reports::WriteAbText, reports::WriteAbJson, reports::WriteAbHtml);
}

}  // namespace trainrx::cli
