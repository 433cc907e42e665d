// trainrx::reports gate — renderings of a gate check (text, Markdown, JUnit XML, JSON). The
// decision rule, the baseline format and the GateReport record are experiments/gate.h.
#pragma once

#include <ostream>
#include <string>

#include "trainrx/experiments/gate.h"

namespace trainrx::reports {

using experiments::GateReport;
void WriteGateText(const GateReport& r, std::ostream& out);
void WriteGateMarkdown(const GateReport& r, std::ostream& out);
void WriteGateJunit(const GateReport& r, std::ostream& out);
void WriteGateJson(const GateReport& r, std::ostream& out);
// The check in `format`: md, junit, json, html, else text.
void WriteGate(const std::string& format, const GateReport& r, std::ostream& out);
// `gate self-test`: each case's false-alarm or detection rate with its 95 % interval, and the
// other rules' rates on the same samples beside it.
void WriteSelfTestText(const experiments::SelfTestReport& r, const experiments::GateRun& run, int repeats,
                       bool across_processes, std::ostream& out);
// The line `gate record-baseline` ends with: "trainrx: baseline FILE: N trials, median M unit [low, high]".
void WriteBaselineSummary(const experiments::Baseline& b, const std::string& path, std::ostream& out);

}  // namespace trainrx::reports
