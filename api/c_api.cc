// The C ABI over sets::AnalyzeSet and reports::WriteReport (trainrx/c_api.h). The analysis and
// rendering are the CLI's own calls with the CLI's options (cli/main.cc RunAnalyze), so the JSON a
// caller gets is byte for byte what `trainrx analyze --format json` prints for the same paths.
#include "trainrx/c_api.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "status_code.h"
#include "trainrx/reports/report.h"
#include "trainrx/sets/analyze_set.h"

struct trainrx_analysis {
  trainrx::sets::SetAnalysis set;
  trainrx::analyzers::Thresholds thresholds;
  std::vector<std::string> inputs;
};

// The codes and messages: status_code.h (the one mapping of a Status's kind to a code).
using trainrx::api::InternalError;
using trainrx::api::kInputError;
using trainrx::api::kInternalError;
using trainrx::api::SetError;

extern "C" {

const char* trainrx_version(void) { return TRAINRX_VERSION; }

int trainrx_analyze(const char* const* paths, size_t n_paths, const char* const* thresholds, size_t n_thresholds,
                    const char* step_name, int flags, trainrx_analysis** out, char** error) {
  if (out == nullptr) return SetError(error, "trainrx_analyze: out is NULL", kInternalError);
  *out = nullptr;
  if (error) *error = nullptr;
  try {
    if (n_paths == 0) return SetError(error, "analyze needs at least one trace file or directory", kInputError);
    auto a = std::make_unique<trainrx_analysis>();
    trainrx::sets::SetOptions options;
    for (size_t i = 0; i < n_thresholds; ++i)
      if (trainrx::Status st = options.thresholds.Parse(thresholds[i] ? thresholds[i] : ""); !st.ok())
        return SetError(error, st);
    options.strict = (flags & TRAINRX_STRICT) != 0;
    options.keep_clocks = (flags & TRAINRX_KEEP_CLOCKS) != 0;
    options.per_rank = (flags & TRAINRX_PER_RANK) != 0;
    if (step_name) options.step_name = step_name;
    for (size_t i = 0; i < n_paths; ++i) a->inputs.emplace_back(paths[i] ? paths[i] : "");
    if (trainrx::Status st = trainrx::sets::AnalyzeSet(a->inputs, options, &a->set); !st.ok()) return SetError(error, st);
    a->thresholds = options.thresholds;
    *out = a.release();
    return 0;
  } catch (const std::bad_alloc&) {
    return SetError(error, "trainrx: out of memory while analyzing", kInternalError);
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

int trainrx_render(const trainrx_analysis* analysis, const char* format, char** out, size_t* size, char** error) {
  if (analysis == nullptr || out == nullptr) return SetError(error, "trainrx_render: NULL argument", kInternalError);
  *out = nullptr;
  if (error) *error = nullptr;
  const std::string f = format ? format : "";
  if (!trainrx::reports::IsReportFormat(f))
    return SetError(error, "format must be text, json, md or html, not '" + f + "'", kInputError);
  try {
    trainrx::reports::RenderOptions options;
    options.inputs = analysis->inputs;
    std::ostringstream text;
    trainrx::reports::WriteReport(f, analysis->set.trace, analysis->set.report, analysis->thresholds, options, text);
    const std::string s = std::move(text).str();
    *out = trainrx::api::CopyOut(s);
    if (*out == nullptr) return SetError(error, "trainrx: out of memory while rendering", kInternalError);
    if (size) *size = s.size();
    return 0;
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

void trainrx_analysis_free(trainrx_analysis* analysis) { delete analysis; }
void trainrx_string_free(char* text) { std::free(text); }

}  // extern "C"
