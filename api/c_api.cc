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

#include <dlfcn.h>

#include <filesystem>

#include "status_code.h"
#include "trainrx/exports/tables.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"
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

namespace {

std::vector<std::string> Strings(const char* const* items, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(items[i] ? items[i] : "");
  return out;
}

// `trainrx analyze`'s options from the C arguments; an error for a bad threshold.
trainrx::Status OptionsOf(const char* const* thresholds, size_t n_thresholds, const char* step_name, int flags,
                          trainrx::sets::SetOptions* options) {
  for (size_t i = 0; i < n_thresholds; ++i)
    if (trainrx::Status st = options->thresholds.Parse(thresholds[i] ? thresholds[i] : ""); !st.ok()) return st;
  options->strict = (flags & TRAINRX_STRICT) != 0;
  options->keep_clocks = (flags & TRAINRX_KEEP_CLOCKS) != 0;
  options->per_rank = (flags & TRAINRX_PER_RANK) != 0;
  if (step_name) options->step_name = step_name;
  return {};
}

int TextOut(const std::string& s, char** out, size_t* size, char** error) {
  *out = trainrx::api::CopyOut(s);
  if (*out == nullptr) return SetError(error, "trainrx: out of memory", kInternalError);
  if (size) *size = s.size();
  return 0;
}

// The folder this library was loaded from: the Parquet plugin lies beside it (as beside the CLI).
std::string LibraryDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&LibraryDir), &info) == 0 || info.dli_fname == nullptr) return ".";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

// An analysis made by `analyze` (AnalyzeSet or AnalyzeFileSides) with `trainrx analyze`'s options
// from the C arguments, owned by *out; `inputs` are the paths the report names.
template <typename Analyze>
int MakeAnalysis(const char* what, const char* const* inputs, size_t n_inputs, const char* const* thresholds,
                 size_t n_thresholds, const char* step_name, int flags, Analyze analyze, trainrx_analysis** out,
                 char** error) {
  if (out == nullptr) return SetError(error, std::string(what) + ": out is NULL", kInternalError);
  *out = nullptr;
  if (error) *error = nullptr;
  try {
    auto a = std::make_unique<trainrx_analysis>();
    trainrx::sets::SetOptions options;
    if (trainrx::Status st = OptionsOf(thresholds, n_thresholds, step_name, flags, &options); !st.ok())
      return SetError(error, st);
    a->inputs = Strings(inputs, n_inputs);
    if (trainrx::Status st = analyze(options, a->inputs, &a->set); !st.ok()) return SetError(error, st);
    a->thresholds = options.thresholds;
    *out = a.release();
    return 0;
  } catch (const std::bad_alloc&) {
    return SetError(error, "trainrx: out of memory while analyzing", kInternalError);
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

}  // namespace

extern "C" {

const char* trainrx_version(void) { return TRAINRX_VERSION; }

int trainrx_analyze(const char* const* paths, size_t n_paths, const char* const* thresholds, size_t n_thresholds,
                    const char* step_name, int flags, trainrx_analysis** out, char** error) {
  if (n_paths == 0 && out != nullptr) {
    *out = nullptr;
    return SetError(error, "analyze needs at least one trace file or directory", kInputError);
  }
  return MakeAnalysis(
      "trainrx_analyze", paths, n_paths, thresholds, n_thresholds, step_name, flags,
      [&](const trainrx::sets::SetOptions& o, const std::vector<std::string>& inputs, trainrx::sets::SetAnalysis* set) {
        return trainrx::sets::AnalyzeSet(inputs, o, set);
      },
      out, error);
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

int trainrx_expand_paths(const char* const* paths, size_t n_paths, char** out, size_t* size, char** error) {
  if (out == nullptr) return SetError(error, "trainrx_expand_paths: out is NULL", kInternalError);
  *out = nullptr;
  if (error) *error = nullptr;
  try {
    const auto files = trainrx::profiler::ExpandTracePaths(Strings(paths, n_paths));
    if (!files.ok()) return SetError(error, files.status());
    std::ostringstream text;
    trainrx::profiler::JsonWriter w(text);
    w.BeginArray();
    for (const auto& f : *files) w.String(f);
    w.EndArray();
    return TextOut(std::move(text).str(), out, size, error);
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

int trainrx_file_sides(const char* path, const char* const* thresholds, size_t n_thresholds, const char* step_name,
                       char** out, size_t* size, char** error) {
  if (out == nullptr || path == nullptr) return SetError(error, "trainrx_file_sides: NULL argument", kInternalError);
  *out = nullptr;
  if (error) *error = nullptr;
  try {
    trainrx::sets::SetOptions options;
    if (trainrx::Status st = OptionsOf(thresholds, n_thresholds, step_name, 0, &options); !st.ok()) return SetError(error, st);
    std::string json;
    if (trainrx::Status st = trainrx::sets::FileSidesJson(path, options.thresholds, options.step_name, &json); !st.ok())
      return SetError(error, st);
    return TextOut(json, out, size, error);
  } catch (const std::bad_alloc&) {
    return SetError(error, "trainrx: out of memory while analyzing", kInternalError);
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

int trainrx_analyze_file_sides(const char* const* inputs, size_t n_inputs, const char* const* files,
                               const char* const* docs, size_t n_files,
                               const char* const* thresholds, size_t n_thresholds, const char* step_name, int flags,
                               trainrx_analysis** out, char** error) {
  return MakeAnalysis(
      "trainrx_analyze_file_sides", inputs, n_inputs, thresholds, n_thresholds, step_name, flags,
      [&](const trainrx::sets::SetOptions& o, const std::vector<std::string>&, trainrx::sets::SetAnalysis* set) {
        return trainrx::sets::AnalyzeFileSides(Strings(files, n_files), Strings(docs, n_files), o, set);
      },
      out, error);
}

int trainrx_export(const char* const* paths, size_t n_paths, const char* dir, const char* format, const char* run,
                   const char* const* thresholds, size_t n_thresholds, const char* step_name, int flags, char** summary,
                   size_t* size, char** error) {
  if (summary == nullptr || dir == nullptr) return SetError(error, "trainrx_export: NULL argument", kInternalError);
  *summary = nullptr;
  if (error) *error = nullptr;
  try {
    trainrx::exports::ExportOptions options;
    if (trainrx::Status st = OptionsOf(thresholds, n_thresholds, step_name, flags, &options.set); !st.ok())
      return SetError(error, st);
    if (run) options.run = run;
    auto sink = trainrx::exports::OpenSink(format ? format : "parquet", LibraryDir());
    if (!sink.ok()) return SetError(error, sink.status());
    trainrx::exports::ExportSummary s;
    if (trainrx::Status st = trainrx::exports::ExportSet(Strings(paths, n_paths), options, dir, **sink, &s); !st.ok())
      return SetError(error, st);
    std::ostringstream text;
    trainrx::profiler::JsonWriter w(text);
    w.BeginObject();
    w.Field("run", s.run);
    w.Field("strategy", trainrx::sets::StrategyName(s.strategy));
    w.Field("ranks", static_cast<int64_t>(s.ranks));
    w.Field("files", static_cast<int64_t>(s.files));
    w.Key("rows");
    w.BeginObject();
    for (const auto& [table, rows] : s.rows) w.Field(table, rows);
    w.EndObject();
    w.EndObject();
    return TextOut(std::move(text).str(), summary, size, error);
  } catch (const std::bad_alloc&) {
    return SetError(error, "trainrx: out of memory while exporting", kInternalError);
  } catch (const std::exception& e) {
    return InternalError(error, e.what());
  }
}

void trainrx_analysis_free(trainrx_analysis* analysis) { delete analysis; }
void trainrx_string_free(char* text) { std::free(text); }

}  // extern "C"
