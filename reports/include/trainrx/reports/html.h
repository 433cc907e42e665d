// trainrx::reports html — one self-contained HTML file per report (`--format html`): the report's
// JSON document, the same one `--format json` writes, embedded in the page and drawn there by an
// inlined script and stylesheet (reports/html/). No network access when opened, nothing to install.
//
// Analyses add a sampled timeline (analyzers/timeline.h) to the document; the page draws the run
// summary with data-loss first, the findings as cards, per-step phase bars (lines per rank on
// multi-rank traces), the operator and kernel tables, and the timeline with a link from each
// finding. Experiment pages draw fix (forest plot), sweep (heat table, line plot), ab (strip plots,
// paired differences) and gate (verdict, change per metric against the tolerance band). Diff pages
// draw both sides' phases side by side and the ranked rows.
//
// Safety: the document is embedded as JSON inside <script type="application/json"> with < > &
// written as \u escapes, so no string from a trace or a command line can close the element; the
// script writes strings through text nodes only. Writers write to the stream they are given.
#pragma once

#include <ostream>
#include <string_view>

#include "trainrx/analyzers/diff.h"
#include "trainrx/analyzers/timeline.h"
#include "trainrx/experiments/gate.h"
#include "trainrx/experiments/results.h"
#include "trainrx/reports/report.h"

namespace trainrx::reports {

inline constexpr const char* kHtmlSchema = "trainrx.html/1";

void WriteHtml(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
               const RenderOptions& options, std::ostream& out,
               const analyzers::TimelineOptions& timeline = analyzers::TimelineOptions());
void WriteFixHtml(const experiments::FixReport& r, std::ostream& out);
void WriteSweepHtml(const experiments::SweepReport& r, std::ostream& out);
void WriteAbHtml(const experiments::AbReport& r, std::ostream& out);
void WriteGateHtml(const experiments::GateReport& r, std::ostream& out);
// `trainrx diff --format html`: both sides' step breakdowns side by side, the verdict, the ranked
// rows and every table of the text rendering (the document is the --format json one).
void WriteDiffHtml(const analyzers::RunDiff& d, std::ostream& out);

// A JSON text made safe inside <script type="application/json">: '<', '>' and '&' (which valid
// JSON holds only inside strings) become \u003c, \u003e, \u0026. JSON.parse reads the same value.
std::string JsonForScript(std::string_view json);

}  // namespace trainrx::reports
