// machine.busy (issue 60.5): the program waited for a CPU during its steps. Our collector samples,
// at step boundaries, how long the process's threads ran and waited on a run queue (Linux's
// schedstat, profiler/cpu_wait.h) and how busy the CPUs it may use were. A program that waits for
// a CPU runs slower than its code: every timing of the run (the step, the phases, a fix's trial)
// holds the other program's share. The finding says how long it waited, who took the CPUs (other
// programs, or the program's own threads wanting more CPUs than there are) and what helps.
// Traces from other tools have no such samples, and the rule stays silent.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "families.h"
#include "trainrx/profiler/cpu_wait.h"

namespace trainrx::analyzers {
namespace {

using profiler::CpuWaitWhat;

// One process's samples: per key, (ts, value) sorted.
struct Series {
  std::map<CpuWaitWhat, std::vector<std::pair<int64_t, double>>> by_key;
  // The value of `what` at ts: the last sample at or before it (the collector stores a sample only
  // when it changed), else the first.
  std::optional<double> At(CpuWaitWhat what, int64_t ts) const {
    const auto it = by_key.find(what);
    if (it == by_key.end() || it->second.empty()) return std::nullopt;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, 1e300));
    return pos == v.begin() ? v.front().second : std::prev(pos)->second;
  }
  profiler::CpuWaitSample SampleAt(int64_t ts) const {
    profiler::CpuWaitSample s;
    const auto get = [&](CpuWaitWhat w, double fallback) { return At(w, ts).value_or(fallback); };
    s.ok = by_key.count(CpuWaitWhat::kWait) > 0;
    s.run_ns = static_cast<int64_t>(get(CpuWaitWhat::kRun, 0));
    s.wait_ns = static_cast<int64_t>(get(CpuWaitWhat::kWait, 0));
    s.involuntary = static_cast<int64_t>(get(CpuWaitWhat::kInvoluntary, 0));
    s.children_run_ns = static_cast<int64_t>(get(CpuWaitWhat::kChildrenRun, -1));
    s.cpus_busy_ns = static_cast<int64_t>(get(CpuWaitWhat::kCpusBusy, -1));
    s.cpus = static_cast<int64_t>(get(CpuWaitWhat::kCpus, 0));
    return s;
  }
};

std::optional<CpuWaitWhat> WhatOf(std::string_view name) {
  for (auto w : {CpuWaitWhat::kRun, CpuWaitWhat::kWait, CpuWaitWhat::kInvoluntary, CpuWaitWhat::kChildrenRun,
                 CpuWaitWhat::kCpusBusy, CpuWaitWhat::kCpus})
    if (name == profiler::CpuWaitCounterName(w)) return w;
  return std::nullopt;
}

// The sample time nearest `ts`, from the run-time series: the process ran between any two samples,
// so it changes at every one (the collector stores a sample only when it changed: on a quiet
// 16-core H200 host the wait stayed put after the third sample, and a lookup by the wait's own
// times found no sample inside the steps, issue 62).
int64_t Nearest(const std::vector<std::pair<int64_t, double>>& v, int64_t ts) {
  auto pos = std::lower_bound(v.begin(), v.end(), std::make_pair(ts, -1e300));
  if (pos == v.end()) return v.back().first;
  if (pos == v.begin()) return pos->first;
  const int64_t after = pos->first, before = std::prev(pos)->first;
  return ts - before <= after - ts ? before : after;
}

}  // namespace

std::optional<RankCpuLoad> CpuLoadOfRank(const profiler::Trace& trace, const StepModel& steps, int32_t rank) {
  // Per process of the rank (a rank is one process; forked loader workers stop recording, but keep
  // the series apart should one write), its samples; the process with the most samples.
  std::map<int64_t, Series> by_pid;
  const std::string_view prefix = profiler::kCpuWaitCounterPrefix;
  for (const auto& c : trace.counters) {
    const profiler::Track& t = trace.tracks[c.track];
    if (t.rank != rank) continue;
    const std::string_view name = trace.strings.Get(c.name);
    if (name.substr(0, prefix.size()) != prefix) continue;
    if (const auto what = WhatOf(name)) by_pid[t.pid].by_key[*what].push_back({c.ts_ns, c.value});
  }
  const Series* series = nullptr;
  size_t most = 0;
  for (auto& [pid, s] : by_pid) {
    for (auto& [k, v] : s.by_key) std::sort(v.begin(), v.end());
    const auto it = s.by_key.find(CpuWaitWhat::kRun);
    if (it != s.by_key.end() && s.by_key.count(CpuWaitWhat::kWait) && it->second.size() > most)
      most = it->second.size(), series = &s;
  }
  if (series == nullptr || most < 2) return std::nullopt;
  const auto& times = series->by_key.at(CpuWaitWhat::kRun);  // the sample times (Nearest)
  // The steady steps' span; without steps, the samples' own.
  int64_t begin = times.front().first, end = times.back().first, step_count = 0;
  bool any_step = false;
  for (const StepRow& s : steps.steps) {
    if (s.rank != rank) continue;
    if (!any_step) begin = s.start_ns, end = s.start_ns + s.wall_ns, any_step = true;
    begin = std::min(begin, s.start_ns);
    end = std::max(end, s.start_ns + s.wall_ns);
    ++step_count;
  }
  const int64_t t0 = Nearest(times, begin), t1 = Nearest(times, end);
  if (t1 <= t0) return std::nullopt;
  RankCpuLoad out;
  out.rank = rank;
  out.steps = step_count;
  out.load = profiler::LoadBetween(series->SampleAt(t0), series->SampleAt(t1), static_cast<double>(t1 - t0));
  const double span = static_cast<double>(end - begin);
  out.span_covered = span > 0 ? std::clamp(static_cast<double>(std::min(t1, end) - std::max(t0, begin)) / span, 0.0, 1.0) : 1;
  // Half the steps' span at least: a figure from a sliver of the run is not the run's.
  if (!out.load.measured || out.span_covered < 0.5) return std::nullopt;
  return out;
}

void AnalyzeMachine(const AnalysisContext& ctx, Report& out) {
  const double min_pct = ctx.thresholds.Get("machine.busy.wait_pct");
  for (int32_t rank : ctx.trace.RankIds()) {
    const auto measured = CpuLoadOfRank(ctx.trace, ctx.steps, rank);
    if (!measured) continue;
    out.metrics.cpu_load.push_back(*measured);
    const profiler::CpuLoad& l = measured->load;
    const double wait_pct = 100.0 * l.WaitShare();
    const double others = l.OtherCpus();  // -1: unknown
    const double wanted = l.OwnCpus() + l.WaitingThreads();
    // Who took the CPUs: other programs (a tenth of the CPUs or more, on average), the program's own
    // threads wanting more CPUs than there are, or both. Only with other programs on the CPUs (or
    // their use unknown) is it a busy machine (as CpuLoad::Starved, at this threshold): a program
    // whose own threads want more CPUs than there are waits on a quiet machine too (nanoGPT, default
    // threads on 2 CPUs, recorded: 11.8 %, others 0.01 CPUs); threads.oversubscribed is that rule.
    const bool by_others = profiler::OthersOnCpus(others, l.cpus);
    const bool by_self = l.cpus > 0 && wanted > l.cpus;
    if (wait_pct < min_pct || (others >= 0 && !by_others)) continue;
    std::string who;
    if (by_others)
      who = fmt::format("other programs used {:.1f} of the {:.0f} CPUs it may run on{}", others, l.cpus,
                        l.children_ns < 0 ? " (its own DataLoader workers among them, if it has any: this kernel does not list a process's children)" : "");
    if (by_self)
      who += fmt::format("{}its threads wanted {:.1f} CPUs ({:.1f} running and {:.1f} waiting on average) of the {:.0f}",
                         who.empty() ? "" : "; ", wanted, l.OwnCpus(), l.WaitingThreads(), l.cpus);
    if (who.empty()) who = "who else used the CPUs could not be read here (/proc/stat)";
    const StepBasis basis(ctx.steps, rank);
    Finding f;
    f.id = "machine.busy";
    f.rank = rank;
    f.confidence = Confidence::kHigh;  // measured by the kernel, not inferred
    f.title = fmt::format("The program waited for a CPU {:.0f} % of the time its threads were ready to run: {}", wait_pct, who);
    f.measured = wait_pct;
    f.threshold = min_pct;
    f.measured_unit = "% of runnable time waiting for a CPU";
    f.evidence = {{"cpu_wait_pct", wait_pct},
                  {"waiting_threads_mean", l.WaitingThreads()},
                  {"own_cpus_mean", l.OwnCpus()},
                  {"other_programs_cpus_mean", others},
                  {"cpus_allowed", l.cpus},
                  {"involuntary_switches_per_s", l.wall_ns > 0 ? l.involuntary / (l.wall_ns / 1e9) : 0},
                  {"measured_over_s", l.wall_ns / 1e9}};
    f.examples = {"every time measured in this run includes that wait: step times, phases and a fix's trials compare "
                  "the machine's load as much as the code"};
    // On a quiet machine each thread would run for the time it waited (an upper figure for work that
    // runs on one thread; threads that wait for a preempted sibling lose more): that share of the step.
    SetSaving(f, basis, l.WaitShare() * basis.mean_step_ns(), basis.mean_step_ns(), "the step (CPU wait share)");
    f.severity = SeverityForSaving(f);
    SetFix(f, by_others || !by_self ? "quiet" : "threads");
    out.findings.push_back(std::move(f));
  }
}

}  // namespace trainrx::analyzers
