// Escaping of names that come from a trace or a command line (op names, commands, file names) for
// the formats that are not JSON (profiler::JsonWriter::Escape does JSON). Private to reports/.
#pragma once

#include <string>
#include <string_view>

namespace trainrx::reports {

// Markdown inline text: ASCII punctuation that could start emphasis, code, a link, an HTML tag, an
// entity or a table cell is backslash-escaped (CommonMark allows it before any ASCII punctuation);
// line breaks and other control bytes become spaces (a name never ends a table row); bytes that are
// not valid UTF-8 become U+FFFD.
std::string MarkdownText(std::string_view s);

// XML 1.0 text and attribute values: & < > " ' as entities; control bytes XML 1.0 forbids (all below
// 0x20 but tab, newline, carriage return) and invalid UTF-8 become U+FFFD.
std::string XmlText(std::string_view s);

}  // namespace trainrx::reports
