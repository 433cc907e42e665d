// trainrx::profiler::JsonWriter — the one JSON writer of the project (trace files, report JSON,
// Markdown/JUnit helpers use its Escape). Streams to an std::ostream it is given; escapes every
// string; tracks commas so callers never hand-build JSON (Kineto had to patch quoting bugs in
// its hand-built JSON). Not thread-safe; one writer per stream.
//
//   JsonWriter w(out);
//   w.BeginObject(); w.Key("id"); w.String("sync.host_device"); w.Key("n"); w.Int(3); w.EndObject();
//   -> {"id":"sync.host_device","n":3}
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace trainrx::profiler {

// The length of the valid UTF-8 sequence at p[0..n) (1..4), or 0 when it is not one (overlong
// forms, surrogates and code points past U+10FFFF included). The one UTF-8 check every writer
// uses (JSON here; Markdown, JUnit XML in reports/).
size_t Utf8SequenceLength(const unsigned char* p, size_t n);

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out, bool pretty = false) : out_(out), pretty_(pretty) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  // Non-finite doubles are written as null (JSON has no NaN).
  void Double(double v, int precision = 6);
  void Bool(bool v);
  void Null();
  // Writes already-valid JSON text verbatim (e.g. a raw "Input Dims" value kept from the source).
  void Raw(std::string_view json);
  // Microsecond timestamp with exact ns digits (see time.h), as a JSON number.
  void MicrosFromNs(int64_t ns);

  // Convenience: Key + value.
  void Field(std::string_view key, std::string_view s) { Key(key); String(s); }
  void Field(std::string_view key, const char* s) { Key(key); String(s); }
  void Field(std::string_view key, int64_t v) { Key(key); Int(v); }
  void Field(std::string_view key, int v) { Key(key); Int(v); }
  void Field(std::string_view key, uint64_t v) { Key(key); Uint(v); }
  void Field(std::string_view key, double v, int precision = 6) { Key(key); Double(v, precision); }
  void Field(std::string_view key, bool v) { Key(key); Bool(v); }
  // An array of doubles, each written as Double(x, precision).
  void Field(std::string_view key, const std::vector<double>& v, int precision) {
    Key(key);
    BeginArray();
    for (double x : v) Double(x, precision);
    EndArray();
  }

  // Key + an array whose elements `each(item)` writes, one per item of `items`:
  //   w.Array("windows", windows, [&](const auto& x) { WriteWindow(w, x); });
  template <typename Range, typename Fn>
  void Array(std::string_view key, const Range& items, Fn&& each) {
    Key(key);
    BeginArray();
    for (const auto& item : items) each(item);
    EndArray();
  }
  // Key + an array of objects, one per item, whose fields `fields(item)` writes:
  //   w.Objects("devices", r.devices, [&](const auto& d) { w.Field("id", d.id); });
  template <typename Range, typename Fn>
  void Objects(std::string_view key, const Range& items, Fn&& fields) {
    Key(key);
    BeginArray();
    for (const auto& item : items) {
      BeginObject();
      fields(item);
      EndObject();
    }
    EndArray();
  }
  // Key + an object whose fields `fields()` writes.
  template <typename Fn>
  void Object(std::string_view key, Fn&& fields) {
    Key(key);
    BeginObject();
    fields();
    EndObject();
  }

  // Without the surrounding quotes. Control bytes become \u00XX and bytes that are not valid
  // UTF-8 become U+FFFD: names from a trace or a command line never make the output invalid JSON.
  static std::string Escape(std::string_view s);
  // A JSON string value, quotes included: what Collector::SetStatic and ConfigValue::String
  // (RankInfo::config) hold for a text. The one such helper: never "\"" + s + "\"".
  static std::string Quote(std::string_view s) { return "\"" + Escape(s) + "\""; }
  // The text of a JSON string value (Quote's inverse: escapes decoded, \uXXXX as UTF-8, surrogate
  // pairs joined); nullopt when `json` is not one string value.
  static std::optional<std::string> Unquote(std::string_view json);

 private:
  void Separate();
  void Newline();
  std::ostream& out_;
  bool pretty_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace trainrx::profiler
