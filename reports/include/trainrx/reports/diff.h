// trainrx::reports diff — renders analyzers::RunDiff (`trainrx diff A B`) as text, Markdown or JSON
// (schema "trainrx.diff/1", docs/json-schema.md). Torch-free.
#pragma once

#include <ostream>
#include <string>

#include "trainrx/analyzers/diff.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::reports {

inline constexpr const char* kDiffSchema = "trainrx.diff/1";
void WriteDiffText(const analyzers::RunDiff& d, std::ostream& out, bool markdown = false);
void WriteDiffJson(const analyzers::RunDiff& d, std::ostream& out);
// The diff in `format`: json, md, html, else text.
void WriteDiff(const std::string& format, const analyzers::RunDiff& d, std::ostream& out);
// The few rows that say why, for `ab` and `gate check` under their verdict: the step change, the
// phases and operators that moved most, settings and findings that differ.
// `from`: how the two sides were made, in the heading ("" : one more run of each side).
void WriteDiffSummary(const analyzers::RunDiff& d, std::ostream& out, bool markdown, const std::string& from = "");
// The diff as a JSON object inside another document (WriteDiffJson's fields, no schema).
void WriteDiffObject(const analyzers::RunDiff& d, profiler::JsonWriter& w);

}  // namespace trainrx::reports
