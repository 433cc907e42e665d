// RankSide: what the cross-rank analyses need of one rank (see cross_rank.h).
#include "trainrx/analyzers/cross_rank.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "collectives.h"
#include "config_view.h"

namespace trainrx::analyzers {

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
  return side;
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

namespace {

// "0-3, 5, 9-10": sorted ranks as ranges.
std::string RankList(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<Finding> FoldFindings(std::vector<Finding> findings, size_t ranks) {
  std::map<std::string, std::vector<size_t>> by_id;  // id -> indices, in order
  std::vector<std::string> order;
  for (size_t i = 0; i < findings.size(); ++i) {
    auto& v = by_id[findings[i].id];
    if (v.empty()) order.push_back(findings[i].id);
    v.push_back(i);
  }
  std::vector<Finding> out;
  for (const auto& id : order) {
    const auto& idx = by_id[id];
    size_t best = idx.front();
    std::vector<int32_t> on;
    for (size_t i : idx) {
      on.push_back(findings[i].rank);
      const Finding& f = findings[i];
      const Finding& b = findings[best];
      if (f.estimated_saving_ns > b.estimated_saving_ns ||
          (f.estimated_saving_ns == b.estimated_saving_ns && f.estimated_saving_pct > b.estimated_saving_pct))
        best = i;
    }
    Finding f = std::move(findings[best]);
    std::sort(on.begin(), on.end());
    on.erase(std::unique(on.begin(), on.end()), on.end());
    if (on.size() > 1) {
      f.title += fmt::format(" (found on {} of {} ranks; rank {} shown: the largest saving)", on.size(), ranks, f.rank);
      f.examples.insert(f.examples.begin(), "found on ranks " + RankList(on));
      f.evidence.push_back({"ranks_with_finding", static_cast<int64_t>(on.size())});
    }
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
  SortFindings(report.findings);
  return report;
}

}  // namespace trainrx::analyzers
