#include "cpu_wait_series.h"

#include <algorithm>
#include <string_view>

namespace trainrx::analyzers {
namespace {

using profiler::CpuWaitWhat;

std::optional<CpuWaitWhat> WhatOf(std::string_view name) {
  for (auto w : {CpuWaitWhat::kRun, CpuWaitWhat::kWait, CpuWaitWhat::kInvoluntary, CpuWaitWhat::kChildrenRun,
                 CpuWaitWhat::kCpusBusy, CpuWaitWhat::kCpus})
    if (name == profiler::CpuWaitCounterName(w)) return w;
  return std::nullopt;
}

}  // namespace

std::optional<double> CpuWaitSeries::At(CpuWaitWhat what, int64_t ts) const {
  const auto it = by_key.find(what);
  if (it == by_key.end() || it->second.empty()) return std::nullopt;
  const auto& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, 1e300));
  return pos == v.begin() ? v.front().second : std::prev(pos)->second;
}

profiler::CpuWaitSample CpuWaitSeries::SampleAt(int64_t ts) const {
  profiler::CpuWaitSample s;
  const auto get = [&](CpuWaitWhat w, double fallback) { return At(w, ts).value_or(fallback); };
  s.ok = by_key.count(CpuWaitWhat::kWait) > 0;
  s.run_ns = static_cast<int64_t>(get(CpuWaitWhat::kRun, 0));
  s.wait_ns = static_cast<int64_t>(get(CpuWaitWhat::kWait, 0));
  s.involuntary = static_cast<int64_t>(get(CpuWaitWhat::kInvoluntary, 0));
  s.children_run_ns = static_cast<int64_t>(get(CpuWaitWhat::kChildrenRun, -1));
  s.cpus_busy_ns = static_cast<int64_t>(get(CpuWaitWhat::kCpusBusy, -1));
  s.cpus = static_cast<int64_t>(get(CpuWaitWhat::kCpus, 0));
  return s;
}

int64_t CpuWaitSeries::Nearest(int64_t ts) const {
  const auto& v = by_key.at(CpuWaitWhat::kRun);
  auto pos = std::lower_bound(v.begin(), v.end(), std::make_pair(ts, -1e300));
  if (pos == v.end()) return v.back().first;
  if (pos == v.begin()) return pos->first;
  const int64_t after = pos->first, before = std::prev(pos)->first;
  return ts - before <= after - ts ? before : after;
}

profiler::CpuLoad CpuWaitSeries::Between(int64_t begin, int64_t end, double* covered) const {
  const int64_t t0 = Nearest(begin), t1 = Nearest(end);
  if (covered != nullptr) {
    const double span = static_cast<double>(end - begin);
    *covered = span > 0 ? std::clamp(static_cast<double>(std::min(t1, end) - std::max(t0, begin)) / span, 0.0, 1.0) : 1;
  }
  if (t1 <= t0) return {};
  return profiler::LoadBetween(SampleAt(t0), SampleAt(t1), static_cast<double>(t1 - t0));
}

std::optional<CpuWaitSeries> CpuWaitSeriesOfRank(const profiler::Trace& trace, int32_t rank) {
  std::map<int64_t, CpuWaitSeries> by_pid;
  const std::string_view prefix = profiler::kCpuWaitCounterPrefix;
  for (const auto& c : trace.counters) {
    const profiler::Track& t = trace.tracks[c.track];
    if (t.rank != rank) continue;
    const std::string_view name = trace.strings.Get(c.name);
    if (name.substr(0, prefix.size()) != prefix) continue;
    if (const auto what = WhatOf(name)) by_pid[t.pid].by_key[*what].push_back({c.ts_ns, c.value});
  }
  CpuWaitSeries* best = nullptr;
  size_t most = 0;
  for (auto& [pid, s] : by_pid) {
    for (auto& [k, v] : s.by_key) std::sort(v.begin(), v.end());
    const auto it = s.by_key.find(CpuWaitWhat::kRun);
    if (it != s.by_key.end() && s.by_key.count(CpuWaitWhat::kWait) && it->second.size() > most)
      most = it->second.size(), best = &s;
  }
  if (best == nullptr || most < 2) return std::nullopt;
  return std::move(*best);
}

}  // namespace trainrx::analyzers
