// The replay of a rank's dependency graph (issue 59): each step re-timed with some tasks made
// shorter, removed or no longer waiting, to predict what a fix saves before anyone reruns it.
//
// The graph, built once per rank from the dependency model (links.h):
//  - host tasks: each host thread's time cut where its innermost op changes (a slice of one op's own
//    time, its "frame"), the loop's thread also between ops (Python and framework time); a slice
//    of a blocking or allocator call that waited for device work, or a stretch that waited for
//    another thread (ThreadWait), is a wait: it ends when its releaser ends, plus the time it took to
//    return then;
//  - device tasks: kernels, copies and memsets per stream;
//  - edges: program order per thread and per stream; launch -> device work; event record -> stream
//    wait, or without sync records the wait on another stream inferred by time as the critical path
//    infers it (links.h InferredStreamWait); a thread other than the loop's, idle before a task, was
//    woken by the loop's thread at that instant (the gap rule).
// Replay gives each task start = max over its edges of (the predecessor's new ready time + lag): the
// binding edge (the one that was latest in the trace) keeps the delay it had (launch latency, an
// unexplained wait), the others their natural minimum (0; a launch the rank's typical latency), so
// the unchanged graph replays exactly the measured times (`Replay` with no edits; its error is
// reported with every prediction). What the trace cannot show (work in another process, a
// collective's other ranks when the trace holds one rank) is held as it was measured; the ranks of
// a set are replayed together (ReplayJoint).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "by_name.h"
#include "links.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

class RankGraph;
class ReplayWalk;
class Edits;
struct ReplayResult;
ReplayResult Replay(const RankGraph& graph, const Edits& edits);

class RankGraph {
 public:
  enum class Kind : uint8_t { kHost, kBetweenOps, kWaitDevice, kWaitThread, kDevice };
  struct Frame {
    const profiler::Event* op = nullptr;
    int32_t parent = -1;
  };
  struct Task {
    int64_t ts = 0, dur = 0;  // as measured
    uint32_t track = 0;
    Kind kind = Kind::kHost;
    int32_t frame = -1;     // host: its innermost op; device: the frame of the call that launched it (-1: none)
    int32_t work = -1;      // device: index in RankLinks::work
    int32_t release = -1;   // waits: the task whose end released it
    int64_t tail = 0;       // waits: from the release to the end
    int32_t edge_begin = 0, edge_count = 0;
  };
  struct Edge {  // 16 bytes: the replay's walks read every edge
    int64_t lag = 0;
    int32_t from = 0;
    float frac = -1;  // < 0: ready at the predecessor's end; else at this fraction of its duration
  };

  // `windows`: the rank's steps [start, end) on the loop's thread (may be empty); the graph covers
  // them, one window's length before and a quarter after (what runs elsewhere is not replayed).
  RankGraph(const profiler::Trace& trace, const RankLinks& links, std::vector<std::pair<int64_t, int64_t>> windows);

  const profiler::Trace& trace() const { return trace_; }
  const RankLinks& links() const { return links_; }
  const std::vector<Frame>& frames() const { return frames_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<std::pair<int64_t, int64_t>>& windows() const { return windows_; }
  // The steps the graph covers, at least one: what a transform's words divide by for "a step".
  double steps() const { return static_cast<double>(std::max<size_t>(1, windows_.size())); }
  // Whether `ts` lies in one of the windows (sorted, not overlapping).
  bool InWindows(int64_t ts) const {
    const auto it = std::upper_bound(windows_.begin(), windows_.end(), std::make_pair(ts, INT64_MAX));
    return it != windows_.begin() && ts < std::prev(it)->second;
  }
  uint32_t loop_thread() const { return loop_; }
  // Starts and ends a cycle of waits left out of the topological order (replayed in time order).
  size_t unordered() const { return unordered_; }
  // The units the replay walks (chains of plain slices as one; its buffers hold two times per group
  // and lane).
  size_t groups() const { return head_.size() - 1; }
  // The bytes a walk reads of the graph whatever its lanes (its order, the groups' first and last
  // tasks, their edges): what walking it once more costs, against a walk's buffers.
  size_t walked_bytes() const {
    return tasks_.size() * sizeof(Task) + edges_.size() * (sizeof(Edge) + sizeof(int32_t)) +
           order_.size() * sizeof(int32_t) + head_.size() * (sizeof(int32_t) + sizeof(int64_t) + 1);
  }
  // The unchanged replay, made once (the self-check every prediction reports).
  const ReplayResult& Unchanged() const;
  // The step a task belongs to (its start inside a window; device work: its launch's), -1: none.
  int32_t StepOf(int32_t task) const { return step_of_[task]; }
  // Per frame: whether its op or an op enclosing it is of `phase` (phases.h's PhaseOf), read from
  // the phases found once per graph.
  std::vector<uint8_t> FramesInPhase(int phase) const {
    std::vector<uint8_t> out(frames_.size());
    for (size_t i = 0; i < frames_.size(); ++i) out[i] = static_cast<uint8_t>((phases_under_[i] >> phase) & 1);
    return out;
  }
  // The task of RankLinks::calls[call]'s first slice (-1: none in the graph's span).
  int32_t CallTask(int32_t call) const { return call_task_[static_cast<size_t>(call)]; }
  // Per frame: whether its op or an op enclosing it has a name that satisfies `pred` (a function of
  // the name alone: asked once per distinct name).
  template <typename Pred>
  std::vector<uint8_t> FramesUnder(Pred pred) const {
    ByName named(trace_, [&pred](std::string_view n) { return static_cast<uint8_t>(pred(n) ? 1 : 0); });
    std::vector<uint8_t> out(frames_.size(), 0);
    for (size_t i = 0; i < frames_.size(); ++i)
      out[i] = frames_[i].parent >= 0 && out[frames_[i].parent] ? 1 : named(*frames_[i].op);
    return out;
  }

 private:
  void AddHostThread(uint32_t track, bool loop);
  void AddDevice();
  void AddEdges();
  void ResolveReleases(const std::vector<int32_t>& work_task, int32_t first_device);
  void MarkSteps(const std::vector<int32_t>& call_task);
  // The task of `track` running at t, or the last before it (-1: none).
  int32_t TaskAt(uint32_t track, int64_t t) const;
  template <typename Fn>
  void EachPred(int32_t node, Fn&& fn) const;
  void GroupChains();
  void KahnOrder();
  void MarkPhases();
  const profiler::Trace& trace_;
  const RankLinks& links_;
  std::vector<std::pair<int64_t, int64_t>> windows_;
  uint32_t loop_ = 0;
  int64_t lo_ = INT64_MIN, hi_ = INT64_MAX;  // the span the tasks cover (clipped to it)
  std::vector<Frame> frames_;
  std::vector<uint8_t> phases_under_;  // per frame: bit p set where it or an enclosing op is of phase p
  std::vector<Task> tasks_;
  std::vector<Edge> edges_;
  // The walk's units: chains of a thread's plain slices (each started by the previous one's end and
  // read by nothing else: no launch, wait, boundary or collective in them) walked as one, tasks
  // [head_[g], head_[g + 1]); ~80 % of a GPU rank's slices are inside such chains. Per group: its
  // measured length (durations and the gaps between them), chain_ns_.
  std::vector<int32_t> head_, group_of_;
  // Per group: kWait (its task waits for a releaser), kCollective (its task is one of
  // CollectiveTasks); 0: its end is its start plus its length.
  static constexpr uint8_t kWait = 1, kCollective = 2;
  std::vector<uint8_t> special_;
  std::vector<int32_t> edge_group_;  // per edge: its predecessor's group (the walk's buffers are per group)
  std::vector<int64_t> chain_ns_;
  std::vector<int64_t> durs_;     // per task: its measured duration (an edited task's change is read from it)
  std::vector<std::pair<const profiler::Event*, int32_t>> collectives_;  // CollectiveTasks, in task order
  std::vector<int32_t> order_;     // group starts (2g) and ends (2g + 1) in a topological order
  size_t unordered_ = 0;
  mutable std::once_flag unchanged_once_;
  mutable std::unique_ptr<ReplayResult> unchanged_;
  std::vector<int32_t> step_of_;
  std::vector<int32_t> call_task_;  // per RankLinks::calls: its first slice (-1: none)
  std::vector<int32_t> device_in_steps_;  // the device tasks of a step (the device's pace)
  std::vector<std::pair<int32_t, double>> boundaries_;  // per window start and end: (loop task, fraction)
  std::unordered_map<uint32_t, std::pair<int32_t, int32_t>> thread_range_;  // per host thread: its tasks [first, last)
  friend class ReplayWalk;
  friend std::vector<std::pair<const profiler::Event*, int32_t>> CollectiveTasks(const RankGraph& g);
};

// What a transform does to the graph: a new duration per task (the measured one scaled, then time
// added; 0 removes it) and waits that no longer wait for their releaser. Kept per task, with a flag
// per task edited: a replay starts from the measured times and applies the edited tasks alone (most
// fixes edit a few tasks of a step), found a word of flags at a time. The added times are made on
// the first Add; Edits() (no tasks) is the unchanged replay's.
class Edits {
 public:
  explicit Edits(size_t tasks = 0) : scale_(tasks), flags_(tasks, 0) { Ones(scale_); }
  size_t size() const { return flags_.size(); }
  float scale(size_t task) const { return scale_.empty() ? 1.0f : scale_[task]; }
  bool unblocked(size_t task) const { return !flags_.empty() && (flags_[task] & kUnblock) != 0; }
  int64_t added_ns(size_t task) const { return add_ns_.empty() ? 0 : add_ns_[task]; }
  // fn(task) for each task edited, in task order.
  template <typename Fn>
  void EachEdited(Fn&& fn) const {
    const size_t n = flags_.size();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {  // eight flags at once: most words have none
      uint64_t word;
      std::memcpy(&word, flags_.data() + i, sizeof word);
      if (word == 0) continue;
      for (size_t j = i; j < i + 8; ++j)
        if (flags_[j] != 0) fn(j);
    }
    for (; i < n; ++i)
      if (flags_[i] != 0) fn(i);
  }
  // The arrays per task (nullptr: no edit of that kind); flags' bit kUnblock: a wait that no longer waits.
  const float* scales() const { return scale_.empty() ? nullptr : scale_.data(); }
  const uint8_t* flags() const { return flags_.empty() ? nullptr : flags_.data(); }
  const int64_t* adds() const { return add_ns_.empty() ? nullptr : add_ns_.data(); }
  static constexpr uint8_t kUnblock = 1;

  // Inline: a transform edits thousands of tasks a step.
  [[gnu::always_inline]] void Scale(size_t task, float s) { ScaleSlot(task) = s; }     // its scale set to s (1: as measured)
  [[gnu::always_inline]] void ScaleBy(size_t task, float s) { ScaleSlot(task) *= s; }  // its scale multiplied by s
  [[gnu::always_inline]] void Unblock(size_t task) { Touch(task) |= kUnblock; }       // the wait no longer waits
  void Add(size_t task, int64_t ns) {  // time added after scaling (may be negative; floors at 0)
    Touch(task);
    if (add_ns_.empty()) add_ns_.assign(flags_.size(), 0);
    add_ns_[task] += ns;
  }

 private:
  static constexpr uint8_t kEdited = 2;
  // Every scale 1, a few by hand and the rest copied from them in doubling blocks (memcpy's wide
  // stores: a plain fill loop of floats is not vectorized at -O2, and an Edits is made per level).
  static void Ones(std::vector<float>& v) {
    const size_t n = v.size();
    for (size_t i = 0; i < std::min<size_t>(n, 16); ++i) v[i] = 1.0f;
    for (size_t k = 16; k < n; k *= 2) std::memcpy(v.data() + k, v.data(), std::min(k, n - k) * sizeof(float));
  }
  [[gnu::always_inline]] uint8_t& Touch(size_t task) { return flags_[task] |= kEdited; }
  [[gnu::always_inline]] float& ScaleSlot(size_t task) {
    Touch(task);
    return scale_[task];
  }
  std::vector<float> scale_;     // per task; 1: as measured (the writers need no test for an array not made yet)
  std::vector<uint8_t> flags_;   // per task: kEdited, kUnblock
  std::vector<int64_t> add_ns_;  // per task: time added after scaling
};

struct ReplayResult {
  std::vector<int64_t> step_ns;   // each window replayed on the loop's thread
  int64_t device_step_ns = 0;     // the device's pace: its work of the windows over their count (0: none)
  double mean_ns = 0;             // mean replayed step: the loop's, or the device's pace when slower
};
ReplayResult Replay(const RankGraph& graph, const Edits& edits);

// A graph's collectives as tasks, in time order: communication kernels, and Gloo's ranges
// ("gloo:all_reduce") held whole by one host task.
std::vector<std::pair<const profiler::Event*, int32_t>> CollectiveTasks(const RankGraph& g);

// Collectives matched across the graphs of a set's ranks (the k-th of a name on each: GPU
// communication kernels, Gloo's ranges), as tasks of each graph. In a joint replay a collective ends
// on every rank when the last rank has arrived plus its transfer time: the shortest measured
// duration (the last arriver's, which did not wait). Arrivals are compared on the first graph's
// clock, each rank's offset taken from the collective's measured ends (which are one instant), so
// the unchanged set replays its measured times.
struct Coupling {
  std::vector<std::vector<int32_t>> task;     // per collective, per graph: its task
  std::vector<std::vector<int64_t>> offset;   // per collective, per graph: its measured end there - on the first
  std::vector<int64_t> transfer;              // per collective: its shortest measured duration
  std::vector<std::vector<int32_t>> of_task;  // per graph, per task: its collective (-1: none)
  bool empty() const { return transfer.empty(); }
};
Coupling CoupleCollectives(const std::vector<const RankGraph*>& graphs);
// Every graph replayed with its edits, together: a coupled collective ends when its last rank has
// arrived (Coupling). `lanes[r]`: rank r's edits, one per lane (all ranks the same count; lane l of
// every rank is one replay of the set: the lanes share one walk of each graph, so several fixes'
// replays cost little more than one); the result per rank, per lane. Where the graphs' orders
// contradict each other (each waits for another), a collective is given up and replayed as
// measured on its rank (the same in every lane): counted in `broken`. `wanted`: the rank whose
// results a lane makes (the others' stay empty); empty: every rank's.
std::vector<std::vector<ReplayResult>> ReplayJoint(const std::vector<const RankGraph*>& graphs,
                                                   const std::vector<std::vector<const Edits*>>& lanes,
                                                   const Coupling& coupling, size_t* broken = nullptr,
                                                   const std::vector<size_t>& wanted = {});
}  // namespace trainrx::analyzers
