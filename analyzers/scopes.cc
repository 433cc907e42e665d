#include "scopes.h"

#include "intervals.h"

#include <algorithm>
#include <string>

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;

namespace {
constexpr std::string_view kModulePrefix = "nn.Module: ";
constexpr std::string_view kAtMark = "trainrx::at ";
}

std::string_view CallSiteText(const profiler::Trace& trace, const Event& e) {
  if (e.kind == EventKind::kPythonFunction) return trace.Name(e);
  if (e.kind != EventKind::kUserAnnotation) return {};
  const std::string_view n = trace.Name(e);
  return StartsWith(n, kAtMark) ? n.substr(kAtMark.size()) : std::string_view();
}

bool IsUserFrame(std::string_view n) {
  return !(n.rfind("torch/", 0) == 0 || n.rfind("<built-in", 0) == 0 || n.find("site-packages/") != std::string_view::npos ||
           n.find("dist-packages/") != std::string_view::npos || n.rfind("nn.Module:", 0) == 0 ||
           n.rfind("<frozen", 0) == 0 || n.find("/lib/python3") != std::string_view::npos);
}

bool CallSites::Visit(const Event& e) {
  while (!open_.empty() && open_.back()->end_ns() <= e.ts_ns) open_.pop_back();
  if (CallSiteText(trace_, e).empty()) return false;
  open_.push_back(&e);
  return true;
}

const Event* CallSites::UserFrame() const {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it)
    if (IsUserFrame(CallSiteText(trace_, **it))) return *it;
  return nullptr;
}

std::string_view CallSites::UserSite() const {
  const Event* f = UserFrame();
  return f ? CallSiteText(trace_, *f) : std::string_view();
}

int64_t CallSites::UserSiteStart() const {
  const Event* f = UserFrame();
  return f ? f->ts_ns : INT64_MIN;
}

std::string_view CallSites::LibrarySite() const {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    const std::string_view text = CallSiteText(trace_, **it);
    for (const std::string_view dir : {std::string_view("site-packages/"), std::string_view("dist-packages/")}) {
      const size_t at = text.find(dir);
      if (at == std::string_view::npos) continue;
      const std::string_view rest = text.substr(at + dir.size());
      if (rest.rfind("torch/", 0) == 0 || rest.rfind("torch_", 0) == 0) break;  // torch's own code: not a site
      return rest;
    }
  }
  return {};
}

std::string_view ModuleName(std::string_view name) {
  if (name.size() <= kModulePrefix.size() || !StartsWith(name, kModulePrefix)) return {};
  return name.substr(kModulePrefix.size());
}

std::string InModule(std::string_view module) {
  return module.empty() ? std::string() : " in " + std::string(module);
}

std::string WhereIn(const ScopeIndex& modules, const ScopeIndex& annotations, const Event& e) {
  const std::string_view m = modules.Of(e);
  return InModule(m.empty() ? annotations.Of(e) : m);
}

ScopeIndex::ScopeIndex(const profiler::Trace& trace, What what) : by_track_(trace.tracks.size()) {
  // Which interned names qualify, decided once per name rather than once per event.
  std::vector<int8_t> is_module(trace.strings.size(), 0);
  for (size_t id = 0; id < trace.strings.size(); ++id)
    is_module[id] = ModuleName(trace.strings.Get(static_cast<profiler::StrId>(id))).empty() ? 0 : 1;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].kind != profiler::TrackKind::kCpuThread) continue;
    auto& ranges = by_track_[ti];
    std::vector<int32_t> open;  // chain of enclosing ranges
    for (const Event& e : trace.TrackEvents(ti)) {
      const bool module = e.name < is_module.size() && is_module[e.name] != 0;
      bool take = false;
      if (what == What::kModules) {
        take = module && (e.kind == EventKind::kUserAnnotation || e.kind == EventKind::kPythonFunction);
      } else {
        const std::string_view n = trace.Name(e);
        // Not steps, and not our own marks (call sites, compile, loader...): they are not the user's scopes.
        take = !module && e.kind == EventKind::kUserAnnotation && !StartsWith(n, "ProfilerStep#") && !StartsWith(n, "trainrx::");
      }
      if (!take || e.dur_ns < 0) continue;
      Range r;
      r.ts = e.ts_ns;
      r.end = e.end_ns();
      r.name = module ? ModuleName(trace.Name(e)) : trace.Name(e);
      // Events come in (start asc, duration desc) order: an enclosing range comes first.
      while (!open.empty() && ranges[static_cast<size_t>(open.back())].end < r.end) open.pop_back();
      r.parent = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int32_t>(ranges.size()));
      ranges.push_back(r);
    }
    ranges_ += ranges.size();
  }
}

std::string_view ScopeIndex::Of(uint32_t track, int64_t ts, int64_t end) const {
  if (track >= by_track_.size()) return {};
  const auto& ranges = by_track_[track];
  auto it = std::upper_bound(ranges.begin(), ranges.end(), ts, [](int64_t t, const Range& r) { return t < r.ts; });
  int32_t k = static_cast<int32_t>(it - ranges.begin()) - 1;
  // The latest range starting at or before ts is either the innermost enclosing one or nested
  // in it (ranges nest), so the enclosing one is on its parent chain.
  while (k >= 0 && ranges[static_cast<size_t>(k)].end < end) k = ranges[static_cast<size_t>(k)].parent;
  return k >= 0 ? ranges[static_cast<size_t>(k)].name : std::string_view();
}

const std::vector<ScopeIndex::Range>& ScopeIndex::RangesOf(uint32_t track) const {
  static const std::vector<Range> kNone;
  return track < by_track_.size() ? by_track_[track] : kNone;
}

}  // namespace trainrx::analyzers
