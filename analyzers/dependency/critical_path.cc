// The critical path of each step (metrics.h CriticalPath; issue 50), over the dependency model.
//
// The walk goes backwards from the step's end on the thread that launches most of the rank's device
// work, one segment at a time, each nanosecond of the step in exactly one class:
//  - on the host at time t: the thread ran its own work back to the last call before t that waited
//    (a blocking call or a copy tied to device work, links.h) or an allocator call. Inside a call
//    that waited for device work D, the host waited from D's end on (sync wait) and the path moves to
//    D; an allocator call that waited for nothing is allocator time;
//  - on device work D: D ran [start, end]; it started after the latest of (a) its launch call's
//    return (then the launch and the device's start latency are the path, which moves to the host
//    at the call), (b) the end of the previous work on its stream (a kernel gap, then that work) and
//    (c) when both had left it waiting more than `kDependencyGapNs`, the end of the work on another
//    stream that ended last before it started: a cross-stream dependency inferred by time (HTA needs
//    cuda_sync records for it and drops the time; we keep the time and say it was inferred).
// A communication kernel matched across ranks (the k-th of its name on every rank,
// collectives.h) started waiting for the last rank to arrive: the part of its duration beyond the
// shortest instance's (the last arrival's) is rank_wait, naming that rank; the rest is gpu_comm.
// Durations only, as dist.straggler: clock offsets between hosts change nothing.
// The slack of the work the path moves to is how much later it could have ended before another of
// D's dependencies would have bound: shortening it by k saves min(k, slack) of the step.
// One pass per step over events that come in time order: binary searches, no general graph.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "collectives.h"
#include "dependency.h"
#include "links.h"
#include "rank_phases.h"
#include "runtime_names.h"

namespace trainrx::analyzers {

const char* PathClassName(PathClass c) {
  switch (c) {
    case PathClass::kCpu: return "cpu";
    case PathClass::kLaunch: return "launch";
    case PathClass::kAllocator: return "allocator";
    case PathClass::kSyncWait: return "sync_wait";
    case PathClass::kCompute: return "gpu_compute";
    case PathClass::kComm: return "gpu_comm";
    case PathClass::kCopy: return "gpu_copy";
    case PathClass::kKernelGap: return "kernel_gap";
    case PathClass::kDependency: return "dependency_wait";
    case PathClass::kOther: return "other";
    case PathClass::kRankWait: return "rank_wait";
  }
  return "other";
}

namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;

// The matched instances of a rank's communication kernels that waited for another rank.
struct RankWait {
  int64_t ts_ns = 0, dur_ns = 0;  // the kernel (its start and duration identify it on its rank)
  int64_t wait_ns = 0;            // its duration beyond the last arrival's
  int32_t late_rank = 0;
};
using RankWaits = std::vector<RankWait>;  // sorted by ts_ns

// A PathSegment while walking: its name a view (most are the trace's names), copied into a
// PathSegment only for the path a report shows.
struct Segment {
  int64_t start_ns = 0, end_ns = 0;
  PathClass cls = PathClass::kCpu;
  std::string_view what;
  int64_t slack_ns = -1;
};

class Walker {
 public:
  Walker(const Trace& trace, const RankLinks& l, const RankWaits* waits) : trace_(trace), l_(l), waits_(waits) {
    for (size_t i = 0; i < l.calls.size(); ++i) {
      const HostCall& c = l.calls[i];
      if (c.waited_for >= 0 || c.kind == CallKind::kAllocator) stops_[c.track].push_back(static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < l.work.size(); ++i)
      if (const HostCall* c = l.CallOf(l.work[i])) launched_.push_back({c->e->ts_ns, static_cast<int32_t>(i)});
    std::sort(launched_.begin(), launched_.end());
  }

  // The path of the window [start, end) from `host`'s point of view, in time order. The window's
  // work is what its host launched: when device work launched inside it ends after `end` (the host
  // ran ahead of a busy device), the path ends there, at the last of it (HTA's window is the same).
  // It is walked back to `stop`: the window's start by default; the previous step's last device
  // work where the device runs behind the loop.
  // The segments name what they were by views into the trace's strings or this walker's texts: valid
  // until the next Walk.
  const std::vector<Segment>& Walk(uint32_t host, int64_t start, int64_t end, int64_t stop = INT64_MIN) {
    segs_.clear();
    texts_.clear();
    start_ = stop == INT64_MIN ? start : stop;
    At at = At::kHost;
    uint32_t track = host;
    int64_t t = end;
    int32_t work = -1;
    int64_t slack = -1;
    for (auto it = std::lower_bound(launched_.begin(), launched_.end(), std::make_pair(start, INT32_MIN));
         it != launched_.end() && it->first < end; ++it) {
      if (l_.work[it->second].end() > t) {
        t = l_.work[it->second].end();
        work = it->second;
        at = At::kDevice;
      }
    }
    for (size_t guard = 0; guard < 4 * (l_.work.size() + l_.calls.size()) + 16; ++guard) {
      if (at == At::kHost) {
        if (t <= start_) break;
        if (!HostStep(host, track, t, work, at)) break;
        if (at == At::kDevice) slack = -1;
        continue;
      }
      // On device work.
      const DeviceWork& d = l_.work[work];
      const PathClass cls = DeviceClass(d);
      const RankWait* rw = cls == PathClass::kComm ? WaitOf(d) : nullptr;
      if (rw != nullptr) {
        const int64_t arrived = d.ts() + rw->wait_ns;
        Add(arrived, std::min(t, d.end()), cls, trace_.Name(*d.e), slack);
        Add(d.ts(), arrived, PathClass::kRankWait, Text(fmt::format("rank {} arrived last at {}", rw->late_rank, trace_.Name(*d.e))), -1);
      } else {
        Add(d.ts(), std::min(t, d.end()), cls, trace_.Name(*d.e), slack);
      }
      if (d.ts() <= start_) break;
      const int64_t ready_p = d.prev >= 0 ? l_.work[d.prev].end() : INT64_MIN;
      // The device can take work once its launch call has started (a call that returns after its
      // work began, such as a copy to pageable memory, must not look like it held the work back).
      const HostCall* call = l_.CallOf(d);
      const int64_t ready_l = call ? call->e->ts_ns : INT64_MIN;
      const int64_t base = std::max(ready_p, ready_l);
      int32_t x = -1;
      int64_t ready_x = INT64_MIN;
      bool by_event = false;
      if (d.waits_on >= 0 && l_.work[d.waits_on].end() > base) {
        // A sync record says what it waited on (an event recorded on another stream): no inference.
        x = d.waits_on;
        ready_x = std::min(l_.work[x].end(), d.ts());
        by_event = true;
      } else if (const int32_t inferred = InferredStreamWait(l_, work); inferred >= 0) {
        x = inferred;  // the work on another stream that ended last at or before d started
        ready_x = l_.work[x].end();
      }
      // The binding dependency: the latest ready time at or before d's start.
      int64_t ready[3] = {std::min(ready_p, d.ts()), std::min(ready_l, d.ts()), ready_x};
      if (d.prev < 0) ready[0] = INT64_MIN;
      if (!call) ready[1] = INT64_MIN;
      const int pick = static_cast<int>(std::max_element(ready, ready + 3) - ready);
      if (ready[pick] == INT64_MIN) {
        Add(start_, d.ts(), PathClass::kOther, "work launched before the trace", -1);
        break;
      }
      int64_t second = INT64_MIN;
      for (int k = 0; k < 3; ++k)
        if (k != pick) second = std::max(second, ready[k]);
      slack = second == INT64_MIN ? ready[pick] - start_ : ready[pick] - second;
      // Left waiting with its launch returned and its stream free, and no other stream's work to
      // name: a dependency the trace does not show (an event recorded from the host, another rank).
      // (After a launch, measured from the call's return: the call itself is launch time.)
      const int64_t free_from = pick == 1 ? std::min(call->e->end_ns(), d.ts()) : ready[pick];
      if (pick != 2 && d.ts() - free_from > kDependencyGapNs)
        Add(free_from, d.ts(), PathClass::kDependency, Text(fmt::format("stream {} waited (not on this rank's streams)", d.stream)), -1);
      if (pick == 0) {
        Add(ready[0], d.ts(), PathClass::kKernelGap, StreamName(d.stream), -1);
        work = d.prev;
        t = l_.work[d.prev].end();
      } else if (pick == 2) {
        Add(ready_x, d.ts(), PathClass::kDependency,
            Text(fmt::format("stream {} waited on stream {}{}", d.stream, l_.work[x].stream, by_event ? " (event)" : "")), -1);
        work = x;
        t = ready_x;
      } else {
        Add(call->e->ts_ns, d.ts(), PathClass::kLaunch, trace_.Name(*call->e), -1);  // call + start latency
        track = call->track;
        t = call->e->ts_ns;
        at = At::kHost;
      }
    }
    std::reverse(segs_.begin(), segs_.end());
    return segs_;
  }

 private:
  enum class At { kHost, kDevice };
  // One step back on a host thread at t: to the last waiting or allocator call, or wait for another
  // thread, before t. Returns false when the walk is over.
  bool HostStep(uint32_t host, uint32_t& track, int64_t& t, int32_t& work, At& at) {
    // A thread other than the loop's works in bursts: before its current burst it was idle, woken
    // by the loop's thread (the autograd engine's device threads, a collective backend's thread).
    int64_t floor = start_;
    std::string_view who;
    if (track != host) {
      const auto bs = l_.busy_spans.find(track);
      const std::pair<int64_t, int64_t>* span = nullptr;
      if (bs != l_.busy_spans.end()) {
        auto it = std::lower_bound(bs->second.begin(), bs->second.end(), t,
                                   [](const std::pair<int64_t, int64_t>& s, int64_t v) { return s.second < v; });
        if (it != bs->second.end() && it->first < t) span = &*it;
      }
      if (span == nullptr) {
        track = host;
        return true;
      }
      floor = std::max(start_, span->first);
      who = Text(ThreadTaskName(track, span->first, t));
    }
    const auto it = stops_.find(track);
    const std::vector<int32_t>* stops = it == stops_.end() ? nullptr : &it->second;
    // The last waiting or allocator call on this thread that started before t.
    int32_t ci = -1;
    if (stops) {
      auto pos = std::lower_bound(stops->begin(), stops->end(), t, [&](int32_t i, int64_t v) { return l_.calls[i].e->ts_ns < v; });
      if (pos != stops->begin()) ci = *std::prev(pos);
    }
    // The last wait for another thread that started before t.
    const ThreadWait* tw = nullptr;
    {
      auto pos = std::lower_bound(l_.thread_waits.begin(), l_.thread_waits.end(), std::make_pair(track, t),
                                  [](const ThreadWait& w, const std::pair<uint32_t, int64_t>& v) {
                                    return std::tie(w.track, w.start_ns) < std::tie(v.first, v.second);
                                  });
      if (pos != l_.thread_waits.begin() && std::prev(pos)->track == track) tw = &*std::prev(pos);
    }
    const int64_t call_at = ci >= 0 ? std::min(l_.calls[ci].e->end_ns(), t) : INT64_MIN;
    const int64_t wait_at = tw ? std::min(tw->end_ns, t) : INT64_MIN;
    const int64_t nearest = std::max(call_at, wait_at);
    if (nearest <= floor) {
      Add(floor, t, PathClass::kCpu, who, -1);
      t = floor;
      if (track == host) return false;
      return true;
    }
    if (nearest < t) {
      Add(nearest, t, PathClass::kCpu, who, -1);
      t = nearest;
      return true;
    }
    if (wait_at >= call_at) {  // inside a wait for another thread
      if (tw->release_ns < t) {
        Add(std::max(tw->release_ns, tw->start_ns), t, PathClass::kCpu, who, -1);
        t = tw->release_ns;
        track = tw->releaser_track;
      } else {  // before the other thread's work began: the wait for it to start
        Add(tw->start_ns, t, PathClass::kCpu, who, -1);
        t = tw->start_ns;
      }
      return true;
    }
    const HostCall& c = l_.calls[ci];
    const DeviceWork* d = c.waited_for >= 0 ? &l_.work[c.waited_for] : nullptr;
    if (d && d->end() > c.e->ts_ns && d->end() <= t) {
      Add(d->end(), t, PathClass::kSyncWait, trace_.Name(*c.e), -1);
      work = c.waited_for;
      t = d->end();
      at = At::kDevice;
      return true;
    }
    Add(c.e->ts_ns, t, c.kind == CallKind::kAllocator ? PathClass::kAllocator : PathClass::kSyncWait, trace_.Name(*c.e),
        -1);
    t = c.e->ts_ns;
    return true;
  }
  // The outermost op of a thread at t inside its busy interval from `from` (what its host work is
  // called on the path): in (ts asc, dur desc) order the first that still runs at t.
  std::string ThreadTaskName(uint32_t track, int64_t from, int64_t t) const {
    const auto events = trace_.TrackEvents(track);
    auto it = std::lower_bound(events.begin(), events.end(), from, [](const Event& e, int64_t v) { return e.ts_ns < v; });
    for (; it != events.end() && it->ts_ns < t; ++it)
      if (it->end_ns() >= t && it->kind != EventKind::kInstant && it->dur_ns > 0)
        return fmt::format("{} (thread {})", trace_.Name(*it), trace_.tracks[track].tid);
    return fmt::format("thread {}", trace_.tracks[track].tid);
  }
  PathClass DeviceClass(const DeviceWork& d) const {
    if (d.e->kind != EventKind::kKernel) return PathClass::kCopy;
    return IsCommKernel(trace_.Name(*d.e)) ? PathClass::kComm : PathClass::kCompute;
  }
  const RankWait* WaitOf(const DeviceWork& d) const {
    if (waits_ == nullptr) return nullptr;
    auto it = std::lower_bound(waits_->begin(), waits_->end(), d.ts(), [](const RankWait& w, int64_t ts) { return w.ts_ns < ts; });
    for (; it != waits_->end() && it->ts_ns == d.ts(); ++it)
      if (it->dur_ns == d.e->dur_ns) return &*it;
    return nullptr;
  }
  // Adds [a, b) clipped to the window; segments come latest first and never overlap.
  void Add(int64_t a, int64_t b, PathClass cls, std::string_view what, int64_t slack) {
    a = std::max(a, start_);
    if (!segs_.empty()) b = std::min(b, segs_.back().start_ns);
    if (b <= a) return;
    segs_.push_back({a, b, cls, what, slack});
  }
  // A text made for a segment, kept until the next Walk.
  std::string_view Text(std::string text) { return texts_.emplace_back(std::move(text)); }
  // "stream N", made once per stream (a kernel gap names its stream).
  std::string_view StreamName(int64_t stream) {
    auto [it, added] = stream_names_.try_emplace(stream);
    if (added) it->second = fmt::format("stream {}", stream);
    return it->second;
  }

  const Trace& trace_;
  const RankLinks& l_;
  const RankWaits* waits_;
  std::unordered_map<uint32_t, std::vector<int32_t>> stops_;
  std::vector<std::pair<int64_t, int32_t>> launched_;  // (launch call start, work), sorted
  std::vector<Segment> segs_;
  std::deque<std::string> texts_;                           // formatted names of this walk's segments
  std::unordered_map<int64_t, std::string> stream_names_;  // nodes: views into them stay valid
  int64_t start_ = 0;
};

// The thread that launched most of the rank's device work (the training loop's thread).
uint32_t HostThread(const RankLinks& l) {
  std::unordered_map<uint32_t, int64_t> n;
  for (const HostCall& c : l.calls) n[c.track] += c.work_count;
  uint32_t best = 0;
  int64_t most = -1;
  for (const auto& [track, k] : n)
    if (k > most || (k == most && track < best)) {
      best = track;
      most = k;
    }
  return best;
}


// Per rank, its communication kernels that waited for another rank (empty with one rank).
std::map<int32_t, RankWaits> RankWaitsOf(const Trace& trace, const LinkIndex& links, const StepModel* steps) {
  std::map<int32_t, RankWaits> out;
  std::vector<int32_t> ranks;
  std::vector<std::vector<Collective>> lists;
  for (const RankLinks& l : links.ranks()) {
    ranks.push_back(l.rank);
    lists.push_back(CollectivesOf(trace, l.rank, steps, true));
  }
  if (ranks.size() < 2) return out;
  std::vector<const std::vector<Collective>*> views;
  for (const auto& list : lists) views.push_back(&list);
  for (const MatchedSet& set : MatchAcrossRanks(views, false)) {
    size_t last = 0;
    for (size_t i = 1; i < set.size(); ++i)
      if (set[i]->dur_ns < set[last]->dur_ns) last = i;
    for (size_t i = 0; i < set.size(); ++i)
      if (i != last && set[i]->dur_ns > set[last]->dur_ns)
        out[ranks[i]].push_back({set[i]->ts_ns, set[i]->dur_ns, set[i]->dur_ns - set[last]->dur_ns, ranks[last]});
  }
  for (auto& [rank, waits] : out)
    std::sort(waits.begin(), waits.end(), [](const RankWait& a, const RankWait& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

// A rank has a path to walk when it has device work, or, on the CPU alone, when its threads wait for
// one another (a collective backend's thread, a pin-memory thread: issue 59's DDP tutorial on two CPU
// ranks, half of each step waiting for gloo:all_reduce). A CPU rank whose loop waits for no other
// thread would have a path of "host work" only: none is made.
bool HasPath(const RankLinks& l) { return !l.work.empty() || !l.thread_waits.empty(); }

// Orders (class, name) pairs whether the name is a string or a view (as std::pair's own < orders
// them), so that a map of names is searched by a view.
struct ItemLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    if (a.first != b.first) return a.first < b.first;
    return std::string_view(a.second) < std::string_view(b.second);
  }
};

// `stops`: where the device runs behind the loop, each window's path is walked back to the previous
// step's last device work (stops[k]; INT64_MIN: the window's start) and the median step is the
// median path.
CriticalPath WalkWindows(const Trace& trace, const RankLinks& l, const std::vector<std::pair<int64_t, int64_t>>& windows,
                         const RankWaits* waits, const std::vector<int64_t>* stops = nullptr) {
  CriticalPath out;
  out.rank = l.rank;
  for (const HostCall& c : l.calls)
    if (c.synced_stream >= 0) out.sync_records = true;
  if (l.event_edges > 0) out.sync_records = true;
  if (windows.empty() || !HasPath(l)) return out;
  size_t linked = 0;
  for (const DeviceWork& w : l.work) linked += w.call >= 0 ? 1 : 0;
  out.linked = 2 * linked >= l.work.size();
  out.device = !l.work.empty();
  Walker walker(trace, l, waits);
  // With device work, the thread that launches most of it; on the CPU alone, the loop's thread.
  const uint32_t host = l.work.empty() ? LoopThread(trace, l, windows) : HostThread(l);
  // Per (class, name): its time over the steps; looked up by a view, a key made once per name.
  std::map<std::pair<PathClass, std::string>, int64_t, ItemLess> items;
  std::array<int64_t, kPathClasses> total{};
  int64_t length = 0;
  std::vector<std::pair<int64_t, size_t>> lengths;
  const auto walk = [&](size_t k) -> const std::vector<Segment>& {
    return walker.Walk(host, windows[k].first, windows[k].second, stops != nullptr ? (*stops)[k] : INT64_MIN);
  };
  for (size_t k = 0; k < windows.size(); ++k) {
    const auto [a, b] = windows[k];
    int64_t len = 0;
    for (const Segment& s : walk(k)) {
      const int64_t ns = s.end_ns - s.start_ns;
      total[static_cast<int>(s.cls)] += ns;
      const std::pair<PathClass, std::string_view> key{
          s.cls, s.cls == PathClass::kCpu && s.what.empty() ? std::string_view("host work") : s.what};
      auto it = items.find(key);
      if (it == items.end()) it = items.emplace(std::make_pair(key.first, std::string(key.second)), 0).first;
      it->second += ns;
      len += ns;
    }
    length += len;
    lengths.push_back({stops != nullptr ? len : b - a, k});
  }
  const auto n = static_cast<int64_t>(windows.size());
  out.mean_ns = length / n;
  for (int k = 0; k < kPathClasses; ++k) out.class_ns[k] = total[k] / n;
  for (const auto& [key, ns] : items) out.top.push_back({key.first, key.second, ns / n});
  std::stable_sort(out.top.begin(), out.top.end(), [](const PathItem& a, const PathItem& b) { return a.ns > b.ns; });
  if (out.top.size() > 12) out.top.resize(12);
  std::nth_element(lengths.begin(), lengths.begin() + static_cast<std::ptrdiff_t>(lengths.size() / 2), lengths.end());
  // The median step's path, walked again (a walk is a function of its window): only it is kept.
  for (const Segment& s : walk(lengths[lengths.size() / 2].second))
    out.segments.push_back({s.start_ns, s.end_ns, s.cls, std::string(s.what), s.slack_ns});
  if (l.work.empty())
    out.note = "no device work: the path follows the loop's thread and, where it waited for another thread (a collective "
               "backend's, a pin-memory thread), that thread's op";
  else if (!out.linked)
    out.note = fmt::format("only {} of {} device activities have their launch call in the trace: the path follows the host "
                           "and cannot see what the device waited for",
                           linked, l.work.size());
  else if (!out.sync_records)
    out.note = "no cuda_sync records: blocking calls are tied to the device work that ended last inside them, and "
               "cross-stream waits are inferred by time";
  return out;
}

}  // namespace

CriticalPath PathOfWindows(const Trace& trace, const RankLinks& l, const std::vector<std::pair<int64_t, int64_t>>& windows) {
  return WalkWindows(trace, l, windows, nullptr);
}

namespace {

// CriticalPath::device_pace_ns, host_pace_ns, steps_behind and steps_compared for the rank's step
// windows (in time order). Returns the steps whose pace counted (k: both k and k - 1 launched device
// work, and k's ended later), each with the end of step k - 1's last device work.
std::vector<std::pair<size_t, int64_t>> DevicePace(const RankLinks& l, const std::vector<std::pair<int64_t, int64_t>>& windows,
                                                   CriticalPath& p) {
  std::vector<double> starts;  // the loop's pace: start to start (a step's range may leave time out after it)
  for (size_t k = 1; k < windows.size(); ++k) starts.push_back(static_cast<double>(windows[k].first - windows[k - 1].first));
  p.host_pace_ns = static_cast<int64_t>(Median(std::move(starts)));
  std::vector<int64_t> ends(windows.size(), INT64_MIN);  // each step's last device end (INT64_MIN: none)
  for (const DeviceWork& w : l.work) {
    const HostCall* c = l.CallOf(w);
    if (c == nullptr) continue;
    const int64_t at = c->e->ts_ns;
    auto it = std::upper_bound(windows.begin(), windows.end(), at,
                               [](int64_t t, const std::pair<int64_t, int64_t>& win) { return t < win.first; });
    if (it == windows.begin()) continue;
    --it;
    if (at >= it->second) continue;
    int64_t& end = ends[static_cast<size_t>(it - windows.begin())];
    end = std::max(end, w.end());
  }
  for (size_t k = 0; k + 1 < ends.size(); ++k) {
    if (ends[k] == INT64_MIN) continue;
    ++p.steps_compared;
    if (ends[k] > windows[k + 1].second) ++p.steps_behind;
  }
  std::vector<std::pair<size_t, int64_t>> paced;
  std::vector<double> gaps;
  for (size_t k = 1; k < ends.size(); ++k)
    if (ends[k] != INT64_MIN && ends[k - 1] != INT64_MIN && ends[k] > ends[k - 1]) {
      paced.push_back({k, ends[k - 1]});
      gaps.push_back(static_cast<double>(ends[k] - ends[k - 1]));
    }
  if (gaps.size() >= 2) p.device_pace_ns = static_cast<int64_t>(Median(std::move(gaps)));
  return paced;
}

}  // namespace

std::vector<CriticalPath> BuildCriticalPaths(const Trace& trace, const LinkIndex& links, const StepModel& steps) {
  std::vector<CriticalPath> out;
  const std::map<int32_t, RankWaits> waits = RankWaitsOf(trace, links, &steps);
  for (const RankLinks& l : links.ranks()) {
    if (!HasPath(l)) continue;
    std::vector<std::pair<int64_t, int64_t>> windows;
    for (const StepRow& row : steps.steps)
      if (row.rank == l.rank) windows.push_back({row.start_ns, row.start_ns + row.wall_ns});
    const int64_t n = static_cast<int64_t>(windows.size());
    if (windows.empty() && l.work.empty()) continue;  // a CPU rank's path needs its steps
    if (windows.empty()) {
      // No steps: the whole span of the rank's device work and the calls that made it.
      int64_t a = INT64_MAX, b = INT64_MIN;
      for (const DeviceWork& w : l.work) {
        a = std::min(a, w.ts());
        b = std::max(b, w.end());
      }
      for (const HostCall& c : l.calls) {
        a = std::min(a, c.e->ts_ns);
        b = std::max(b, c.e->end_ns());
      }
      windows.push_back({a, b});
    }
    const auto w = waits.find(l.rank);
    const RankWaits* rank_waits = w == waits.end() ? nullptr : &w->second;
    CriticalPath pace;
    std::vector<std::pair<size_t, int64_t>> paced;
    if (n >= 3) paced = DevicePace(l, windows, pace);
    CriticalPath p;
    if (pace.DeviceBehind()) {
      // The device behind the loop: a step's path is the device's, from the previous step's last
      // device work to its own (the work launched in its window); the loop's window would start the
      // path steps before its work ran.
      std::vector<std::pair<int64_t, int64_t>> from;
      std::vector<int64_t> stops;
      for (const auto& [k, stop] : paced) {
        from.push_back(windows[k]);
        stops.push_back(stop);
      }
      p = WalkWindows(trace, l, from, rank_waits, &stops);
      p.steps = static_cast<int64_t>(paced.size());
      p.note = fmt::format("the device ran behind the loop: each step's path runs from the previous step's last device "
                           "work to its own ({} steps){}{}",
                           paced.size(), p.note.empty() ? "" : "; ", p.note);
    } else {
      p = WalkWindows(trace, l, windows, rank_waits);
      p.steps = n;
    }
    p.device_pace_ns = pace.device_pace_ns;
    p.host_pace_ns = pace.host_pace_ns;
    p.steps_behind = pace.steps_behind;
    p.steps_compared = pace.steps_compared;
    out.push_back(std::move(p));
  }
  return out;
}

CriticalPath CriticalPathOf(const Trace& trace, int32_t rank, int64_t start_ns, int64_t end_ns) {
  const LinkIndex links(trace);
  const RankLinks* l = links.Rank(rank);
  if (l == nullptr) return {};
  return PathOfWindows(trace, *l, {{start_ns, end_ns}});
}

}  // namespace trainrx::analyzers
