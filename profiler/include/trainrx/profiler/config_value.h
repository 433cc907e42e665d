// trainrx::profiler ConfigValue — one value of a trace's configuration (RankInfo::config: our
// collector's "trainrx" block, torch.profiler's record_shapes / with_stack ...), as JSON.
//
// Who makes one: the readers keep a value as the JSON text they read (Json), code that adds a value
// says its type (String, Number, Bool): a string is quoted and escaped by the one JSON writer
// (JsonWriter::Quote), never by hand. Who reads one: the writer copies json() back into the
// block as it is; everyone else through the typed reads (AsString, AsNumber, Text). A plain value,
// header-only (the probe compiles it too); no locking.
//
//   ConfigValue::String("cnn \"a\"").json()  -> "\"cnn \\\"a\\\"\""     AsString() -> cnn "a"
//   ConfigValue::Json("2000").AsNumber()    -> 2000                    Text()     -> 2000
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "trainrx/profiler/json_writer.h"

namespace trainrx::profiler {

class ConfigValue {
 public:
  ConfigValue() = default;  // JSON null
  // JSON text as read (a reader's minified value, a journal header's); kept as it is.
  static ConfigValue Json(std::string json) { return ConfigValue(std::move(json)); }
  static ConfigValue String(std::string_view text) { return ConfigValue(JsonWriter::Quote(text)); }
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  static ConfigValue Number(T n) {
    return ConfigValue(std::to_string(n));
  }
  static ConfigValue Bool(bool b) { return ConfigValue(b ? "true" : "false"); }

  const std::string& json() const { return json_; }
  // The text of a string value; nullopt for anything else.
  std::optional<std::string> AsString() const { return JsonWriter::Unquote(json_); }
  // A number's value (its leading number, as strtod reads it), true and false as 1 and 0; nullopt
  // for anything else.
  std::optional<double> AsNumber() const {
    if (json_ == "true") return 1.0;
    if (json_ == "false") return 0.0;
    char* end = nullptr;
    const double v = std::strtod(json_.c_str(), &end);
    if (end == json_.c_str()) return std::nullopt;
    return v;
  }
  // A whole number's value, exactly (timestamps in ns do not fit a double); nullopt for anything
  // that does not start with one.
  std::optional<int64_t> AsInt() const {
    char* end = nullptr;
    const long long v = std::strtoll(json_.c_str(), &end, 10);
    if (end == json_.c_str()) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  // A string's text; anything else as its JSON ("12", "{\"A\":\"b\"}").
  std::string Text() const { return AsString().value_or(json_); }

  bool operator==(const ConfigValue&) const = default;

 private:
  explicit ConfigValue(std::string json) : json_(std::move(json)) {}
  std::string json_ = "null";
};

}  // namespace trainrx::profiler
