// trainrx::sets analysis_json — the JSON of an analysis' parts (a step row, a finding, a rank whose
// recording did not finish, a recorded window): one writer for the per-rank summaries (summary.h)
// and the JSON report (reports/), so the two never drift apart. docs/json-schema.md documents them.
#pragma once

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::sets {

// A step row: its head, and with `phases` its phase times (and GPU times when it has them).
void WriteStepRow(profiler::JsonWriter& w, const analyzers::StepRow& s, bool phases);
void WriteFinding(profiler::JsonWriter& w, const analyzers::Finding& f);
// A what-if prediction's fields (a finding's `predicted` object, a metrics.what_if row), into the
// object the caller opened.
void WritePredictionFields(profiler::JsonWriter& w, const analyzers::Prediction& p);
// run.unfinished[] and run.windows[] entries (and a summary's).
void WriteUnfinished(profiler::JsonWriter& w, const analyzers::UnfinishedRank& u);
void WriteWindow(profiler::JsonWriter& w, const analyzers::RecordedWindow& win);
// run.losses[]: a rank whose collector dropped records.
void WriteLoss(profiler::JsonWriter& w, const analyzers::RecordingLoss& l);

}  // namespace trainrx::sets
