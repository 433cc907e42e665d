// Tables of the text and Markdown renderings (private to reports/): the experiments' records and
// the diff of two runs use the same aligned columns and pipe tables.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace trainrx::reports {

// At most kMaxCell characters, keeping the head and the tail.
std::string Abbreviated(const std::string& s);
// "  A: <the whole text>" lines for the labels a table abbreviated.
void FullLabels(const std::vector<std::pair<std::string, std::string>>& labels, std::ostream& out, bool md);
// Text: aligned columns (cells abbreviated); Markdown: a pipe table (the first row is the header).
void Table(const std::vector<std::vector<std::string>>& rows, std::ostream& out, bool md);

}  // namespace trainrx::reports
