#include "trainrx/profiler/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "trainrx/profiler/time.h"

namespace trainrx::profiler {

void JsonWriter::Newline() {
  if (!pretty_) return;
  out_.put('\n');
  for (size_t i = 0; i < first_.size(); ++i) out_.write("  ", 2);
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.put(',');
    first_.back() = false;
    Newline();
  }
}

void JsonWriter::BeginObject() {
  Separate();
  out_.put('{');
  first_.push_back(true);
}
void JsonWriter::EndObject() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) Newline();
  out_.put('}');
}
void JsonWriter::BeginArray() {
  Separate();
  out_.put('[');
  first_.push_back(true);
}
void JsonWriter::EndArray() {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) Newline();
  out_.put(']');
}
void JsonWriter::Key(std::string_view key) {
  Separate();
  out_.put('"');
  out_ << Escape(key);
  out_.write(pretty_ ? "\": " : "\":", pretty_ ? 3 : 2);
  after_key_ = true;
}

size_t Utf8SequenceLength(const unsigned char* p, size_t n) {
  if (n == 0) return 0;
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) { return i < n && p[i] >= lo && p[i] <= hi; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

std::string JsonWriter::Escape(std::string_view s) {
  std::string r;
  r.reserve(s.size() + 2);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = p[i];
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(p + i, s.size() - i);
      if (len == 0) {
        r += "\\ufffd";
      } else {
        r.append(s.data() + i, len);
        i += len - 1;
      }
      continue;
    }
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\r': r += "\\r"; break;
      case '\t': r += "\\t"; break;
      case '\b': r += "\\b"; break;
      case '\f': r += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          r += buf;
        } else {
          r.push_back(static_cast<char>(c));
        }
    }
  }
  return r;
}

void JsonWriter::String(std::string_view s) {
  Separate();
  out_.put('"');
  out_ << Escape(s);
  out_.put('"');
}
void JsonWriter::Int(int64_t v) {
  Separate();
  char buf[24];
  out_.write(buf, std::to_chars(buf, buf + sizeof buf, v).ptr - buf);
}
void JsonWriter::Uint(uint64_t v) {
  Separate();
  char buf[24];
  out_.write(buf, std::to_chars(buf, buf + sizeof buf, v).ptr - buf);
}
void JsonWriter::Double(double v, int precision) {
  Separate();
  if (!std::isfinite(v)) {
    out_ << "null";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, precision);
  out_.write(buf, r.ptr - buf);
}
void JsonWriter::Bool(bool v) {
  Separate();
  out_ << (v ? "true" : "false");
}
void JsonWriter::Null() {
  Separate();
  out_ << "null";
}
void JsonWriter::Raw(std::string_view json) {
  Separate();
  out_ << json;
}
void JsonWriter::MicrosFromNs(int64_t ns) {
  Separate();
  char buf[32];
  out_ << FormatNsAsMicros(ns, buf);
}

}  // namespace trainrx::profiler
