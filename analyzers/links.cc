#include "links.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <unordered_map>

#include "ops.h"
#include "runtime_names.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/sort_runs.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

bool IsAllocatorCall(std::string_view n) {
  // Device memory only: cudaHostAlloc / cudaMallocHost (pinned host buffers) and the stream-ordered
  // pool (cudaMallocAsync / cudaFreeAsync: no device sync) are not the caching allocator's misses.
  return n == "cudaMalloc" || n == "cudaFree" || n == "cuMemAlloc_v2" || n == "cuMemFree_v2" || n == "hipMalloc" ||
         n == "hipFree" || n == "hipExtMallocWithFlags" || n == "cudaMallocManaged" || n == "hipMallocManaged";
}

CallKind CallKindOf(std::string_view n) {
  if (IsLaunchCall(n)) return CallKind::kLaunch;
  if (n == "cudaGraphLaunch" || n == "hipGraphLaunch" || n == "cuGraphLaunch") return CallKind::kGraphLaunch;
  if (IsBlockingCall(n)) return CallKind::kBlocking;
  if (IsAllocatorCall(n)) return CallKind::kAllocator;
  if (n == "cudaStreamWaitEvent" || n == "hipStreamWaitEvent" || n == "cuStreamWaitEvent" || n == "enqueueCommand waitOnEvent")
    return CallKind::kStreamWait;
  if (n == "cudaEventRecord" || n == "hipEventRecord" || n == "cuEventRecord" || n == "cudaEventRecordWithFlags" ||
      n == "recordEvent")  // the last: MTIA
    return CallKind::kEventRecord;
  return CallKind::kOther;
}

bool IsHostTask(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kCudaRuntime ||
         k == EventKind::kCudaDriver || k == EventKind::kPythonFunction;
}

int64_t RankLinks::TypicalLaunchLatency() const {
  struct LaunchLatency {
    int64_t ns = 0;
  };
  return Derived<LaunchLatency>([this] {
           std::vector<int64_t> latencies;
           for (const DeviceWork& w : work) {
             if (w.call < 0) continue;
             const int64_t launched = calls[w.call].e->ts_ns;
             if ((w.prev < 0 || work[w.prev].end() < launched) && w.ts() >= launched) latencies.push_back(w.ts() - launched);
           }
           return LaunchLatency{Quantile(latencies, 0.5)};
         }).ns;
}

const HostCall* RankLinks::CallByCorrelation(int64_t correlation) const {
  auto it = std::lower_bound(call_by_correlation.begin(), call_by_correlation.end(), std::make_pair(correlation, INT32_MIN));
  return it != call_by_correlation.end() && it->first == correlation ? &calls[it->second] : nullptr;
}

const Event* RankLinks::OpByExternalId(int64_t external_id) const {
  auto it = std::lower_bound(op_by_external.begin(), op_by_external.end(), std::make_pair(external_id, static_cast<const Event*>(nullptr)));
  return it != op_by_external.end() && it->first == external_id ? it->second : nullptr;
}

namespace {

// The activity whose end released a call that waited for the device: the last to end inside the
// call ([ts, end], the call returns a little after), among those on `stream` when it is known.
int32_t ReleaseOf(const RankLinks& l, const Event& call, int64_t stream) {
  auto it = std::upper_bound(l.by_end.begin(), l.by_end.end(), std::make_pair(call.end_ns(), INT32_MAX));
  while (it != l.by_end.begin()) {
    --it;
    if (it->first < call.ts_ns) return -1;  // nothing ended while the call waited: it did not wait for the device
    if (stream < 0 || l.work[it->second].stream == stream) return it->second;
  }
  return -1;
}

// The rank's device work per stream (in time order, each with the one before it) and its host
// calls (runtime and driver calls, and any host event with a correlation id), sorted for lookup;
// returns the cuda_sync records' (correlation, stream): the stream each sync call synchronized.
std::vector<std::pair<int64_t, int64_t>> CollectRank(const Trace& trace, int32_t rank, const std::vector<CallKind>& kinds, RankLinks& l) {
  std::vector<std::pair<int64_t, int64_t>> synced;  // (correlation, stream)
  // Room for the most the lists can take (the rank's events by kind of track), so that they never
  // move while they grow (pages a list does not reach are never touched).
  size_t device_events = 0, host_events = 0;
  for (const auto& t : trace.tracks)
    if (t.rank == rank) (t.kind == TrackKind::kGpuStream ? device_events : host_events) += t.event_count;
  l.work.reserve(device_events);
  l.op_by_external.reserve(host_events);
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank) continue;
    if (t.kind == TrackKind::kGpuStream) {
      int32_t prev = -1;
      for (const Event& e : trace.TrackEvents(ti)) {
        if (e.kind == EventKind::kCudaSync) {
          if (e.correlation != profiler::kNoId && t.stream >= 0 && t.stream < (int64_t{1} << 32) - 1)
            synced.push_back({e.correlation, t.stream});
          continue;
        }
        if (e.kind != EventKind::kKernel && e.kind != EventKind::kMemcpy && e.kind != EventKind::kMemset) continue;
        if (t.stream < 0) continue;
        DeviceWork w;
        w.e = &e;
        w.track = ti;
        w.device = t.device;
        w.stream = t.stream;
        w.prev = prev;
        prev = static_cast<int32_t>(l.work.size());
        l.work.push_back(w);
      }
      continue;
    }
    for (const Event& e : trace.TrackEvents(ti)) {
      if (e.kind == EventKind::kCpuOp && e.external_id != profiler::kNoId) l.op_by_external.push_back({e.external_id, &e});
      // Runtime and driver calls, and any other host event with a correlation id (MTIA's runtime
      // calls, sources that name their categories otherwise): what enqueued device work. The kind is
      // the name's (runtime_names.h), whatever the category.
      const bool runtime = e.kind == EventKind::kCudaRuntime || e.kind == EventKind::kCudaDriver;
      if (!runtime && e.correlation == profiler::kNoId) continue;
      const CallKind kind = kinds[e.name];
      if (kind == CallKind::kOther && e.correlation == profiler::kNoId) continue;
      const auto index = static_cast<int32_t>(l.calls.size());
      l.calls.push_back({&e, ti, kind});
      if (e.correlation != profiler::kNoId) l.call_by_correlation.push_back({e.correlation, index});
      if (kind == CallKind::kAllocator) l.allocator_calls.push_back(index);
      if (kind == CallKind::kBlocking) l.blocking_calls.push_back(index);
    }
  }
  profiler::SortRuns(l.call_by_correlation.begin(), l.call_by_correlation.end());
  profiler::SortRuns(l.op_by_external.begin(), l.op_by_external.end());
  profiler::SortRuns(synced.begin(), synced.end());
  return synced;
}

// Device work -> the call that enqueued it; a call -> its first activity and how many; the work by
// its end.
void LinkWorkToCalls(RankLinks& l) {
  for (size_t i = 0; i < l.work.size(); ++i) {
    DeviceWork& w = l.work[i];
    const HostCall* found = w.e->correlation != profiler::kNoId ? l.CallByCorrelation(w.e->correlation) : nullptr;
    if (found == nullptr) continue;
    w.call = static_cast<int32_t>(found - l.calls.data());
    HostCall& c = l.calls[w.call];
    w.graph = c.kind == CallKind::kGraphLaunch;
    if (c.work < 0 || l.work[c.work].ts() > w.ts()) c.work = static_cast<int32_t>(i);
    ++c.work_count;
  }
  l.by_end.resize(l.work.size());
  l.work_blocks.assign((l.work.size() + RankLinks::kSpanBlock - 1) / RankLinks::kSpanBlock, {INT64_MAX, INT64_MIN});
  for (size_t i = 0; i < l.work.size(); ++i) {
    const DeviceWork& w = l.work[i];
    l.by_end[i] = {w.end(), static_cast<int32_t>(i)};
    const int64_t launched = w.call >= 0 ? l.calls[w.call].e->ts_ns : w.ts();
    auto& [first, last] = l.work_blocks[i / RankLinks::kSpanBlock];
    first = std::min({first, w.ts(), launched});
    last = std::max({last, w.end(), launched});
  }
  profiler::SortRuns(l.by_end.begin(), l.by_end.end());  // a run per stream (pairs are unique: any sort gives this order)
}

// Event edges from the sync records that name what they waited on (cuda_sync's wait_on_stream
// and wait_on_cuda_event_record_corr_id): the recorded work is the last launched on that stream
// before the record call (HTA's index_previous_launch); a stream wait binds the waiting stream's
// next launched work (index_next_launch), an event sync is released by the recorded work. Returns
// the event syncs' (waiting call's correlation, work), sorted.
std::vector<std::pair<int64_t, int32_t>> EventEdges(const Trace& trace, int32_t rank, RankLinks& l) {
  std::vector<std::pair<int64_t, int32_t>> event_sync_release;  // (waiting call's correlation, work)
  {
    std::unordered_map<int64_t, std::vector<std::pair<int64_t, int32_t>>> launched_on;  // stream -> (launch ts, work), sorted
    for (size_t i = 0; i < l.work.size(); ++i)
      if (const HostCall* c = l.CallOf(l.work[i])) launched_on[l.work[i].stream].push_back({c->e->ts_ns, static_cast<int32_t>(i)});
    for (auto& [stream, v] : launched_on) std::sort(v.begin(), v.end());
    const auto last_before = [&](int64_t stream, int64_t ts) -> int32_t {
      auto it = launched_on.find(stream);
      if (it == launched_on.end()) return -1;
      auto pos = std::lower_bound(it->second.begin(), it->second.end(), std::make_pair(ts, INT32_MIN));
      return pos == it->second.begin() ? -1 : std::prev(pos)->second;
    };
    const auto first_after = [&](int64_t stream, int64_t ts) -> int32_t {
      auto it = launched_on.find(stream);
      if (it == launched_on.end()) return -1;
      auto pos = std::upper_bound(it->second.begin(), it->second.end(), std::make_pair(ts, INT32_MAX));
      return pos == it->second.end() ? -1 : pos->second;
    };
    for (const profiler::SyncWait& sw : trace.sync_waits) {
      const auto& t = trace.tracks[sw.track];
      if (t.rank != rank || sw.record_correlation == profiler::kNoId) continue;
      const HostCall* record = l.CallByCorrelation(sw.record_correlation);
      const HostCall* waiter = l.CallByCorrelation(sw.correlation);
      if (record == nullptr || waiter == nullptr) continue;
      const int32_t source = last_before(sw.wait_on_stream, record->e->ts_ns);
      if (source < 0) continue;
      if (t.stream >= 0 && t.stream != sw.wait_on_stream) {  // a stream waits (Stream Wait Event)
        const int32_t target = first_after(t.stream, waiter->e->ts_ns);
        if (target >= 0 && l.work[target].waits_on < 0) {
          l.work[target].waits_on = source;
          ++l.event_edges;
        }
      } else if (t.stream < 0) {  // the host waits (Event Sync)
        event_sync_release.push_back({sw.correlation, source});
      }
    }
    std::sort(event_sync_release.begin(), event_sync_release.end());
  }
  return event_sync_release;
}

// Blocking and allocator calls -> the activity that released them.
void ResolveBlockingCalls(const Trace& trace, const std::vector<std::pair<int64_t, int64_t>>& synced,
                          const std::vector<std::pair<int64_t, int32_t>>& event_sync_release, RankLinks& l) {
  const auto release = [&](int32_t index) {
    HostCall& c = l.calls[index];
    if (const DeviceWork* own = l.FirstWorkOf(c); own && own->e->kind == EventKind::kMemcpy) {
      c.waited_for = c.work;  // a synchronous copy waits for its own copy (and what ran before it)
      return;
    }
    if (auto ev = std::lower_bound(event_sync_release.begin(), event_sync_release.end(), std::make_pair(c.e->correlation, INT32_MIN));
        c.e->correlation != profiler::kNoId && ev != event_sync_release.end() && ev->first == c.e->correlation) {
      // The event's recorded work; ended before the call started, the call did not wait for it.
      c.synced_stream = l.work[ev->second].stream;
      c.waited_for = l.work[ev->second].end() > c.e->ts_ns ? ev->second : -1;
      return;
    }
    auto it = std::lower_bound(synced.begin(), synced.end(), std::make_pair(c.e->correlation, int64_t{INT64_MIN}));
    if (c.e->correlation != profiler::kNoId && it != synced.end() && it->first == c.e->correlation) c.synced_stream = it->second;
    c.waited_for = ReleaseOf(l, *c.e, c.synced_stream);
  };
  for (int32_t i : l.blocking_calls) release(i);
  // Frees wait for the device (the memory may still be in use); allocations do not.
  for (int32_t i : l.allocator_calls) {
    const std::string_view n = trace.Name(*l.calls[i].e);
    if (n.find("Free") != std::string_view::npos || n.find("free") != std::string_view::npos) release(i);
  }
  // Launches of device-to-host copies into pageable memory block too (the copy is staged through a
  // pinned buffer and the call returns when it is done): they wait for their own copy.
  for (HostCall& c : l.calls) {
    if (c.kind != CallKind::kLaunch || c.work < 0) continue;
    const Event& w = *l.work[c.work].e;
    if (w.kind != EventKind::kMemcpy || w.aux == profiler::kNoAux) continue;
    const profiler::MemcpyInfo& m = trace.memcpys[w.aux];
    if (m.copy == profiler::CopyKind::kDtoH && m.dst != profiler::MemKind::kPinned) c.waited_for = c.work;
  }
}

// Launches that blocked on a full launch queue: the device so far behind the loop that the driver's
// queue of pending launches filled, and the call returned when earlier work ended and freed a slot
// (an H200's ResNet-18 at batch 1024 with FP32 convolutions, 2026-11-28: 1 % of 4 918 launches over
// 0.8 ms, up to 15.8 ms, 200 ms in all, against a median of 8 us; the loop's 28.8 ms a step then
// floored every replayed fix, where the fixed runs' loops ran 20.8-25.5 ms). Such a launch waits for
// the device work whose end released it, as a synchronize does: a fix that shortens the device's work
// unblocks it, which its recorded length, kept as host work, would not. A launch counts as blocked
// when it took kQueuedLaunchMinNs and kQueuedLaunchFactor x the rank's tenth-percentile launch, with at least
// kQueuedLaunchPending launches not yet ended on the device at its start (a slow launch with the
// device idle is the host's own time: preemption on a busy machine).
void ResolveQueuedLaunches(RankLinks& l) {
  std::vector<int64_t> durs, launched;  // launch calls' lengths; each launched work's call start
  for (const HostCall& c : l.calls)
    if (c.kind == CallKind::kLaunch && c.work >= 0) durs.push_back(c.e->dur_ns);
  if (durs.size() < static_cast<size_t>(kQueuedLaunchPending)) return;
  // A launch's own cost: the tenth percentile (where most launches blocked, the median is a wait).
  std::nth_element(durs.begin(), durs.begin() + static_cast<std::ptrdiff_t>(durs.size() / 10), durs.end());
  const int64_t min_ns = std::max(kQueuedLaunchMinNs, kQueuedLaunchFactor * durs[durs.size() / 10]);
  for (const DeviceWork& w : l.work)
    if (w.call >= 0) launched.push_back(l.calls[static_cast<size_t>(w.call)].e->ts_ns);
  std::sort(launched.begin(), launched.end());
  for (HostCall& c : l.calls) {
    if (c.kind != CallKind::kLaunch || c.waited_for >= 0 || c.e->dur_ns < min_ns) continue;
    const int64_t t = c.e->ts_ns;
    const auto before = std::lower_bound(launched.begin(), launched.end(), t) - launched.begin();
    const auto ended = std::upper_bound(l.by_end.begin(), l.by_end.end(), std::make_pair(t, INT32_MAX)) - l.by_end.begin();
    if (before - ended < kQueuedLaunchPending) continue;
    c.waited_for = ReleaseOf(l, *c.e, -1);
  }
}

void BuildRank(const Trace& trace, int32_t rank, const std::vector<CallKind>& kinds, RankLinks& l) {
  l.rank = rank;
  std::vector<std::pair<int64_t, int64_t>> synced = CollectRank(trace, rank, kinds, l);
  LinkWorkToCalls(l);
  const std::vector<std::pair<int64_t, int32_t>> event_sync_release = EventEdges(trace, rank, l);
  ResolveBlockingCalls(trace, synced, event_sync_release, l);
  ResolveQueuedLaunches(l);
}

// One thread's outermost busy intervals, merged, with the busy time before each (prefix sums).
struct Busy {
  std::vector<std::pair<int64_t, int64_t>> spans;  // [start, end), disjoint, in order
  std::vector<int64_t> before;                     // busy time before spans[i]
  int64_t In(int64_t a, int64_t b) const {  // busy time inside [a, b)
    const auto at = [&](int64_t t) -> int64_t {  // busy time before t
      auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(t, INT64_MAX));
      if (it == spans.begin()) return 0;
      const size_t i = static_cast<size_t>(std::prev(it) - spans.begin());
      return before[i] + std::min(t, spans[i].second) - spans[i].first;
    };
    return b > a ? at(b) - at(a) : 0;
  }
};

// The op of another thread whose end released a stretch [a, b) of an op's own time: the latest to
// end in [b - tol, b] (tol: max(10 us, 2 % of the stretch), and after a) that was busy through half
// of the stretch; else the latest such op within the fork-and-join tolerance (a tenth of the
// stretch) of a thread idle before it. nullptr: none.
using ThreadEnds = std::unordered_map<uint32_t, std::vector<std::pair<int64_t, const Event*>>>;
std::pair<const Event*, uint32_t> ReleaserOf(uint32_t own_track, int64_t a, int64_t b, const ThreadEnds& ends,
                                            const std::unordered_map<uint32_t, Busy>& busy) {
  const int64_t len = b - a;
  const int64_t tol = std::max<int64_t>(10'000, len / 50);
  const int64_t fork_join_tol = std::max<int64_t>(tol, len / 10);
  const Event* best = nullptr;
  uint32_t best_track = 0;
  bool best_tight = false;
  for (const auto& [track, closed] : ends) {
    if (track == own_track) continue;
    auto it = std::upper_bound(closed.begin(), closed.end(), b,
                               [](int64_t v, const std::pair<int64_t, const Event*>& x) { return v < x.first; });
    if (it == closed.begin()) continue;
    const auto& [end, op] = *std::prev(it);
    if (end < b - fork_join_tol || end <= a) continue;
    const Busy& bz = busy.at(track);
    if (2 * bz.In(a, end) < end - a) continue;
    const bool tight = end >= b - tol;
    if (!tight && 10 * bz.In(a - len / 4, a) > len / 4) continue;  // not idle before: no fork
    if (best == nullptr || tight > best_tight ||
        (tight == best_tight && (end > best->end_ns() || (end == best->end_ns() && track < best_track)))) {
      best = op;
      best_track = track;
      best_tight = tight;
    }
  }
  return {best, best_track};
}

// Two ops on two threads that end together each look released by the other (the loop's c10d::wait
// and the Gloo range it waits for, ending at one instant): a cycle no replay can order. The one that
// started later waited for the one already running (the wait is issued after the work); started
// together, neither is said to wait.
void DropMutualWaits(std::vector<ThreadWait>& waits) {
  std::unordered_map<const Event*, size_t> by_op;
  for (size_t i = 0; i < waits.size(); ++i) by_op.emplace(waits[i].op, i);
  std::vector<uint8_t> drop(waits.size(), 0);
  for (size_t i = 0; i < waits.size(); ++i) {
    const auto other = by_op.find(waits[i].releaser);
    if (other == by_op.end() || waits[other->second].releaser != waits[i].op) continue;
    const ThreadWait& o = waits[other->second];
    if (waits[i].start_ns <= o.start_ns) drop[i] = 1;  // it started first: it was not the one waiting
  }
  size_t kept = 0;
  for (size_t i = 0; i < waits.size(); ++i)
    if (!drop[i]) waits[kept++] = waits[i];
  waits.resize(kept);
}

// Waits between host threads (links.h ThreadWait). Each thread's ops are walked as a call tree; a
// stretch of an op's own time of kThreadWaitMinNs or more is a wait when another thread's op ended
// within max(10 us, 2 % of the stretch) before the stretch's end and that thread was busy through at
// least half of the stretch up to that end. A fork and join is a wait with a longer return: the other
// thread was idle before the stretch (busy at most a tenth of the quarter-stretch before it), worked
// through at least half of it and ended within a tenth of the stretch before its end (the Python
// return from `loss.backward()` into the next call, which the trace has no op for: 0.2-0.5 ms after
// 5-7 ms of the autograd thread's work on an H200, issue 62). Two ops that would wait for each other
// keep one wait (DropMutualWaits).
void BuildThreadWaits(const Trace& trace, int32_t rank, RankLinks& l) {
  struct Stretch {
    const Event* op;
    uint32_t track;
    int64_t a, b;
  };
  std::vector<Stretch> stretches;
  // Per thread, its ops by end time: the call tree's walk closes them in that order.
  ThreadEnds ends;
  std::unordered_map<uint32_t, Busy> busy;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || t.kind != TrackKind::kCpuThread) continue;
    Busy& bz = busy[ti];
    auto& closed = ends[ti];
    std::vector<int64_t>& block_ends = l.thread_block_ends[ti];
    block_ends.assign((t.event_count + RankLinks::kSpanBlock - 1) / RankLinks::kSpanBlock, INT64_MIN);
    size_t k = 0;  // the event's index on its track
    closed.reserve(t.event_count);  // one per op at most: it never moves while it grows
    std::vector<std::pair<const Event*, int64_t>> stack;  // (op, own time accounted up to)
    const auto pop = [&] {
      const auto [op, cursor] = stack.back();
      stack.pop_back();
      closed.push_back({op->end_ns(), op});
      if (op->end_ns() - cursor >= kThreadWaitMinNs) stretches.push_back({op, ti, cursor, op->end_ns()});
      if (!stack.empty()) stack.back().second = std::max(stack.back().second, op->end_ns());
    };
    for (const Event& e : trace.TrackEvents(ti)) {
      int64_t& block_end = block_ends[k++ / RankLinks::kSpanBlock];
      block_end = std::max(block_end, e.end_ns());
      if (!IsHostTask(e.kind) || e.dur_ns <= 0) continue;
      while (!stack.empty() && stack.back().first->end_ns() <= e.ts_ns) pop();
      if (!stack.empty()) {
        auto& [op, cursor] = stack.back();
        if (e.end_ns() > op->end_ns()) continue;  // not nested: a source's overlapping ranges
        if (e.ts_ns - cursor >= kThreadWaitMinNs) stretches.push_back({op, ti, cursor, e.ts_ns});
        cursor = std::max(cursor, e.ts_ns);
      } else if (!bz.spans.empty() && e.ts_ns <= bz.spans.back().second) {
        bz.spans.back().second = std::max(bz.spans.back().second, e.end_ns());
      } else {
        bz.spans.push_back({e.ts_ns, e.end_ns()});
      }
      stack.push_back({&e, e.ts_ns});
    }
    while (!stack.empty()) pop();
    int64_t sum = 0;
    for (const auto& [a, b] : bz.spans) {
      bz.before.push_back(sum);
      sum += b - a;
    }
  }
  for (auto& [track, bz] : busy) l.busy_spans[track] = bz.spans;
  if (busy.size() < 2) return;
  for (const Stretch& s : stretches) {
    const auto [best, best_track] = ReleaserOf(s.track, s.a, s.b, ends, busy);
    if (best == nullptr) continue;
    l.thread_waits.push_back({s.op, s.track, s.a, s.b, best, best_track, best->end_ns()});
  }
  DropMutualWaits(l.thread_waits);
  std::sort(l.thread_waits.begin(), l.thread_waits.end(), [](const ThreadWait& x, const ThreadWait& y) {
    return std::tie(x.track, x.start_ns) < std::tie(y.track, y.start_ns);
  });
}

}  // namespace

void KernelNames::Classify(profiler::StrId id, std::string_view name) {
  if (id >= bits_.size() || (bits_[id] & kDone) != 0) return;
  uint16_t b = kDone | static_cast<uint16_t>(ClassifyGemmKernel(name));
  if (IsCommKernel(name)) b |= kComm;
  if (IsFusableKernel(name)) b |= kFusable;
  if (IsFp32DataKernel(name)) b |= kFp32Data;
  if (IsCudnnBatchNormKernel(name)) b |= kCudnnNorm;
  if (Lowercase(name).find("tf32") != std::string::npos) b |= kSaysTf32;
  if (IsLayoutConversionKernel(name)) b |= kLayout;
  if (IsReductionKernel(name)) b |= kReduction;
  bits_[id] = b;
}

LinkIndex::LinkIndex(const Trace& trace, size_t threads) {
  std::vector<CallKind> kinds(trace.strings.size());
  for (profiler::StrId id = 0; id < kinds.size(); ++id) kinds[id] = CallKindOf(trace.strings.Get(id));
  // Each rank's links read only its own events: the ranks built at once, each into its own slot (the
  // same index for any thread count); the kernel names, shared, classified after.
  const std::vector<int32_t> ids = trace.RankIds();
  ranks_.resize(ids.size());
  std::vector<std::function<void()>> tasks;
  for (size_t k = 0; k < ids.size(); ++k)
    tasks.push_back([&, k] {
      BuildRank(trace, ids[k], kinds, ranks_[k]);
      BuildThreadWaits(trace, ids[k], ranks_[k]);
    });
  profiler::RunTasks(tasks, threads);
  auto names = std::make_shared<KernelNames>(trace.strings.size());
  for (const RankLinks& r : ranks_)
    for (const DeviceWork& w : r.work)
      if (w.e->kind == EventKind::kKernel) names->Classify(w.e->name, trace.Name(*w.e));
  const auto shared = std::make_shared<DerivedValues>();
  for (RankLinks& r : ranks_) r.kernel_names = names, r.trace_values = shared;
}

LinkIndex::LinkIndex(const LinkIndex& o) : ranks_(o.ranks_) {
  const auto shared = std::make_shared<DerivedValues>();
  for (RankLinks& r : ranks_) r.trace_values = shared;
}

LinkIndex& LinkIndex::operator=(const LinkIndex& o) {
  if (this != &o) *this = LinkIndex(o);
  return *this;
}

const RankLinks* LinkIndex::Rank(int32_t rank) const {
  for (const RankLinks& r : ranks_)
    if (r.rank == rank) return &r;
  return nullptr;
}

int32_t InferredStreamWait(const RankLinks& l, int32_t i) {
  const DeviceWork& d = l.work[static_cast<size_t>(i)];
  if (d.waits_on >= 0) return -1;
  const int64_t ready_p = d.prev >= 0 ? l.work[static_cast<size_t>(d.prev)].end() : INT64_MIN;
  const HostCall* call = l.CallOf(d);
  const int64_t base = std::max(ready_p, call ? call->e->ts_ns : INT64_MIN);
  if (base != INT64_MIN && d.ts() - base <= kDependencyGapNs) return -1;
  auto pos = std::upper_bound(l.by_end.begin(), l.by_end.end(), std::make_pair(d.ts(), INT32_MAX));
  while (pos != l.by_end.begin()) {
    --pos;
    const DeviceWork& o = l.work[static_cast<size_t>(pos->second)];
    if (o.stream != d.stream && o.device == d.device && o.ts() < d.ts()) return pos->first > base ? pos->second : -1;
  }
  return -1;
}

// The loop's thread: the one holding a range that is the first window (ProfilerStep#N, our step
// marks), else the one busiest inside the windows (in the whole trace without windows).
uint32_t LoopThread(const profiler::Trace& trace, const RankLinks& l, const std::vector<std::pair<int64_t, int64_t>>& windows) {
  if (!windows.empty())
    for (const auto& [track, spans] : l.busy_spans) {
      const auto events = trace.TrackEvents(track);
      auto it = std::lower_bound(events.begin(), events.end(), windows.front().first,
                                 [](const Event& e, int64_t v) { return e.ts_ns < v; });
      for (; it != events.end() && it->ts_ns == windows.front().first; ++it)
        if (it->end_ns() == windows.front().second) return track;
    }
  uint32_t best = 0;
  int64_t most = -1;
  for (const auto& [track, spans] : l.busy_spans) {
    int64_t busy = 0;
    for (const auto& [a, b] : spans) {
      if (windows.empty()) {
        busy += b - a;
        continue;
      }
      for (const auto& [wa, wb] : windows) busy += std::max<int64_t>(0, std::min(b, wb) - std::max(a, wa));
    }
    if (busy > most || (busy == most && track < best)) {
      best = track;
      most = busy;
    }
  }
  return best;
}

}  // namespace trainrx::analyzers
