// gpu.idle and gpu.launch_bound, following Holistic Trace Analysis (HTA 0.5.0 .. 0.6.1) definitions so
// the numbers agree with HTA on the same trace (tests/analyzers/hta_golden_test.cc):
//
//  Times ("gpu.idle.hta_time", default 1): HTA reads a trace's float µs "ts"/"dur" as doubles and,
//  when any "ts" in the file has a fraction (ns-resolution Kineto), makes them whole µs:
//  end = floor(ts + dur), ts = ceil(ts) (profiler::HtaRoundedMicros; HTA's trace_parser.py
//  round_down_time_stamps). Every time below (windows, spans, gaps, launch stats) then uses those
//  whole µs, so sub-µs kernels shrink to dur 0 or -1 µs exactly as in HTA. With 0 the breakdowns
//  use the exact ns we parse (HTA's figures less its rounding loss: e.g. ns_resolution idle 1.68 %
//  instead of HTA's 2.63 %). Integer-µs traces give the same numbers either way.
//  Window ("the last ProfilerStep excluded"): when a rank has two or more ProfilerStep#N, CPU
//  events starting at or after the last step's start are dropped; GPU activities (kernels,
//  memcpy, memset with a stream and a correlation id) are kept only if their correlation id
//  belongs to a kept CPU event (the launching runtime call). With fewer than two steps, all
//  CPU events are kept, and still only correlated GPU activities count.
//  Temporal breakdown: kernel_time = last GPU end - first GPU start; idle = kernel_time - union
//  of all GPU activities; compute = union of compute kernels (not ncclKernel, not Memcpy/Memset);
//  non-compute = the rest.
//  Idle split per stream: activities sorted by start; gap = start - previous activity's end.
//  host wait: the launching runtime call started after the previous activity ended;
//  kernel wait: otherwise, when gap < 30 µs; other: the rest. (HTA's threshold argument is 30
//  in the trace's µs units.) Negative gaps (overlap) are summed as HTA does.
//  Savings (ours, not HTA's): per-stream waits are per stream, and summed over streams they can
//  exceed the device's idle time (issue 12: 123-185 % of the step on multi-stream traces). A fix
//  recovers only device idle time, so gpu.idle claims the host-wait gaps that fall where no stream
//  ran (gpu.launch_bound: the kernel-wait gaps), bounded by the idle time and the step. Idle time
//  inside a CUDA/HIP graph capture (StreamBeginCapture .. StreamEndCapture on a thread) is no
//  saving: captured launches are recorded, not run. A trace whose idle time is mostly capture is
//  not a training step: gpu.idle says so at severity info with no saving, and gpu.launch_bound is
//  not judged (issue 12: a capture trace reported 99.95 % idle with a 99.9 % saving).
//  Launch stats: per activity launched by a launch call (kernel launches, async copies / memsets;
//  CUDA and HIP names, runtime_names.h; as HTA, not blocking copies nor graph launches), runtime
//  duration (cpu), activity duration (gpu), start delay.
//  Known HTA differences left as they are: HTA also counts CUDA sync records (Stream/Context Sync,
//  Stream Wait Event) as GPU activities in the temporal breakdown (alexnet's kernel_time is 75.8 ms
//  longer there; the shares move < 0.01 pp); it defines launch delay as kernel start - launch call
//  end, >= 0.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_set>

#include "families.h"
#include "intervals.h"
#include "links.h"
#include "runtime_names.h"
#include "trainrx/profiler/time.h"
#include "trainrx/profiler/sort_runs.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

bool IsComputeKernel(std::string_view name) {
  return !IsCommKernel(name) && name.find("Memcpy") == std::string_view::npos &&
         name.find("Memset") == std::string_view::npos;
}

struct GpuActivity {
  const Event* e;
  int64_t stream;
  int32_t device;
  int64_t ts, end;                 // the activity, in the breakdown's time (see GpuClock)
  int64_t runtime_ts, runtime_end; // its launching runtime call, same time
  bool launch;                     // that call is a launch (enters the launch statistics)
  const DeviceWork* work;          // the activity in the dependency model (stream order, graph launch)
};

struct RankGpu {
  std::vector<GpuActivity> acts;
  std::string window;
  std::vector<Interval> capture;  // graph captures: BeginCapture to EndCapture, per thread, merged
  int64_t captures = 0;
};

// The times the breakdowns use, in ns: exact, or HTA's whole µs (x 1000) when hta_time is on and
// the rank's file has a fractional "ts" (HTA rounds only then: its ts column is float64).
class GpuClock {
 public:
  GpuClock(const Trace& trace, int32_t rank, bool hta_time) {
    if (!hta_time) return;
    const profiler::RankInfo* info = trace.FindRank(rank);
    base_ns_ = info ? info->base_time_ns : 0;  // the file's ts are relative to it
    for (uint32_t ti = 0; ti < trace.tracks.size() && !round_; ++ti) {
      if (trace.tracks[ti].rank != rank) continue;
      for (const Event& e : trace.TrackEvents(ti)) {
        if ((e.ts_ns - base_ns_) % 1000 != 0) {
          round_ = true;
          break;
        }
      }
    }
  }
  bool rounds() const { return round_; }
  int64_t Start(const Event& e) const {
    return round_ ? profiler::HtaRoundedMicros(e.ts_ns - base_ns_, e.dur_ns).ts_us * 1000 + base_ns_ : e.ts_ns;
  }
  Interval Span(const Event& e) const {
    if (!round_) return {e.ts_ns, e.end_ns()};
    const auto m = profiler::HtaRoundedMicros(e.ts_ns - base_ns_, e.dur_ns);
    return {m.ts_us * 1000 + base_ns_, m.end_us * 1000 + base_ns_};
  }

 private:
  bool round_ = false;
  int64_t base_ns_ = 0;
};

// What CollectRank asks of an event's name, worked out once per interned name: a trace has far
// fewer names than events, and the substring searches per CPU event were most of this analyzer.
enum NameFlag : uint8_t { kStepName = 1, kCaptureBeginName = 2, kCaptureEndName = 4 };
std::vector<uint8_t> NameFlags(const Trace& trace) {
  std::vector<uint8_t> flags(trace.strings.size());
  for (profiler::StrId id = 0; id < flags.size(); ++id) {
    const std::string_view n = trace.strings.Get(id);
    flags[id] = static_cast<uint8_t>((n.find("ProfilerStep") != std::string_view::npos ? kStepName : 0) |
                                     (IsCaptureBegin(n) ? kCaptureBeginName : 0) | (IsCaptureEnd(n) ? kCaptureEndName : 0));
  }
  return flags;
}

RankGpu CollectRank(const Trace& trace, const RankLinks& links, int32_t rank, const GpuClock& clock,
                    const std::vector<uint8_t>& name_flags) {
  RankGpu out;
  // Distinct ProfilerStep names and the last step's start.
  std::unordered_set<profiler::StrId> step_names;
  int64_t last_step_start = INT64_MIN;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || t.kind == TrackKind::kGpuStream) continue;
    for (const Event& e : trace.TrackEvents(ti)) {
      if (name_flags[e.name] & kStepName) {
        step_names.insert(e.name);
        last_step_start = std::max(last_step_start, clock.Start(e));
      }
    }
  }
  const bool cut = step_names.size() >= 2;
  out.window = cut ? fmt::format("CPU events before the last of {} ProfilerSteps", step_names.size())
                   : "whole trace (fewer than two ProfilerSteps)";
  if (clock.rounds()) out.window += "; times in whole µs as HTA rounds them (start up, end down)";
  // The capture ranges of each thread; which runtime calls fall in the window is asked of the
  // dependency model's calls below (the call an activity's correlation id names).
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& t = trace.tracks[ti];
    if (t.rank != rank || t.kind == TrackKind::kGpuStream) continue;
    int64_t capture_start = INT64_MIN;
    for (const Event& e : trace.TrackEvents(ti)) {
      const uint8_t flags = name_flags[e.name];
      if (flags & kCaptureBeginName) {
        ++out.captures;
        capture_start = clock.Start(e);
      } else if ((flags & kCaptureEndName) && capture_start != INT64_MIN) {
        out.capture.push_back({capture_start, clock.Span(e).second});
        capture_start = INT64_MIN;
      }
    }
    if (capture_start != INT64_MIN) out.capture.push_back({capture_start, INT64_MAX});  // never ended
  }
  MergeIntervals(out.capture);
  for (const DeviceWork& w : links.work) {
    const HostCall* call = links.CallOf(w);
    if (call == nullptr) continue;
    const Interval runtime = clock.Span(*call->e);
    if (cut && runtime.first >= last_step_start) continue;
    const Interval span = clock.Span(*w.e);
    out.acts.push_back({w.e, w.stream, w.device, span.first, span.second, runtime.first, runtime.second,
                        call->kind == CallKind::kLaunch, &w});
  }
  return out;
}

// Length of `gaps` (any order, may overlap) during which nothing in `busy` (merged) ran.
int64_t DeviceIdleWithin(std::vector<Interval> gaps, const std::vector<Interval>& busy) {
  const int64_t length = MergeIntervals(gaps);
  return length - CoveredWithinEach(busy, gaps);
}

// The rank's GPU activities as interval lists: all of them, compute kernels, communication
// kernels; merged (in place) by Breakdown.
struct BusyIntervals {
  std::vector<Interval> all, compute, comm;
};

// The temporal breakdown (HTA's): kernel time, idle, compute, non-compute, and communication with
// the part of it hidden behind compute. Merges `busy`'s lists; the per-stream split is added by
// SplitStreamIdle.
TemporalBreakdown Breakdown(const Trace& trace, int32_t rank, const RankGpu& g, BusyIntervals& busy_out) {
  TemporalBreakdown tb;
  tb.rank = rank;
  tb.window = g.window;
  std::vector<Interval>& all = busy_out.all;
  std::vector<Interval>& compute = busy_out.compute;
  std::vector<Interval>& comm = busy_out.comm;
  for (const auto& a : g.acts) {
    all.push_back({a.ts, a.end});
    if (a.e->kind != EventKind::kKernel) continue;
    const std::string_view name = trace.Name(*a.e);
    if (IsCommKernel(name)) comm.push_back({a.ts, a.end});
    else if (IsComputeKernel(name)) compute.push_back({a.ts, a.end});
  }
  const int64_t busy = MergeIntervals(all);
  tb.kernel_time_ns = all.back().second - all.front().first;
  tb.idle_ns = tb.kernel_time_ns - busy;
  tb.compute_ns = MergeIntervals(compute);
  // Communication hidden behind compute (HTA's comm-comp overlap): merged comm time covered by
  // merged compute time.
  tb.comm_ns = MergeIntervals(comm);
  for (const auto& [s, e] : comm) tb.comm_overlap_ns += CoveredWithin(compute, s, e);
  if (tb.comm_ns > 0) tb.comm_overlap_pct = 100.0 * static_cast<double>(tb.comm_overlap_ns) / static_cast<double>(tb.comm_ns);
  tb.non_compute_ns = tb.kernel_time_ns - tb.compute_ns - tb.idle_ns;
  if (tb.kernel_time_ns > 0) {
    tb.idle_pct = 100.0 * static_cast<double>(tb.idle_ns) / static_cast<double>(tb.kernel_time_ns);
    tb.compute_pct = 100.0 * static_cast<double>(tb.compute_ns) / static_cast<double>(tb.kernel_time_ns);
    tb.non_compute_pct = 100.0 * static_cast<double>(tb.non_compute_ns) / static_cast<double>(tb.kernel_time_ns);
  }
  return tb;
}

// The per-stream waits summed over streams, and the gaps they were made of.
struct StreamWaits {
  int64_t host_wait_total = 0, kernel_wait_total = 0;
  std::vector<Interval> host_wait_gaps, kernel_wait_gaps;
};

// Per-stream idle split (HTA's): each gap between a stream's activities is host wait (launched
// after the previous one ended), kernel wait (shorter than kernel_wait_ns) or other. Appends one
// StreamIdle per (device, stream) to tb.streams.
StreamWaits SplitStreamIdle(const RankGpu& g, int64_t kernel_wait_ns, TemporalBreakdown& tb) {
  StreamWaits w;
  std::map<std::pair<int32_t, int64_t>, std::vector<const GpuActivity*>> by_stream;
  for (const auto& a : g.acts) by_stream[{a.device, a.stream}].push_back(&a);
  for (auto& [key, acts] : by_stream) {
    std::stable_sort(acts.begin(), acts.end(), [](const GpuActivity* a, const GpuActivity* b) { return a->ts < b->ts; });
    StreamIdle si;
    si.device = key.first;
    si.stream = key.second;
    for (size_t i = 1; i < acts.size(); ++i) {
      const int64_t prev_end = acts[i - 1]->end;
      const int64_t gap = acts[i]->ts - prev_end;
      if (acts[i]->runtime_ts > prev_end) {
        si.host_wait_ns += gap;
        if (gap > 0) w.host_wait_gaps.push_back({prev_end, acts[i]->ts});
      } else if (gap < kernel_wait_ns) {
        si.kernel_wait_ns += gap;
        if (gap > 0) w.kernel_wait_gaps.push_back({prev_end, acts[i]->ts});
      } else {
        si.other_ns += gap;
      }
    }
    w.host_wait_total += si.host_wait_ns;
    w.kernel_wait_total += si.kernel_wait_ns;
    tb.streams.push_back(si);
  }
  return w;
}

// The device's idle time a fix could recover: the waits' gaps during which no stream ran and no
// graph capture was in progress, over the trace and inside the steady steps.
struct DeviceIdle {
  int64_t capture_idle = 0;    // idle time inside graph captures
  bool capture_phase = false;  // mostly a capture: not a training step
  int64_t host_wait_idle = 0, kernel_wait_idle = 0;
  int64_t host_wait_idle_steps = 0, kernel_wait_idle_steps = 0;
  int64_t span_in = 0;                     // the GPU's active span inside the steps
  int64_t idle_outside_capture_steps = 0;  // the idle time there, outside captures
};

DeviceIdle MeasureDeviceIdle(const RankGpu& g, const TemporalBreakdown& tb, const std::vector<Interval>& all,
                             const StepWindows& windows, StreamWaits& waits) {
  DeviceIdle d;
  // What a fix can recover is the device's idle time, not a stream's: only the part of the
  // waits during which no stream ran counts (`all` is the merged busy time). Nor is idle time
  // inside a graph capture: captured launches are recorded, not run, so the device idles by
  // design there.
  std::vector<Interval> busy_or_capture = all;
  for (const auto& [s, e] : g.capture) {
    const int64_t lo = std::max(s, all.front().first), hi = std::min(e, all.back().second);
    if (hi > lo) busy_or_capture.push_back({lo, hi});
  }
  const int64_t idle_outside_capture = tb.kernel_time_ns - MergeIntervals(busy_or_capture);
  d.capture_idle = tb.idle_ns - idle_outside_capture;
  // Mostly a capture: not a training step; nothing about it to fix.
  d.capture_phase = d.capture_idle > 0 && 2 * d.capture_idle >= tb.idle_ns;
  // The same inside the steady steps: what per-step savings are made of (their denominator counts
  // those steps only; a cuDNN-autotuning first step must not add its idle time to them).
  d.host_wait_idle_steps = DeviceIdleWithin(windows.Clip(waits.host_wait_gaps), busy_or_capture);
  d.kernel_wait_idle_steps = DeviceIdleWithin(windows.Clip(waits.kernel_wait_gaps), busy_or_capture);
  // The GPU's active span inside the steps: the idle there, and the span dist.comm_overlap judges.
  const std::vector<Interval> active_in_steps = windows.Clip({{all.front().first, all.back().second}});
  for (const auto& [a, b] : active_in_steps) d.span_in += b - a;
  d.idle_outside_capture_steps = DeviceIdleWithin(active_in_steps, busy_or_capture);
  d.host_wait_idle = DeviceIdleWithin(std::move(waits.host_wait_gaps), busy_or_capture);
  d.kernel_wait_idle = DeviceIdleWithin(std::move(waits.kernel_wait_gaps), busy_or_capture);
  return d;
}

// What the device's idle time waited for (IdleCauses, metrics.h). The gaps are the complement of
// `all` (merged busy time) inside the active span; a gap ends when the next activity starts. When the
// activities that start there had all been launched before the gap began, the device had work and
// did not run it: queued (a cross-stream event, a collective, a graph's own node order). Otherwise
// the host had not launched yet: host-starved until the launch call, and from its start on, the launch
// itself. Host-starved time during which any thread of the rank was in an allocator call is charged to
// the allocator (cudaFree synchronizes the device and holds the runtime's lock; no thread launches).
struct IdleSplit {
  IdleCauses causes;
  std::vector<Interval> host, allocator, queued;  // the gaps (or their parts), for the steps' share
};

IdleSplit SplitIdleCauses(const RankGpu& g, const std::vector<Interval>& all, const RankLinks& links, const GpuClock& clock) {
  IdleSplit out;
  if (all.size() < 2) return out;
  std::vector<const GpuActivity*> by_start;
  by_start.reserve(g.acts.size());
  for (const auto& a : g.acts) by_start.push_back(&a);
  std::stable_sort(by_start.begin(), by_start.end(), [](const GpuActivity* a, const GpuActivity* b) { return a->ts < b->ts; });
  // The stream whose activity ended last at or before a time (the work after which a gap began).
  std::vector<std::pair<int64_t, int64_t>> ends;  // (end, stream), sorted
  ends.reserve(g.acts.size());
  for (const auto& a : g.acts) ends.push_back({a.end, a.stream});
  std::sort(ends.begin(), ends.end());
  std::vector<Interval> alloc;
  for (int32_t i : links.allocator_calls) alloc.push_back(clock.Span(*links.calls[i].e));
  MergeIntervals(alloc);
  std::map<int64_t, QueuedWait> waits;
  std::map<std::pair<int64_t, int64_t>, int64_t> after;  // (waiting stream, stream that ended) -> ns
  size_t next = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    const int64_t s = all[i - 1].second, e = all[i].first;
    if (e <= s) continue;
    while (next < by_start.size() && by_start[next]->ts < e) ++next;
    // The activities that start where the gap ends: the earliest-launched of them decides.
    const GpuActivity* first = nullptr;
    for (size_t j = next; j < by_start.size() && by_start[j]->ts == e; ++j)
      if (first == nullptr || by_start[j]->runtime_ts < first->runtime_ts) first = by_start[j];
    if (first == nullptr) continue;
    if (first->runtime_ts <= s) {
      out.causes.queued_ns += e - s;
      out.queued.push_back({s, e});
      // Between two nodes of one graph launch: the previous activity on the stream came from the
      // same call.
      const DeviceWork& w = *first->work;
      if (w.graph && w.prev >= 0 && links.work[w.prev].call == w.call) out.causes.graph_ns += e - s;
      QueuedWait& q = waits[first->stream];
      q.stream = first->stream;
      q.ns += e - s;
      ++q.gaps;
      auto it = std::upper_bound(ends.begin(), ends.end(), std::make_pair(s, INT64_MAX));
      if (it != ends.begin()) after[{first->stream, std::prev(it)->second}] += e - s;
      continue;
    }
    out.causes.host_starved_ns += e - s;
    out.host.push_back({s, e});
    const int64_t in_alloc = CoveredWithin(alloc, s, std::min(e, first->runtime_ts));
    if (in_alloc > 0) {
      out.causes.allocator_ns += in_alloc;
      // The allocator's parts of the gap, for the steps' share.
      auto it = std::lower_bound(alloc.begin(), alloc.end(), Interval{s, s},
                                 [](const Interval& a, const Interval& b) { return a.second < b.first; });
      for (; it != alloc.end() && it->first < std::min(e, first->runtime_ts); ++it)
        out.allocator.push_back({std::max(it->first, s), std::min({it->second, e, first->runtime_ts})});
    }
  }
  for (auto& [stream, w] : waits) {
    int64_t best = -1;
    for (const auto& [key, ns] : after)
      if (key.first == stream && (best < 0 || ns > best)) {
        best = ns;
        w.after_stream = key.second;
      }
    out.causes.queued_by_stream.push_back(w);
  }
  std::stable_sort(out.causes.queued_by_stream.begin(), out.causes.queued_by_stream.end(),
                   [](const QueuedWait& a, const QueuedWait& b) { return a.ns > b.ns; });
  return out;
}

// Launches inside the steady steps (all of them without steps), and those whose kernel ran
// shorter than the launch call: what gpu.launch_bound judges.
struct SteadyLaunches {
  int64_t launches = 0, short_kernels = 0;
  int64_t graph_kernels = 0;  // kernels a graph launch ran in the steps: one call for many, never launch-bound
};

// Launch statistics (HTA's): per activity launched by a launch call, runtime duration, activity
// duration and start delay.
LaunchStats CollectLaunchStats(const RankGpu& g, int32_t rank, const Thresholds& thresholds, const StepWindows& windows,
                               SteadyLaunches* steady) {
  LaunchStats ls;
  ls.rank = rank;
  const int64_t runtime_cutoff = static_cast<int64_t>(thresholds.Get("gpu.launch_bound.runtime_cutoff_us") * 1000);
  const int64_t delay_cutoff = static_cast<int64_t>(thresholds.Get("gpu.launch_bound.delay_cutoff_us") * 1000);
  double cpu = 0, gpu = 0, delay = 0;
  // The rule judges the launches inside the steady steps (all of them without steps): start-up
  // and warm-up kernels (allocator, autotuning) are not what each step launches.
  for (const auto& a : g.acts) {
    if (a.work->graph && windows.Contains(a.runtime_ts)) ++steady->graph_kernels;
    if (!a.launch) continue;  // a blocking copy or a graph launch: not a launch (runtime_names.h)
    ++ls.kernels;
    const int64_t runtime_dur = a.runtime_end - a.runtime_ts, dur = a.end - a.ts, start_delay = a.ts - a.runtime_ts;
    if (windows.Contains(a.runtime_ts)) {
      ++steady->launches;
      if (dur < runtime_dur) ++steady->short_kernels;
    }
    cpu += static_cast<double>(runtime_dur);
    gpu += static_cast<double>(dur);
    delay += static_cast<double>(start_delay);
    if (dur < runtime_dur) ++ls.short_kernels;
    if (runtime_dur > runtime_cutoff) ++ls.long_launches;
    if (start_delay > delay_cutoff) ++ls.long_delays;
  }
  if (ls.kernels > 0) {
    ls.mean_cpu_us = cpu / static_cast<double>(ls.kernels) / 1000.0;
    ls.mean_gpu_us = gpu / static_cast<double>(ls.kernels) / 1000.0;
    ls.mean_delay_us = delay / static_cast<double>(ls.kernels) / 1000.0;
  }
  return ls;
}

// The steady state: GPU idle inside this rank's steps (warm-up steps are not among them). HTA's
// figure spans the whole trace, where one cuDNN-autotuning first step (5-6 s on an H100 against
// 17 ms steps) can make a busy GPU look idle; the rule needs both, and the saving is per steady step.
struct SteadyIdle {
  bool steady = false;  // the rank has steps with GPU activity
  double idle_pct = 0;  // GPU idle in those steps; the whole trace's figure without them
};

SteadyIdle SteadyIdleOf(const StepModel& steps, int32_t rank, const TemporalBreakdown& tb) {
  int64_t steady_wall = 0, steady_idle = 0;
  for (const auto& row : steps.steps)
    if (row.rank == rank && row.has_gpu) {
      steady_wall += row.wall_ns;
      steady_idle += row.gpu_idle_ns;
    }
  SteadyIdle s;
  s.steady = steady_wall > 0;
  s.idle_pct = s.steady ? 100.0 * static_cast<double>(steady_idle) / static_cast<double>(steady_wall) : tb.idle_pct;
  return s;
}

// Everything the rules of one rank read.
struct RankFigures {
  int32_t rank = 0;
  TemporalBreakdown tb;
  LaunchStats ls;
  BusyIntervals busy;
  StreamWaits waits;  // its gap lists are consumed by MeasureDeviceIdle
  DeviceIdle idle;
  SteadyLaunches launches;
  SteadyIdle steady;
  IdleSplit split;
  // The split's parts inside the steady steps (all of the trace without steps), outside graph captures.
  int64_t host_in_steps = 0, allocator_in_steps = 0, queued_in_steps = 0;
};

// Length of the parts of `gaps` (device idle, disjoint) inside the steps and outside graph captures.
int64_t InStepsOutsideCapture(const std::vector<Interval>& gaps, const StepWindows& windows, const std::vector<Interval>& capture) {
  int64_t total = 0;
  for (const auto& [s, e] : windows.Clip(gaps)) total += (e - s) - CoveredWithin(capture, s, e);
  return total;
}

// The host calls that waited longest for the device, per name and the op that made them (at most
// 3): a blocking copy whose own copy started long after the call (it waited behind the stream's
// earlier work: named), a synchronize, a free. "cudaMemcpyAsync in aten::copy_ waited 146.6 ms for
// the GPU (3 calls, longest): its Memcpy DtoH started 146.6 ms after the call, behind stream 27's
// reduce_kernel".
std::vector<std::string> HostWaits(const Trace& trace, const RankLinks& links) {
  struct Wait {
    int64_t total = 0, longest = 0, calls = 0;
    const HostCall* call = nullptr;  // the longest
  };
  std::map<std::pair<std::string_view, std::string_view>, Wait> waits;
  for (const HostCall& c : links.calls) {
    if (c.waited_for < 0) continue;
    const DeviceWork& d = links.work[c.waited_for];
    const int64_t waited = std::min(d.end(), c.e->end_ns()) - c.e->ts_ns;
    if (waited <= 0) continue;
    const Event* op = c.e->external_id != profiler::kNoId ? links.OpByExternalId(c.e->external_id) : nullptr;
    Wait& w = waits[{trace.Name(*c.e), op ? trace.Name(*op) : std::string_view()}];
    w.total += waited;
    ++w.calls;
    if (waited > w.longest) {
      w.longest = waited;
      w.call = &c;
    }
  }
  std::vector<std::pair<int64_t, std::string>> lines;
  for (const auto& [key, w] : waits) {
    const DeviceWork& d = links.work[w.call->waited_for];
    std::string line = fmt::format("{}{} waited {:.1f} ms for the GPU in {} call(s) (longest {:.1f} ms)", key.first,
                                   key.second.empty() ? "" : fmt::format(" in {}", key.second), w.total / 1e6, w.calls,
                                   w.longest / 1e6);
    const int64_t late = d.ts() - w.call->e->ts_ns;
    if (d.call >= 0 && &links.calls[d.call] == w.call && late > 0) {
      line += fmt::format(": its {} started {:.1f} ms after the call", trace.Name(*d.e), late / 1e6);
      if (d.prev >= 0) line += fmt::format(", behind stream {}'s {}", d.stream, trace.Name(*links.work[d.prev].e).substr(0, 60));
    } else {
      line += fmt::format(", until {} on stream {} ended", trace.Name(*d.e).substr(0, 60), d.stream);
    }
    lines.push_back({w.total, std::move(line)});
  }
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size() && i < 3 && lines[i].first >= 1'000'000; ++i) out.push_back(std::move(lines[i].second));
  return out;
}

// What gpu.idle's idle time waited for (the dependency model's causes), said in its evidence, title
// and examples: work already launched and waiting (by stream), host-starved, allocator calls, the
// gaps between a graph's nodes.
void DescribeIdleCauses(const IdleCauses& c, const TemporalBreakdown& tb, Finding& f) {
  f.evidence.push_back({"idle_host_starved_ns", c.host_starved_ns});
  f.evidence.push_back({"idle_allocator_ns", c.allocator_ns});
  f.evidence.push_back({"idle_queued_ns", c.queued_ns});
  f.evidence.push_back({"idle_graph_nodes_ns", c.graph_ns});
  const auto pct = [&](int64_t ns) { return tb.idle_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(tb.idle_ns) : 0.0; };
  if (c.queued_ns + c.host_starved_ns > 0) {
    f.title += fmt::format(": {:.0f}% of it with work already launched and waiting, {:.0f}% host-starved", pct(c.queued_ns),
                           pct(c.host_starved_ns));
    if (c.allocator_ns > 0) f.title += fmt::format(" ({:.0f}% in allocator calls)", pct(c.allocator_ns));
  }
  for (size_t i = 0; i < c.queued_by_stream.size() && i < 4; ++i) {
    const QueuedWait& w = c.queued_by_stream[i];
    std::string after = w.after_stream < 0 ? "" : w.after_stream == w.stream ? ", mostly right after its own previous work"
                                                                              : fmt::format(", mostly after stream {}'s work ended", w.after_stream);
    f.examples.insert(f.examples.begin() + static_cast<std::ptrdiff_t>(i),
                      fmt::format("stream {}: launched work waited {:.1f} ms in {} gaps with nothing running{}", w.stream,
                                  w.ns / 1e6, w.gaps, after));
  }
  if (c.graph_ns > 0)
    f.examples.push_back(fmt::format("{:.1f} ms of the waiting was between the nodes of one CUDA/HIP graph", c.graph_ns / 1e6));
}

// gpu.idle: the GPU idle above the threshold over its active span and in the steady steps.
void RuleGpuIdle(const AnalysisContext& ctx, const RankLinks& links, const RankGpu& g, const RankFigures& r,
                 const StepBasis& basis, Report& out) {
  const TemporalBreakdown& tb = r.tb;
  const int32_t rank = r.rank;
  const bool steady = r.steady.steady;
  const double steady_idle_pct = r.steady.idle_pct;
  if (!(tb.idle_pct > ctx.thresholds.Get("gpu.idle.idle_pct") && steady_idle_pct > ctx.thresholds.Get("gpu.idle.idle_pct")))
    return;
  Finding f;
  f.id = "gpu.idle";
  f.rank = rank;
  f.severity = tb.idle_pct > 50 ? Severity::kHigh : Severity::kMedium;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("GPU idle {:.1f}% of its active span on rank {}", tb.idle_pct, rank);
  if (steady && std::abs(steady_idle_pct - tb.idle_pct) >= 5.0) f.title += fmt::format(" ({:.1f}% in the steps)", steady_idle_pct);
  f.measured = tb.idle_pct;
  f.threshold = ctx.thresholds.Get("gpu.idle.idle_pct");
  f.measured_unit = "% of GPU active span";
  f.evidence = {{"kernel_time_ns", tb.kernel_time_ns}, {"idle_ns", tb.idle_ns},
                {"host_wait_ns", r.waits.host_wait_total}, {"host_wait_device_idle_ns", r.idle.host_wait_idle},
                {"kernel_wait_ns", r.waits.kernel_wait_total}, {"window", tb.window}};
  for (const auto& s : tb.streams) {
    f.examples.push_back(fmt::format("stream {}: host wait {:.1f} ms, kernel wait {:.1f} ms, other {:.1f} ms", s.stream,
                                     s.host_wait_ns / 1e6, s.kernel_wait_ns / 1e6, s.other_ns / 1e6));
  }
  if (g.captures > 0) f.evidence.push_back({"graph_capture_idle_ns", r.idle.capture_idle});
  // What the idle time waited for (the dependency model): the fix addresses the largest cause, and
  // the saving is what removing that cause recovers, inside the steady steps when there are steps.
  DescribeIdleCauses(r.split.causes, tb, f);
  const int64_t host_only = r.host_in_steps - r.allocator_in_steps;
  enum class Cause { kHost, kAllocator, kQueued } cause = Cause::kHost;
  if (r.queued_in_steps > r.host_in_steps) cause = Cause::kQueued;
  else if (r.allocator_in_steps > host_only) cause = Cause::kAllocator;
  // The host calls that waited longest for the device (the other side of the same waits).
  for (const std::string& line : HostWaits(ctx.trace, links)) f.examples.push_back(line);
  const double saving = basis.Per(static_cast<double>(cause == Cause::kQueued      ? r.queued_in_steps
                                                      : cause == Cause::kAllocator ? r.allocator_in_steps
                                                                                   : host_only));
  const double bound = basis.Per(static_cast<double>(r.idle.idle_outside_capture_steps));
  if (steady) f.evidence.push_back({"steady_step_idle_pct", steady_idle_pct});
  if (basis.has_steps()) {
    f.evidence.push_back({"host_wait_device_idle_in_steps_ns", r.idle.host_wait_idle_steps});
    f.evidence.push_back({"idle_host_starved_in_steps_ns", r.host_in_steps});
    f.evidence.push_back({"idle_queued_in_steps_ns", r.queued_in_steps});
  }
  f.evidence.push_back({"idle_cause", cause == Cause::kQueued ? "queued" : cause == Cause::kAllocator ? "allocator" : "host"});
  SetSaving(f, basis, r.idle.capture_phase ? 0.0 : saving, bound,
            cause == Cause::kQueued      ? "GPU idle time with launched work waiting (no stream running)"
            : cause == Cause::kAllocator ? "GPU idle time while the host was in allocator calls"
            : steady                     ? "GPU idle time in the steps with nothing launched (no stream running)"
                                         : "GPU idle time with nothing launched (no stream running, outside graph captures)");
  if (r.idle.capture_phase) {
    f.severity = Severity::kInfo;
    f.title = fmt::format("GPU idle {:.1f}% of its active span on rank {}, during a CUDA/HIP graph capture: not a training step",
                          tb.idle_pct, rank);
    f.examples.insert(f.examples.begin(),
                      fmt::format("{} stream capture(s) hold {:.1f} ms of the {:.1f} ms idle: launches inside a capture are "
                                  "recorded into the graph, not run, so the GPU idles by design. Profile steps that replay "
                                  "the graph (cudaGraphLaunch / hipGraphLaunch) to judge idle time",
                                  g.captures, r.idle.capture_idle / 1e6, tb.idle_ns / 1e6));
  }
  SetFix(f, r.idle.capture_phase || cause == Cause::kHost ? "host" : cause == Cause::kQueued ? "queued" : "allocator");
  out.findings.push_back(std::move(f));
}

// gpu.launch_bound: most kernels of the steady steps run shorter than their launch call, and the
// GPU idles in the steps.
void RuleLaunchBound(const AnalysisContext& ctx, const RankFigures& r, const StepBasis& basis, Report& out) {
  const int64_t steady_launches = r.launches.launches, steady_short = r.launches.short_kernels;
  const LaunchStats& ls = r.ls;
  // Kernels a graph launch ran are in the denominator: their launch cost is one call for all of them
  // (a CUDA-graph replay step with 41 eager kernels beside 356 graph kernels is judged on 397).
  const int64_t judged = steady_launches + r.launches.graph_kernels;
  const double short_pct = judged > 0 ? 100.0 * static_cast<double>(steady_short) / static_cast<double>(judged) : 0.0;
  if (!(steady_launches > 0 && !r.idle.capture_phase && short_pct >= ctx.thresholds.Get("gpu.launch_bound.short_kernel_pct") &&
        r.steady.idle_pct > 5.0))
    return;
  Finding f;
  f.id = "gpu.launch_bound";
  f.rank = r.rank;
  f.severity = Severity::kMedium;
  f.confidence = Confidence::kMedium;
  f.title = fmt::format("{:.0f}% of GPU kernels run shorter than their launch call (rank {})", short_pct, r.rank);
  f.measured = short_pct;
  f.threshold = ctx.thresholds.Get("gpu.launch_bound.short_kernel_pct");
  f.measured_unit = "% of kernels";
  f.evidence = {{"kernels", ls.kernels}, {"short_kernels", ls.short_kernels},
                {"launches_in_steps", steady_launches}, {"short_kernels_in_steps", steady_short},
                {"graph_kernels_in_steps", r.launches.graph_kernels},
                {"mean_launch_us", ls.mean_cpu_us}, {"mean_kernel_us", ls.mean_gpu_us},
                {"mean_launch_delay_us", ls.mean_delay_us}, {"long_launches", ls.long_launches},
                {"kernel_wait_ns", r.waits.kernel_wait_total}, {"kernel_wait_device_idle_ns", r.idle.kernel_wait_idle}};
  if (basis.has_steps()) f.evidence.push_back({"kernel_wait_device_idle_in_steps_ns", r.idle.kernel_wait_idle_steps});
  SetSaving(f, basis, basis.Per(static_cast<double>(r.idle.kernel_wait_idle_steps)),
            basis.Per(static_cast<double>(r.idle.idle_outside_capture_steps)),
            basis.has_steps() ? "GPU idle time in the steps (no stream running, outside graph captures)"
                              : "GPU idle time (no stream running, outside graph captures)");
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// dist.comm_overlap on GPUs. Exposed communication: what the GPU spends on collectives while no
// compute runs beside them (DDP's all-reduce not overlapped with backward, a sync per
// micro-step). Judged against the GPU's active span; what better overlap can recover is bounded
// by the exposed time and by the compute time not already hiding communication.
void RuleCommOverlap(const AnalysisContext& ctx, const RankFigures& r, const StepWindows& windows, const StepBasis& basis,
                     Report& out) {
  const TemporalBreakdown& tb = r.tb;
  const int64_t exposed = tb.comm_ns - tb.comm_overlap_ns;
  const double exposed_pct =
      tb.kernel_time_ns > 0 ? 100.0 * static_cast<double>(exposed) / static_cast<double>(tb.kernel_time_ns) : 0.0;
  // Judged on the steady steps when there are steps, as every per-step figure is: HTA's
  // whole-trace figure is diluted by start-up and warm-up (an idle GPU while the loader starts,
  // autotuning kernels) and can hide a job whose every step waits on its all-reduce.
  std::vector<Interval> comm_in = windows.Clip(r.busy.comm), compute_in = windows.Clip(r.busy.compute);
  const int64_t comm_in_ns = MergeIntervals(comm_in), compute_in_ns = MergeIntervals(compute_in);
  int64_t overlap_in_ns = 0;
  for (const auto& [cs, ce] : comm_in) overlap_in_ns += CoveredWithin(compute_in, cs, ce);
  const int64_t exposed_in = comm_in_ns - overlap_in_ns;
  const double judged_pct = !basis.has_steps() ? exposed_pct
                            : r.idle.span_in > 0 ? 100.0 * static_cast<double>(exposed_in) / static_cast<double>(r.idle.span_in)
                                                 : 0.0;
  if (!(tb.comm_ns > 0 && !r.idle.capture_phase && judged_pct > ctx.thresholds.Get("dist.comm_overlap.exposed_pct"))) return;
  Finding f;
  f.id = "dist.comm_overlap";
  f.rank = r.rank;
  f.severity = judged_pct > 25 ? Severity::kHigh : Severity::kMedium;
  f.confidence = Confidence::kHigh;
  f.title = fmt::format("Communication not hidden behind compute: {:.1f}% of GPU time{} on rank {} ({:.1f}% of its NCCL "
                        "time overlaps compute)",
                        judged_pct, basis.has_steps() ? " in the steps" : "", r.rank, tb.comm_overlap_pct);
  f.measured = judged_pct;
  f.threshold = ctx.thresholds.Get("dist.comm_overlap.exposed_pct");
  f.measured_unit = basis.has_steps() ? "% of GPU active span in the steps" : "% of GPU active span";
  f.evidence = {{"comm_ns", tb.comm_ns},         {"comm_overlap_ns", tb.comm_overlap_ns},
                {"exposed_comm_ns", exposed},    {"comm_overlap_pct", tb.comm_overlap_pct},
                {"kernel_time_ns", tb.kernel_time_ns}, {"compute_ns", tb.compute_ns},
                {"exposed_pct_whole_trace", exposed_pct}, {"window", tb.window}};
  const int64_t room = std::max<int64_t>(0, compute_in_ns - overlap_in_ns);
  if (basis.has_steps()) f.evidence.push_back({"exposed_comm_in_steps_ns", exposed_in});
  SetSaving(f, basis, basis.Per(static_cast<double>(std::min(exposed_in, room))), basis.Per(static_cast<double>(exposed_in)),
            "exposed communication that compute not yet overlapping it could hide");
  SetFix(f, "gpu");
  out.findings.push_back(std::move(f));
}

// gpu.allocator: allocator calls (cudaMalloc / cudaFree, hipMalloc / hipFree) take a share of the
// steps (of the GPU's active span without steps) at or above the threshold. The caching allocator
// makes them rare after the first step; where they repeat, the cache is off
// (PYTORCH_NO_CUDA_MEMORY_CACHING) or emptied, or memory pressure makes it free and retry. A free
// synchronizes the device. Time is the calls' union over the rank's threads.
void RuleAllocator(const AnalysisContext& ctx, const RankLinks& links, const RankFigures& r, const StepWindows& windows,
                   const StepBasis& basis, Report& out) {
  std::vector<Interval> calls;
  std::map<std::string_view, std::pair<int64_t, int64_t>> by_name;  // name -> (calls, ns) inside the steps
  std::set<int64_t> steps_with_calls;
  for (int32_t i : links.allocator_calls) {
    const Event& e = *links.calls[i].e;
    if (!windows.Contains(e.ts_ns)) continue;
    calls.push_back({e.ts_ns, e.end_ns()});
    auto& [n, ns] = by_name[ctx.trace.Name(e)];
    ++n;
    ns += e.dur_ns;
    steps_with_calls.insert(windows.Index(e.ts_ns));
  }
  const int64_t total = MergeIntervals(calls);
  if (total <= 0) return;
  const double per = basis.Per(static_cast<double>(total));
  const double denom = basis.has_steps() ? basis.mean_step_ns() : static_cast<double>(r.tb.kernel_time_ns);
  const double share = denom > 0 ? 100.0 * per / denom : 0.0;
  if (share < ctx.thresholds.Get("gpu.allocator.share_pct")) return;
  Finding f;
  f.id = "gpu.allocator";
  f.rank = r.rank;
  f.confidence = basis.has_steps() ? Confidence::kHigh : Confidence::kMedium;  // without steps, start-up is in it
  int64_t n_calls = 0;
  for (const auto& [name, v] : by_name) n_calls += v.first;
  f.title = fmt::format("Allocator calls take {:.1f}% of {} on rank {} ({} cudaMalloc/cudaFree-type calls{})", share,
                        basis.has_steps() ? "the step" : "the GPU's active span", r.rank, n_calls,
                        basis.has_steps() ? fmt::format(", in {} of {} steps", steps_with_calls.size(), basis.steps()) : "");
  f.measured = share;
  f.threshold = ctx.thresholds.Get("gpu.allocator.share_pct");
  f.measured_unit = basis.has_steps() ? "% of the step" : "% of the GPU's active span";
  f.evidence = {{"allocator_calls", n_calls}, {basis.NsKey("allocator_call"), per}, {"idle_allocator_ns", r.split.causes.allocator_ns}};
  for (const auto& [name, v] : by_name)
    f.examples.push_back(fmt::format("{}: {} calls, {:.2f} ms", name, v.first, v.second / 1e6));
  SetSaving(f, basis, per, per, basis.has_steps() ? "allocator call time in the steps" : "allocator call time in the trace");
  f.severity = basis.has_steps() ? SeverityForSaving(f) : (share >= 20 ? Severity::kHigh : Severity::kMedium);
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeGpu(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  const int64_t kernel_wait_ns = static_cast<int64_t>(ctx.thresholds.Get("gpu.idle.kernel_wait_us") * 1000.0);
  const bool hta_time = ctx.thresholds.Get("gpu.idle.hta_time") != 0;
  const std::vector<uint8_t> name_flags = NameFlags(trace);
  for (int32_t rank : trace.RankIds()) {
    const GpuClock clock(trace, rank, hta_time);
    const RankLinks* links = ctx.links.Rank(rank);
    if (links == nullptr) continue;
    RankGpu g = CollectRank(trace, *links, rank, clock, name_flags);
    if (g.acts.empty()) continue;
    RankFigures r;
    r.rank = rank;
    r.tb = Breakdown(trace, rank, g, r.busy);
    r.waits = SplitStreamIdle(g, kernel_wait_ns, r.tb);
    const StepWindows windows(ctx.steps, rank);
    r.split = SplitIdleCauses(g, r.busy.all, *links, clock);
    r.tb.idle_causes = r.split.causes;
    r.host_in_steps = InStepsOutsideCapture(r.split.host, windows, g.capture);
    r.allocator_in_steps = InStepsOutsideCapture(r.split.allocator, windows, g.capture);
    r.queued_in_steps = InStepsOutsideCapture(r.split.queued, windows, g.capture);
    r.idle = MeasureDeviceIdle(g, r.tb, r.busy.all, windows, r.waits);
    r.ls = CollectLaunchStats(g, rank, ctx.thresholds, windows, &r.launches);
    const StepBasis basis(ctx.steps, rank);
    r.steady = SteadyIdleOf(ctx.steps, rank, r.tb);
    RuleGpuIdle(ctx, *links, g, r, basis, out);
    RuleLaunchBound(ctx, r, basis, out);
    RuleCommOverlap(ctx, r, windows, basis, out);
    RuleAllocator(ctx, *links, r, windows, basis, out);
    out.metrics.temporal.push_back(std::move(r.tb));
    out.metrics.launch.push_back(r.ls);
  }
}

}  // namespace trainrx::analyzers
