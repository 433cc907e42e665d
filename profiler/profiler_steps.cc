#include "trainrx/profiler/profiler_steps.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace trainrx::profiler {
namespace {

bool IsRange(EventKind k) { return k == EventKind::kUserAnnotation || k == EventKind::kCpuOp; }

}  // namespace

std::string AddProfilerSteps(Trace& trace, int32_t rank) {
  std::vector<const Event*> markers, optimizer;
  std::vector<bool> on_rank(trace.tracks.size());
  for (size_t t = 0; t < trace.tracks.size(); ++t) on_rank[t] = trace.tracks[t].rank == rank;
  for (const Event& e : trace.events) {
    if (e.track >= on_rank.size() || !on_rank[e.track] || !IsRange(e.kind)) continue;
    const std::string_view name = trace.Name(e);
    if (name.rfind("ProfilerStep#", 0) == 0) return "";  // torch.profiler's own: keep them
    if (name.rfind("trainrx::step#", 0) == 0) markers.push_back(&e);
    if (name.rfind("Optimizer.step#", 0) == 0) optimizer.push_back(&e);
  }
  auto by_start = [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; };
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
  } else if (optimizer.size() >= 2) {
    std::sort(optimizer.begin(), optimizer.end(), by_start);
    for (size_t i = 1; i < optimizer.size(); ++i) {
      Event s;
      s.ts_ns = optimizer[i - 1]->end_ns();
      s.dur_ns = optimizer[i]->end_ns() - s.ts_ns;
      s.track = optimizer[i]->track;
      s.kind = EventKind::kUserAnnotation;
      s.name = trace.strings.Intern("ProfilerStep#" + std::to_string(i));
      added.push_back(s);
    }
    how = "inferred from Optimizer.step";
  }
  for (const Event& e : added) trace.AddEvent(e);
  return how;
}

}  // namespace trainrx::profiler
