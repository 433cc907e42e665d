// Public entry points of the trace reader (kineto_reader.h). This file is compiled for the
// baseline CPU: it checks that the CPU can run the SIMD-compiled parser (kineto_parse.cc) before
// calling into it, so an old CPU gets a message instead of SIGILL.
#include "trainrx/profiler/kineto_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "byte_source.h"
#include "kineto_parse.h"

namespace trainrx::profiler {
namespace {

ReadStatus CheckCpu() {
#if defined(TRAINRX_PARSER_NEEDS_AVX2) && (defined(__x86_64__) || defined(__i386__))
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("pclmul")) {
    return ReadStatus::Error(
        "this CPU lacks AVX2/BMI2/PCLMUL, which this trainrx build's JSON parser was compiled for; "
        "rebuild with -DTRAINRX_SIMD=OFF");
  }
#endif
  return {};
}

bool HasTraceSuffix(const std::string& name) {
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  return ends(".json") || ends(".json.gz");
}

}  // namespace

std::optional<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& paths, std::string* error) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(p, ec)) {
        if (entry.is_regular_file() && HasTraceSuffix(entry.path().filename().string())) files.push_back(entry.path().string());
      }
      if (ec) {
        *error = fmt::format("{}: cannot list directory: {}", p, ec.message());
        return std::nullopt;
      }
      if (files.empty()) {
        *error = fmt::format("{}: directory contains no trace files (*.json, *.json.gz)", p);
        return std::nullopt;
      }
      std::sort(files.begin(), files.end());
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::exists(p, ec)) {
      out.push_back(p);
    } else {
      *error = fmt::format("{}: no such file or directory", p);
      return std::nullopt;
    }
  }
  if (out.empty()) {
    *error = "no trace files given";
    return std::nullopt;
  }
  return out;
}

ReadStatus ReadTraceBuffer(std::string_view bytes, std::string_view source_name, int32_t rank, Trace& trace,
                           const ReadOptions& options) {
  if (auto st = CheckCpu(); !st.ok) return st;
  auto src = io::OpenMemorySource(bytes);
  auto st = ParseOneSource(*src, std::string(source_name), rank, trace, options);
  if (st.ok) trace.Finalize();
  return st;
}

ReadStatus ReadTraces(const std::vector<std::string>& paths, Trace& trace, const ReadOptions& options) {
  if (auto st = CheckCpu(); !st.ok) return st;
  std::string error;
  auto files = ExpandTracePaths(paths, &error);
  if (!files) return ReadStatus::Error(error);
  for (const auto& f : *files) {
    std::string open_error;
    auto src = io::OpenFileSource(f, &open_error);
    if (!src) return ReadStatus::Error(fmt::format("{}: cannot open: {}", f, open_error));
    if (auto st = ParseOneSource(*src, f, files->size() == 1 ? options.rank_hint : -1, trace, options); !st.ok) return st;
  }
  trace.Finalize();
  return {};
}

}  // namespace trainrx::profiler
