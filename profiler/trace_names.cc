#include "trainrx/profiler/trace_names.h"

#include <charconv>
#include <limits>

namespace trainrx::profiler {
namespace {

size_t FileNameStart(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? 0 : slash + 1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// `digits` (all decimal digits, at least one) as a non-negative number no larger than `max`.
std::optional<int64_t> Decimal(std::string_view digits, int64_t max) {
  if (digits.empty()) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

}  // namespace

size_t TraceSuffixStart(std::string_view path) {
  const size_t ext = path.find(".json", FileNameStart(path));
  return ext == std::string_view::npos ? path.size() : ext;
}

std::string TaggedTracePath(std::string_view base, std::string_view tag) {
  const size_t ext = TraceSuffixStart(base);
  std::string out;
  out.reserve(base.size() + tag.size());
  out.append(base.substr(0, ext)).append(tag).append(base.substr(ext));
  return out;
}

std::string RankTracePath(std::string_view base, int64_t rank) {
  return TaggedTracePath(base, ".rank" + std::to_string(rank));
}

std::string PidTracePath(std::string_view base, int64_t pid) {
  return TaggedTracePath(base, ".pid" + std::to_string(pid));
}

std::string ProcessTracePath(std::string_view base, bool is_root, int64_t rank, int64_t pid) {
  if (is_root) return std::string(base);
  return rank >= 0 ? RankTracePath(base, rank) : PidTracePath(base, pid);
}

std::optional<TraceTag> ParseTaggedTraceName(std::string_view name, std::string_view base) {
  const size_t ext = TraceSuffixStart(base);
  const std::string_view stem = base.substr(0, ext), suffix = base.substr(ext);
  if (name.size() <= stem.size() + suffix.size() || !name.starts_with(stem) || !name.ends_with(suffix))
    return std::nullopt;
  std::string_view tag = name.substr(stem.size(), name.size() - stem.size() - suffix.size());
  TraceTag out;
  if (tag.starts_with(".rank")) {
    out.kind = TraceTag::Kind::kRank;
    tag.remove_prefix(5);
  } else if (tag.starts_with(".pid")) {
    out.kind = TraceTag::Kind::kPid;
    tag.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  for (char c : tag)
    if (!IsDigit(c)) return std::nullopt;
  const auto value = Decimal(tag, std::numeric_limits<int64_t>::max());
  if (!value) return std::nullopt;
  out.value = *value;
  return out;
}

int32_t RankInFileName(std::string_view path) {
  // The regex "rank[-_]?([0-9]+)" (case-insensitive), searched leftmost-first, without <regex>.
  const std::string_view name = path.substr(FileNameStart(path));
  for (size_t i = 0; i + 4 < name.size(); ++i) {
    if (Lower(name[i]) != 'r' || Lower(name[i + 1]) != 'a' || Lower(name[i + 2]) != 'n' || Lower(name[i + 3]) != 'k')
      continue;
    size_t d = i + 4;
    if ((name[d] == '-' || name[d] == '_') && d + 1 < name.size() && IsDigit(name[d + 1])) ++d;
    if (!IsDigit(name[d])) continue;
    size_t end = d;
    while (end < name.size() && IsDigit(name[end])) ++end;
    const auto rank = Decimal(name.substr(d, end - d), std::numeric_limits<int32_t>::max());
    return rank ? static_cast<int32_t>(*rank) : -1;
  }
  return -1;
}

bool MoveClaimedRank(int32_t* rank, std::string* rank_source, const std::function<bool(int32_t)>& taken) {
  if (!taken(*rank)) return false;
  int32_t to = *rank;
  // Every int32_t rank taken cannot happen (that many files); the bound keeps the loop finite.
  for (uint64_t tries = 0; taken(to) && tries <= std::numeric_limits<uint32_t>::max(); ++tries)
    to = to == std::numeric_limits<int32_t>::max() ? 0 : to + 1;
  *rank = to;
  if (rank_source) rank_source->append(kMovedRankNote);
  return true;
}

}  // namespace trainrx::profiler
