// Representative steps cut down to a drawable timeline (timeline.h says why and how).
#include "trainrx/analyzers/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "intervals.h"
#include "phases.h"
#include "runtime_names.h"

namespace trainrx::analyzers {

const char* TimelineClassName(TimelineClass c) {
  switch (c) {
    case TimelineClass::kOp: return "op";
    case TimelineClass::kAnnotation: return "annotation";
    case TimelineClass::kStep: return "step";
    case TimelineClass::kData: return "data";
    case TimelineClass::kForward: return "forward";
    case TimelineClass::kBackward: return "backward";
    case TimelineClass::kOptimizer: return "optimizer";
    case TimelineClass::kRuntime: return "runtime";
    case TimelineClass::kSync: return "sync";
    case TimelineClass::kKernel: return "kernel";
    case TimelineClass::kMemcpy: return "memcpy";
    case TimelineClass::kMemset: return "memset";
  }
  return "op";
}

namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

// Whether an event of this kind is drawn at all (instants and GPU-projected annotations are not):
// told by the kind alone, so the events before a window set the depth without their names.
bool Drawn(EventKind kind) { return kind != EventKind::kInstant && kind != EventKind::kGpuUserAnnotation; }

// The class an event is drawn as, or nothing (not Drawn).
std::optional<TimelineClass> ClassOf(const Event& e, std::string_view name) {
  if (!Drawn(e.kind)) return std::nullopt;
  switch (e.kind) {
    case EventKind::kKernel: return TimelineClass::kKernel;
    case EventKind::kMemcpy: return TimelineClass::kMemcpy;
    case EventKind::kMemset: return TimelineClass::kMemset;
    case EventKind::kCudaSync: return TimelineClass::kSync;
    case EventKind::kCudaRuntime:
    case EventKind::kCudaDriver: return IsBlockingCall(name) ? TimelineClass::kSync : TimelineClass::kRuntime;
    case EventKind::kCpuOp:
    case EventKind::kUserAnnotation:
    case EventKind::kPythonFunction:
    case EventKind::kOther: {
      if (StartsWith(name, "ProfilerStep#") || StartsWith(name, "trainrx::step#")) return TimelineClass::kStep;
      switch (PhaseOf(name)) {
        case kData: return TimelineClass::kData;
        case kOptimizer: return TimelineClass::kOptimizer;
        case kBackward: return TimelineClass::kBackward;
        case kForward: return TimelineClass::kForward;
        default: break;
      }
      return e.kind == EventKind::kUserAnnotation ? TimelineClass::kAnnotation : TimelineClass::kOp;
    }
    case EventKind::kGpuUserAnnotation:
    case EventKind::kInstant: return std::nullopt;
  }
  return std::nullopt;
}

// Kept whatever their width: what a reader of a timeline looks for first.
bool AlwaysKept(TimelineClass c) {
  return c == TimelineClass::kSync || c == TimelineClass::kData || c == TimelineClass::kStep;
}

std::string LaneLabel(const Trace& trace, const profiler::Track& t) {
  if (t.kind == TrackKind::kGpuStream) {
    return "GPU " + std::to_string(t.device >= 0 ? t.device : t.pid) + " · stream " +
           std::to_string(t.stream >= 0 ? t.stream : t.tid);
  }
  // A thread's own name when it has one ("python3", "pt_autograd_0"), with its id.
  const std::string id = t.tid_name != profiler::kNoStr ? std::string(trace.strings.Get(t.tid_name))
                                                         : "thread " + std::to_string(t.tid);
  if (t.name == profiler::kNoStr) return id;
  // Kineto's names carry the id already: "thread 4515 (python3)".
  const std::string name(trace.strings.Get(t.name));
  return name.find(std::to_string(t.tid)) != std::string::npos ? name : name + " · " + id;
}

struct Candidate {
  uint32_t lane;
  TimelineEvent event;
  int64_t full_dur_ns;  // before clipping: the width that decides what is kept
};

class Builder {
 public:
  Builder(const Trace& trace, const TimelineOptions& options, Timeline& out)
      : trace_(trace), options_(options), out_(out) {}

  void AddWindow(TimelineWindow w) {
    const int64_t lo = w.start_ns, hi = w.start_ns + w.dur_ns;
    std::vector<Candidate> candidates;
    for (uint32_t ti = 0; ti < trace_.tracks.size(); ++ti) {
      const auto& track = trace_.tracks[ti];
      if (track.rank != w.rank || track.kind == TrackKind::kOther) continue;
      const bool gpu = track.kind == TrackKind::kGpuStream;
      const auto events = trace_.TrackEvents(ti);
      // Events before `hi` only; the ones starting before `lo` still set the depth of what they enclose.
      const auto end = std::lower_bound(events.begin(), events.end(), hi,
                                        [](const Event& e, int64_t t) { return e.ts_ns < t; });
      std::vector<int64_t> open_ends;
      const uint32_t lane = static_cast<uint32_t>(w.lanes.size());
      const size_t candidates_before = candidates.size();
      int64_t left_out = 0;
      for (auto it = events.begin(); it != end; ++it) {
        const Event& e = *it;
        if (e.dur_ns <= 0 || !Drawn(e.kind)) continue;
        int depth = 0;
        if (!gpu) {
          while (!open_ends.empty() && open_ends.back() <= e.ts_ns) open_ends.pop_back();
          depth = static_cast<int>(open_ends.size());
          open_ends.push_back(e.end_ns());
        }
        if (e.end_ns() <= lo) continue;  // before the window: its depth only (a long trace's prefix: no name read)
        const auto cls = ClassOf(e, trace_.Name(e));
        if (!cls) continue;
        ++w.events_in_window;
        if (depth >= options_.max_depth && !AlwaysKept(*cls)) {
          ++left_out;
          continue;
        }
        TimelineEvent te;
        te.ts_ns = std::max(e.ts_ns, lo) - lo;
        te.dur_ns = std::min(e.end_ns(), hi) - lo - te.ts_ns;
        te.name = NameIndex(e.name);
        te.depth = static_cast<uint8_t>(std::min(depth, 255));
        te.cls = *cls;
        candidates.push_back({lane, te, e.dur_ns});
      }
      if (left_out == 0 && candidates.size() == candidates_before) continue;  // nothing of the window here
      TimelineLane l;
      l.label = LaneLabel(trace_, track);
      l.gpu = gpu;
      l.left_out = left_out;
      w.lanes.push_back(std::move(l));
    }
    Sample(candidates, w);
    out_.windows.push_back(std::move(w));
  }

 private:
  // Keeps every always-kept event and the widest of the others up to the budget.
  void Sample(std::vector<Candidate>& candidates, TimelineWindow& w) {
    std::vector<size_t> optional;
    size_t always = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (AlwaysKept(candidates[i].event.cls)) ++always;
      else optional.push_back(i);
    }
    const size_t room = options_.events_per_window > static_cast<int64_t>(always)
                            ? static_cast<size_t>(options_.events_per_window) - always
                            : 0;
    std::vector<bool> keep(candidates.size(), true);
    if (optional.size() > room) {
      std::stable_sort(optional.begin(), optional.end(), [&](size_t a, size_t b) {
        return candidates[a].full_dur_ns > candidates[b].full_dur_ns;
      });
      for (size_t k = room; k < optional.size(); ++k) {
        keep[optional[k]] = false;
        ++w.lanes[candidates[optional[k]].lane].left_out;
      }
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!keep[i]) continue;
      w.lanes[candidates[i].lane].events.push_back(candidates[i].event);
      ++w.events_kept;
    }
  }

  uint32_t NameIndex(profiler::StrId id) {
    const auto [it, added] = name_index_.try_emplace(id, static_cast<uint32_t>(out_.names.size()));
    if (added) out_.names.emplace_back(trace_.strings.Get(id));
    return it->second;
  }

  const Trace& trace_;
  const TimelineOptions& options_;
  Timeline& out_;
  std::unordered_map<profiler::StrId, uint32_t> name_index_;
};

// Index into `rows` of the nearest-rank median by wall time, and of the slowest row.
std::pair<size_t, size_t> MedianAndSlowest(const std::vector<size_t>& rows, const std::vector<StepRow>& steps) {
  std::vector<size_t> by_wall = rows;
  std::stable_sort(by_wall.begin(), by_wall.end(),
                   [&](size_t a, size_t b) { return steps[a].wall_ns < steps[b].wall_ns; });
  return {by_wall[(by_wall.size() - 1) / 2], by_wall.back()};
}

}  // namespace

Timeline BuildTimeline(const Trace& trace, const StepModel& steps, const TimelineOptions& options) {
  Timeline out;
  const std::vector<int32_t> ranks = trace.RankIds();
  out.ranks_total = static_cast<int32_t>(ranks.size());
  Builder builder(trace, options, out);

  // Steps of each rank, in trace order.
  std::map<int32_t, std::vector<size_t>> rows_of;
  for (size_t i = 0; i < steps.steps.size(); ++i) rows_of[steps.steps[i].rank].push_back(i);

  if (rows_of.empty()) {
    // No steps: the first rank's whole span (sampled to the budget).
    if (ranks.empty()) return out;
    const int32_t rank = ranks.front();
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
      if (trace.tracks[ti].rank != rank) continue;
      for (const Event& e : trace.TrackEvents(ti)) {
        lo = std::min(lo, e.ts_ns);
        hi = std::max(hi, e.end_ns());
      }
    }
    if (lo >= hi) return out;
    TimelineWindow w;
    w.rank = rank;
    w.why = "whole trace";
    w.label = "rank " + std::to_string(rank) + " · whole trace (no steps found)";
    w.start_ns = lo;
    w.dur_ns = hi - lo;
    out.ranks_shown.push_back(rank);
    builder.AddWindow(std::move(w));
    return out;
  }

  // The first rank, and the rank whose median step is slowest (a straggler shows there).
  std::vector<int32_t> shown = {rows_of.begin()->first};
  int32_t slowest_rank = shown.front();
  int64_t slowest_median = -1;
  for (const auto& [rank, rows] : rows_of) {
    const int64_t median = steps.steps[MedianAndSlowest(rows, steps.steps).first].wall_ns;
    if (median > slowest_median) slowest_median = median, slowest_rank = rank;
  }
  if (slowest_rank != shown.front() && options.max_ranks > 1) shown.push_back(slowest_rank);
  out.ranks_shown = shown;

  for (const int32_t rank : shown) {
    const auto& rows = rows_of[rank];
    const std::string prefix = "rank " + std::to_string(rank) + " · ";
    const auto add_step = [&](const StepRow& row, int32_t index, const std::string& why) {
      TimelineWindow w;
      w.rank = rank;
      w.why = why;
      w.label = prefix + row.name + " (" + why + ")";
      w.start_ns = row.start_ns;
      w.dur_ns = std::max<int64_t>(row.wall_ns, 1);
      w.step_index = index;
      builder.AddWindow(std::move(w));
    };
    const auto [median, slowest] = MedianAndSlowest(rows, steps.steps);
    add_step(steps.steps[median], static_cast<int32_t>(median), "median");
    if (slowest != median) add_step(steps.steps[slowest], static_cast<int32_t>(slowest), "slowest");
    for (const auto& warm : steps.warmup_steps) {
      if (warm.rank != rank) continue;
      add_step(warm, -1, "warm-up");
      break;
    }
  }
  return out;
}

}  // namespace trainrx::analyzers
