// eval.grad_enabled: evaluation (or inference) that runs with autograd on, so every forward op
// records a graph and keeps activations alive for a backward that never comes.
//
// Evidence needed: grad mode per op, which only our collector records ("trainrx.grad_enabled"
// counters per thread). Evaluation is found two ways:
//   * explicit: "trainrx::eval" ranges (C++ API ScopedPhase(Phase::kEval), reference workloads);
//   * a Python loop with no markers: an iteration of a DataLoader (from one
//     "enumerate(DataLoader)#" range to the next, on the same thread) that runs model ops but has
//     no backward and no optimizer step anywhere in the rank during it.
// A finding needs model ops (conv / linear / matmul / norm / embedding) with grad on inside eval.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "families.h"
#include "scopes.h"
#include "intervals.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

bool IsModelOp(std::string_view n) {
  return StartsWith(n, "aten::conv") || n == "aten::linear" || n == "aten::addmm" || n == "aten::matmul" ||
         n == "aten::mm" || n == "aten::bmm" || n == "aten::batch_norm" || n == "aten::layer_norm" ||
         n == "aten::embedding";
}

}  // namespace

void AnalyzeEval(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  const profiler::StrId grad_name = trace.strings.Find("trainrx.grad_enabled");
  if (grad_name == profiler::kNoStr) return;  // not our collector's trace: cannot tell
  std::map<uint32_t, std::vector<std::pair<int64_t, double>>> grad;  // track -> (ts, value)
  for (const auto& c : trace.counters)
    if (c.name == grad_name) grad[c.track].push_back({c.ts_ns, c.value});
  for (auto& [t, v] : grad) std::sort(v.begin(), v.end());
  auto grad_at = [&](uint32_t track, int64_t ts) {
    auto it = grad.find(track);
    if (it == grad.end() || it->second.empty()) return false;
    auto pos = std::upper_bound(it->second.begin(), it->second.end(), std::make_pair(ts, 1e300));
    return pos != it->second.begin() && std::prev(pos)->second != 0;
  };

  for (int32_t rank : trace.RankIds()) {
    // Training activity anywhere in the rank: backward functions and optimizer steps.
    std::vector<Interval> training;
    for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
      if (trace.tracks[ti].rank != rank || trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
      for (const Event& e : trace.TrackEvents(ti)) {
        const std::string_view n = trace.Name(e);
        if (StartsWith(n, "autograd::engine::evaluate_function") || StartsWith(n, "Optimizer.step#") ||
            StartsWith(n, "trainrx::backward") || StartsWith(n, "trainrx::optimizer")) {
          training.push_back({e.ts_ns, e.end_ns()});
        }
      }
    }
    MergeIntervals(training);

    int64_t eval_iterations = 0, grad_iterations = 0, grad_ops = 0, eval_ns = 0;
    std::string example;
    for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
      if (trace.tracks[ti].rank != rank || trace.tracks[ti].kind != TrackKind::kCpuThread) continue;
      const auto events = trace.TrackEvents(ti);
      // Eval windows on this thread: explicit ranges, then loader iterations without training.
      std::vector<Interval> windows;
      std::vector<int64_t> loader_starts;
      for (const Event& e : events) {
        const std::string_view n = trace.Name(e);
        if (StartsWith(n, "trainrx::eval")) windows.push_back({e.ts_ns, e.end_ns()});
        if (StartsWith(n, "enumerate(DataLoader)#")) loader_starts.push_back(e.ts_ns);
      }
      if (!loader_starts.empty()) {
        const int64_t track_end = events.empty() ? 0 : std::max_element(events.begin(), events.end(), [](const Event& a, const Event& b) {
                                                       return a.end_ns() < b.end_ns();
                                                     })->end_ns();
        for (size_t i = 0; i < loader_starts.size(); ++i) {
          const int64_t lo = loader_starts[i];
          const int64_t hi = i + 1 < loader_starts.size() ? loader_starts[i + 1] : track_end;
          if (hi > lo && CoveredWithin(training, lo, hi) == 0) windows.push_back({lo, hi});
        }
      }
      std::sort(windows.begin(), windows.end());
      for (const Interval& w : windows) {
        auto first = std::lower_bound(events.begin(), events.end(), w.first,
                                      [](const Event& e, int64_t ts) { return e.ts_ns < ts; });
        int64_t model_ops = 0, with_grad = 0;
        for (auto it = first; it != events.end() && it->ts_ns < w.second; ++it) {
          if (it->kind != EventKind::kCpuOp || !IsModelOp(trace.Name(*it))) continue;
          ++model_ops;
          if (grad_at(ti, it->ts_ns)) {
            ++with_grad;
            if (example.empty()) example = fmt::format("{}{} with grad enabled during evaluation", trace.Name(*it), InModule(ctx.modules.Of(*it)));
          }
        }
        if (model_ops == 0) continue;
        ++eval_iterations;
        eval_ns += w.second - w.first;
        if (with_grad > 0) {
          ++grad_iterations;
          grad_ops += with_grad;
        }
      }
    }
    if (grad_iterations == 0) continue;
    Finding f;
    f.id = "eval.grad_enabled";
    f.severity = Severity::kMedium;
    f.confidence = Confidence::kHigh;
    f.rank = rank;
    f.title = fmt::format("Evaluation runs with autograd on ({} of {} eval iterations)", grad_iterations, eval_iterations);
    f.measured = 100.0 * grad_iterations / eval_iterations;
    f.threshold = 0;
    f.measured_unit = "% of eval iterations";
    f.evidence = {{"eval_iterations", eval_iterations},
                  {"iterations_with_grad", grad_iterations},
                  {"model_ops_with_grad", grad_ops},
                  {"eval_time_ns", eval_ns}};
    f.examples.push_back(example);
    // The saving (graph recording, activations kept) is not visible as ops: `trainrx fix`
    // measures it; no estimate here.
    SetFix(f);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace trainrx::analyzers
