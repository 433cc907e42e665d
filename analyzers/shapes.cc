#include "shapes.h"

namespace trainrx::analyzers {

std::optional<Dims> ParseDims(std::string_view s) {
  Dims out;
  int depth = 0;
  int64_t num = 0;
  bool in_num = false, neg = false;
  for (char c : s) {
    if (c == '[') {
      ++depth;
      if (depth == 2) out.emplace_back();
    } else if (c == ']' || c == ',') {
      if (in_num && depth >= 2) out.back().push_back(neg ? -num : num);
      in_num = false;
      neg = false;
      num = 0;
      if (c == ']') --depth;
    } else if (c >= '0' && c <= '9') {
      if (num > (INT64_MAX - (c - '0')) / 10) return std::nullopt;  // no real dimension has 19 digits
      num = num * 10 + (c - '0');
      in_num = true;
    } else if (c == '-') {
      neg = true;
    } else if (c != ' ' && c != '\n') {
      return std::nullopt;
    }
  }
  if (depth != 0) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> ParseTypes(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  };
  skip_ws();
  if (i >= s.size() || s[i] != '[') return std::nullopt;
  ++i;
  skip_ws();
  if (i < s.size() && s[i] == ']') return out;
  while (i < s.size()) {
    skip_ws();
    if (i >= s.size() || s[i] != '"') return std::nullopt;
    ++i;
    std::string item;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;  // type names carry no escapes; keep the char
      item += s[i++];
    }
    if (i >= s.size()) return std::nullopt;
    ++i;  // closing quote
    out.push_back(std::move(item));
    skip_ws();
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == ']') return out;
    return std::nullopt;
  }
  return std::nullopt;
}

namespace {
bool HasOpInputs(const profiler::Trace& trace, const profiler::Event& e) {
  // aux of a memcpy / memset indexes trace.memcpys, not op_inputs.
  return e.kind != profiler::EventKind::kMemcpy && e.kind != profiler::EventKind::kMemset &&
         e.aux != profiler::kNoAux && e.aux < trace.op_inputs.size();
}
}  // namespace

std::optional<Dims> OpDims(const profiler::Trace& trace, const profiler::Event& e) {
  if (!HasOpInputs(trace, e)) return std::nullopt;
  const profiler::StrId id = trace.op_inputs[e.aux].input_dims;
  if (id == profiler::kNoStr) return std::nullopt;
  return ParseDims(trace.strings.Get(id));
}

std::optional<std::vector<std::string>> OpTypes(const profiler::Trace& trace, const profiler::Event& e) {
  if (!HasOpInputs(trace, e)) return std::nullopt;
  const profiler::StrId id = trace.op_inputs[e.aux].input_types;
  if (id == profiler::kNoStr) return std::nullopt;
  return ParseTypes(trace.strings.Get(id));
}

std::optional<std::vector<std::string>> OpConcrete(const profiler::Trace& trace, const profiler::Event& e) {
  if (!HasOpInputs(trace, e)) return std::nullopt;
  const profiler::StrId id = trace.op_inputs[e.aux].concrete;
  if (id == profiler::kNoStr) return std::nullopt;
  return ParseTypes(trace.strings.Get(id));
}

bool IsHalfType(std::string_view t) {
  if (t.substr(0, 5) == "c10::") t.remove_prefix(5);
  return t == "BFloat16" || t == "Half" || t == "bfloat16" || t == "half" || t == "float16";
}

}  // namespace trainrx::analyzers
