// steps.slow: steady steps that took far longer than the median step, later in the run than the
// warm-up (steps.cc leaves out only the leading slow steps of a rank). Warm-up is at the start
// (autotuning, lazy start-up); a slow step later is something else, and the report says which
// shape it has, from the steps alone (issue 49.9: slow steps in the middle of a Hugging Face
// Trainer run on a busy machine were labelled warm-up):
//   * periodic: the slow steps recur every k steps (k >= 2, at least 3 of them): an event the loop
//     runs every k steps (logging, a checkpoint, evaluation, a gradient-accumulation boundary);
//   * a burst: consecutive slow steps (one run of them): something else took the machine for a
//     while (another process, memory pressure, a throttled CPU) or the program changed phase;
//   * scattered: isolated slow steps (GC pauses, preemption).
// The phase that grew is named: every phase slower in proportion is the CPU taken from the program
// (contention), one phase growing alone is that phase's own event (a loader stall, a sync).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <array>
#include <numeric>

#include "families.h"
#include "ops.h"

namespace trainrx::analyzers {
namespace {

struct Phase {
  const char* name;
  int64_t StepRow::*field;
};
constexpr std::array<Phase, 5> kPhases = {{{"data wait", &StepRow::data_wait_ns},
                                           {"forward", &StepRow::forward_ns},
                                           {"backward", &StepRow::backward_ns},
                                           {"optimizer", &StepRow::optimizer_ns},
                                           {"other", &StepRow::other_ns}}};

std::string Ms(double ns) { return fmt::format("{:.2f} ms", ns / 1e6); }

// "12-14" / "12" for a run of step indices.
std::string Runs(const std::vector<size_t>& idx, size_t limit = 4) {
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    if (shown++ == limit) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + (i == j ? fmt::format("{}", idx[i]) : fmt::format("{}-{}", idx[i], idx[j]));
    i = j + 1;
  }
  return out;
}

// What grew in the slow steps: each phase's mean there against its median in the others; the
// phase that grew most, and whether every phase that is a real part of a normal step (>= 5 % of the
// median step, two or more of them) at least doubled (the CPU taken from the program).
struct Growth {
  std::string phase;
  double by_ns = 0;
  bool contention = false;
};
Growth WhatGrew(const std::vector<const StepRow*>& rows, const std::vector<size_t>& slow, int64_t median) {
  Growth g;
  int stretched_phases = 0, present_phases = 0;
  for (const Phase& p : kPhases) {
    std::vector<int64_t> normal;
    double in_slow = 0;
    for (size_t i = 0, k = 0; i < rows.size(); ++i) {
      if (k < slow.size() && slow[k] == i) {
        in_slow += static_cast<double>(rows[i]->*p.field), ++k;
        continue;
      }
      normal.push_back(rows[i]->*p.field);
    }
    in_slow /= static_cast<double>(slow.size());
    const double base = normal.empty() ? 0 : static_cast<double>(Quantile(normal, 0.5));
    if (in_slow - base > g.by_ns) g.by_ns = in_slow - base, g.phase = p.name;
    if (base >= 0.05 * static_cast<double>(median)) {
      ++present_phases;
      if (in_slow >= 2 * base) ++stretched_phases;
    }
  }
  g.contention = present_phases >= 2 && stretched_phases == present_phases;
  return g;
}

// The slow steps as their names number them (ProfilerStep#64), as the evidence lists them (issue 60:
// the title said "steps 63, 127, 191", the steady steps' indices, beside ProfilerStep#64, #128,
// #192); the indices only when a name carries no number.
std::vector<size_t> StepNumbers(const std::vector<const StepRow*>& rows, const std::vector<size_t>& slow) {
  std::vector<size_t> numbers;
  for (size_t i : slow) {
    const std::string& name = rows[i]->name;
    const size_t hash = name.rfind('#');
    size_t n = 0;
    const char* first = name.data() + (hash == std::string::npos ? name.size() : hash + 1);
    const char* last = name.data() + name.size();
    if (first == last || std::from_chars(first, last, n).ptr != last) return slow;
    numbers.push_back(n);
  }
  return numbers;
}

void FlagSlowSteps(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const auto& th = ctx.thresholds;
  std::vector<const StepRow*> rows;
  for (const StepRow& s : ctx.steps.steps)
    if (s.rank == rank) rows.push_back(&s);
  std::sort(rows.begin(), rows.end(), [](const StepRow* a, const StepRow* b) { return a->start_ns < b->start_ns; });
  if (rows.size() < static_cast<size_t>(th.Get("steps.slow.min_steps"))) return;
  std::vector<int64_t> walls;
  for (const StepRow* s : rows) walls.push_back(s->wall_ns);
  const int64_t median = Quantile(walls, 0.5);
  if (median <= 0) return;
  const double ratio = th.Get("steps.slow.ratio");  // the warm-up's own test (steps.cc): 3x the median
  std::vector<size_t> slow;
  double excess = 0, total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    total += static_cast<double>(rows[i]->wall_ns);
    if (static_cast<double>(rows[i]->wall_ns) > ratio * static_cast<double>(median))
      slow.push_back(i), excess += static_cast<double>(rows[i]->wall_ns - median);
  }
  if (slow.empty() || total <= 0) return;
  const double excess_pct = 100.0 * excess / total;
  if (excess_pct < th.Get("steps.slow.min_excess_pct")) return;

  // The shape: periodic, one burst, or scattered.
  std::vector<size_t> gaps;
  for (size_t i = 1; i < slow.size(); ++i) gaps.push_back(slow[i] - slow[i - 1]);
  const bool one_run = !gaps.empty() && std::all_of(gaps.begin(), gaps.end(), [](size_t g) { return g == 1; });
  const bool periodic = slow.size() >= 3 && gaps.front() >= 2 &&
                        std::all_of(gaps.begin(), gaps.end(), [&](size_t g) { return g == gaps.front(); });
  const Growth growth = WhatGrew(rows, slow, median);
  const std::string& grew = growth.phase;
  const double grew_by = growth.by_ns;
  const bool contention = growth.contention;
  const double slow_median = [&] {
    std::vector<int64_t> w;
    for (size_t i : slow) w.push_back(rows[i]->wall_ns);
    return static_cast<double>(Quantile(w, 0.5));
  }();

  const std::vector<size_t> numbers = StepNumbers(rows, slow);
  Finding f;
  f.id = "steps.slow";
  f.rank = rank;
  f.severity = Severity::kLow;
  f.confidence = Confidence::kMedium;
  const std::string shape =
      periodic ? fmt::format("every {} steps (steps {}): an event the loop runs periodically (logging, a checkpoint, evaluation, "
                             "a gradient-accumulation boundary)",
                             gaps.front(), Runs(numbers))
      : one_run || slow.size() == 1
          ? fmt::format("in one burst (step{} {}), after the warm-up: not warm-up", slow.size() == 1 ? "" : "s", Runs(numbers))
          : fmt::format("scattered (steps {}): isolated pauses (garbage collection, preemption)", Runs(numbers));
  const std::string cause = contention
                                ? "every phase slowed in proportion: the CPU was taken from the program (another process on the machine, "
                                  "memory pressure, throttling), not its own work"
                                : fmt::format("{} grew most ({} more than in a normal step)", grew.empty() ? "no phase" : grew, Ms(grew_by));
  f.title = fmt::format("{} of {} steady steps took {:.1f}x the median step, {}; {}", slow.size(), rows.size(),
                        slow_median / static_cast<double>(median), shape, cause);
  f.measured = excess_pct;
  f.threshold = th.Get("steps.slow.min_excess_pct");
  f.measured_unit = "% of the steps' time above the median step, in the slow steps";
  f.steps = static_cast<int64_t>(rows.size());
  f.evidence = {{"slow_steps", static_cast<int64_t>(slow.size())},
                {"steps", static_cast<int64_t>(rows.size())},
                {"median_step_ns", median},
                {"slow_step_median_ns", slow_median},
                {"pattern", std::string(periodic ? "periodic" : one_run || slow.size() == 1 ? "burst" : "scattered")},
                {"phase_grown_most", grew},
                {"all_phases_slowed", std::string(contention ? "yes" : "no")}};
  if (periodic) f.evidence.push_back({"period_steps", static_cast<int64_t>(gaps.front())});
  for (size_t i = 0; i < slow.size() && i < 8; ++i) f.examples.push_back(fmt::format("{}: {}", rows[slow[i]]->name, Ms(static_cast<double>(rows[slow[i]]->wall_ns))));
  const StepBasis basis(ctx.steps, rank);
  const double per = basis.Per(excess);
  SetSaving(f, basis, per, per, "the slow steps' time above the median step");
  SetFix(f, periodic ? "periodic" : contention ? "contention" : "look");
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeStepTimes(const AnalysisContext& ctx, Report& out) {
  std::vector<int32_t> ranks;
  for (const StepRow& s : ctx.steps.steps)
    if (std::find(ranks.begin(), ranks.end(), s.rank) == ranks.end()) ranks.push_back(s.rank);
  for (int32_t rank : ranks) FlagSlowSteps(ctx, rank, out);
}

void DropSlowStepsBehindDevice(Report& report) {
  std::erase_if(report.findings, [&](const Finding& f) {
    if (f.id != "steps.slow") return false;
    return std::any_of(report.metrics.critical_paths.begin(), report.metrics.critical_paths.end(),
                       [&](const CriticalPath& p) { return p.rank == f.rank && p.DeviceBehind(); });
  });
}

}  // namespace trainrx::analyzers
