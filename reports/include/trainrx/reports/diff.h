// trainrx::reports diff — renders analyzers::RunDiff (`trainrx diff A B`) as text, Markdown or JSON
// (schema "trainrx.diff/1", docs/json-schema.md). Torch-free.
#pragma once

#include <ostream>

#include "trainrx/analyzers/diff.h"

namespace trainrx::reports {

inline constexpr const char* kDiffSchema = "trainrx.diff/1";
void WriteDiffText(const analyzers::RunDiff& d, std::ostream& out, bool markdown = false);
void WriteDiffJson(const analyzers::RunDiff& d, std::ostream& out);

}  // namespace trainrx::reports
