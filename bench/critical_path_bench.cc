// The critical path's own time (issue 50), for bench/critical_path_vs_hta.sh.
//
//   trainrx_critical_path_bench step TRACE [--rank R] [--annotation ProfilerStep] [--instance 1] [--reps 5]
//     One window, as HTA's critical_path_analysis(rank, annotation, instance_id) takes it: the
//     instance-th event (0-based, in time order) of the rank whose name contains the annotation.
//     Times CriticalPathOf (the rank's dependency model built from the whole trace, then the walk of
//     that window), the median of --reps runs; reading the trace is not timed (nor is HTA's load).
//   trainrx_critical_path_bench set PATH... [--reps 3]
//     A trace set: reads it (not timed), finds its steps (Analyze, not timed), then times the
//     dependency model and the critical paths of every step of every rank, as Analyze builds them.
//   trainrx_critical_path_bench whatif PATH... [--reps 3]
//     The what-if (issue 59): reads the set (not timed), then times the whole analysis (--threads)
//     with the predictions and without them (--threshold what_if.steps=0), in pairs back to back:
//     "ms" is the median of the pairs' differences, every finding's transform replayed on every
//     rank (its graph, the unchanged replay, the transform's levels); "alone_ms" times that
//     what-if by itself (PredictSavings on the findings of the analysis without it).
// Prints one JSON line with the figures.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "dependency/dependency.h"
#include "links.h"
#include "dependency/replay.h"
#include "dependency/what_if.h"
#include "trainrx/profiler/parallel.h"
#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace {

using trainrx::analyzers::CriticalPath;
using Clock = std::chrono::steady_clock;

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Usage() {
  fmt::print(stderr,
             "usage: trainrx_critical_path_bench step TRACE [--rank R] [--annotation NAME] [--instance I] [--reps N]\n"
             "       trainrx_critical_path_bench set PATH... [--reps N]\n"
             "       trainrx_critical_path_bench whatif PATH... [--reps N] [--alone-reps N (default: --reps; a profiler's run)] [--threads N (default 1; 0: the machine's)]\n");
  return 2;
}

std::string Classes(const CriticalPath& p) {
  std::string out;
  for (int k = 0; k < trainrx::analyzers::kPathClasses; ++k) {
    if (p.class_ns[k] <= 0) continue;
    out += fmt::format("{}\"{}\": {:.2f}", out.empty() ? "" : ", ",
                       trainrx::analyzers::PathClassName(static_cast<trainrx::analyzers::PathClass>(k)),
                       100.0 * static_cast<double>(p.class_ns[k]) / static_cast<double>(std::max<int64_t>(p.mean_ns, 1)));
  }
  return "{" + out + "}";
}

int Step(const std::vector<std::string>& paths, int32_t rank, const std::string& annotation, size_t instance, int reps) {
  trainrx::profiler::Trace trace;
  if (const auto st = trainrx::profiler::ReadTraces(paths, trace); !st.ok()) {
    fmt::print(stderr, "critical_path_bench: {}\n", st.message());
    return 1;
  }
  std::vector<const trainrx::profiler::Event*> hits;
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    if (trace.tracks[ti].rank != rank || trace.tracks[ti].kind != trainrx::profiler::TrackKind::kCpuThread) continue;
    for (const auto& e : trace.TrackEvents(ti))
      if (e.dur_ns > 0 && trace.Name(e).find(annotation) != std::string_view::npos) hits.push_back(&e);
  }
  std::sort(hits.begin(), hits.end(), [](const auto* a, const auto* b) { return a->ts_ns < b->ts_ns; });
  if (instance >= hits.size()) {
    fmt::print(stderr, "critical_path_bench: rank {} has {} events named like '{}', no instance {}\n", rank, hits.size(),
               annotation, instance);
    return 1;
  }
  const auto* w = hits[instance];
  std::vector<double> ms;
  CriticalPath p;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    p = trainrx::analyzers::CriticalPathOf(trace, rank, w->ts_ns, w->end_ns());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  size_t in_window = 0;
  for (const auto& e : trace.events)
    if (e.ts_ns >= w->ts_ns && e.ts_ns < w->end_ns()) ++in_window;
  fmt::print("{{\"mode\": \"step\", \"window\": \"{}\", \"events_in_window\": {}, \"events\": {}, \"ms\": {:.3f}, "
             "\"path_ms\": {:.3f}, \"segments\": {}, \"classes_pct\": {}}}\n",
             trace.Name(*w), in_window, trace.events.size(), MedianMs(ms), static_cast<double>(p.mean_ns) / 1e6,
             p.segments.size(), Classes(p));
  return 0;
}

int Set(const std::vector<std::string>& paths, int reps) {
  trainrx::profiler::Trace trace;
  if (const auto st = trainrx::profiler::ReadTraces(paths, trace); !st.ok()) {
    fmt::print(stderr, "critical_path_bench: {}\n", st.message());
    return 1;
  }
  const trainrx::analyzers::Report report = trainrx::analyzers::Analyze(trace);
  std::vector<double> ms;
  size_t paths_built = 0, steps = 0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    const trainrx::analyzers::LinkIndex links(trace);
    const auto built = trainrx::analyzers::BuildCriticalPaths(trace, links, report.metrics.steps);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    paths_built = built.size();
    steps = 0;
    for (const auto& p : built) steps += static_cast<size_t>(std::max<int64_t>(p.steps, 1));
  }
  const double median = MedianMs(ms);
  // The links alone, their ranks built one at a time and on every CPU, alternated.
  std::vector<double> one, all;
  for (int i = 0; i < reps; ++i)
    for (size_t threads : {size_t{1}, size_t{0}}) {
      const auto t0 = Clock::now();
      const trainrx::analyzers::LinkIndex links(trace, threads);
      (threads == 1 ? one : all).push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  fmt::print("{{\"mode\": \"set\", \"ranks\": {}, \"events\": {}, \"steps_walked\": {}, \"ms\": {:.3f}, "
             "\"us_per_kevent\": {:.3f}, \"links_ms_one_thread\": {:.3f}, \"links_ms_every_cpu\": {:.3f}, \"cpus\": {}}}\n",
             paths_built, trace.events.size(), steps, median, 1000.0 * median / (static_cast<double>(trace.events.size()) / 1000.0),
             MedianMs(one), MedianMs(all), trainrx::profiler::UsableCpus());
  return 0;
}

int WhatIf(const std::vector<std::string>& paths, int reps, int alone_reps, size_t threads) {
  trainrx::profiler::Trace trace;
  if (const auto st = trainrx::profiler::ReadTraces(paths, trace); !st.ok()) {
    fmt::print(stderr, "critical_path_bench: {}\n", st.message());
    return 1;
  }
  // What the what-if adds to analyze: the whole analysis (`threads`; 0: the machine's) with and without it
  // (--threshold what_if.steps=0), interleaved; the difference is the predictions' cost.
  trainrx::analyzers::Thresholds off;
  if (!off.Set("what_if.steps", 0).ok()) return 1;
  std::vector<double> with, without;
  size_t predicted = 0, findings = 0;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    const trainrx::analyzers::Report r = trainrx::analyzers::Analyze(trace, trainrx::analyzers::Thresholds(), threads);
    with.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    t0 = Clock::now();
    const trainrx::analyzers::Report r0 = trainrx::analyzers::Analyze(trace, off, threads);
    without.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    predicted = findings = 0;
    for (const auto& f : r.findings) {
      ++findings;
      predicted += f.predicted.method == "replay" ? 1 : 0;
    }
  }
  // The cost: the median of the pairs' differences (a pair runs back to back, so a machine that
  // slows down or speeds up between pairs moves both halves alike).
  std::vector<double> added;
  for (size_t i = 0; i < with.size(); ++i) added.push_back(with[i] - without[i]);
  // And the what-if alone (its graphs, plans and replays: PredictSavings, as Analyze calls it, on
  // the findings of the analysis without it and the dependency model built once): without the
  // rest of the analysis' noise around it.
  const trainrx::analyzers::Report base = trainrx::analyzers::Analyze(trace, off, threads);
  const trainrx::analyzers::LinkIndex links(trace);
  trainrx::analyzers::Thresholds defaults;
  const auto replayed = static_cast<size_t>(defaults.Get("what_if.steps"));
  std::vector<double> alone;
  size_t predicted_alone = 0;
  for (int i = 0; i < alone_reps; ++i) {
    trainrx::analyzers::Report r = base;
    // A copy of the links per run: what the what-if derives from them once per rank (RankLinks::
    // Derived) is made again, as in one analysis, not kept from the run before.
    const trainrx::analyzers::LinkIndex fresh = links;
    const auto t0 = Clock::now();
    trainrx::analyzers::PredictSavings(trace, fresh, base.metrics.steps, {}, r, threads, replayed);
    alone.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    predicted_alone = 0;
    for (const auto& f : r.findings) predicted_alone += f.predicted.method == "replay" ? 1 : 0;
  }
  if (predicted_alone != predicted) {
    fmt::print(stderr, "critical_path_bench: the what-if alone made {} predictions, the analysis {}\n", predicted_alone, predicted);
    return 1;
  }
  const double a = MedianMs(with), b = MedianMs(without);
  fmt::print("{{\"mode\": \"whatif\", \"ranks\": {}, \"events\": {}, \"findings\": {}, \"predictions\": {}, "
             "\"threads\": {}, \"analyze_ms\": {:.3f}, \"analyze_without_ms\": {:.3f}, \"ms\": {:.3f}, \"alone_ms\": {:.3f}}}\n",
             trace.ranks.size(), trace.events.size(), findings, predicted, threads, a, b, MedianMs(added), MedianMs(alone));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string mode = argv[1];
  std::vector<std::string> paths;
  int32_t rank = 0;
  std::string annotation = "ProfilerStep";
  size_t instance = 1;
  int reps = 5, alone_reps = -1;
  size_t threads = 1;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--rank" && has_value) rank = std::atoi(argv[++i]);
    else if (a == "--annotation" && has_value) annotation = argv[++i];
    else if (a == "--instance" && has_value) instance = static_cast<size_t>(std::atoi(argv[++i]));
    else if (a == "--reps" && has_value) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--alone-reps" && has_value) alone_reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && has_value) threads = static_cast<size_t>(std::max(0, std::atoi(argv[++i])));
    else if (a.rfind("--", 0) == 0) return Usage();
    else paths.push_back(a);
  }
  if (paths.empty()) return Usage();
  if (mode == "step") return Step(paths, rank, annotation, instance, reps);
  if (mode == "set") return Set(paths, reps);
  if (mode == "whatif") return WhatIf(paths, reps, alone_reps < 0 ? reps : alone_reps, threads);
  return Usage();
}
