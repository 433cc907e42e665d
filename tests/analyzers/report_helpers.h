// Shared by the analyzer tests: a trace from JSON text, analyzed, and a finding looked up by id.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers::testing {

// Reads `json` (Kineto JSON text, named `name` in messages) and analyzes it with the default
// thresholds; a read error fails the calling test.
inline Report AnalyzeJsonText(const std::string& json, const char* name = "test.json") {
  profiler::Trace t;
  const auto st = profiler::ReadTraceBuffer(json, name, 0, t);
  EXPECT_TRUE(st.ok()) << st.message();
  return Analyze(t);
}

// The first finding with `id`, or nullptr. Points into `r`: keep the Report alive while it is read.
inline const Finding* FindFinding(const Report& r, const char* id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

}  // namespace trainrx::analyzers::testing
