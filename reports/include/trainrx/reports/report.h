// trainrx::reports — renders an analysis (Report + the Trace's ingest stats) as text for a
// terminal, Markdown for a PR comment, or versioned JSON (schema in docs/json-schema.md).
// Reporters write to the stream they are given and do no analysis of their own. Data-loss
// counts from ingest always come first.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/rank_side.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::reports {

inline constexpr const char* kJsonSchema = "trainrx.analysis/1";

struct RenderOptions {
  bool color = false;               // ANSI colors (text only; the CLI enables it on a TTY)
  std::vector<std::string> inputs;  // what was analyzed, for the header
  int max_steps_listed = 10;        // text/md: how many step rows to show
  // `trainrx run`: each rank's result document (schema "trainrx.run/1": per-step times, loss,
  // samples/s), embedded verbatim in JSON under "runs", and one summary line per rank for text/md.
  std::vector<std::string> run_results_json;
  std::vector<std::string> run_summary;
};

void WriteText(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
               const RenderOptions& options, std::ostream& out);
void WriteMarkdown(const profiler::Trace& trace, const analyzers::Report& report,
                   const analyzers::Thresholds& thresholds, const RenderOptions& options, std::ostream& out);
void WriteJson(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
               const RenderOptions& options, std::ostream& out);

// Whether `format` names a report format: text, json, md or html.
bool IsReportFormat(const std::string& format);
// The report in `format` (WriteJson, WriteHtml, WriteMarkdown; anything else: WriteText).
void WriteReport(const std::string& format, const profiler::Trace& trace, const analyzers::Report& report,
                 const analyzers::Thresholds& thresholds, const RenderOptions& options, std::ostream& out);

// Per-rank summaries (`trainrx summarize`) are data, not a report: trainrx/sets/summary.h.

}  // namespace trainrx::reports
