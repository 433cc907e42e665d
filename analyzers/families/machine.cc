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

#include "config_view.h"
#include "cpu_wait_series.h"
#include "families.h"
#include "trainrx/profiler/cpu_wait.h"

namespace trainrx::analyzers {

std::optional<RankCpuLoad> CpuLoadOfRank(const profiler::Trace& trace, const StepModel& steps, int32_t rank) {
  const std::optional<CpuWaitSeries> series = CpuWaitSeriesOfRank(trace, rank);
  if (!series) return std::nullopt;
  // The steady steps' span; without steps, the samples' own.
  const auto& times = series->by_key.at(profiler::CpuWaitWhat::kRun);
  int64_t begin = times.front().first, end = times.back().first, step_count = 0;
  bool any_step = false;
  for (const StepRow& s : steps.steps) {
    if (s.rank != rank) continue;
    if (!any_step) begin = s.start_ns, end = s.start_ns + s.wall_ns, any_step = true;
    begin = std::min(begin, s.start_ns);
    end = std::max(end, s.start_ns + s.wall_ns);
    ++step_count;
  }
  RankCpuLoad out;
  out.rank = rank;
  out.steps = step_count;
  out.load = series->Between(begin, end, &out.span_covered);
  // Half the steps' span at least: a figure from a sliver of the run is not the run's.
  if (!out.load.measured || out.span_covered < 0.5) return std::nullopt;
  return out;
}

void AnalyzeMachine(const AnalysisContext& ctx, Report& out) {
  const double min_pct = ctx.thresholds.Get("machine.busy.wait_pct");
  // Every rank's load first: the job's own ranks on one machine are no "other programs" to each
  // other, though /proc/stat counts their CPU time with everyone's (issue 81.8: two Gloo ranks on
  // two CPUs read "machine.busy [high]: other programs used 1.0 of the 2 CPUs").
  std::vector<RankCpuLoad> loads;
  for (int32_t rank : ctx.trace.RankIds())
    if (auto measured = CpuLoadOfRank(ctx.trace, ctx.steps, rank)) loads.push_back(std::move(*measured));
  std::vector<std::string> hosts;  // of each rank in `loads`, read once ("" unknown)
  for (const RankCpuLoad& l : loads) {
    const profiler::RankInfo* info = ctx.trace.FindRank(l.rank);
    hosts.push_back(info != nullptr ? ConfigText(*info, "hostname") : std::string());
  }
  for (size_t i = 0; i < loads.size(); ++i) {
    const RankCpuLoad& measured = loads[i];
    const int32_t rank = measured.rank;
    out.metrics.cpu_load.push_back(measured);
    const profiler::CpuLoad& l = measured.load;
    const double wait_pct = 100.0 * l.WaitShare();
    // The job's other ranks on this machine that this trace holds: the CPUs they used and wanted.
    const std::string& host = hosts[i];
    double sibling_cpus = 0, sibling_wanted = 0;
    int siblings = 0;
    for (size_t j = 0; j < loads.size(); ++j) {
      const RankCpuLoad& other = loads[j];
      if (j == i || host.empty() || hosts[j] != host) continue;
      ++siblings;
      const double children = other.load.children_ns > 0 && other.load.wall_ns > 0 ? other.load.children_ns / other.load.wall_ns : 0;
      sibling_cpus += other.load.OwnCpus() + children;
      sibling_wanted += other.load.OwnCpus() + other.load.WaitingThreads();
    }
    // Its other local ranks this trace does not hold (LOCAL_WORLD_SIZE): their CPU time cannot be
    // told from other programs'.
    const int unseen = std::max(0, static_cast<int>(ConfigView(ctx.trace, rank).LocalRanks()) - 1 - siblings);
    const double measured_others = l.OtherCpus();  // -1: unknown
    const double others = measured_others < 0 ? -1 : std::max(0.0, measured_others - sibling_cpus);
    // What the job's threads on this machine wanted: this rank's, the others' here, and each unseen
    // one taken as this one (a job's ranks run the same step).
    const double own_wanted = l.OwnCpus() + l.WaitingThreads();
    const double wanted = own_wanted * (1 + unseen) + sibling_wanted;
    // Who took the CPUs: other programs (a tenth of the CPUs or more, on average), the program's own
    // threads wanting more CPUs than there are, or both. Only with other programs on the CPUs (or
    // their use unknown) is it a busy machine (as CpuLoad::Starved, at this threshold): a program
    // whose own threads want more CPUs than there are waits on a quiet machine too (nanoGPT, default
    // threads on 2 CPUs, recorded: 11.8 %, others 0.01 CPUs); threads.oversubscribed is that rule.
    const bool by_others = profiler::OthersOnCpus(others, l.cpus);
    const bool by_self = l.cpus > 0 && wanted > l.cpus;
    if (wait_pct < min_pct || (others >= 0 && !by_others)) continue;
    std::string who;
    const bool maybe_own_ranks = by_others && unseen > 0;
    if (maybe_own_ranks)
      who = fmt::format("other processes used {:.1f} of the {:.0f} CPUs it may run on, and the job's own {} other "
                        "rank{} on this machine (LOCAL_WORLD_SIZE), not in this trace, {} among them: analyze every "
                        "rank's trace together to tell them from other programs",
                        others, l.cpus, unseen, unseen == 1 ? "" : "s", unseen == 1 ? "is" : "are");
    else if (by_others)
      who = fmt::format("other programs used {:.1f} of the {:.0f} CPUs it may run on{}{}", others, l.cpus,
                        siblings > 0 ? fmt::format(" (besides the job's own {} other rank{} here, {:.1f} CPUs)", siblings,
                                                   siblings == 1 ? "" : "s", sibling_cpus)
                                     : std::string(),
                        l.children_ns < 0 ? " (its own DataLoader workers among them, if it has any: this kernel does not list a process's children)" : "");
    if (by_self)
      who += siblings + unseen > 0
                 ? fmt::format("{}the job's threads on this machine ({} ranks{}) wanted {:.1f} CPUs of the {:.0f}",
                               who.empty() ? "" : "; ", siblings + unseen + 1,
                               unseen > 0 ? ", each one not in this trace taken as this one" : "", wanted, l.cpus)
                 : fmt::format("{}its threads wanted {:.1f} CPUs ({:.1f} running and {:.1f} waiting on average) of the {:.0f}",
                               who.empty() ? "" : "; ", wanted, l.OwnCpus(), l.WaitingThreads(), l.cpus);
    if (who.empty()) who = "who else used the CPUs could not be read here (/proc/stat)";
    const StepBasis basis(ctx.steps, rank);
    Finding f;
    f.id = "machine.busy";
    f.rank = rank;
    // Measured by the kernel, not inferred; but a verdict from under a second of steps, or with the
    // job's own unseen ranks among the "other" processes, says how little it rests on.
    constexpr double kFewSeconds = 1.0;
    const double seconds = l.wall_ns / 1e9;
    f.confidence = seconds < kFewSeconds ? Confidence::kLow : maybe_own_ranks ? Confidence::kMedium : Confidence::kHigh;
    f.title = fmt::format("The program waited for a CPU {:.0f} % of the time its threads were ready to run: {}{}", wait_pct,
                          who,
                          seconds < kFewSeconds ? fmt::format(" (measured over only {:.2f} s of its steps)", seconds)
                                                : std::string());
    f.measured = wait_pct;
    f.threshold = min_pct;
    f.measured_unit = "% of runnable time waiting for a CPU";
    f.evidence = {{"cpu_wait_pct", wait_pct},
                  {"waiting_threads_mean", l.WaitingThreads()},
                  {"own_cpus_mean", l.OwnCpus()},
                  {"other_programs_cpus_mean", others},
                  {"own_other_ranks_cpus_mean", sibling_cpus},
                  {"own_other_ranks_unseen", static_cast<int64_t>(unseen)},
                  {"cpus_allowed", l.cpus},
                  {"involuntary_switches_per_s", l.wall_ns > 0 ? l.involuntary / (l.wall_ns / 1e9) : 0},
                  {"measured_over_s", l.wall_ns / 1e9}};
    f.examples = {"every time measured in this run includes that wait: step times, phases and a fix's trials compare "
                  "the machine's load as much as the code"};
    // On a quiet machine each thread would run for the time it waited (an upper figure for work that
    // runs on one thread; threads that wait for a preempted sibling lose more): that share of the step.
    SetSaving(f, basis, l.WaitShare() * basis.mean_step_ns(), basis.mean_step_ns(), "the step (CPU wait share)");
    f.severity = SeverityForSaving(f);
    SetFix(f, (by_others && !maybe_own_ranks) || !by_self ? "quiet" : "threads");
    out.findings.push_back(std::move(f));
  }
}

}  // namespace trainrx::analyzers
