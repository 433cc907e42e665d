// trainrx::reports gate — renderings of a gate check (text, Markdown, JUnit XML, JSON). The
// decision rule, the baseline format and the GateReport record are experiments/gate.h.
#pragma once

#include <ostream>

#include "trainrx/experiments/gate.h"

namespace trainrx::reports {

using experiments::GateReport;
void WriteGateText(const GateReport& r, std::ostream& out);
void WriteGateMarkdown(const GateReport& r, std::ostream& out);
void WriteGateJunit(const GateReport& r, std::ostream& out);
void WriteGateJson(const GateReport& r, std::ostream& out);

}  // namespace trainrx::reports
