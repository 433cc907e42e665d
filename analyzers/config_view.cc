#include "config_view.h"

#include <algorithm>
#include <cstdlib>

#include "intervals.h"
#include "trainrx/profiler/json_writer.h"

namespace trainrx::analyzers {

std::string ConfigText(const profiler::RankInfo& info, const char* key) {
  auto it = info.config.find(key);
  if (it == info.config.end()) return "";
  // A JSON string decoded; anything else as it is.
  if (auto text = it->second.AsString()) return *std::move(text);
  std::string v = it->second.json();
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

ConfigView::ConfigView(const profiler::Trace& trace, int32_t rank) : rank_(rank) {
  constexpr std::string_view kPrefix = "trainrx.config.";
  for (const auto& c : trace.counters) {
    if (trace.tracks[c.track].rank != rank) continue;
    const std::string_view name = trace.strings.Get(c.name);
    if (!StartsWith(name, kPrefix)) continue;
    series_[std::string(name.substr(kPrefix.size()))].push_back({c.ts_ns, c.value});
  }
  for (auto& [k, v] : series_) std::sort(v.begin(), v.end());
  if (const auto* info = trace.FindRank(rank)) {
    block_ = info->config;
    auto it = block_.find("collector");
    from_collector_ = it != block_.end() || !series_.empty();
  }
}

std::optional<double> ConfigView::Static(const std::string& key) const {
  auto it = block_.find(key);
  if (it == block_.end()) return std::nullopt;
  return it->second.AsNumber();
}

std::string ConfigView::Raw(const std::string& key) const {
  auto it = block_.find(key);
  return it == block_.end() ? std::string() : it->second.json();
}

std::optional<double> ConfigView::At(const std::string& key, int64_t ts_ns) const {
  auto it = series_.find(key);
  if (it == series_.end() || it->second.empty()) return Static(key);
  const auto& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), std::make_pair(ts_ns, 1e300));
  if (pos == v.begin()) return v.front().second;
  return std::prev(pos)->second;
}

std::optional<double> ConfigView::Max(const std::string& key) const {
  std::optional<double> best = Static(key);
  auto it = series_.find(key);
  if (it != series_.end()) {
    for (const auto& [ts, value] : it->second) best = best ? std::max(*best, value) : value;
  }
  return best;
}

int64_t ConfigView::StepsWhereOn(const std::string& key, const StepModel& steps, int64_t* total) const {
  int64_t on = 0, n = 0;
  auto it = series_.find(key);
  for (const auto& s : steps.steps) {
    if (s.rank != rank_) continue;
    ++n;
    bool active = At(key, s.start_ns).value_or(0) != 0;
    if (!active && it != series_.end()) {
      for (const auto& [ts, value] : it->second) {
        if (ts >= s.start_ns && ts < s.start_ns + s.wall_ns && value != 0) active = true;
      }
    }
    on += active ? 1 : 0;
  }
  if (total) *total = n;
  return on;
}

double ConfigView::LocalRanks() const {
  const std::string env = Raw("env");
  const std::string key = "\"LOCAL_WORLD_SIZE\":\"";
  if (const size_t p = env.find(key); p != std::string::npos) return std::max(1.0, std::strtod(env.c_str() + p + key.size(), nullptr));
  return 1;
}

}  // namespace trainrx::analyzers
