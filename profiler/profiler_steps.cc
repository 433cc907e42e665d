#include "trainrx/profiler/profiler_steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace trainrx::profiler {
namespace {

bool IsRange(EventKind k) { return k == EventKind::kUserAnnotation || k == EventKind::kCpuOp; }

// The cycle of StepsFromOptimizer (profiler_steps.h): `spans` merged k at a time where the loader's
// fetches (their start times) say every k optimizer steps share one batch; *cycle = k, else 1 and
// `spans` kept.
std::vector<StepSpan> MergeCycles(std::vector<StepSpan> spans, std::vector<int64_t> fetches, int* cycle) {
  *cycle = 1;
  if (spans.size() < 4 || fetches.size() < 3) return spans;
  std::sort(fetches.begin(), fetches.end());
  std::vector<size_t> holding;  // the spans that hold a fetch
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto lo = std::lower_bound(fetches.begin(), fetches.end(), spans[i].start_ns);
    const auto hi = std::lower_bound(lo, fetches.end(), spans[i].end_ns);
    if (hi - lo > 1) return spans;  // two batches a step: accumulation or a second loader, no cycle
    if (hi - lo == 1) holding.push_back(i);
  }
  if (holding.size() < 3) return spans;
  const size_t k = holding[1] - holding[0];
  if (k < 2) return spans;
  for (size_t j = 1; j < holding.size(); ++j)
    if (holding[j] - holding[j - 1] != k) return spans;
  std::vector<StepSpan> merged;
  for (size_t first : holding) {
    if (first + k > spans.size()) break;  // a partial cycle at the end
    merged.push_back({spans[first].start_ns, spans[first + k - 1].end_ns, spans[first].track});
  }
  if (merged.size() < 2) return spans;
  *cycle = static_cast<int>(k);
  return merged;
}

}  // namespace

std::string OptimizerStepsSource(int cycle) {
  return cycle > 1 ? fmt::format("inferred from Optimizer.step, {} optimizer steps and one loader fetch an iteration: the "
                                 "iteration is the step",
                                 cycle)
                   : "inferred from Optimizer.step";
}

std::vector<StepSpan> StepsFromOptimizer(const Trace& trace, int32_t rank, int* cycle) {
  std::vector<const Event*> opt;
  std::vector<int64_t> fetches;  // the loader's, for the cycle
  for (const Event& e : trace.events) {
    if (e.track >= trace.tracks.size()) continue;
    const Track& t = trace.tracks[e.track];
    if (t.rank != rank || t.kind != TrackKind::kCpuThread) continue;
    if (e.kind != EventKind::kCpuOp && e.kind != EventKind::kUserAnnotation && e.kind != EventKind::kPythonFunction) continue;
    const std::string_view name = trace.Name(e);
    if (name.rfind("Optimizer.step#", 0) == 0) opt.push_back(&e);
    else if (IsRange(e.kind) && name.rfind("enumerate(DataLoader)#", 0) == 0) fetches.push_back(e.ts_ns);
  }
  std::sort(opt.begin(), opt.end(), [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
  std::vector<StepSpan> out;
  for (size_t i = 1; i < opt.size(); ++i) out.push_back({opt[i - 1]->end_ns(), opt[i]->end_ns(), opt[i]->track});
  int k = 1;
  out = MergeCycles(std::move(out), std::move(fetches), &k);
  if (cycle != nullptr) *cycle = k;
  return out;
}

std::vector<StepSpan> StepsFromBackward(const Trace& trace, int32_t rank) {
  constexpr std::string_view kBackward = "autograd::engine::evaluate_function";
  // The rank's CPU ops by thread, in time order (enclosing first), to find each thread's top level.
  std::vector<std::vector<const Event*>> by_track(trace.tracks.size());
  for (const Event& e : trace.events) {
    if (e.kind != EventKind::kCpuOp || e.track >= trace.tracks.size()) continue;
    const Track& t = trace.tracks[e.track];
    if (t.rank == rank && t.kind == TrackKind::kCpuThread) by_track[e.track].push_back(&e);
  }
  struct Top {
    int64_t ts, end;
    uint32_t track;
    bool backward;
  };
  std::vector<Top> tops;
  std::vector<int64_t> forward_ops(trace.tracks.size(), 0);
  for (auto& ops : by_track) {
    std::sort(ops.begin(), ops.end(), [](const Event* a, const Event* b) {
      return a->ts_ns != b->ts_ns ? a->ts_ns < b->ts_ns : a->dur_ns > b->dur_ns;
    });
    int64_t open_end = INT64_MIN;
    for (const Event* e : ops) {
      if (e->ts_ns < open_end) continue;  // nested in the op before
      open_end = e->end_ns();
      const bool backward = trace.Name(*e).substr(0, kBackward.size()) == kBackward;
      tops.push_back({e->ts_ns, e->end_ns(), e->track, backward});
      if (!backward) ++forward_ops[e->track];
    }
  }
  const auto forward_thread =
      static_cast<uint32_t>(std::max_element(forward_ops.begin(), forward_ops.end()) - forward_ops.begin());
  std::erase_if(tops, [&](const Top& t) { return !t.backward && t.track != forward_thread; });
  std::sort(tops.begin(), tops.end(), [](const Top& a, const Top& b) { return a.ts < b.ts; });
  struct Pass {
    int64_t start, end;
  };
  std::vector<Pass> passes;
  bool in_pass = false;
  for (const Top& t : tops) {
    if (t.backward) {
      if (in_pass) {
        passes.back().end = std::max(passes.back().end, t.end);
      } else {
        passes.push_back({t.ts, t.end});
        in_pass = true;
      }
    } else if (in_pass && t.ts >= passes.back().end) {
      in_pass = false;  // a forward-thread op after the pass: the pass is over
    }
  }
  std::vector<StepSpan> out;
  // The steps belong to the forward thread (the training loop's), even where backward ran on
  // autograd's device threads.
  for (size_t i = 1; i < passes.size(); ++i) out.push_back({passes[i - 1].end, passes[i].end, forward_thread});
  return out;
}

std::string AddProfilerSteps(Trace& trace, int32_t rank, int64_t first) {
  std::vector<const Event*> markers;
  std::vector<bool> on_rank(trace.tracks.size());
  for (size_t t = 0; t < trace.tracks.size(); ++t) on_rank[t] = trace.tracks[t].rank == rank;
  for (const Event& e : trace.events) {
    if (e.track >= on_rank.size() || !on_rank[e.track] || !IsRange(e.kind)) continue;
    const std::string_view name = trace.Name(e);
    if (name.rfind("ProfilerStep#", 0) == 0) return "";  // torch.profiler's own: keep them
    if (name.rfind("trainrx::step#", 0) == 0) markers.push_back(&e);
  }
  std::vector<Event> added;
  std::string how;
  if (!markers.empty()) {
    for (const Event* m : markers) {
      Event s = *m;
      s.name = trace.strings.Intern("ProfilerStep#" + std::string(trace.Name(*m).substr(14)));
      s.correlation = s.external_id = kNoId;
      s.aux = kNoAux;
      added.push_back(s);
    }
    how = "trainrx step markers";
  } else {
    int cycle = 1;
    auto inferred = StepsFromOptimizer(trace, rank, &cycle);
    how = OptimizerStepsSource(cycle);
    if (inferred.empty()) {  // parameters updated by hand: the backward passes mark the steps
      inferred = StepsFromBackward(trace, rank);
      how = inferred.empty() ? "" : "inferred from backward passes";
    }
    for (size_t i = 0; i < inferred.size(); ++i) {
      Event s;
      s.ts_ns = inferred[i].start_ns;
      s.dur_ns = inferred[i].end_ns - inferred[i].start_ns;
      s.track = inferred[i].track;
      s.kind = EventKind::kUserAnnotation;
      s.name = trace.strings.Intern("ProfilerStep#" + std::to_string(first + static_cast<int64_t>(i)));
      added.push_back(s);
    }
  }
  for (const Event& e : added) trace.AddEvent(e);
  return how;
}

}  // namespace trainrx::profiler
