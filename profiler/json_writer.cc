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

namespace {
void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Four hex digits at s[i..i+4) as a number, or -1.
int32_t Hex4(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  int32_t v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}
}  // namespace

std::optional<std::string> JsonWriter::Unquote(std::string_view json) {
  if (json.size() < 2 || json.front() != '"' || json.back() != '"') return std::nullopt;
  const std::string_view s = json.substr(1, json.size() - 2);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c < 0x20) return std::nullopt;  // an unescaped quote ends the string early
    if (c != '\\') {
      out.push_back(static_cast<char>(c));
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    switch (s[i]) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        int32_t cp = Hex4(s, i + 1);
        if (cp < 0) return std::nullopt;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
          const int32_t lo = i + 2 < s.size() && s[i + 1] == '\\' && s[i + 2] == 'u' ? Hex4(s, i + 3) : -1;
          if (lo < 0xDC00 || lo > 0xDFFF) return std::nullopt;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return std::nullopt;
        }
        AppendUtf8(static_cast<uint32_t>(cp), &out);
        break;
      }
      default: return std::nullopt;
    }
  }
  return out;
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
