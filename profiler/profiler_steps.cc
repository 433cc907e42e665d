#include "trainrx/profiler/profiler_steps.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace trainrx::profiler {
namespace {

bool IsRange(EventKind k) { return k == EventKind::kUserAnnotation || k == EventKind::kCpuOp; }

}  // namespace

std::vector<StepSpan> StepsFromOptimizer(const Trace& trace, int32_t rank) {
  std::vector<const Event*> opt;
  for (const Event& e : trace.events) {
    if (e.track >= trace.tracks.size()) continue;
    const Track& t = trace.tracks[e.track];
    if (t.rank != rank || t.kind != TrackKind::kCpuThread) continue;
    if (e.kind != EventKind::kCpuOp && e.kind != EventKind::kUserAnnotation && e.kind != EventKind::kPythonFunction) continue;
    if (trace.Name(e).rfind("Optimizer.step#", 0) == 0) opt.push_back(&e);
  }
  std::sort(opt.begin(), opt.end(), [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
  std::vector<StepSpan> out;
  for (size_t i = 1; i < opt.size(); ++i) out.push_back({opt[i - 1]->end_ns(), opt[i]->end_ns(), opt[i]->track});
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
  } else if (const auto inferred = StepsFromOptimizer(trace, rank); !inferred.empty()) {
    for (size_t i = 0; i < inferred.size(); ++i) {
      Event s;
      s.ts_ns = inferred[i].start_ns;
      s.dur_ns = inferred[i].end_ns - inferred[i].start_ns;
      s.track = inferred[i].track;
      s.kind = EventKind::kUserAnnotation;
      s.name = trace.strings.Intern("ProfilerStep#" + std::to_string(first + static_cast<int64_t>(i)));
      added.push_back(s);
    }
    how = "inferred from Optimizer.step";
  }
  for (const Event& e : added) trace.AddEvent(e);
  return how;
}

}  // namespace trainrx::profiler
