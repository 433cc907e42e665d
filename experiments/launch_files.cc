#include "trainrx/experiments/launch_files.h"

#include <algorithm>

namespace trainrx::experiments {

namespace fs = std::filesystem;

namespace {
// Start of the ".json..." suffix of base's file name (its end when there is none).
size_t SuffixStart(const std::string& base) {
  const size_t slash = base.rfind('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const size_t ext = base.find(".json", name_start);
  return ext == std::string::npos ? base.size() : ext;
}
}  // namespace

std::string TaggedTracePath(const std::string& base, const std::string& tag) {
  const size_t ext = SuffixStart(base);
  return base.substr(0, ext) + tag + base.substr(ext);
}

std::vector<std::string> LaunchTraces(const fs::path& output, fs::file_time_type since) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::exists(output, ec) && fs::last_write_time(output, ec) >= since) out.push_back(output.string());
  const std::string name = output.filename().string();
  const size_t ext = SuffixStart(name);
  const std::string stem = name.substr(0, ext), suffix = name.substr(ext);
  std::vector<std::string> children;
  for (const auto& entry : fs::directory_iterator(output.parent_path(), ec)) {
    const std::string n = entry.path().filename().string();
    if (n.rfind(stem + ".rank", 0) != 0 && n.rfind(stem + ".pid", 0) != 0) continue;
    if (n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (entry.last_write_time(ec) < since) continue;
    children.push_back(entry.path().string());
  }
  std::sort(children.begin(), children.end());
  out.insert(out.end(), children.begin(), children.end());
  return out;
}

}  // namespace trainrx::experiments
