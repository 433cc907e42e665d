// RankSide: what the cross-rank analyses need of one rank (see cross_rank.h).
#include "trainrx/analyzers/cross_rank.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "collectives.h"
#include "config_view.h"
#include "rank_phases.h"
#include "model_inputs.h"
#include "shapes.h"

namespace trainrx::analyzers {

namespace {

bool IsModelEntry(std::string_view n) {
  return n == "aten::conv2d" || n == "aten::linear" || n == "aten::conv1d" || n == "aten::conv3d";
}

// "[32, 3, 16, 16]"
std::string DimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The rank's input shape (RankSide::input_shape): per step, the first conv/linear op with its
// inputs recorded; the most common (op, first input) among the steps, ties to the first seen.
void FindInputShape(const profiler::Trace& trace, int32_t rank, RankSide& side) {
  std::vector<const StepRow*> rows;
  for (const auto* list : {&side.warmup_steps, &side.steps})
    for (const StepRow& st : *list) rows.push_back(&st);
  const auto inputs = FirstInputPerStep(trace, rank, rows, [](std::string_view name, const Dims& dims) {
    return IsModelEntry(name) && !dims.empty() && !dims.front().empty();
  });
  std::vector<std::pair<std::string, int64_t>> counts;  // in order of first appearance
  for (const StepInput& in : inputs) {
    const std::string shape = std::string(trace.Name(*in.op)) + " " + DimsText(in.dims.front());
    ++side.shaped_steps;
    auto c = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == shape; });
    if (c == counts.end()) counts.emplace_back(shape, 1);
    else ++c->second;
  }
  for (const auto& [shape, n] : counts)
    if (n > side.input_shape_steps) side.input_shape = shape, side.input_shape_steps = n;
}

}  // namespace

RankSide BuildRankSide(const profiler::Trace& trace, const StepModel* steps, int32_t rank) {
  RankSide side;
  if (const profiler::RankInfo* info = trace.FindRank(rank)) side.info = *info;
  side.info.rank = rank;
  if (steps) {
    side.steps_source = steps->source;
    side.steps_have_gpu = steps->has_gpu;
    for (const auto& s : steps->steps)
      if (s.rank == rank) side.steps.push_back(s);
    for (const auto& s : steps->warmup_steps)
      if (s.rank == rank) side.warmup_steps.push_back(s);
  }
  side.gpu = CollectivesOf(trace, rank, steps, true);
  side.gloo = CollectivesOf(trace, rank, steps, false);
  // Own the names: a side outlives the trace it came from.
  for (auto* list : {&side.gpu, &side.gloo})
    for (auto& c : *list) c.name = side.Intern(c.name);
  const ConfigView cfg(trace, rank);
  side.cpu_count = cfg.Static("cpu_count").value_or(0);
  side.intra_op_threads = cfg.Max("intra_op_threads").value_or(0);
  side.local_ranks = cfg.LocalRanks();
  FindInputShape(trace, rank, side);
  return side;
}

std::vector<RankSide> BuildRankSides(const profiler::Trace& trace, const StepModel* steps,
                                     const std::vector<UnfinishedRank>& unfinished,
                                     const std::vector<RecordedWindow>& windows) {
  std::vector<RankSide> sides;
  for (int32_t rank : trace.RankIds()) {
    RankSide side = BuildRankSide(trace, steps, rank);
    for (const auto& u : unfinished)
      if (u.rank == rank) side.unfinished.push_back(u);
    for (const auto& w : windows)
      if (w.rank == rank) side.windows.push_back(w);
    sides.push_back(std::move(side));
  }
  return sides;
}

StepModel StepModelOf(const std::vector<RankSide>& sides) {
  StepModel model;
  model.source = "none";
  for (const auto& side : sides) {
    model.steps.insert(model.steps.end(), side.steps.begin(), side.steps.end());
    model.warmup_steps.insert(model.warmup_steps.end(), side.warmup_steps.begin(), side.warmup_steps.end());
    if (model.source == "none" && !side.steps.empty()) model.source = side.steps_source;
    model.has_gpu = model.has_gpu || side.steps_have_gpu;
  }
  SummarizeStepRows(model);
  return model;
}

std::vector<Finding> FoldFindings(std::vector<Finding> findings, size_t ranks) {
  // (id, knob) -> indices, in order of first appearance
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  std::vector<std::pair<std::string, std::string>> order;
  for (size_t i = 0; i < findings.size(); ++i) {
    auto& v = groups[{findings[i].id, findings[i].knob}];
    if (v.empty()) order.push_back({findings[i].id, findings[i].knob});
    v.push_back(i);
  }
  std::vector<Finding> out;
  for (const auto& key : order) {
    const auto& idx = groups[key];
    std::vector<int32_t> on;
    for (size_t i : idx) on.push_back(findings[i].rank);
    std::sort(on.begin(), on.end());
    // One finding per rank, all from ranks: the same claim seen on several ranks. Several of one
    // rank (a rule that speaks of each op or site), or whole-set ones, stay as they are.
    const bool per_rank = on.front() >= 0 && std::adjacent_find(on.begin(), on.end()) == on.end();
    if (idx.size() < 2 || !per_rank) {
      for (size_t i : idx) out.push_back(std::move(findings[i]));
      continue;
    }
    size_t best = idx.front();
    for (size_t i : idx) {
      const Finding& f = findings[i];
      const Finding& b = findings[best];
      if (f.estimated_saving_ns > b.estimated_saving_ns ||
          (f.estimated_saving_ns == b.estimated_saving_ns && f.estimated_saving_pct > b.estimated_saving_pct))
        best = i;
    }
    Finding f = std::move(findings[best]);
    f.title += fmt::format(" (found on {} of {} ranks; rank {} shown: the largest saving)", on.size(), ranks, f.rank);
    f.examples.insert(f.examples.begin(), "found on ranks " + RankList(on));
    f.evidence.push_back({"ranks_with_finding", static_cast<int64_t>(on.size())});
    out.push_back(std::move(f));
  }
  return out;
}

Report AnalyzeSides(std::vector<RankSide>& sides, const Thresholds& thresholds) {
  std::sort(sides.begin(), sides.end(), [](const RankSide& a, const RankSide& b) { return a.info.rank < b.info.rank; });
  Report report;
  // One clock per side, in the sides' order: recorded for the report (a side's times are not
  // shifted: nothing reads them across ranks after this).
  const std::vector<RankClock> clocks = EstimateRankClocks(sides);
  for (size_t i = 0; i < clocks.size(); ++i) clocks[i].RecordIn(sides[i].info);
  report.metrics.steps = StepModelOf(sides);
  std::vector<Finding> all;
  for (const auto& side : sides) {
    all.insert(all.end(), side.findings.begin(), side.findings.end());
    report.metrics.unfinished.insert(report.metrics.unfinished.end(), side.unfinished.begin(), side.unfinished.end());
    report.metrics.windows.insert(report.metrics.windows.end(), side.windows.begin(), side.windows.end());
  }
  report.findings = FoldFindings(std::move(all), sides.size());
  AnalyzeStraggler(sides, thresholds, report);
  AnalyzeRankMismatch(sides, report);
  SortFindings(report.findings);
  return report;
}

}  // namespace trainrx::analyzers
