// The JSON of an analysis' parts (see analysis_json.h).
#include "trainrx/sets/analysis_json.h"

#include <variant>

namespace trainrx::sets {

using profiler::JsonWriter;

// A step row: its head (rank, name), and every declared figure the row carries (StepFields: a
// warm-up row, `phases` false, has its start and wall time only).
void WriteStepRow(JsonWriter& w, const analyzers::StepRow& s, bool phases) {
  w.BeginObject();
  w.Field("rank", s.rank);
  w.Field("name", s.name);
  for (const analyzers::StepField& f : analyzers::StepFields())
    if (f.CarriedBy(s, phases)) w.Field(f.name, s.*f.member);
  w.EndObject();
}

void WriteFinding(JsonWriter& w, const analyzers::Finding& f) {
  w.BeginObject();
  w.Field("id", f.id);
  w.Field("severity", analyzers::SeverityName(f.severity));
  w.Field("confidence", analyzers::ConfidenceName(f.confidence));
  w.Field("title", f.title);
  w.Field("rank", f.rank);
  w.Field("measured", f.measured);
  w.Field("threshold", f.threshold);
  w.Field("unit", f.measured_unit);
  w.Object("evidence", [&] {
    for (const auto& e : f.evidence) {
      w.Key(e.key);
      if (const auto* i = std::get_if<int64_t>(&e.value)) w.Int(*i);
      else if (const auto* d = std::get_if<double>(&e.value)) w.Double(*d);
      else w.String(std::get<std::string>(e.value));
    }
  });
  w.Array("examples", f.examples, [&](const auto& x) { w.String(x); });
  w.Field("estimated_saving_pct", f.estimated_saving_pct);
  w.Field("estimated_saving_ns", f.estimated_saving_ns);
  w.Field("saving_bound_ns", f.saving_bound_ns);
  w.Field("saving_bound", f.saving_bound);
  w.Field("steps", f.steps);
  w.Object("fix", [&] {
    w.Field("python", f.fix_python);
    w.Field("cpp", f.fix_cpp);
    w.Field("knob", f.knob);
  });
  if (!f.predicted.method.empty()) {  // the what-if replay's (dependency/what_if.cc)
    w.Object("predicted", [&] {
      WritePredictionFields(w, f.predicted);
    });
  }
  w.EndObject();
}

void WritePredictionFields(JsonWriter& w, const analyzers::Prediction& p) {
  w.Field("method", p.method);
  w.Field("transform", p.transform);
  if (p.method == "replay") {
    w.Field("saving_pct", p.saving_pct);
    w.Field("low_pct", p.low_pct);
    w.Field("high_pct", p.high_pct);
    w.Field("step_ns_before", p.step_ns_before);
    w.Field("step_ns_after", p.step_ns_after);
    w.Field("replay_error_pct", p.replay_error_pct);
    if (p.level > 0) {
      w.Field("level", p.level);
      w.Field("margin", p.margin);
    }
    if (!p.calibration.empty()) w.Field("calibration", p.calibration);
  }
  w.Field("assumptions", p.assumptions);
}

// run.unfinished[] and run.windows[] entries (and a summary's).
void WriteUnfinished(JsonWriter& w, const analyzers::UnfinishedRank& u) {
  w.BeginObject();
  w.Field("rank", u.rank);
  w.Field("source", u.source);
  w.Field("end_reason", u.end_reason);
  w.Field("recorded_ns", u.recorded_ns);
  w.Field("steps", u.steps);
  w.Field("open_ranges", u.open_ranges);
  if (u.behind_ns >= 0) w.Field("behind_ns", u.behind_ns);
  w.EndObject();
}

void WriteWindow(JsonWriter& w, const analyzers::RecordedWindow& win) {
  w.BeginObject();
  w.Field("rank", win.rank);
  w.Field("skip", win.skip);
  w.Field("steps", win.steps);
  w.Field("boundary", win.boundary);
  w.Field("run_boundaries", win.run_boundaries);
  w.Field("opened", win.opened);
  w.Field("closed", win.closed);
  w.Field("gpu_records_outside", win.gpu_records_outside);
  w.EndObject();
}

void WriteLoss(JsonWriter& w, const analyzers::RecordingLoss& l) {
  w.BeginObject();
  w.Field("rank", l.rank);
  w.Field("source", l.source);
  w.Field("dropped", l.dropped);
  w.Field("gpu_dropped", l.gpu_dropped);
  w.Field("kept", l.kept);
  if (l.max_events >= 0) w.Field("max_events", l.max_events);
  if (l.kept_ns >= 0) {
    w.Field("kept_ns", l.kept_ns);
    w.Field("first_dropped_ns", l.first_dropped_ns);
    w.Field("steps_cut", l.steps_cut);
  }
  if (l.run_ns >= 0) w.Field("run_ns", l.run_ns);
  if (l.run_steps >= 0) {
    w.Field("run_steps", l.run_steps);
    w.Field("boundary", l.boundary);
  }
  w.EndObject();
}

}  // namespace trainrx::sets
