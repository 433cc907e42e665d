// Per-step figures of one side of a diff (diff_series.h). Self time is the op table's
// (op_table.cc): an op's duration less its direct child ops on the same thread, so the self times
// of one thread add up to the thread's time in ops. Worked example, one step [0, 100) on one
// thread: aten::conv2d [10, 60) holding aten::convolution [12, 58) -> self: conv2d 4,
// convolution 46; total: conv2d 50, convolution 46; outside = 100 - 50 = 50.
#include "diff_series.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "collectives.h"
#include "scopes.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::TrackKind;

// rank -> its steps' windows [start, end) with their index in StepModel::steps, by start.
class StepIndex {
 public:
  explicit StepIndex(const StepModel& m) {
    for (size_t i = 0; i < m.steps.size(); ++i) {
      const auto& s = m.steps[i];
      by_rank_[s.rank].push_back({s.start_ns, s.start_ns + s.wall_ns, i});
    }
    for (auto& [rank, w] : by_rank_) std::sort(w.begin(), w.end(), [](const W& a, const W& b) { return a.start < b.start; });
    whole_trace_ = m.steps.empty();
  }
  // The step holding ts on `rank`, -1 when none does; 0 for every event without steps.
  int64_t Of(int32_t rank, int64_t ts) const {
    if (whole_trace_) return 0;
    const auto it = by_rank_.find(rank);
    if (it == by_rank_.end()) return -1;
    const auto& w = it->second;
    auto up = std::upper_bound(w.begin(), w.end(), ts, [](int64_t t, const W& x) { return t < x.start; });
    if (up == w.begin()) return -1;
    --up;
    return ts < up->end ? static_cast<int64_t>(up->index) : -1;
  }
  // How many steps `rank` has; LocalOf: the position among them of the step holding ts (-1: none).
  size_t RankSteps(int32_t rank) const {
    const auto it = by_rank_.find(rank);
    return it == by_rank_.end() ? 0 : it->second.size();
  }
  int64_t LocalOf(int32_t rank, int64_t ts) const {
    const auto it = by_rank_.find(rank);
    if (whole_trace_) return 0;
    if (it == by_rank_.end()) return -1;
    const auto& w = it->second;
    auto up = std::upper_bound(w.begin(), w.end(), ts, [](int64_t t, const W& x) { return t < x.start; });
    if (up == w.begin()) return -1;
    --up;
    return ts < up->end ? up - w.begin() : -1;
  }

 private:
  struct W {
    int64_t start, end;
    size_t index;
  };
  std::unordered_map<int32_t, std::vector<W>> by_rank_;
  bool whole_trace_ = false;
};

void Add(NamedSeries& m, std::string_view name, size_t steps, int64_t step, double v) {
  auto it = m.find(name);
  if (it == m.end()) it = m.emplace(std::string(name), Series(steps, 0.0)).first;
  it->second[static_cast<size_t>(step)] += v;
}

std::string Key(const InputSignature& s) {
  std::string k;
  for (const auto& d : s.dims) k += DimsText(d) + ";";
  k += "|";
  for (const auto& t : s.types) k += t + ";";
  return k;
}

}  // namespace

std::vector<std::string> TopModules(const SideSeries& side, const std::string& op, size_t max) {
  std::vector<std::string> out;
  const auto it = side.op_modules.find(op);
  if (it == side.op_modules.end()) return out;
  std::vector<std::pair<int64_t, const std::string*>> by_calls;
  for (const auto& [m, calls] : it->second) by_calls.push_back({calls, &m});
  std::stable_sort(by_calls.begin(), by_calls.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < by_calls.size() && i < max; ++i) out.push_back(*by_calls[i].second);
  if (by_calls.size() > max) out.push_back(fmt::format("{} more", by_calls.size() - max));
  return out;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

SideSeries BuildSideSeries(const profiler::Trace& trace, const StepModel& m) {
  SideSeries out;
  const StepIndex index(m);
  out.steps = std::max<size_t>(1, m.steps.size());
  out.wall.assign(out.steps, 0.0);
  for (size_t i = 0; i < m.steps.size(); ++i) out.wall[i] = static_cast<double>(m.steps[i].wall_ns);
  // name -> signature key -> (signature, count): the most frequent one per name is kept.
  std::map<std::string, std::map<std::string, InputSignature>> signatures;
  Series self_sum(out.steps, 0.0);
  const ScopeIndex modules(trace, ScopeIndex::What::kModules);
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const auto& track = trace.tracks[ti];
    const auto events = trace.TrackEvents(ti);
    if (track.kind == TrackKind::kGpuStream) {
      for (const Event& e : events) {
        if (e.kind != EventKind::kKernel) continue;
        const int64_t s = index.Of(track.rank, e.ts_ns);
        if (s >= 0) Add(out.kernels, trace.Name(e), out.steps, s, static_cast<double>(e.dur_ns));
      }
      continue;
    }
    // CPU ops as a call tree: the open ops enclosing the current one (annotations are transparent).
    struct Open {
      const Event* e;
      int64_t step;
      int64_t child_ns;
    };
    std::vector<Open> stack;
    std::unordered_map<profiler::StrId, int> depth;  // open ops per name (recursion counts once)
    const auto close = [&]() {
      const Open& o = stack.back();
      if (o.step >= 0) {
        const double self = static_cast<double>(std::max<int64_t>(0, o.e->dur_ns - o.child_ns));
        Add(out.op_self, trace.Name(*o.e), out.steps, o.step, self);
        self_sum[static_cast<size_t>(o.step)] += self;
      }
      --depth[o.e->name];
      stack.pop_back();
    };
    for (const Event& e : events) {
      if (e.kind != EventKind::kCpuOp) continue;
      while (!stack.empty() && stack.back().e->end_ns() <= e.ts_ns) close();
      if (!stack.empty()) stack.back().child_ns += e.dur_ns;
      const int64_t s = index.Of(track.rank, e.ts_ns);
      if (s >= 0) {
        const std::string_view name = trace.Name(e);
        Add(out.op_calls, name, out.steps, s, 1);
        if (depth[e.name] == 0) Add(out.op_total, name, out.steps, s, static_cast<double>(e.dur_ns));
      }
      // The module it ran in, from anywhere in the trace (module ranges cover the first calls only).
      if (!modules.empty()) {
        if (const std::string_view m = modules.Of(e); !m.empty()) {
          const std::string_view name = trace.Name(e);
          auto it = out.op_modules.find(name);
          if (it == out.op_modules.end()) it = out.op_modules.emplace(std::string(name), std::map<std::string, int64_t>{}).first;
          ++it->second[std::string(m)];
        }
      }
      // Inputs from anywhere in the trace: our collector records them in the first steps only,
      // which are often warm-up; a shape is what the program does, not a timing.
      if (const auto dims = OpDims(trace, e)) {
        InputSignature sig;
        sig.dims = *dims;
        if (const auto types = OpTypes(trace, e)) sig.types = *types;
        auto& slot = signatures[std::string(trace.Name(e))][Key(sig)];
        if (slot.count == 0) slot = std::move(sig);
        ++slot.count;
      }
      ++depth[e.name];
      stack.push_back({&e, s, 0});
    }
    while (!stack.empty()) close();
  }
  out.outside.assign(out.steps, 0.0);
  if (!m.steps.empty())
    for (size_t i = 0; i < out.steps; ++i) out.outside[i] = out.wall[i] - self_sum[i];
  for (auto& [name, by_key] : signatures) {
    const InputSignature* best = nullptr;  // most frequent; ties: the first key (deterministic)
    for (const auto& [k, sig] : by_key)
      if (!best || sig.count > best->count) best = &sig;
    out.inputs[name] = *best;
  }
  for (const int32_t rank : trace.RankIds()) {
    const size_t n = m.steps.empty() ? 1 : index.RankSteps(rank);
    if (n == 0) continue;
    for (const bool gpu : {true, false}) {
      for (const Collective& c : CollectivesOf(trace, rank, &m, gpu)) {
        const int64_t s = index.LocalOf(rank, c.ts_ns);
        if (s < 0) continue;
        auto [it, fresh] = out.collectives.try_emplace({rank, std::string(c.name)}, Series(n, 0.0));
        it->second[static_cast<size_t>(s)] += static_cast<double>(c.dur_ns);
      }
    }
  }
  return out;
}

}  // namespace trainrx::analyzers
