#include "dependency/replay.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "collectives.h"
#include "phases.h"
#include "runtime_names.h"

#include "ops.h"

namespace trainrx::analyzers {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

namespace {

// A task's collective (CollectiveTasks), nullptr: none.
const Event* CollectiveOf(const RankGraph& g, const RankGraph::Task& t) {
  const Event* e = nullptr;
  if (t.kind == RankGraph::Kind::kDevice && t.work >= 0) {
    e = g.links().work[static_cast<size_t>(t.work)].e;
    if (e->kind != EventKind::kKernel || !g.links().kernel_names->Comm(e->name)) e = nullptr;
  } else if (t.kind == RankGraph::Kind::kHost && t.frame >= 0) {
    e = g.frames()[static_cast<size_t>(t.frame)].op;
    if (t.ts != e->ts_ns || t.dur != e->dur_ns || g.trace().Name(*e).substr(0, 5) != "gloo:") e = nullptr;
  }
  return e != nullptr && e->dur_ns > 0 ? e : nullptr;
}

// From the rank's first host event to its last.
int64_t TraceSpan(const RankLinks& l) {
  int64_t a = INT64_MAX, b = INT64_MIN;
  for (const auto& [track, spans] : l.busy_spans)
    if (!spans.empty()) {
      a = std::min(a, spans.front().first);
      b = std::max(b, spans.back().second);
    }
  return b > a ? b - a : 1;
}

}  // namespace

RankGraph::RankGraph(const profiler::Trace& trace, const RankLinks& links, std::vector<std::pair<int64_t, int64_t>> windows)
    : trace_(trace), links_(links), windows_(std::move(windows)) {
  std::sort(windows_.begin(), windows_.end());
  loop_ = LoopThread(trace_, links_, windows_);
  // The span the graph covers: the windows, with one window's length before them (what the first
  // one inherits: the device still busy with earlier work) and a quarter after; without windows,
  // everything.
  if (!windows_.empty()) {
    const int64_t first = windows_.front().second - windows_.front().first;
    const int64_t last = windows_.back().second - windows_.back().first;
    lo_ = windows_.front().first - first;
    hi_ = windows_.back().second + last / 4;
  }
  std::vector<uint32_t> threads;
  size_t host_events = 0;
  for (const auto& [track, spans] : links_.busy_spans) {
    threads.push_back(track);
    host_events += trace_.tracks[track].event_count;
  }
  std::sort(threads.begin(), threads.end());
  const double covered = windows_.empty() || links_.busy_spans.empty()
                             ? 1.0
                             : std::min(1.0, static_cast<double>(hi_ - lo_) /
                                                 static_cast<double>(std::max<int64_t>(1, TraceSpan(links_))));
  frames_.reserve(static_cast<size_t>(covered * static_cast<double>(host_events)) + 16);
  tasks_.reserve(static_cast<size_t>(covered * static_cast<double>(2 * host_events + links_.work.size())) + 16);
  call_task_.assign(links_.calls.size(), -1);
  for (uint32_t track : threads) AddHostThread(track, track == loop_);
  MarkPhases();
  AddDevice();
  AddEdges();
  MarkSteps(call_task_);
  GroupChains();
  KahnOrder();
}

// One thread's slices: its time cut wherever the innermost op changes (links.h's call tree walk).
void RankGraph::AddHostThread(uint32_t track, bool loop) {
  // The calls of this thread (RankLinks::calls is grouped by thread, in event order): which ops
  // are runtime calls that waited for device work.
  auto call = std::lower_bound(links_.calls.begin(), links_.calls.end(), track,
                               [](const HostCall& c, uint32_t t) { return c.track < t; });
  const auto calls_end = links_.calls.end();
  auto wait = std::lower_bound(links_.thread_waits.begin(), links_.thread_waits.end(), track,
                               [](const ThreadWait& w, uint32_t t) { return w.track < t; });
  struct Open {
    const Event* op;
    int32_t frame;
    int64_t cursor;
    int32_t waited_for;  // a call that waited for device work: RankLinks::work index
    int32_t call;        // its index in RankLinks::calls (-1: not a call)
  };
  std::vector<Open> stack;
  int64_t last_end = INT64_MIN;  // the loop's thread: end of its last outermost op
  const auto emit = [&](int32_t frame, int64_t a, int64_t b, Kind kind) {
    a = std::max(a, lo_);
    b = std::min(b, hi_);
    if (b <= a) return false;
    Task t;
    t.ts = a;
    t.dur = b - a;
    t.track = track;
    t.kind = kind;
    t.frame = frame;
    tasks_.push_back(t);
    return true;
  };
  const auto own = [&](Open& o, int64_t until) {  // o's own time from its cursor to `until`
    if (until <= o.cursor) return;
    Kind kind = Kind::kHost;
    while (wait != links_.thread_waits.end() && wait->track == track && wait->start_ns < o.cursor) ++wait;
    if (o.waited_for >= 0 && until == o.op->end_ns()) {
      kind = Kind::kWaitDevice;
    } else if (wait != links_.thread_waits.end() && wait->track == track && wait->start_ns == o.cursor && wait->op == o.op) {
      kind = Kind::kWaitThread;
    }
    if (emit(o.frame, o.cursor, until, kind)) {
      if (kind == Kind::kWaitDevice) tasks_.back().release = o.waited_for;  // a work index until AddEdges
      if (o.call >= 0 && call_task_[o.call] < 0) call_task_[o.call] = static_cast<int32_t>(tasks_.size() - 1);
    }
    o.cursor = until;
  };
  const auto pop = [&] {
    Open o = stack.back();
    own(o, o.op->end_ns());
    stack.pop_back();
    if (!stack.empty()) stack.back().cursor = std::max(stack.back().cursor, o.op->end_ns());
  };
  const auto events = trace_.TrackEvents(track);
  for (size_t k = 0; k < events.size(); ++k) {
    if (links_.ThreadBlockEndsBefore(track, k, lo_)) {  // each would be passed over below
      k += RankLinks::kSpanBlock - 1;
      continue;
    }
    const Event& e = events[k];
    if (!IsHostTask(e.kind) || e.dur_ns <= 0) continue;
    if (e.ts_ns > hi_) break;
    if (e.end_ns() < lo_) continue;
    while (!stack.empty() && stack.back().op->end_ns() <= e.ts_ns) pop();
    if (!stack.empty() && e.end_ns() > stack.back().op->end_ns()) continue;  // overlaps without nesting
    if (!stack.empty()) {
      own(stack.back(), e.ts_ns);
    } else {
      if (loop && last_end != INT64_MIN && e.ts_ns > last_end) emit(-1, last_end, e.ts_ns, Kind::kBetweenOps);
      last_end = std::max(last_end, e.end_ns());
    }
    while (call != calls_end && call->track == track && call->e < &e) ++call;
    int32_t waited_for = -1, call_index = -1;
    if (call != calls_end && call->track == track && call->e == &e) {
      waited_for = call->waited_for;
      call_index = static_cast<int32_t>(call - links_.calls.begin());
    }
    frames_.push_back({&e, stack.empty() ? -1 : stack.back().frame});
    stack.push_back({&e, static_cast<int32_t>(frames_.size() - 1), e.ts_ns, waited_for, call_index});
  }
  while (!stack.empty()) pop();
}

void RankGraph::MarkPhases() {
  ByName phase_of(trace_, [](std::string_view n) { return static_cast<uint8_t>(PhaseOf(n) + 1); });  // 0: none
  phases_under_.assign(frames_.size(), 0);
  for (size_t i = 0; i < frames_.size(); ++i) {
    const int phase = phase_of(*frames_[i].op) - 1;
    const int32_t parent = frames_[i].parent;  // parents come first
    phases_under_[i] = static_cast<uint8_t>((parent >= 0 ? phases_under_[parent] : 0) | (phase >= 0 ? 1 << phase : 0));
  }
}

void RankGraph::AddDevice() {
  for (size_t i = 0; i < links_.work.size(); ++i) {
    if (links_.WorkBlockOutside(i, lo_, hi_)) {  // none of the span's work in this block
      i += RankLinks::kSpanBlock - 1;
      continue;
    }
    const DeviceWork& w = links_.work[i];
    // Work of the span: run there, or launched there (a busy device runs it later).
    const int64_t launched = w.call >= 0 ? links_.calls[w.call].e->ts_ns : w.ts();
    if ((w.ts() > hi_ || w.end() < lo_) && (launched > hi_ || launched < lo_)) continue;
    Task t;
    t.ts = w.ts();
    t.dur = w.e->dur_ns;
    t.track = w.track;
    t.kind = Kind::kDevice;
    t.work = static_cast<int32_t>(i);
    tasks_.push_back(t);
  }
}

void RankGraph::AddEdges() {
  const auto n = static_cast<int32_t>(tasks_.size());
  // Host tasks are grouped by thread in time order, then the device work in RankLinks::work order.
  const auto device = std::find_if(tasks_.begin(), tasks_.end(), [](const Task& t) { return t.kind == Kind::kDevice; });
  const auto first_device = static_cast<int32_t>(device - tasks_.begin());
  std::vector<int32_t> work_task(links_.work.size(), -1);
  for (int32_t i = first_device; i < n; ++i) work_task[tasks_[i].work] = i;
  // Each thread's task range, to find the task running at an instant.
  for (int32_t i = 0; i < first_device; ++i) {
    auto [it, fresh] = thread_range_.try_emplace(tasks_[i].track, i, i + 1);
    if (!fresh) it->second.second = i + 1;
  }
  const auto at = [&](uint32_t track, int64_t t) { return TaskAt(track, t); };
  const std::vector<int32_t>& call_task = call_task_;  // the launching call's first slice, per call
  const int64_t latency = links_.TypicalLaunchLatency();
  ResolveReleases(work_task, first_device);
  // Edges, each with the ready time it had in the trace.
  struct Candidate {
    Edge e;
    int64_t ready, natural;
  };
  Candidate cands[4];  // a host task has at most two (program order, the gap rule), device work four
  size_t count = 0;
  edges_.reserve(2 * tasks_.size());
  const auto push = [&](int32_t from, float frac, int64_t natural) {
    const Task& p = tasks_[from];
    const int64_t ready = frac < 0 ? p.ts + p.dur : p.ts + static_cast<int64_t>(std::llround(frac * static_cast<double>(p.dur)));
    cands[count++] = {Edge{0, from, frac}, ready, natural};
  };
  const auto finish = [&](Task& t) {
    t.edge_begin = static_cast<int32_t>(edges_.size());
    t.edge_count = static_cast<int32_t>(count);
    size_t binding = 0;
    for (size_t k = 1; k < count; ++k)
      if (cands[k].ready > cands[binding].ready) binding = k;
    for (size_t k = 0; k < count; ++k) {
      Edge e = cands[k].e;
      e.lag = k == binding ? t.ts - cands[k].ready : std::min(cands[k].natural, t.ts - cands[k].ready);
      edges_.push_back(e);
    }
    count = 0;
  };
  for (int32_t i = 0; i < n; ++i) {
    Task& t = tasks_[i];
    if (t.kind != Kind::kDevice) {
      const bool first = i == 0 || tasks_[i - 1].track != t.track || tasks_[i - 1].kind == Kind::kDevice;
      if (!first) push(i - 1, -1, 0);
      const bool idle_before = first || tasks_[i - 1].ts + tasks_[i - 1].dur < t.ts;
      if (t.track != loop_ && idle_before) {
        // Woken by the loop's thread at that instant (gap rule): what ran there then. A wait there
        // (the loop waiting for this thread) is read from the task before it.
        int32_t w = at(loop_, t.ts);
        if (w >= 0 && tasks_[w].ts + tasks_[w].dur >= t.ts) {
          if (tasks_[w].release >= 0 && w > 0 && tasks_[w - 1].track == loop_) {
            --w;
            push(w, 1.0f, 0);  // its end, held at the measured offset by the lag
          } else {
            push(w, tasks_[w].dur > 0 ? static_cast<float>(static_cast<double>(t.ts - tasks_[w].ts) / static_cast<double>(tasks_[w].dur)) : 0.0f, 0);
          }
        }
      }
    } else {
      const DeviceWork& w = links_.work[t.work];
      if (w.prev >= 0 && work_task[w.prev] >= 0) push(work_task[w.prev], -1, 0);
      if (w.call >= 0 && call_task[w.call] >= 0) {
        push(call_task[w.call], 0.0f, latency);
        t.frame = tasks_[call_task[w.call]].frame;
      }
      if (w.waits_on >= 0 && work_task[w.waits_on] >= 0) push(work_task[w.waits_on], -1, 0);
      // No sync record: the wait on another stream the critical path infers by time (links.h).
      if (const int32_t x = InferredStreamWait(links_, t.work); x >= 0 && work_task[x] >= 0)
        push(work_task[x], -1, 0);
    }
    finish(t);
  }
}

int32_t RankGraph::TaskAt(uint32_t track, int64_t t) const {
  auto r = thread_range_.find(track);
  if (r == thread_range_.end()) return -1;
  auto b = tasks_.begin() + r->second.first, e = tasks_.begin() + r->second.second;
  auto it = std::upper_bound(b, e, t, [](int64_t v, const Task& x) { return v < x.ts; });
  return it == b ? -1 : static_cast<int32_t>(std::prev(it) - tasks_.begin());
}

// Releases: a device wait's work index -> its task; a thread wait -> the releaser's slice (a wait
// its releaser did not end within is no wait).
void RankGraph::ResolveReleases(const std::vector<int32_t>& work_task, int32_t first_device) {
  const auto at = [&](uint32_t track, int64_t t) { return TaskAt(track, t); };
  for (int32_t i = 0; i < first_device; ++i) {
    Task& t = tasks_[i];
    if (t.kind == Kind::kWaitDevice) {
      t.release = t.release >= 0 ? work_task[t.release] : -1;
    } else if (t.kind == Kind::kWaitThread) {
      auto w = std::lower_bound(links_.thread_waits.begin(), links_.thread_waits.end(), std::make_pair(t.track, t.ts),
                                [](const ThreadWait& x, const std::pair<uint32_t, int64_t>& v) {
                                  return std::tie(x.track, x.start_ns) < std::tie(v.first, v.second);
                                });
      t.release = w != links_.thread_waits.end() && w->track == t.track && w->start_ns == t.ts
                      ? at(w->releaser_track, w->release_ns - 1)
                      : -1;
    }
    if (t.release >= 0) {
      const Task& r = tasks_[t.release];
      t.tail = t.ts + t.dur - (r.ts + r.dur);
      if (t.tail < 0 || r.ts + r.dur < t.ts) t.release = -1;  // not released by it after all
    }
    if (t.release < 0 && t.kind != Kind::kBetweenOps) t.kind = Kind::kHost;
  }
}

// Steps: each task's window, and each window's start and end on the loop's thread.
void RankGraph::MarkSteps(const std::vector<int32_t>& call_task) {
  const auto n = static_cast<int32_t>(tasks_.size());
  const auto at = [&](uint32_t track, int64_t t) { return TaskAt(track, t); };
  const auto window_of = [&](int64_t ts) -> int32_t {
    auto it = std::upper_bound(windows_.begin(), windows_.end(), std::make_pair(ts, INT64_MAX));
    if (it == windows_.begin()) return -1;
    --it;
    return ts < it->second ? static_cast<int32_t>(it - windows_.begin()) : -1;
  };
  step_of_.assign(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    const Task& t = tasks_[i];
    if (t.kind != Kind::kDevice) {
      step_of_[i] = window_of(t.ts);
      continue;
    }
    const DeviceWork& w = links_.work[t.work];
    step_of_[i] = w.call >= 0 && call_task[w.call] >= 0 ? window_of(tasks_[call_task[w.call]].ts) : window_of(t.ts);
  }
  for (const auto& [a, b] : windows_)
    for (int64_t instant : {a, b}) {
      int32_t ti = at(loop_, instant);
      if (ti < 0) ti = thread_range_.count(loop_) ? thread_range_.at(loop_).first : -1;
      double frac = 0;
      if (ti >= 0 && tasks_[ti].dur > 0)
        frac = std::clamp(static_cast<double>(instant - tasks_[ti].ts) / static_cast<double>(tasks_[ti].dur), 0.0, 1.0);
      boundaries_.push_back({ti, frac});
    }
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].kind == Kind::kDevice && step_of_[i] >= 0) device_in_steps_.push_back(static_cast<int32_t>(i));
}


// The walk's groups: task i joins the chain of i - 1 when i - 1's end is read by i alone (its only
// edge, no wait released by it, no step boundary in it) and i starts at that end and nothing reads
// i's start (no launch from it, no fraction of it) or waits in it; a collective stays alone.
// Walking a chain as one gives the same times: its end is its start plus its members' durations
// and the gaps between them.
void RankGraph::GroupChains() {
  const auto n = static_cast<int32_t>(tasks_.size());
  enum : uint8_t { kEndRead = 1, kStartRead = 2, kPinned = 4 };
  std::vector<uint8_t> flags(n, 0);
  std::vector<int32_t> readers(n, 0);
  for (const Edge& e : edges_) {
    ++readers[e.from];
    if (e.frac >= 0) flags[e.from] |= kStartRead;
  }
  for (const Task& t : tasks_)
    if (t.release >= 0) flags[t.release] |= kEndRead;
  for (const auto& b : boundaries_)
    if (b.first >= 0) flags[b.first] |= kPinned;
  collectives_.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (tasks_[i].release >= 0) flags[i] |= kPinned;
    if (const Event* c = CollectiveOf(*this, tasks_[i]); c != nullptr) {
      flags[i] |= kPinned;
      collectives_.push_back({c, i});
    }
  }
  const auto joins = [&](int32_t i) {
    if (i == 0) return false;
    const Task& t = tasks_[i];
    const Task& p = tasks_[i - 1];
    if (t.kind == Kind::kDevice || p.kind == Kind::kDevice || t.track != p.track || t.edge_count != 1) return false;
    const Edge& e = edges_[t.edge_begin];
    return e.from == i - 1 && e.frac < 0 && readers[i - 1] == 1 && (flags[i - 1] & (kEndRead | kPinned)) == 0 &&
           (flags[i] & (kStartRead | kPinned)) == 0;
  };
  head_.clear();
  group_of_.assign(n, 0);
  chain_ns_.clear();
  durs_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    if (!joins(i)) {
      head_.push_back(i);
      chain_ns_.push_back(0);
    } else {
      chain_ns_.back() += edges_[tasks_[i].edge_begin].lag;
    }
    chain_ns_.back() += tasks_[i].dur;
    durs_[i] = tasks_[i].dur;
    group_of_[i] = static_cast<int32_t>(head_.size() - 1);
  }
  head_.push_back(n);
  // Pinned tasks are groups of their own: a wait's or a collective's group is that task alone.
  special_.assign(head_.size() - 1, 0);
  for (int32_t i = 0; i < n; ++i)
    if (tasks_[i].release >= 0) special_[group_of_[i]] |= kWait;
  for (const auto& [c, i] : collectives_) special_[group_of_[i]] |= kCollective;
  edge_group_.resize(edges_.size());
  for (size_t k = 0; k < edges_.size(); ++k) edge_group_[k] = group_of_[edges_[k].from];
}

// Each group's start (node 2g) needs its first task's edges' predecessors (their start for an edge
// at the start of a task, a launch; else their end); its end (2g + 1) needs its start and a wait's
// releaser's end (a synchronous copy waits for the copy it launched).
template <typename Fn>
void RankGraph::EachPred(int32_t node, Fn&& fn) const {
  const int32_t g = node / 2;
  if (node % 2 == 0) {
    const Task& t = tasks_[head_[g]];
    for (int32_t k = 0; k < t.edge_count; ++k) {
      const Edge& e = edges_[t.edge_begin + k];
      fn(e.frac == 0.0f ? 2 * group_of_[e.from] : 2 * group_of_[e.from] + 1);
    }
  } else {
    fn(2 * g);
    if (const Task& t = tasks_[head_[g + 1] - 1]; t.release >= 0) fn(2 * group_of_[t.release] + 1);
  }
}

// Kahn's topological order over the groups' starts and ends; a cycle (a trace whose waits
// contradict each other) leaves its nodes to the end, in time order.
void RankGraph::KahnOrder() {
  const auto groups = static_cast<int32_t>(head_.size() - 1);
  const int32_t nodes = 2 * groups;
  std::vector<int32_t> indegree(nodes, 0), out_begin(nodes + 1, 0), out;
  const auto each_pred = [&](int32_t node, auto&& fn) { EachPred(node, fn); };
  for (int32_t v = 0; v < nodes; ++v) each_pred(v, [&](int32_t p) { ++out_begin[p + 1]; ++indegree[v]; });
  for (int32_t v = 0; v < nodes; ++v) out_begin[v + 1] += out_begin[v];
  out.resize(out_begin[nodes]);
  {
    std::vector<int32_t> fill(out_begin.begin(), out_begin.end() - 1);
    for (int32_t v = 0; v < nodes; ++v) each_pred(v, [&](int32_t p) { out[fill[p]++] = v; });
  }
  // Ready nodes in their measured time order (any topological order replays the same times; this
  // one keeps each walk near the trace's time, so the walks of a joint replay meet at their
  // collectives in the order the ranks reached them).
  const auto instant = [&](int32_t v) {
    if (v % 2 == 0) return tasks_[head_[v / 2]].ts;
    const Task& t = tasks_[head_[v / 2 + 1] - 1];
    return t.ts + t.dur;
  };
  using Ready = std::pair<int64_t, int32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  order_.clear();
  order_.reserve(nodes);
  for (int32_t v = 0; v < nodes; ++v)
    if (indegree[v] == 0) ready.push({instant(v), v});
  while (!ready.empty()) {
    const int32_t v = ready.top().second;
    ready.pop();
    order_.push_back(v);
    for (int32_t k = out_begin[v]; k < out_begin[v + 1]; ++k)
      if (--indegree[out[k]] == 0) ready.push({instant(out[k]), out[k]});
  }
  if (order_.size() < static_cast<size_t>(nodes)) {
    std::vector<int32_t> rest;
    for (int32_t v = 0; v < nodes; ++v)
      if (indegree[v] > 0) rest.push_back(v);
    std::sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
      const int64_t ta = instant(a), tb = instant(b);
      return ta != tb ? ta < tb : a < b;
    });
    unordered_ = rest.size();
    order_.insert(order_.end(), rest.begin(), rest.end());
  }
}

const ReplayResult& RankGraph::Unchanged() const {
  std::call_once(unchanged_once_, [this] { unchanged_ = std::make_unique<ReplayResult>(Replay(*this, Edits())); });
  return *unchanged_;
}

// A walk's buffer of times, grown and never shrunk, left uninitialized: in a topological order every
// entry is written before it is read (zeroing ~10 MB for a set's batched lanes cost more than the
// walk); a graph with a cycle is zeroed first.
class WalkBuffer {
 public:
  int64_t* Grown(size_t n) {
    if (n > size_) {
      data_.reset(new int64_t[n]);
      size_ = n;
    }
    return data_.get();
  }
  size_t bytes() const { return size_ * sizeof(int64_t); }

 private:
  std::unique_ptr<int64_t[]> data_;
  size_t size_ = 0;
};

// One graph's replay as a walk over its topological order, for several edits at once (lanes: the
// order, the edges and the tasks are read once for all of them), that can stop at the end of a
// coupled task (a collective whose other ranks have not all arrived yet) and go on later.
class ReplayWalk {
 public:
  // `start` and `end`: the walk's buffers, lent by WalkBuffers (grown to the graph's tasks x lanes,
  // never shrunk: later walks reuse them, so a set of 256 ranks does not map and fault in ~40 MB a
  // replay).
  ReplayWalk(const RankGraph& g, std::vector<const Edits*> lanes, WalkBuffer& start, WalkBuffer& end)
      : g_(g), lanes_(std::move(lanes)), start_(start.Grown(g.groups() * lanes_.size())),
        end_(end.Grown(g.groups() * lanes_.size())) {
    if (g.unordered_ > 0) {  // a cycle's nodes, walked in time order, may read a predecessor not walked yet: 0
      std::fill(start_, start_ + g.groups() * lanes_.size(), 0);
      std::fill(end_, end_ + g.groups() * lanes_.size(), 0);
    }
    for (const Edits* e : lanes_) raw_.push_back({e->scales(), e->flags(), e->adds()});
    GroupLengths();
  }
  size_t lanes() const { return lanes_.size(); }
  // Walks on. `coupling.Of(i)`: task i's collective (-1: none); `coupling.Ready(k)`: whether every
  // rank has started collective k; `coupling.End(k, lane, start, scale)`: its end then. True when
  // the walk is done, false when it stopped at a collective not ready yet.
  template <typename Coupled>
  bool Run(const Coupled& coupling) {
    switch (lanes_.size()) {
      case 1: return RunLanes<1>(coupling);
      case 2: return RunLanes<2>(coupling);
      case 3: return RunLanes<3>(coupling);
      default: return RunLanes<0>(coupling);
    }
  }
  size_t pos() const { return pos_; }
  // Ends the task the walk stopped at as measured (a coupling given up) and moves past it.
  void EndAsMeasured() {
    const int32_t g = g_.order_[pos_] / 2;  // a collective: a group of its own
    const int32_t i = g_.head_[g];
    for (size_t l = 0; l < lanes_.size(); ++l) {
      const size_t at = static_cast<size_t>(g) * lanes_.size() + l;
      end_[at] = start_[at] + g_.tasks_[i].dur;
    }
    ++pos_;
  }
  ReplayResult Result(size_t lane) const;

 private:
  // The walk for N lanes (0: any number; 1-3 fixed, so the lane loops unroll).
  template <size_t N, typename Coupled>
  bool RunLanes(const Coupled& coupling) {
    const auto& tasks = g_.tasks_;
    const auto& edges = g_.edges_;
    const auto& order = g_.order_;
    const size_t L = N == 0 ? lanes_.size() : N;
    for (; pos_ < order.size(); ++pos_) {
      const int32_t node = order[pos_];
      const int32_t g = node / 2;
      const int32_t i = node % 2 == 0 ? g_.head_[g] : g_.head_[g + 1] - 1;  // its first task; its last
      const RankGraph::Task& t = tasks[i];
      int64_t* end = &end_[static_cast<size_t>(g) * L];
      int64_t* start = &start_[static_cast<size_t>(g) * L];
      // A group's end: its start plus its length, but for a wait (its releaser's end) and a collective.
      const uint8_t special = g_.special_[g];
      if (node % 2 == 1 && (special == 0 || (special == RankGraph::kCollective && coupling.Of(i) < 0))) {
        const int64_t* length = &length_[static_cast<size_t>(g) * L];
        for (size_t l = 0; l < L; ++l) end[l] = start[l] + length[l];
        continue;
      }
      if (node % 2 == 0) {
        // The latest of its edges (the first sets, the others raise); none: as measured.
        if (t.edge_count == 0)
          for (size_t l = 0; l < L; ++l) start[l] = t.ts;
        for (int32_t k = 0; k < t.edge_count; ++k) {
          const RankGraph::Edge& e = edges[t.edge_begin + k];
          const int32_t from = g_.edge_group_[static_cast<size_t>(t.edge_begin + k)];
          const int64_t* ps = &start_[static_cast<size_t>(from) * L];
          const int64_t* pe = &end_[static_cast<size_t>(from) * L];
          if (e.frac < 0 && k == 0) {
            for (size_t l = 0; l < L; ++l) start[l] = pe[l] + e.lag;
          } else if (e.frac < 0) {
            for (size_t l = 0; l < L; ++l) start[l] = std::max(start[l], pe[l] + e.lag);
          } else {
            for (size_t l = 0; l < L; ++l) {
              const int64_t ready = e.frac == 0 ? ps[l] : ps[l] + static_cast<int64_t>(e.frac * static_cast<double>(pe[l] - ps[l]) + 0.5);
              start[l] = k == 0 ? ready + e.lag : std::max(start[l], ready + e.lag);
            }
          }
        }
        if (const int32_t c = special & RankGraph::kCollective ? coupling.Of(i) : -1; c >= 0) coupling.Started(c, start, L);
        continue;
      }
      const int32_t collective = special & RankGraph::kCollective ? coupling.Of(i) : -1;
      if (collective >= 0 && !coupling.Ready(collective)) return false;
      for (size_t l = 0; l < L; ++l) {
        const Lane& lane = raw_[l];
        const double scale = lane.scale ? lane.scale[i] : 1.0;
        if (collective >= 0) {
          end[l] = coupling.End(collective, l, start[l], scale);
          continue;
        }
        const int64_t dur = lane.Duration(static_cast<size_t>(i), t.dur);
        if (t.release >= 0 && scale > 0) {
          // A wait: until its releaser ends, then the time it took to return.
          const bool waits = !lane.flags || (lane.flags[i] & Edits::kUnblock) == 0;
          const int64_t released = end_[static_cast<size_t>(g_.group_of_[t.release]) * L + l];
          end[l] = waits ? std::max(start[l] + std::min(dur, t.tail), released + t.tail) : start[l] + std::min(dur, t.tail);
        } else {
          end[l] = start[l] + dur;
        }
      }
    }
    return true;
  }
  struct Lane {  // an edit's arrays (nullptr: empty)
    const float* scale;
    const uint8_t* flags;
    const int64_t* add;
    // A task's duration under this lane's edits: the measured one scaled (1.0 * d + 0.5 truncated
    // is d), then its added time, floored at 0.
    int64_t Duration(size_t task, int64_t measured) const {
      int64_t d = scale ? static_cast<int64_t>(static_cast<double>(scale[task]) * static_cast<double>(measured) + 0.5) : measured;
      if (add && add[task] != 0) d = std::max<int64_t>(0, d + add[task]);
      return d;
    }
  };
  // Per group, per lane: its length under the lane's edits (its members' durations, scaled and with
  // their added time, and the gaps between them): the measured length, and each edited task's
  // change added to its group's.
  void GroupLengths() {
    const size_t L = lanes_.size();
    const size_t groups = g_.groups();
    length_.reset(new int64_t[groups * L]);
    const int64_t* measured = g_.chain_ns_.data();
    for (size_t g = 0; g < groups; ++g)
      for (size_t l = 0; l < L; ++l) length_[g * L + l] = measured[g];
    const int64_t* dur = g_.durs_.data();
    const int32_t* group_of = g_.group_of_.data();
    for (size_t l = 0; l < L; ++l) {
      const Lane lane = raw_[l];  // a copy: its pointers stay in registers across the lengths' stores
      int64_t* length = length_.get() + l;
      // Tasks come in group order: a group's changes are summed, then added once.
      int32_t group = -1;
      int64_t change = 0;
      lanes_[l]->EachEdited([&](size_t m) {
        const int64_t d = lane.Duration(m, dur[m]);
        if (group_of[m] != group) {
          if (group >= 0) length[static_cast<size_t>(group) * L] += change;
          group = group_of[m];
          change = 0;
        }
        change += d - dur[m];
      });
      if (group >= 0) length[static_cast<size_t>(group) * L] += change;
    }
  }
  std::unique_ptr<int64_t[]> length_;  // per group, per lane
  const RankGraph& g_;
  std::vector<const Edits*> lanes_;
  std::vector<Lane> raw_;
  int64_t* start_;  // per group, per lane
  int64_t* end_;
  size_t pos_ = 0;
};

ReplayResult ReplayWalk::Result(size_t lane) const {
  const size_t L = lanes_.size();
  // The tasks read here (step boundaries, device work) are groups of their own.
  const auto s = [&](int32_t i) { return start_[static_cast<size_t>(g_.group_of_[i]) * L + lane]; };
  const auto e = [&](int32_t i) { return end_[static_cast<size_t>(g_.group_of_[i]) * L + lane]; };
  ReplayResult r;
  const auto instant = [&](const std::pair<int32_t, double>& b) -> int64_t {
    if (b.first < 0) return 0;
    return s(b.first) + static_cast<int64_t>(std::llround(b.second * static_cast<double>(e(b.first) - s(b.first))));
  };
  const size_t windows = g_.windows_.size();
  double sum = 0;
  for (size_t w = 0; w < windows; ++w) {
    r.step_ns.push_back(instant(g_.boundaries_[2 * w + 1]) - instant(g_.boundaries_[2 * w]));
    sum += static_cast<double>(r.step_ns.back());
  }
  r.mean_ns = windows ? sum / static_cast<double>(windows) : 0;
  // The device's pace: the end of each window's device work, first to last.
  if (windows >= 2) {
    std::vector<int64_t> last(windows, INT64_MIN);
    for (const int32_t i : g_.device_in_steps_) last[g_.step_of_[i]] = std::max(last[g_.step_of_[i]], e(i));
    if (last.front() != INT64_MIN && last.back() != INT64_MIN) {
      r.device_step_ns = (last.back() - last.front()) / static_cast<int64_t>(windows - 1);
      r.mean_ns = std::max(r.mean_ns, static_cast<double>(r.device_step_ns));
    }
  }
  return r;
}

namespace {
struct Uncoupled {
  int32_t Of(int32_t) const { return -1; }
  void Started(int32_t, const int64_t*, size_t) const {}
  bool Ready(int32_t) const { return true; }
  int64_t End(int32_t, size_t, int64_t, double) const { return 0; }
};
}  // namespace

// The walks' buffers, lent and given back (two per graph of a joint replay): shared by the threads
// and kept between analyses of one process (the bench's repetitions, the Python API, fix's
// trials), so a helper thread's walk does not fault in fresh pages each time. At most kKeptBytes
// are kept (a 256-rank set's walk uses ~40 MB).
class WalkBuffers {
 public:
  explicit WalkBuffers(size_t count) {
    std::lock_guard<std::mutex> lock(Mutex());
    auto& free = Free();
    for (size_t k = 0; k < count; ++k) {
      if (free.empty()) {
        held_.push_back(std::make_unique<WalkBuffer>());
      } else {
        held_.push_back(std::move(free.back()));
        free.pop_back();
      }
    }
  }
  ~WalkBuffers() {
    constexpr size_t kKeptBytes = size_t{64} << 20;
    std::lock_guard<std::mutex> lock(Mutex());
    size_t kept = 0;
    for (const auto& b : Free()) kept += b->bytes();
    for (auto& b : held_) {
      if (kept + b->bytes() > kKeptBytes) continue;  // freed here
      kept += b->bytes();
      Free().push_back(std::move(b));
    }
  }
  WalkBuffers(const WalkBuffers&) = delete;
  WalkBuffers& operator=(const WalkBuffers&) = delete;
  WalkBuffer& operator[](size_t k) { return *held_[k]; }

 private:
  static std::mutex& Mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::unique_ptr<WalkBuffer>>& Free() {
    static std::vector<std::unique_ptr<WalkBuffer>> free;
    return free;
  }
  std::vector<std::unique_ptr<WalkBuffer>> held_;
};

ReplayResult Replay(const RankGraph& g, const Edits& edits) {
  WalkBuffers buffers(2);
  ReplayWalk walk(g, {&edits}, buffers[0], buffers[1]);
  walk.Run(Uncoupled());
  return walk.Result(0);
}

std::vector<std::pair<const Event*, int32_t>> CollectiveTasks(const RankGraph& g) {
  std::vector<std::pair<const Event*, int32_t>> found = g.collectives_;
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first->ts_ns < b.first->ts_ns; });
  return found;
}

Coupling CoupleCollectives(const std::vector<const RankGraph*>& graphs) {
  Coupling c;
  if (graphs.size() < 2) return c;
  // Per graph: its collectives, as measured, in time order, and their tasks.
  std::vector<std::vector<Collective>> lists(graphs.size());
  std::vector<std::vector<int32_t>> task_of(graphs.size());
  for (size_t r = 0; r < graphs.size(); ++r) {
    for (const auto& [e, i] : CollectiveTasks(*graphs[r])) {
      lists[r].push_back({graphs[r]->trace().Name(*e), e->ts_ns, e->dur_ns, true});
      task_of[r].push_back(i);
    }
  }
  std::vector<const std::vector<Collective>*> ptrs;
  for (const auto& l : lists) ptrs.push_back(&l);
  c.of_task.resize(graphs.size());
  for (size_t r = 0; r < graphs.size(); ++r) c.of_task[r].assign(graphs[r]->tasks().size(), -1);
  for (const MatchedSet& set : MatchAcrossRanks(ptrs, false)) {
    const auto k = static_cast<int32_t>(c.transfer.size());
    std::vector<int32_t> tasks(graphs.size());
    std::vector<int64_t> offset(graphs.size());
    int64_t transfer = INT64_MAX;
    for (size_t r = 0; r < graphs.size(); ++r) {
      const auto at = static_cast<size_t>(set[r] - lists[r].data());
      tasks[r] = task_of[r][at];
      offset[r] = set[r]->end_ns() - set[0]->end_ns();
      transfer = std::min(transfer, set[r]->dur_ns);
    }
    for (size_t r = 0; r < graphs.size(); ++r) c.of_task[r][static_cast<size_t>(tasks[r])] = k;
    c.task.push_back(std::move(tasks));
    c.offset.push_back(std::move(offset));
    c.transfer.push_back(transfer);
  }
  return c;
}

std::vector<std::vector<ReplayResult>> ReplayJoint(const std::vector<const RankGraph*>& graphs,
                                                   const std::vector<std::vector<const Edits*>>& lanes_of, const Coupling& c,
                                                   size_t* broken, const std::vector<size_t>& wanted) {
  std::vector<ReplayWalk> walks;
  walks.reserve(graphs.size());
  WalkBuffers buffers(2 * graphs.size());
  for (size_t r = 0; r < graphs.size(); ++r) walks.emplace_back(*graphs[r], lanes_of[r], buffers[2 * r], buffers[2 * r + 1]);
  std::vector<uint8_t> done(graphs.size(), 0);
  size_t left = graphs.size(), given_up = 0;
  // A collective ends when the last rank arrived (each arrival on the first rank's clock), plus
  // the transfer: per collective, how many ranks have arrived and the latest arrival per lane.
  size_t lanes = 1;
  for (const auto& l : lanes_of) lanes = std::max(lanes, l.size());
  std::vector<int32_t> arrived(c.transfer.size(), 0);
  std::vector<int64_t> latest(c.transfer.size() * lanes, INT64_MIN);
  struct Coupled {
    const Coupling& c;
    std::vector<int32_t>& arrived;
    std::vector<int64_t>& latest;
    size_t lanes, r, ranks;
    int32_t Of(int32_t i) const { return c.empty() ? -1 : c.of_task[r][static_cast<size_t>(i)]; }
    void Started(int32_t k, const int64_t* start, size_t n) const {
      ++arrived[static_cast<size_t>(k)];
      const int64_t offset = c.offset[static_cast<size_t>(k)][r];
      for (size_t l = 0; l < lanes; ++l) {
        int64_t& x = latest[static_cast<size_t>(k) * lanes + l];
        x = std::max(x, start[std::min(l, n - 1)] - offset);
      }
    }
    bool Ready(int32_t k) const { return static_cast<size_t>(arrived[static_cast<size_t>(k)]) == ranks; }
    int64_t End(int32_t k, size_t lane, int64_t, double scale) const {
      return latest[static_cast<size_t>(k) * lanes + lane] + c.offset[static_cast<size_t>(k)][r] +
             static_cast<int64_t>(scale * static_cast<double>(c.transfer[static_cast<size_t>(k)]) + 0.5);
    }
  };
  while (left > 0) {
    bool progress = false;
    for (size_t r = 0; r < graphs.size(); ++r) {
      if (done[r]) continue;
      const size_t before = walks[r].pos();
      if (walks[r].Run(Coupled{c, arrived, latest, lanes, r, graphs.size()})) {
        done[r] = 1;
        --left;
      }
      progress = progress || walks[r].pos() != before || done[r];
    }
    if (!progress) {  // every walk left waits for another: their orders contradict; the first gives up
      for (size_t r = 0; r < graphs.size(); ++r)
        if (!done[r]) {
          walks[r].EndAsMeasured();
          ++given_up;
          break;
        }
    }
  }
  if (broken != nullptr) *broken = given_up;
  std::vector<std::vector<ReplayResult>> out(walks.size());
  for (size_t r = 0; r < walks.size(); ++r) {
    out[r].resize(walks[r].lanes());
    for (size_t l = 0; l < walks[r].lanes(); ++l)
      if (wanted.empty() || wanted[l] == r) out[r][l] = walks[r].Result(l);
  }
  return out;
}

}  // namespace trainrx::analyzers

