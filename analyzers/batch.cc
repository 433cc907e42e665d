#include "trainrx/analyzers/batch.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "model_inputs.h"
#include "phases.h"
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

std::vector<StepInput> FirstInputPerStep(const profiler::Trace& trace, int32_t rank,
                                         const std::vector<const StepRow*>& rows,
                                         const std::function<bool(std::string_view, const Dims&)>& accept) {
  std::vector<StepInput> out;
  for (const StepRow* s : rows) {
    const int64_t end = s->start_ns + s->wall_ns;
    StepInput first;
    for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
      if (trace.tracks[t].rank != rank || trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
      const auto events = trace.TrackEvents(t);
      auto it = std::lower_bound(events.begin(), events.end(), s->start_ns,
                                 [](const profiler::Event& e, int64_t ts) { return e.ts_ns < ts; });
      for (; it != events.end() && it->ts_ns < end; ++it) {
        if (first.op && it->ts_ns >= first.op->ts_ns) break;  // this track cannot beat the earliest found
        if (it->kind != profiler::EventKind::kCpuOp || it->aux == profiler::kNoAux) continue;
        auto dims = OpDims(trace, *it);
        if (!dims || !accept(trace.Name(*it), *dims)) continue;
        first = {&*it, std::move(*dims)};
        break;
      }
    }
    if (first.op) out.push_back(std::move(first));
  }
  return out;
}

namespace {

// One op that leads with the batch dimension, as recorded.
struct BatchInput {
  const profiler::Event* op = nullptr;
  int64_t batch = 0, elements = 0;  // dim 0 of its batch input; the elements of one sample
};

// The step's training input: `first` the forward that feeds its first backward pass, `micro_steps`
// how many backward passes a forward of that input fed (gradient accumulation: k micro-batches a
// step), `samples` their batches summed.
struct StepInputs {
  BatchInput first;
  int micro_steps = 1;
  int64_t samples = 0;
};

// The step's training input: the forward that feeds the step's backward. A step can also run
// forwards that train nothing (minGPT generates text with batch 1 in its first iteration; an
// evaluation pass), and they come first. So: the name of the step's first batch-leading op (the
// model's entry: embedding, conv, linear), and of the ops with that name that start before the
// step's first backward, the last (the forward whose loss the backward differentiates). A step
// without a backward keeps its first such op.
// Gradient accumulation (issue 81.1): a step of k micro-batches runs k forwards, each followed by
// its backward pass. Walking the step's entry ops and backward ranges in time order, each backward
// pass that a forward of the entry op precedes (since the pass before) is a micro-step, and that
// forward's batch its samples: nanoGPT's 4 micro-batches of 8 are 32 samples a step, not 8. An
// entry op inside a backward range (activation checkpointing recomputes the forward there) is no
// forward of its own; a forward after the last pass (evaluation) feeds nothing.
std::optional<StepInputs> TrainingInput(const profiler::Trace& trace, int32_t rank, const StepRow& s) {
  const int64_t end = s.start_ns + s.wall_ns;
  std::vector<BatchInput> found;
  std::vector<std::pair<int64_t, int64_t>> backward;  // backward ranges (start, end), every thread
  int64_t first_backward = INT64_MAX;
  for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
    if (trace.tracks[t].rank != rank || trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
    const auto events = trace.TrackEvents(t);
    auto it = std::lower_bound(events.begin(), events.end(), s.start_ns,
                               [](const profiler::Event& e, int64_t ts) { return e.ts_ns < ts; });
    for (; it != events.end() && it->ts_ns < end; ++it) {
      if (PhaseOf(trace.Name(*it)) == kBackward) {
        first_backward = std::min(first_backward, it->ts_ns);
        backward.emplace_back(it->ts_ns, it->end_ns());
      }
      if (it->kind != profiler::EventKind::kCpuOp || it->aux == profiler::kNoAux) continue;
      const int arg = BatchArg(trace.Name(*it));
      if (arg < 0) continue;
      const auto dims = OpDims(trace, *it);
      if (!dims || static_cast<int>(dims->size()) <= arg || (*dims)[arg].empty() || (*dims)[arg][0] <= 0) continue;
      // A 1-D index tensor leads with no batch: a GPT's position embedding looks up `pos` of shape
      // [T] (karpathy/llm.c train_gpt2.py before its token embedding: "samples per step" was the
      // sequence length, and sweep ranked batch 4 3.78x above batch 16, issue 60). The batch's
      // indices are [B, T] (or [B] in a bag, which embedding_bag reads, not this).
      if (arg == 1 && (*dims)[arg].size() < 2) continue;
      int64_t elements = 1;
      for (size_t d = 1; d < (*dims)[arg].size(); ++d) elements *= std::max<int64_t>(1, (*dims)[arg][d]);
      found.push_back({&*it, (*dims)[arg][0], elements});
    }
  }
  if (found.empty()) return std::nullopt;
  // A position index broadcast over the batch, [1, T], beside the batch's indices [B, T]: minGPT's
  // wpe(pos) with pos = arange(T).unsqueeze(0), after wte(idx) (karpathy/minGPT's adder trained
  // batches of 64, and sweep read 1 sample a step). A [1, T] lookup with no [B, T] of the same T
  // beside it (batch 1, or a generation's one sequence) stays.
  std::erase_if(found, [&](const BatchInput& in) {
    if (in.batch != 1 || BatchArg(trace.Name(*in.op)) != 1) return false;
    return std::any_of(found.begin(), found.end(), [&](const BatchInput& other) {
      return other.batch > 1 && other.elements == in.elements && BatchArg(trace.Name(*other.op)) == 1;
    });
  });
  std::sort(found.begin(), found.end(), [](const BatchInput& a, const BatchInput& b) { return a.op->ts_ns < b.op->ts_ns; });
  const std::string_view entry = trace.Name(*found.front().op);
  const BatchInput* pick = &found.front();
  for (const BatchInput& in : found)
    if (in.op->ts_ns < first_backward && trace.Name(*in.op) == entry) pick = &in;
  StepInputs out{*pick, 1, pick->batch};
  if (backward.empty()) return out;
  // The micro-steps: entry ops and backward ranges in time order; a pending forward (the last entry
  // op since the pass before, outside every backward range) is consumed by the next backward range.
  std::sort(backward.begin(), backward.end());
  int micro = 0;
  int64_t samples = 0, in_backward_to = INT64_MIN;
  const BatchInput* pending = nullptr;
  size_t b = 0;
  for (const BatchInput& in : found) {
    for (; b < backward.size() && backward[b].first < in.op->ts_ns; ++b) {
      if (pending != nullptr) ++micro, samples += pending->batch, pending = nullptr;
      in_backward_to = std::max(in_backward_to, backward[b].second);
    }
    if (trace.Name(*in.op) == entry && in.op->ts_ns >= in_backward_to) pending = &in;
  }
  if (pending != nullptr && b < backward.size()) ++micro, samples += pending->batch;
  if (micro > 1) out.micro_steps = micro, out.samples = samples;
  return out;
}

}  // namespace

std::optional<BatchEstimate> SamplesPerStep(const profiler::Trace& trace, const StepModel& model) {
  std::vector<const StepRow*> steps;
  for (const auto* rows : {&model.warmup_steps, &model.steps})
    for (const auto& s : *rows) steps.push_back(&s);
  if (steps.empty()) return std::nullopt;
  const int32_t rank = std::min_element(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->rank < b->rank; })[0]->rank;
  std::erase_if(steps, [&](const StepRow* s) { return s->rank != rank; });
  std::map<int64_t, int> votes;
  std::map<int64_t, StepInputs> first_of;  // the first step that gave each value
  int with_shapes = 0;
  for (const StepRow* s : steps) {
    const auto in = TrainingInput(trace, rank, *s);
    if (!in) continue;
    ++with_shapes;
    if (++votes[in->samples] == 1) first_of[in->samples] = *in;
  }
  if (votes.empty()) return std::nullopt;
  const auto best = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  const StepInputs& in = first_of[best->first];
  BatchEstimate e{best->first, std::string(trace.Name(*in.first.op)), best->second, with_shapes, in.first.elements};
  e.micro_steps = in.micro_steps;
  e.micro_batch = in.micro_steps > 1 ? in.first.batch : best->first;
  return e;
}

int64_t TokensPerSample(const BatchEstimate& batch) {
  return batch.op == "aten::embedding" && batch.sample_elements > 1 ? batch.sample_elements : 0;
}

}  // namespace trainrx::analyzers
