#include "trainrx/analyzers/batch.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "shapes.h"

namespace trainrx::analyzers {
namespace {

// Ops whose input `arg` leads with the batch dimension. A model's first layer is one of these in
// every architecture we have seen (CNNs: conv; MLPs and transformers: linear or a norm after the
// embedding); nested ops (conv2d > convolution > _convolution) carry the same input.
int BatchArg(std::string_view name) {
  static const std::map<std::string_view, int> kOps = {
      {"aten::conv1d", 0},      {"aten::conv2d", 0},       {"aten::conv3d", 0},     {"aten::convolution", 0},
      {"aten::_convolution", 0}, {"aten::linear", 0},       {"aten::layer_norm", 0}, {"aten::batch_norm", 0},
      {"aten::group_norm", 0},  {"aten::instance_norm", 0}, {"aten::rms_norm", 0},  {"aten::embedding", 1},
  };
  const auto it = kOps.find(name);
  return it == kOps.end() ? -1 : it->second;
}

}  // namespace

std::optional<BatchEstimate> SamplesPerStep(const profiler::Trace& trace, const StepModel& model) {
  std::vector<const StepRow*> steps;
  for (const auto* rows : {&model.warmup_steps, &model.steps})
    for (const auto& s : *rows) steps.push_back(&s);
  if (steps.empty()) return std::nullopt;
  const int32_t rank = std::min_element(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->rank < b->rank; })[0]->rank;
  std::map<int64_t, int> votes;
  std::map<int64_t, std::string> op_of;
  int with_shapes = 0;
  for (const StepRow* s : steps) {
    if (s->rank != rank) continue;
    const int64_t end = s->start_ns + s->wall_ns;
    const profiler::Event* first = nullptr;
    int64_t batch = 0;
    for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
      if (trace.tracks[t].rank != rank || trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
      const auto events = trace.TrackEvents(t);
      auto it = std::lower_bound(events.begin(), events.end(), s->start_ns,
                                 [](const profiler::Event& e, int64_t ts) { return e.ts_ns < ts; });
      for (; it != events.end() && it->ts_ns < end; ++it) {
        if (first && it->ts_ns >= first->ts_ns) break;  // this track cannot beat the earliest found
        if (it->kind != profiler::EventKind::kCpuOp || it->aux == profiler::kNoAux) continue;
        const int arg = BatchArg(trace.Name(*it));
        if (arg < 0) continue;
        const auto dims = OpDims(trace, *it);
        if (!dims || static_cast<int>(dims->size()) <= arg || (*dims)[arg].empty() || (*dims)[arg][0] <= 0) continue;
        first = &*it;
        batch = (*dims)[arg][0];
        break;
      }
    }
    if (!first) continue;
    ++with_shapes;
    if (++votes[batch] == 1) op_of[batch] = std::string(trace.Name(*first));
  }
  if (votes.empty()) return std::nullopt;
  const auto best = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  return BatchEstimate{best->first, op_of[best->first], best->second, with_shapes};
}

}  // namespace trainrx::analyzers
