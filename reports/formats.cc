// The one place a --format name picks a renderer, for every report the CLI writes.
#include "trainrx/reports/diff.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/html.h"
#include "trainrx/reports/report.h"

namespace trainrx::reports {

bool IsReportFormat(const std::string& format) {
  return format == "text" || format == "json" || format == "md" || format == "html";
}

void WriteReport(const std::string& format, const profiler::Trace& trace, const analyzers::Report& report,
                 const analyzers::Thresholds& thresholds, const RenderOptions& options, std::ostream& out) {
  if (format == "json") WriteJson(trace, report, thresholds, options, out);
  else if (format == "html") WriteHtml(trace, report, thresholds, options, out);
  else if (format == "md") WriteMarkdown(trace, report, thresholds, options, out);
  else WriteText(trace, report, thresholds, options, out);
}

void WriteDiff(const std::string& format, const analyzers::RunDiff& d, std::ostream& out) {
  if (format == "json") WriteDiffJson(d, out);
  else if (format == "html") WriteDiffHtml(d, out);
  else WriteDiffText(d, out, format == "md");
}

void WriteGate(const std::string& format, const GateReport& r, std::ostream& out) {
  if (format == "md") WriteGateMarkdown(r, out);
  else if (format == "junit") WriteGateJunit(r, out);
  else if (format == "json") WriteGateJson(r, out);
  else if (format == "html") WriteGateHtml(r, out);
  else WriteGateText(r, out);
}

void WriteFix(const std::string& format, const FixReport& r, std::ostream& out) {
  if (format == "json") WriteFixJson(r, out);
  else if (format == "html") WriteFixHtml(r, out);
  else WriteFixText(r, out, format == "md");
}

void WriteSweep(const std::string& format, const SweepReport& r, std::ostream& out) {
  if (format == "json") WriteSweepJson(r, out);
  else if (format == "html") WriteSweepHtml(r, out);
  else WriteSweepText(r, out, format == "md");
}

void WriteAb(const std::string& format, const AbReport& r, std::ostream& out) {
  if (format == "json") WriteAbJson(r, out);
  else if (format == "html") WriteAbHtml(r, out);
  else WriteAbText(r, out, format == "md");
}

}  // namespace trainrx::reports
