// Step detection and per-step phase breakdown.
//
// Steps, in order of preference: ProfilerStep#N ranges (torch.profiler schedule), our collector's
// "trainrx::step#N" markers, else inferred from repeating Optimizer.step#... ranges (step k runs
// from the end of optimizer step k-1 to the end of optimizer step k). The model says which.
//
// Phases inside a step (exclusive; where ranges overlap the higher one wins,
// data > optimizer > backward > forward; the rest is "other"):
//   data wait  enumerate(DataLoader)#..., enumerate(DataPipe)#... and trainrx::data ranges
//   optimizer  Optimizer.step#..., Optimizer.zero_grad#..., trainrx::optimizer; an optimizer step
//              that runs a closure holding the forward and backward (Lightning) is split: forward
//              to its first backward, backward to its last, optimizer after (InnermostPhases)
//   backward   autograd::engine::evaluate_function: ... on any thread, trainrx::backward, and bare
//              autograd nodes (XxxBackward, torch::autograd::AccumulateGrad) of PyTorch <= 1.9
//   forward    trainrx::forward, else every other CPU op on the step's thread
// Forward and backward open at once (on two threads: DualPipe-style schedules) is measured too
// (fwd_bwd_overlap_ns), so the report can say the forward share leaves it out.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <queue>
#include <span>
#include <tuple>

#include "by_name.h"
#include "config_view.h"
#include "cpu_wait_series.h"
#include "per_step.h"
#include "intervals.h"
#include "ops.h"
#include "phases.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/profiler_steps.h"

namespace trainrx::analyzers {

// An autograd node run by the engine. PyTorch >= 1.10 wraps each in
// "autograd::engine::evaluate_function: X"; older traces (1.8, 1.9) have the bare node on the
// autograd thread: "CudnnConvolutionBackward", "AddmmBackward0", "torch::autograd::AccumulateGrad".
bool IsAutogradNode(std::string_view name) {
  if (StartsWith(name, "torch::autograd::")) return true;
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  constexpr std::string_view kSuffix = "Backward";
  return end > kSuffix.size() && name.substr(end - kSuffix.size(), kSuffix.size()) == kSuffix &&
         name.find("::") == std::string_view::npos;  // not an aten::*_backward op name
}

int PhaseOf(std::string_view name) {
  if (StartsWith(name, "enumerate(DataLoader)#") || StartsWith(name, "enumerate(DataPipe)#") ||
      StartsWith(name, "trainrx::data"))
    return kData;
  if (StartsWith(name, "Optimizer.step#") || StartsWith(name, "Optimizer.zero_grad#") ||
      StartsWith(name, "trainrx::optimizer"))
    return kOptimizer;
  if (StartsWith(name, "autograd::engine::evaluate_function") || StartsWith(name, "trainrx::backward") ||
      IsAutogradNode(name))
    return kBackward;
  if (StartsWith(name, "trainrx::forward")) return kForward;
  return -1;
}

namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

// What the phase sweep asks of a range's name, each name asked once (a run repeats its names every
// step; PhaseOf's prefix tests were a third of the step model's time): its phase and whether it
// is a step's own range or the optimizer's step.
class NamesSeen {
 public:
  explicit NamesSeen(const Trace& trace) : of_(trace, &Classify) {}
  int Phase(const Event& e) { return (of_(e) & kPhaseMask) - 1; }
  bool StepRange(const Event& e) { return (of_(e) & kStepRange) != 0; }
  bool OptimizerStep(const Event& e) { return (of_(e) & kOptimizerStep) != 0; }

 private:
  static constexpr uint8_t kPhaseMask = 0x0f, kStepRange = 0x10, kOptimizerStep = 0x20;
  static uint8_t Classify(std::string_view name) {
    uint8_t m = static_cast<uint8_t>(PhaseOf(name) + 1);
    if (StartsWith(name, "ProfilerStep#") || StartsWith(name, "trainrx::step#")) m |= kStepRange;
    if (StartsWith(name, "Optimizer.step#")) m |= kOptimizerStep;
    return m;
  }
  ByName<uint8_t (*)(std::string_view)> of_;
};

bool IsCpuRange(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kPythonFunction;
}

struct Labeled {
  int64_t s, e;
  int phase;
};

// Exclusive time per phase inside [lo, hi) by a boundary sweep; *fwd_bwd the time both forward
// and backward ranges are open (attributed to backward).
void Attribute(std::vector<Labeled>& ranges, int64_t lo, int64_t hi, int64_t out[kNumPhases], int64_t* fwd_bwd) {
  struct Pt {
    int64_t t;
    int delta;
    int phase;
  };
  std::vector<Pt> pts;
  pts.reserve(ranges.size() * 2);
  for (const auto& r : ranges) {
    const int64_t s = std::max(r.s, lo), e = std::min(r.e, hi);
    if (e <= s) continue;
    pts.push_back({s, +1, r.phase});
    pts.push_back({e, -1, r.phase});
  }
  std::sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) { return a.t < b.t; });
  int active[kNumPhases] = {0, 0, 0, 0};
  for (size_t i = 0; i < pts.size(); ++i) {
    active[pts[i].phase] += pts[i].delta;
    if (i + 1 < pts.size() && pts[i + 1].t > pts[i].t) {
      if (active[kForward] > 0 && active[kBackward] > 0) *fwd_bwd += pts[i + 1].t - pts[i].t;
      for (int p = kNumPhases - 1; p >= 0; --p) {
        if (active[p] > 0) {
          out[p] += pts[i + 1].t - pts[i].t;
          break;
        }
      }
    }
  }
}

// What one CPU thread is doing at each instant: the phase of the open range that started last. A
// range without a phase of its own takes the one current where it starts (an aten op inside
// autograd::engine::evaluate_function is backward work, though the same thread ran the forward);
// at the top of the step's own thread it is forward, on other threads nothing. Step ranges are
// transparent. "Started last", not a nesting stack: Kineto's Python-function events do not nest
// properly with the ranges they open (record_function's annotation starts inside __enter__ and
// outlives it). Appends the thread's timeline as disjoint segments, so forward and backward can
// be open at once only on different threads.
//
// An optimizer step that runs its closure (`optimizer.step(closure)`: PyTorch Lightning, LBFGS,
// SAM; the closure computes the loss and calls backward) holds the forward and the backward of the
// step inside its range: the autograd work of the rank (`backward`, every thread's backward ranges,
// start-sorted) that starts inside an Optimizer.step# range says so. Its range then opens, per
// backward pass, a forward child up to the pass and a backward child over it (LBFGS calls the
// closure up to 20 times a step: pytorch/examples' time_sequence_prediction read backward 100 %
// when one backward child ran from the first pass to the last): what ran decides the phase, not
// the outermost range (issue 49.7: Lightning read forward 0 %, optimizer 47 %). Nested optimizer
// ranges (zero_grad inside the closure) still win, as started later.
// A closure step's children (start, end, phase): its backward passes, each its backward ranges
// (every thread's) until the step's thread ran something between them (the closure called
// again: LBFGS evaluates it up to 20 times a step), a backward child; before each, from the
// step's start or the pass before, a forward child (the closure's forward). Between two passes
// the optimizer runs its own work (LBFGS: the direction, the line search) before it calls the
// closure again: where the closure calls `optimizer.zero_grad()` first (an `Optimizer.zero_grad#`
// range on the step's thread with a forward after it), the next forward starts at the last such
// call and what ran before it stays the optimizer's; without one, the forward child starts at the
// pass before and holds the optimizer's own work too (the trace does not mark where a closure call
// starts). `events`: the step's thread's, in time order.
using Child = std::tuple<int64_t, int64_t, int>;
std::vector<Child> ClosureChildren(const Trace& trace, const Event& step, const std::vector<Interval>& backward,
                                   std::span<const Event> events) {
  const auto from_ts = [&](int64_t a) {
    return std::lower_bound(events.begin(), events.end(), a, [](const Event& x, int64_t t) { return x.ts_ns < t; });
  };
  const auto ops_in = [&](int64_t a, int64_t b) {
    int64_t n = 0;
    for (auto it = from_ts(a); it != events.end() && it->ts_ns < b; ++it) n += it->kind == EventKind::kCpuOp;
    return n;
  };
  int64_t first_forward_ops = -1;  // the first pass's forward: the closure's, with nothing of the optimizer's before it
  // The start of the last zero_grad range in [a, b) where a forward follows it (at least half the
  // ops of the step's first forward run from its end to b: Lightning's closure calls zero_grad after
  // its forward, just before backward, and that call starts nothing), else a.
  const auto closure_call = [&](int64_t a, int64_t b) {
    const Event* zero_grad = nullptr;
    for (auto it = from_ts(a); it != events.end() && it->ts_ns < b; ++it)
      if (IsCpuRange(it->kind) && StartsWith(trace.Name(*it), "Optimizer.zero_grad#")) zero_grad = &*it;
    if (zero_grad == nullptr || 2 * ops_in(zero_grad->end_ns(), b) < first_forward_ops) return a;
    return zero_grad->ts_ns;
  };
  // Whether the thread started a range in [a, b) (not backward work: the backward ranges up to b are known).
  const auto ran_between = [&](int64_t a, int64_t b) {
    auto it = std::lower_bound(events.begin(), events.end(), a, [](const Event& x, int64_t t) { return x.ts_ns < t; });
    for (; it != events.end() && it->ts_ns < b; ++it)
      if (IsCpuRange(it->kind) && it->dur_ns > 0) return true;
    return false;
  };
  std::vector<Child> out;
  int64_t from = step.ts_ns, pass_start = -1, pass_end = -1;
  const auto close_pass = [&] {
    if (pass_start < 0) return;
    if (first_forward_ops < 0) first_forward_ops = ops_in(from, pass_start);
    else from = closure_call(from, pass_start);  // after a pass: the optimizer's own work first
    if (pass_start > from) out.push_back({from, pass_start, kForward});
    out.push_back({pass_start, pass_end, kBackward});
    from = pass_end;
  };
  for (auto it = std::lower_bound(backward.begin(), backward.end(), Interval{step.ts_ns, INT64_MIN});
       it != backward.end() && it->first < step.end_ns(); ++it) {
    const int64_t end = std::min(it->second, step.end_ns());
    if (pass_start >= 0 && (it->first < pass_end || !ran_between(pass_end, it->first))) {
      pass_end = std::max(pass_end, end);
      continue;
    }
    close_pass();
    pass_start = it->first;
    pass_end = end;
  }
  close_pass();
  return out;
}

void InnermostPhases(const Trace& trace, uint32_t track, bool main_thread, const std::vector<Interval>& backward,
                     std::vector<Labeled>& out) {
  std::vector<int> phase_of;       // per opened range
  std::vector<char> open;          // per opened range: not ended yet
  std::vector<uint32_t> by_start;  // opened ranges in start order (ended ones dropped lazily)
  std::priority_queue<std::pair<int64_t, uint32_t>, std::vector<std::pair<int64_t, uint32_t>>, std::greater<>> ends;
  int64_t cursor = std::numeric_limits<int64_t>::min();
  const auto current = [&] {
    while (!by_start.empty() && !open[by_start.back()]) by_start.pop_back();
    return by_start.empty() ? -1 : phase_of[by_start.back()];
  };
  const auto emit = [&](int64_t s, int64_t e, int phase) {
    if (e <= s || phase < 0) return;
    if (!out.empty() && out.back().phase == phase && out.back().e == s) out.back().e = e;  // one segment
    else out.push_back({s, e, phase});
  };
  const auto advance = [&](int64_t t) {  // the timeline up to t
    while (!ends.empty() && ends.top().first <= t) {
      const auto [e, id] = ends.top();
      ends.pop();
      emit(cursor, e, current());
      cursor = std::max(cursor, e);
      open[id] = 0;
    }
    emit(cursor, t, current());
    cursor = std::max(cursor, t);
  };
  const auto push = [&](int64_t end, int phase) {
    const auto id = static_cast<uint32_t>(phase_of.size());
    phase_of.push_back(phase);
    open.push_back(1);
    by_start.push_back(id);
    ends.push({end, id});
  };
  // Forward and backward children of closure steps, opened when the timeline reaches their start.
  std::priority_queue<Child, std::vector<Child>, std::greater<>> pending;
  const auto open_pending = [&](int64_t t) {
    while (!pending.empty() && std::get<0>(pending.top()) <= t) {
      const auto [s, e, phase] = pending.top();
      pending.pop();
      advance(s);
      push(e, phase);
    }
  };
  const auto events = trace.TrackEvents(track);
  NamesSeen names(trace);
  for (const Event& e : events) {
    if (!IsCpuRange(e.kind) || e.dur_ns <= 0) continue;
    if (names.StepRange(e)) continue;
    open_pending(e.ts_ns);
    advance(e.ts_ns);
    int phase = names.Phase(e);
    if (phase < 0) {
      const int parent = current();
      phase = parent >= 0 ? parent : main_thread ? static_cast<int>(kForward) : -1;
    }
    push(e.end_ns(), phase);
    if (phase == kOptimizer && names.OptimizerStep(e) && !backward.empty())
      for (const auto& child : ClosureChildren(trace, e, backward, events)) pending.push(child);
  }
  open_pending(std::numeric_limits<int64_t>::max());
  advance(std::numeric_limits<int64_t>::max());
}

// Forward before the training batch's fetch is evaluation or generation only beyond what the
// rank's steps do there as a rule (decided by consistency, not by a floor): Hugging Face Trainer
// runs a few ops before every fetch (8 us a step) and evaluates every N steps (4.4 ms), a script
// with a second loader fetched mid-forward runs the same forward before it in every step. The
// median step's amount is the rule and stays forward; a step counts forward that trains nothing
// only where it has more than twice that and 5 % of the median training forward, and then only
// the excess. A rank evaluating in every step cannot be told from one that trains that way: its
// forward stays forward.
void SplitUntrainedForward(std::vector<StepRow>& rows) {
  if (rows.empty()) return;
  std::vector<int64_t> before, forward;
  for (const StepRow& r : rows) before.push_back(r.untrained_forward_ns), forward.push_back(r.forward_ns);
  const int64_t rule = Quantile(before, 0.5), typical_forward = Quantile(forward, 0.5);
  for (StepRow& r : rows) {
    const bool beyond = r.untrained_forward_ns > 2 * rule + typical_forward / 20 && r.untrained_forward_ns > rule;
    const int64_t back = beyond ? rule : r.untrained_forward_ns;
    r.forward_ns += back;
    r.other_ns -= back;
    r.untrained_forward_ns -= back;
    if (!beyond) r.trained_from_ns = 0;
  }
}

// Whether a rank's `lead` slow leading steps (of its `rows`) were slow for want of a CPU rather than from
// work of their own: over their span its threads waited for a CPU at least kBusyWaitPct of their
// runnable time, and ran no more than 1.5x a steady step's CPU time a step (one-time work, the
// allocator's and the autotuner's, runs; contention waits). "" where they were warm-up or the
// samples cannot tell (no samples, or too few to cover both spans); else the note's text.
std::string ContendedLead(const CpuWaitSeries* series, std::span<const StepRow> rows, size_t lead) {
  if (series == nullptr || lead == 0 || lead >= rows.size()) return "";
  const StepRow& a = rows[0];
  const StepRow& b = rows[lead - 1];
  const StepRow& c = rows[lead];
  const StepRow& d = rows.back();
  double lead_covered = 0, steady_covered = 0;
  const profiler::CpuLoad head = series->Between(a.start_ns, b.start_ns + b.wall_ns, &lead_covered);
  const profiler::CpuLoad rest = series->Between(c.start_ns, d.start_ns + d.wall_ns, &steady_covered);
  if (!head.measured || !rest.measured || lead_covered < 0.5 || steady_covered < 0.5) return "";
  const double head_run = head.run_ns / static_cast<double>(lead);
  const double rest_run = rest.run_ns / static_cast<double>(rows.size() - lead);
  if (100 * head.WaitShare() < profiler::kBusyWaitPct || head_run > 1.5 * rest_run) return "";
  return fmt::format("the first {} steps{} took over 3x the median but waited for a CPU {:.0f} % of their runnable time "
                     "and ran {:.1f} ms of CPU a step against {:.1f} ms later: contention, not warm-up, so they stay in "
                     "the steps",
                     lead, a.rank ? fmt::format(" of rank {}", a.rank) : "", 100 * head.WaitShare(), head_run / 1e6,
                     rest_run / 1e6);
}

// Moves each rank's leading warm-up steps (see StepModel::warmup_steps) out of model.steps. Rows
// are in time order within a rank.
void SplitWarmup(const Trace& trace, StepModel& model) {
  std::vector<StepRow> kept;
  kept.reserve(model.steps.size());
  for (size_t i = 0; i < model.steps.size();) {
    size_t j = i;
    while (j < model.steps.size() && model.steps[j].rank == model.steps[i].rank) ++j;
    const size_t n = j - i;
    size_t lead = 0;
    if (n >= 4) {
      std::vector<int64_t> walls;
      for (size_t k = i; k < j; ++k) walls.push_back(model.steps[k].wall_ns);
      const int64_t median = Quantile(walls, 0.5);
      while (lead < n / 4 && model.steps[i + lead].wall_ns > 3 * median) ++lead;
    }
    if (lead > 0) {
      const std::optional<CpuWaitSeries> series = CpuWaitSeriesOfRank(trace, model.steps[i].rank);
      const std::span<const StepRow> rank_rows(model.steps.data() + i, n);
      if (std::string note = ContendedLead(series ? &*series : nullptr, rank_rows, lead); !note.empty()) {
        model.warmup_notes.push_back(std::move(note));
        lead = 0;
      }
    }
    for (size_t k = i; k < j; ++k) (k < i + lead ? model.warmup_steps : kept).push_back(std::move(model.steps[k]));
    i = j;
  }
  model.steps = std::move(kept);
}

// A step found on a rank: its range, the thread it is on, its name.
struct StepRange {
  int64_t s, e;
  uint32_t track;
  std::string name;
};

// The steps of one rank, in start order, by the first source that has any; *source says which
// (unchanged when none does).
std::vector<StepRange> FindSteps(const Trace& trace, int32_t rank, std::string* source) {
  std::vector<StepRange> found;
  // Inferred spans (the optimizer's or the backward passes'), numbered "step 1", "step 2", ...
  const auto found_from = [&](const std::vector<profiler::StepSpan>& inferred) {
    found.clear();
    for (size_t i = 0; i < inferred.size(); ++i)
      found.push_back({inferred[i].start_ns, inferred[i].end_ns, inferred[i].track, "step " + std::to_string(i + 1)});
  };
  // 0) the step the user named (`analyze --step NAME`, sets::SetOptions::step_name, in the
  //    rank's config as "step_name"): every range of that name (record_function) or Python
  //    frame of that function ("train.py(57): train_step"), outermost only; it wins over the rest.
  if (const profiler::RankInfo* info = trace.FindRank(rank); info && info->config.count("step_name")) {
    const std::string want = ConfigText(*info, "step_name");
    for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
      int64_t open_end = INT64_MIN;
      for (const Event& e : trace.TrackEvents(ti)) {
        if (!IsCpuRange(e.kind) && e.kind != EventKind::kPythonFunction) continue;
        const std::string_view n = trace.Name(e);
        const bool named = n == want || (n.size() > want.size() + 2 && n.substr(n.size() - want.size()) == want &&
                                         n.substr(n.size() - want.size() - 2, 2) == ": ");
        if (!named || e.ts_ns < open_end) continue;  // nested in the last one (a recursive call)
        open_end = e.end_ns();
        found.push_back({e.ts_ns, e.end_ns(), ti, std::string(n)});
      }
    }
    *source = "named: " + want;
  }
  // 1) ProfilerStep#N  2) trainrx::step#N
  for (const char* prefix : {"ProfilerStep#", "trainrx::step#"}) {
    if (!found.empty()) break;
    for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
      for (const Event& e : trace.TrackEvents(ti)) {
        if (IsCpuRange(e.kind) && StartsWith(trace.Name(e), prefix)) {
          found.push_back({e.ts_ns, e.end_ns(), ti, std::string(trace.Name(e))});
        }
      }
    }
    if (!found.empty()) {
      *source = prefix[0] == 'P' ? "ProfilerStep" : "trainrx step markers";
      // ProfilerStep#N that our collector wrote from its own markers or the optimizer steps.
      if (const profiler::RankInfo* info = trace.FindRank(rank); info && prefix[0] == 'P') {
        if (info->config.count("profiler_steps_from")) *source = ConfigText(*info, "profiler_steps_from");
      }
      // Written one per optimizer step by a collector before cycles were found (issue 81.3): the
      // optimizer steps again, with the cycle where there is one.
      if (*source == profiler::OptimizerStepsSource(1)) {
        int cycle = 1;
        const auto inferred = profiler::StepsFromOptimizer(trace, rank, &cycle);
        if (cycle > 1) {
          found_from(inferred);
          *source = profiler::OptimizerStepsSource(cycle);
        }
      }
      break;
    }
  }
  // 3) inferred from Optimizer.step#... (profiler::StepsFromOptimizer: the rule our collector
  //    also writes its ProfilerStep#N with)
  if (found.empty()) {
    int cycle = 1;
    found_from(profiler::StepsFromOptimizer(trace, rank, &cycle));
    if (!found.empty()) *source = profiler::OptimizerStepsSource(cycle);
  }
  // 4) no optimizer at all (parameters updated by hand): from the backward passes
  //    (profiler::StepsFromBackward, the rule our collector also uses)
  if (found.empty()) {
    found_from(profiler::StepsFromBackward(trace, rank));
    if (!found.empty()) *source = "inferred from backward passes";
  }
  std::sort(found.begin(), found.end(), [](const StepRange& a, const StepRange& b) { return a.s < b.s; });
  return found;
}

// Phase ranges on a rank's CPU threads (each thread's in time order, disjoint); GPU activity
// merged across streams.
struct RankPhases {
  std::vector<std::vector<Labeled>> thread_ranges;
  std::vector<Interval> gpu_all, gpu_kernel, gpu_mem;
};

// The threads and the GPU on `threads` cores.
RankPhases GatherPhases(const Trace& trace, int32_t rank, const std::vector<StepRange>& found, size_t threads) {
  RankPhases p;
  std::vector<uint32_t> cpu_tracks;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].rank == rank && trace.tracks[ti].kind != TrackKind::kGpuStream) cpu_tracks.push_back(ti);
  }
  p.thread_ranges.resize(cpu_tracks.size());
  // The rank's backward ranges on every thread (InnermostPhases: closure steps), when any
  // Optimizer.step# range holds one; else none, and no thread looks.
  std::vector<std::vector<Interval>> per_track(cpu_tracks.size());
  std::vector<char> has_step(cpu_tracks.size(), 0);
  std::vector<std::function<void()>> tasks;
  for (size_t k = 0; k < cpu_tracks.size(); ++k) {
    tasks.push_back([&, k] {
      NamesSeen names(trace);
      for (const Event& e : trace.TrackEvents(cpu_tracks[k])) {
        if (!IsCpuRange(e.kind) || e.dur_ns <= 0) continue;
        if (names.Phase(e) == kBackward) per_track[k].push_back({e.ts_ns, e.end_ns()});
        else if (!has_step[k] && names.OptimizerStep(e)) has_step[k] = 1;
      }
    });
  }
  profiler::RunTasks(tasks, threads);
  tasks.clear();
  std::vector<Interval> backward;
  if (std::any_of(has_step.begin(), has_step.end(), [](char c) { return c != 0; }))
    for (auto& v : per_track) backward.insert(backward.end(), v.begin(), v.end());
  std::sort(backward.begin(), backward.end());
  for (size_t k = 0; k < cpu_tracks.size(); ++k) {
    tasks.push_back([&, k] {
      const uint32_t ti = cpu_tracks[k];
      const bool main_thread =
          std::any_of(found.begin(), found.end(), [&](const StepRange& s) { return s.track == ti; });
      InnermostPhases(trace, ti, main_thread, backward, p.thread_ranges[k]);
    });
  }
  tasks.push_back([&] {
    for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
      const auto& t = trace.tracks[ti];
      if (t.rank != rank || t.kind != TrackKind::kGpuStream) continue;
      for (const Event& e : trace.TrackEvents(ti)) {
        const bool copy = e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset;
        if (e.kind == EventKind::kKernel) p.gpu_kernel.push_back({e.ts_ns, e.end_ns()});
        else if (copy) p.gpu_mem.push_back({e.ts_ns, e.end_ns()});
        else continue;
        p.gpu_all.push_back({e.ts_ns, e.end_ns()});
      }
    }
    MergeIntervals(p.gpu_all);
    MergeIntervals(p.gpu_kernel);
    MergeIntervals(p.gpu_mem);
  });
  profiler::RunTasks(tasks, threads);
  return p;
}

// One step's row: its phases (the ranges overlapping it, found per thread by binary search: a
// thread's ranges are disjoint and in order) and, with GPU activity, the GPU's share of it.
void FillStepRow(const StepRange& st, int32_t rank, const RankPhases& p, bool has_gpu, StepRow& row) {
  row.rank = rank;
  row.name = st.name;
  row.start_ns = st.s;
  row.wall_ns = st.e - st.s;
  int64_t ph[kNumPhases] = {0, 0, 0, 0};
  std::vector<Labeled> in_step;
  for (const auto& list : p.thread_ranges) {
    auto it = std::partition_point(list.begin(), list.end(), [&](const Labeled& r) { return r.e <= st.s; });
    for (; it != list.end() && it->s < st.e; ++it) in_step.push_back(*it);
  }
  // Forward before the fetch of the batch the step's backward trains on feeds no backward: an
  // evaluation or generation pass inside the step (StepRow::untrained_forward_ns; what the rank's
  // steps do there as a rule stays forward: SplitUntrainedForward). Without a backward or a data
  // range before it nothing is told apart.
  int64_t first_backward = INT64_MAX, fetch = INT64_MIN;
  for (const Labeled& r : in_step)
    if (r.phase == kBackward) first_backward = std::min(first_backward, std::max(r.s, st.s));
  for (const Labeled& r : in_step)
    if (r.phase == kData && r.s < first_backward) fetch = std::max(fetch, r.s);
  if (first_backward != INT64_MAX && fetch > st.s) {
    int64_t with[kNumPhases] = {0, 0, 0, 0}, unused = 0;
    Attribute(in_step, st.s, st.e, with, &unused);
    std::vector<Labeled> kept;
    for (const Labeled& r : in_step) {
      if (r.phase != kForward || r.s >= fetch) kept.push_back(r);
      else if (r.e > fetch) kept.push_back({fetch, r.e, kForward});
    }
    in_step.swap(kept);
    Attribute(in_step, st.s, st.e, ph, &row.fwd_bwd_overlap_ns);
    row.untrained_forward_ns = with[kForward] - ph[kForward];
    row.trained_from_ns = fetch;
  } else {
    Attribute(in_step, st.s, st.e, ph, &row.fwd_bwd_overlap_ns);
  }
  row.data_wait_ns = ph[kData];
  row.data_exposed_ns = ph[kData];
  row.optimizer_ns = ph[kOptimizer];
  row.backward_ns = ph[kBackward];
  row.forward_ns = ph[kForward];
  row.other_ns = std::max<int64_t>(0, row.wall_ns - ph[kData] - ph[kOptimizer] - ph[kBackward] - ph[kForward]);
  if (has_gpu) {
    row.has_gpu = true;
    row.gpu_kernel_ns = CoveredWithin(p.gpu_kernel, st.s, st.e);
    row.gpu_memcpy_ns = CoveredWithin(p.gpu_mem, st.s, st.e);
    row.gpu_idle_ns = row.wall_ns - CoveredWithin(p.gpu_all, st.s, st.e);
    // Data has the highest priority, so its exclusive time is the union of the data ranges.
    std::vector<std::pair<int64_t, int64_t>> data;
    for (const auto& r : in_step)
      if (r.phase == kData) data.push_back({std::max(r.s, st.s), std::min(r.e, st.e)});
    MergeIntervals(data);
    row.data_exposed_ns = 0;
    for (const auto& [s, e] : data) row.data_exposed_ns += (e - s) - CoveredWithin(p.gpu_all, s, e);
  }
}

}  // namespace

const std::vector<StepField>& StepFields() {
  using W = StepField::When;
  static const std::vector<StepField> k = {
      {"start_ns", &StepRow::start_ns, W::kAlways, "start", "the step's start on the trace's clock (ns)"},
      {"wall_ns", &StepRow::wall_ns, W::kAlways, "wall", "the step's wall time"},
      {"data_wait_ns", &StepRow::data_wait_ns, W::kPhases, "data wait", "waiting for the next batch (data-loading ranges)"},
      {"forward_ns", &StepRow::forward_ns, W::kPhases, "forward", "forward pass"},
      {"backward_ns", &StepRow::backward_ns, W::kPhases, "backward", "backward pass"},
      {"optimizer_ns", &StepRow::optimizer_ns, W::kPhases, "optimizer", "optimizer step and zero_grad"},
      {"other_ns", &StepRow::other_ns, W::kPhases, "other", "the rest of the step (the loop's own code, logging, an evaluation between steps)"},
      {"forward_backward_overlap_ns", &StepRow::fwd_bwd_overlap_ns, W::kNonZero, "fwd+bwd overlap",
       "forward and backward running at once on different threads (pipeline schedules); left out of forward"},
      {"gpu_kernel_ns", &StepRow::gpu_kernel_ns, W::kGpu, "GPU kernels", "the union of the step's kernels"},
      {"gpu_memcpy_ns", &StepRow::gpu_memcpy_ns, W::kGpu, "GPU copies", "the union of the step's copies and memsets"},
      {"gpu_idle_ns", &StepRow::gpu_idle_ns, W::kGpu, "GPU idle", "wall time with no GPU activity"},
      {"data_wait_gpu_idle_ns", &StepRow::data_exposed_ns, W::kGpu, "data wait, GPU idle",
       "data wait while no GPU activity runs (what loading costs the throughput)"},
  };
  return k;
}

StepModel BuildStepModel(const Trace& trace, size_t threads, StepDetail detail) {
  StepModel model;
  model.source = "none";
  for (int32_t rank : trace.RankIds()) {
    std::string source;
    const std::vector<StepRange> found = FindSteps(trace, rank, &source);
    if (found.empty()) continue;
    if (model.source == "none") model.source = source;
    if (detail == StepDetail::kBoundaries) {
      for (const StepRange& st : found) {
        StepRow& row = model.steps.emplace_back();
        row.rank = rank, row.name = st.name, row.start_ns = st.s, row.wall_ns = st.e - st.s;
      }
      continue;
    }
    const RankPhases phases = GatherPhases(trace, rank, found, threads);
    const bool has_gpu = !phases.gpu_all.empty();
    model.has_gpu = model.has_gpu || has_gpu;

    // One row per step, the steps split between the cores. The sweep does not depend on the
    // order of the ranges.
    std::vector<StepRow> rows(found.size());
    std::vector<std::function<void()>> tasks;
    constexpr size_t kChunk = 64;
    for (size_t from = 0; from < rows.size(); from += kChunk) {
      tasks.push_back([&, from] {
        for (size_t i = from; i < std::min(rows.size(), from + kChunk); ++i) FillStepRow(found[i], rank, phases, has_gpu, rows[i]);
      });
    }
    profiler::RunTasks(tasks, threads);
    SplitUntrainedForward(rows);
    std::move(rows.begin(), rows.end(), std::back_inserter(model.steps));
  }
  if (model.steps.empty()) return model;
  SplitWarmup(trace, model);
  SummarizeStepRows(model);
  return model;
}

void SummarizeStepRows(StepModel& model) {
  model.median_wall_ns = 0;
  model.mean_wall_ns = 0;
  model.data_worst_steps.clear();
  if (model.steps.empty()) return;
  std::vector<int64_t> walls;
  double total = 0, exposed = 0;
  for (const auto& s : model.steps) {
    walls.push_back(s.wall_ns);
    total += s.wall_ns;
    exposed += s.data_exposed_ns;
  }
  std::nth_element(walls.begin(), walls.begin() + walls.size() / 2, walls.end());
  int64_t median = walls[walls.size() / 2];
  if (walls.size() % 2 == 0) {
    const int64_t lower = *std::max_element(walls.begin(), walls.begin() + walls.size() / 2);
    median = (median + lower) / 2;
  }
  model.median_wall_ns = median;
  model.mean_wall_ns = static_cast<int64_t>(total / static_cast<double>(model.steps.size()));
  // Each figure's share of the steps' summed wall time.
  static constexpr std::pair<int64_t StepRow::*, double StepModel::*> kShares[] = {
      {&StepRow::data_wait_ns, &StepModel::data_wait_share},
      {&StepRow::data_exposed_ns, &StepModel::data_exposed_share},
      {&StepRow::fwd_bwd_overlap_ns, &StepModel::fwd_bwd_overlap_share},
      {&StepRow::untrained_forward_ns, &StepModel::untrained_forward_share},
      {&StepRow::forward_ns, &StepModel::forward_share},
      {&StepRow::backward_ns, &StepModel::backward_share},
      {&StepRow::optimizer_ns, &StepModel::optimizer_share},
      {&StepRow::other_ns, &StepModel::other_share},
      {&StepRow::gpu_kernel_ns, &StepModel::gpu_kernel_share},
      {&StepRow::gpu_memcpy_ns, &StepModel::gpu_memcpy_share},
      {&StepRow::gpu_idle_ns, &StepModel::gpu_idle_share},
  };
  if (total > 0)
    for (const auto& [figure, share] : kShares) {
      double sum = 0;
      for (const auto& s : model.steps) sum += static_cast<double>(s.*figure);
      model.*share = sum / total;
    }
  // The loader-bottleneck share without its worst quarter of steps (see StepModel). data_exposed
  // is the data wait itself on CPU-only ranks, so it is the loader share on every trace.
  model.data_share_without_worst = model.data_exposed_share;
  if (model.steps.size() >= 3) {
    std::vector<int32_t> order(model.steps.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return model.steps[static_cast<size_t>(a)].data_exposed_ns > model.steps[static_cast<size_t>(b)].data_exposed_ns;
    });
    const size_t drop = std::max<size_t>(1, (order.size() + 3) / 4);
    double rest_total = total, rest_data = exposed;
    for (size_t k = 0; k < drop; ++k) {
      const StepRow& s = model.steps[static_cast<size_t>(order[k])];
      if (s.data_exposed_ns <= 0) break;  // steps that did not wait are no stall
      model.data_worst_steps.push_back(order[k]);
      rest_total -= static_cast<double>(s.wall_ns);
      rest_data -= static_cast<double>(s.data_exposed_ns);
    }
    model.data_share_without_worst = rest_total > 0 ? rest_data / rest_total : 0.0;
  }
}

}  // namespace trainrx::analyzers
