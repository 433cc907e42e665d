// Tables of the text and Markdown renderings (table.h).
#include "table.h"

#include <algorithm>

#include "escape.h"

namespace trainrx::reports {
namespace {

std::string Pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

}  // namespace

// A text table cell holds at most this many characters: a user's whole command in a column made
// every line of the table over 300 characters wide (issue 34). Longer cells keep their head and
// tail (where a command's distinguishing arguments usually are); callers print the whole text
// under the table (FullLabels).
constexpr size_t kMaxCell = 60;
std::string Abbreviated(const std::string& s) {
  if (s.size() <= kMaxCell) return s;
  constexpr size_t kHead = 24, kTail = kMaxCell - kHead - 3;
  return s.substr(0, kHead) + "..." + s.substr(s.size() - kTail);
}
// "A: <the whole command>" lines for the labels a table abbreviated.
void FullLabels(const std::vector<std::pair<std::string, std::string>>& labels, std::ostream& out, bool md) {
  for (const auto& [key, label] : labels)
    if (label.size() > kMaxCell) out << (md ? "- " : "  ") << key << ": " << (md ? MarkdownText(label) : label) << "\n";
}

// Text: aligned columns; Markdown: a pipe table (the first row is the header). Both from rows.
void Table(const std::vector<std::vector<std::string>>& rows, std::ostream& out, bool md) {
  if (md) {
    for (size_t r = 0; r < rows.size(); ++r) {
      std::string line = "|";
      for (const auto& cell : rows[r]) line += " " + (cell.empty() ? std::string(" ") : MarkdownText(cell)) + " |";
      out << line << "\n";
      if (r == 0) {
        std::string rule = "|";
        for (size_t i = 0; i < rows[r].size(); ++i) rule += "---|";
        out << rule << "\n";
      }
    }
    return;
  }
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], Abbreviated(r[i]).size());
  }
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t i = 0; i < r.size(); ++i) line += " " + Pad(Abbreviated(r[i]), width[i] + 1);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

}  // namespace trainrx::reports
