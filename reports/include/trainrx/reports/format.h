// trainrx::reports format — one interface per kind of output: a report format is one class that
// renders each of the six documents trainrx writes (an analysis, a diff, a gate check, a fix, a
// sweep, an A/B) and one registration. `--format NAME` picks it (reports/formats.cc registers the
// built-in text, md, json, html and junit); WriteReport, WriteDiff, WriteGate, WriteFix,
// WriteSweep and WriteAb render through it. A new format: a class derived from ReportFormat,
// registered once with RegisterFormat (tests/reports/format_registry_test.cc registers a toy one).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/analyzers/diff.h"
#include "trainrx/profiler/trace.h"
#include "trainrx/reports/diff.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/report.h"

namespace trainrx::reports {

// The documents a format renders.
enum class Document { kAnalysis, kDiff, kGate, kFix, kSweep, kAb };

class ReportFormat {
 public:
  virtual ~ReportFormat() = default;
  virtual std::string_view name() const = 0;
  // Whether it renders `d` (junit renders the gate check only); a document it does not render is
  // written as text.
  virtual bool Renders(Document) const { return true; }
  virtual void Analysis(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
                        const RenderOptions& options, std::ostream& out) const = 0;
  virtual void Diff(const analyzers::RunDiff& d, std::ostream& out) const = 0;
  virtual void Gate(const GateReport& r, std::ostream& out) const = 0;
  virtual void Fix(const FixReport& r, std::ostream& out) const = 0;
  virtual void Sweep(const SweepReport& r, std::ostream& out) const = 0;
  virtual void Ab(const AbReport& r, std::ostream& out) const = 0;
};

// Adds a format (a name already registered is replaced). Thread-safe; the built-in ones are there
// before the first lookup.
void RegisterFormat(std::unique_ptr<ReportFormat> format);
// The format called `name` that renders `d`, else nullptr.
const ReportFormat* FindFormat(std::string_view name, Document d);
// The registered names that render `d`, in registration order.
std::vector<std::string> FormatNames(Document d);

}  // namespace trainrx::reports
