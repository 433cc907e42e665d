// The HTML page (html.h): a static shell, the report's JSON document and the inlined script.
//
//   <!doctype html> ... <style>report.css</style>
//   <script>error catcher</script>
//   <script type="application/json" id="trainrx-data">{"schema":"trainrx.html/1","kind":"analysis",
//     "report":{...the --format json document...},"timeline":{...}}</script>
//   <div id="app"></div><script>report.js</script>
#include <sstream>

#include "html_assets.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/reports/diff.h"
#include "trainrx/reports/experiment.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/html.h"

namespace trainrx::reports {

using profiler::JsonWriter;

std::string JsonForScript(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 64);
  for (const char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

namespace {

// Timeline events travel as [ts_ns, dur_ns, name, depth, class] arrays: a 6 000-event window is
// ~150 KB instead of ~450 KB with keys.
void WriteTimeline(JsonWriter& w, const analyzers::Timeline& tl) {
  using analyzers::TimelineClass;
  w.BeginObject();
  w.Key("classes");
  w.BeginArray();
  for (int c = 0; c <= static_cast<int>(TimelineClass::kMemset); ++c)
    w.String(analyzers::TimelineClassName(static_cast<TimelineClass>(c)));
  w.EndArray();
  w.Field("ranks_total", tl.ranks_total);
  w.Key("ranks_shown");
  w.BeginArray();
  for (const int32_t r : tl.ranks_shown) w.Int(r);
  w.EndArray();
  w.Array("names", tl.names, [&](const auto& n) { w.String(n); });
  w.Objects("windows", tl.windows, [&](const auto& win) {
    w.Field("label", win.label);
    w.Field("why", win.why);
    w.Field("rank", win.rank);
    w.Field("start_ns", win.start_ns);
    w.Field("dur_ns", win.dur_ns);
    w.Field("step_index", win.step_index);
    w.Field("events_in_window", win.events_in_window);
    w.Field("events_kept", win.events_kept);
    w.Objects("lanes", win.lanes, [&](const auto& lane) {
      w.Field("label", lane.label);
      w.Field("gpu", lane.gpu);
      w.Field("left_out", lane.left_out);
      w.Key("events");
      w.BeginArray();
      for (const auto& e : lane.events) {
        w.BeginArray();
        w.Int(e.ts_ns);
        w.Int(e.dur_ns);
        w.Uint(e.name);
        w.Int(e.depth);
        w.Int(static_cast<int>(e.cls));
        w.EndArray();
      }
      w.EndArray();
    });
  });
  w.EndObject();
}

// The page around a document. `report_json` is a complete JSON value; `timeline` may be null.
void WritePage(std::string_view kind, const char* title, const std::string& report_json,
               const analyzers::Timeline* timeline, std::ostream& out) {
  std::ostringstream doc;
  {
    JsonWriter w(doc);
    w.BeginObject();
    w.Field("schema", kHtmlSchema);
    w.Field("kind", kind);
    w.Key("report");
    w.Raw(report_json);
    if (timeline) {
      w.Key("timeline");
      WriteTimeline(w, *timeline);
    }
    w.EndObject();
  }
  out << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         // Nothing may load from anywhere: the page is its own, and only its inline parts run.
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
         "<meta name=\"generator\" content=\"trainrx\">\n<title>"
      << title << "</title>\n<style>\n"
      << kReportCss
      << "</style>\n"
         // Before anything else runs: script errors are kept and shown on the page (and counted for
         // the browser test in #trainrx-status).
         "<script>window.__trainrxErrors = []; window.addEventListener('error', function (e) { "
         "window.__trainrxErrors.push(String(e.message)); });</script>\n"
         "</head>\n<body>\n<noscript>This report is drawn by a script in the file: allow scripts to see it. "
         "The same data is in the JSON below (and `--format json`).</noscript>\n"
         "<script type=\"application/json\" id=\"trainrx-data\">"
      << JsonForScript(doc.str()) << "</script>\n<div id=\"app\"></div>\n<script>\n"
      << kReportJs << "</script>\n</body>\n</html>\n";
}

template <typename Record>
void WriteExperimentPage(std::string_view kind, const char* title, const Record& r,
                         void (*json)(const Record&, std::ostream&), std::ostream& out) {
  std::ostringstream doc;
  json(r, doc);
  WritePage(kind, title, doc.str(), nullptr, out);
}

}  // namespace

void WriteHtml(const profiler::Trace& trace, const analyzers::Report& report, const analyzers::Thresholds& thresholds,
               const RenderOptions& options, std::ostream& out, const analyzers::TimelineOptions& timeline_options) {
  std::ostringstream doc;
  WriteJson(trace, report, thresholds, options, doc);
  const analyzers::Timeline timeline = analyzers::BuildTimeline(trace, report.metrics.steps, timeline_options);
  WritePage("analysis", "trainrx analysis", doc.str(), &timeline, out);
}

void WriteFixHtml(const experiments::FixReport& r, std::ostream& out) {
  WriteExperimentPage("fix", "trainrx fix", r, WriteFixJson, out);
}
void WriteSweepHtml(const experiments::SweepReport& r, std::ostream& out) {
  WriteExperimentPage("sweep", "trainrx sweep", r, WriteSweepJson, out);
}
void WriteAbHtml(const experiments::AbReport& r, std::ostream& out) {
  WriteExperimentPage("ab", "trainrx ab", r, WriteAbJson, out);
}
void WriteGateHtml(const experiments::GateReport& r, std::ostream& out) {
  WriteExperimentPage("gate", "trainrx gate", r, WriteGateJson, out);
}
void WriteDiffHtml(const analyzers::RunDiff& d, std::ostream& out) {
  WriteExperimentPage("diff", "trainrx diff", d, WriteDiffJson, out);
}

}  // namespace trainrx::reports
