#include "escape.h"

#include "trainrx/profiler/json_writer.h"

namespace trainrx::reports {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Calls emit(byte) for ASCII bytes and appends valid multi-byte sequences (U+FFFD for invalid ones).
template <typename Emit>
std::string Each(std::string_view s, Emit emit) {
  std::string out;
  out.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size(); ++i) {
    if (p[i] < 0x80) {
      emit(static_cast<char>(p[i]), out);
      continue;
    }
    const size_t len = profiler::Utf8SequenceLength(p + i, s.size() - i);
    if (len == 0) {
      out += kReplacement;
    } else {
      out.append(s.data() + i, len);
      i += len - 1;
    }
  }
  return out;
}

}  // namespace

std::string MarkdownText(std::string_view s) {
  return Each(s, [](char c, std::string& out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out.push_back(' ');
      return;
    }
    if (std::string_view("\\`*_[]<>|&#!").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  });
}

std::string XmlText(std::string_view s) {
  return Each(s, [](char c, std::string& out) {
    switch (c) {
      case '&': out += "&amp;"; return;
      case '<': out += "&lt;"; return;
      case '>': out += "&gt;"; return;
      case '"': out += "&quot;"; return;
      case '\'': out += "&apos;"; return;
      case '\t': case '\n': case '\r': out.push_back(c); return;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += kReplacement;
        else out.push_back(c);
    }
  });
}

}  // namespace trainrx::reports
