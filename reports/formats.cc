// The one place a --format name picks a renderer, for every report the CLI writes: the registry of
// report formats (format.h) and the built-in ones, each one class.
#include <algorithm>
#include <mutex>

#include "trainrx/reports/diff.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/format.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/html.h"
#include "trainrx/reports/report.h"

namespace trainrx::reports {
namespace {

class TextFormat : public ReportFormat {
 public:
  std::string_view name() const override { return "text"; }
  void Analysis(const profiler::Trace& t, const analyzers::Report& r, const analyzers::Thresholds& th, const RenderOptions& o,
                std::ostream& out) const override {
    WriteText(t, r, th, o, out);
  }
  void Diff(const analyzers::RunDiff& d, std::ostream& out) const override { WriteDiffText(d, out, false); }
  void Gate(const GateReport& r, std::ostream& out) const override { WriteGateText(r, out); }
  void Fix(const FixReport& r, std::ostream& out) const override { WriteFixText(r, out, false); }
  void Sweep(const SweepReport& r, std::ostream& out) const override { WriteSweepText(r, out, false); }
  void Ab(const AbReport& r, std::ostream& out) const override { WriteAbText(r, out, false); }
};

class MarkdownFormat : public ReportFormat {
 public:
  std::string_view name() const override { return "md"; }
  void Analysis(const profiler::Trace& t, const analyzers::Report& r, const analyzers::Thresholds& th, const RenderOptions& o,
                std::ostream& out) const override {
    WriteMarkdown(t, r, th, o, out);
  }
  void Diff(const analyzers::RunDiff& d, std::ostream& out) const override { WriteDiffText(d, out, true); }
  void Gate(const GateReport& r, std::ostream& out) const override { WriteGateMarkdown(r, out); }
  void Fix(const FixReport& r, std::ostream& out) const override { WriteFixText(r, out, true); }
  void Sweep(const SweepReport& r, std::ostream& out) const override { WriteSweepText(r, out, true); }
  void Ab(const AbReport& r, std::ostream& out) const override { WriteAbText(r, out, true); }
};

class JsonFormat : public ReportFormat {
 public:
  std::string_view name() const override { return "json"; }
  void Analysis(const profiler::Trace& t, const analyzers::Report& r, const analyzers::Thresholds& th, const RenderOptions& o,
                std::ostream& out) const override {
    WriteJson(t, r, th, o, out);
  }
  void Diff(const analyzers::RunDiff& d, std::ostream& out) const override { WriteDiffJson(d, out); }
  void Gate(const GateReport& r, std::ostream& out) const override { WriteGateJson(r, out); }
  void Fix(const FixReport& r, std::ostream& out) const override { WriteFixJson(r, out); }
  void Sweep(const SweepReport& r, std::ostream& out) const override { WriteSweepJson(r, out); }
  void Ab(const AbReport& r, std::ostream& out) const override { WriteAbJson(r, out); }
};

class HtmlFormat : public ReportFormat {
 public:
  std::string_view name() const override { return "html"; }
  void Analysis(const profiler::Trace& t, const analyzers::Report& r, const analyzers::Thresholds& th, const RenderOptions& o,
                std::ostream& out) const override {
    WriteHtml(t, r, th, o, out);
  }
  void Diff(const analyzers::RunDiff& d, std::ostream& out) const override { WriteDiffHtml(d, out); }
  void Gate(const GateReport& r, std::ostream& out) const override { WriteGateHtml(r, out); }
  void Fix(const FixReport& r, std::ostream& out) const override { WriteFixHtml(r, out); }
  void Sweep(const SweepReport& r, std::ostream& out) const override { WriteSweepHtml(r, out); }
  void Ab(const AbReport& r, std::ostream& out) const override { WriteAbHtml(r, out); }
};

// JUnit XML: a gate check as a CI system's test result; nothing else.
class JunitFormat : public TextFormat {
 public:
  std::string_view name() const override { return "junit"; }
  bool Renders(Document d) const override { return d == Document::kGate; }
  void Gate(const GateReport& r, std::ostream& out) const override { WriteGateJunit(r, out); }
};

struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<ReportFormat>> formats;
  Registry() {
    formats.push_back(std::make_unique<TextFormat>());
    formats.push_back(std::make_unique<MarkdownFormat>());
    formats.push_back(std::make_unique<JsonFormat>());
    formats.push_back(std::make_unique<HtmlFormat>());
    formats.push_back(std::make_unique<JunitFormat>());
  }
};
Registry& Formats() {
  static Registry r;
  return r;
}

// The format for `name` and `d`, text where none renders it (the commands check names first).
const ReportFormat& Pick(const std::string& name, Document d) {
  if (const ReportFormat* f = FindFormat(name, d)) return *f;
  return *FindFormat("text", d);
}

}  // namespace

void RegisterFormat(std::unique_ptr<ReportFormat> format) {
  Registry& r = Formats();
  std::lock_guard lock(r.mu);
  for (auto& f : r.formats)
    if (f->name() == format->name()) {
      f = std::move(format);
      return;
    }
  r.formats.push_back(std::move(format));
}

const ReportFormat* FindFormat(std::string_view name, Document d) {
  Registry& r = Formats();
  std::lock_guard lock(r.mu);
  for (const auto& f : r.formats)
    if (f->name() == name && f->Renders(d)) return f.get();
  return nullptr;
}

std::vector<std::string> FormatNames(Document d) {
  Registry& r = Formats();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& f : r.formats)
    if (f->Renders(d)) out.emplace_back(f->name());
  return out;
}

bool IsReportFormat(const std::string& format) { return FindFormat(format, Document::kAnalysis) != nullptr; }

void WriteReport(const std::string& format, const profiler::Trace& trace, const analyzers::Report& report,
                 const analyzers::Thresholds& thresholds, const RenderOptions& options, std::ostream& out) {
  Pick(format, Document::kAnalysis).Analysis(trace, report, thresholds, options, out);
}
void WriteDiff(const std::string& format, const analyzers::RunDiff& d, std::ostream& out) { Pick(format, Document::kDiff).Diff(d, out); }
void WriteGate(const std::string& format, const GateReport& r, std::ostream& out) { Pick(format, Document::kGate).Gate(r, out); }
void WriteFix(const std::string& format, const FixReport& r, std::ostream& out) { Pick(format, Document::kFix).Fix(r, out); }
void WriteSweep(const std::string& format, const SweepReport& r, std::ostream& out) { Pick(format, Document::kSweep).Sweep(r, out); }
void WriteAb(const std::string& format, const AbReport& r, std::ostream& out) { Pick(format, Document::kAb).Ab(r, out); }

}  // namespace trainrx::reports
