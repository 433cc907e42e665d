// dist.rank_mismatch: data-parallel ranks that do not do the same work.
//
// Synchronous data parallelism (DDP, FSDP, our Gloo reducer) assumes every rank runs the same
// steps on equal batches. Two things break it, and both are visible across rank sides:
// - Different numbers of steps. A rank that runs out of data first leaves the others waiting at
//   their next collective (a hang or a timeout), or, under DDP's Join, doing shadow all-reduces.
//   A rank's count is compared only where it is whole: recorded to its normal end, no records
//   dropped, every rank through the same step window. A rank that did not finish (killed by a
//   watchdog while it waited) still shows how many steps the others ran.
// - Different input shapes. The first input of each step's first conv/linear op is the batch as
//   the model sees it. A rank with a larger batch makes the others wait every step; DDP averages
//   gradients over ranks, not samples, so a rank's samples weigh by its batch size. Compared only
//   where shapes are fixed (one shape in most of a rank's steps), the model entry is the same op
//   on every rank, and no rank sends point-to-point (pipeline stages see different tensors).
#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "config_view.h"
#include "families.h"
#include "rank_phases.h"
#include "runtime_names.h"
#include "trainrx/analyzers/cross_rank.h"

namespace trainrx::analyzers {
namespace {

int64_t StepCount(const RankSide& side) { return static_cast<int64_t>(side.steps.size() + side.warmup_steps.size()); }

bool DroppedRecords(const RankSide& side) {
  return std::strtoll(ConfigText(side.info, "dropped_records").c_str(), nullptr, 10) > 0;
}

// "skip 5, 10 steps"; "" when recorded whole.
std::string WindowKey(const RankSide& side) {
  std::string key;
  for (const auto& w : side.windows) key += fmt::format("skip {}, {} steps; ", w.skip, w.steps);
  return key;
}

void StepCounts(const std::vector<RankSide>& sides, Report& out) {
  // Ranks whose count says how many steps they ran: steps found, nothing dropped, one window.
  std::vector<const RankSide*> counted;
  for (const auto& side : sides)
    if (StepCount(side) > 0 && !DroppedRecords(side)) counted.push_back(&side);
  if (counted.size() < 2) return;
  for (const RankSide* side : counted)
    if (WindowKey(*side) != WindowKey(*counted.front()) || side->steps_source != counted.front()->steps_source) return;
  int64_t most = 0;
  for (const RankSide* side : counted) most = std::max(most, StepCount(*side));
  // Short: ranks that ended normally with fewer steps than another rank ran (one cut short by
  // its own end proves nothing about the others).
  std::vector<int32_t> short_ranks;
  std::map<int64_t, std::vector<int32_t>> by_count;
  for (const RankSide* side : counted) {
    by_count[StepCount(*side)].push_back(side->info.rank);
    if (StepCount(*side) < most && side->unfinished.empty()) short_ranks.push_back(side->info.rank);
  }
  if (short_ranks.empty()) return;
  Finding f;
  f.id = "dist.rank_mismatch";
  f.severity = Severity::kMedium;
  f.confidence = Confidence::kHigh;
  std::string counts;
  for (auto it = by_count.rbegin(); it != by_count.rend(); ++it)
    counts += fmt::format("{}{} step{} on rank{} {}", counts.empty() ? "" : ", ", it->first, it->first == 1 ? "" : "s",
                          it->second.size() == 1 ? "" : "s", RankList(it->second));
  f.title = fmt::format("Ranks ran different numbers of steps ({}): data-parallel ranks must run the same steps; "
                        "rank{} {} ended early (uneven data per rank?)",
                        counts, short_ranks.size() == 1 ? "" : "s", RankList(short_ranks));
  f.measured = static_cast<double>(short_ranks.size());
  f.threshold = 0;
  f.measured_unit = "ranks with fewer steps";
  f.evidence = {{"most_steps", most},
                {"ranks_with_fewer_steps", static_cast<int64_t>(short_ranks.size())},
                {"ranks_compared", static_cast<int64_t>(counted.size())},
                {"steps_source", counted.front()->steps_source}};
  for (const auto& [n, ranks] : by_count) f.examples.push_back(fmt::format("{} steps: ranks {}", n, RankList(ranks)));
  for (const RankSide* side : counted)
    if (!side->unfinished.empty())
      f.examples.push_back(fmt::format("rank {} did not end normally ({}): it was still running", side->info.rank,
                                       side->unfinished.front().end_reason));
  SetFix(f, "steps");
  out.findings.push_back(std::move(f));
}

// "aten::conv2d [32, 3, 16, 16]" -> ("aten::conv2d", "[32, 3, 16, 16]", {"32", "3", "16", "16"})
struct Shape {
  std::string op, text;
  std::vector<std::string> dims;
};
Shape SplitShape(const std::string& s) {
  Shape out;
  const size_t sp = s.find(' ');
  out.op = s.substr(0, sp);
  if (sp == std::string::npos) return out;
  out.text = s.substr(sp + 1);
  std::string cur;
  for (char ch : out.text) {
    if (ch == '[' || ch == ' ') continue;
    if (ch == ',' || ch == ']') {
      if (!cur.empty()) out.dims.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  return out;
}

void InputShapes(const std::vector<RankSide>& sides, Report& out) {
  for (const auto& side : sides)
    for (const auto& c : side.Compared())
      if (IsPointToPoint(c.name)) return;  // pipeline stages: each sees its own tensors
  // Ranks with fixed shapes: one shape in at least 60 % of the steps that had one.
  std::vector<const RankSide*> fixed;
  for (const auto& side : sides)
    if (side.HasFixedInputShape()) fixed.push_back(&side);
  if (fixed.size() < 2) return;
  std::map<std::string, std::vector<const RankSide*>> by_shape;
  for (const RankSide* side : fixed) by_shape[side->input_shape].push_back(side);
  if (by_shape.size() < 2) return;
  // The same model entry (op and rank of its input) on every rank; else these are not replicas.
  const auto first = SplitShape(fixed.front()->input_shape);
  for (const RankSide* side : fixed) {
    const auto mine = SplitShape(side->input_shape);
    if (mine.op != first.op || mine.dims.size() != first.dims.size()) return;
  }
  // The common shape: the one most ranks have (ties: the lowest rank's).
  const std::vector<const RankSide*>* common = nullptr;
  for (const RankSide* side : fixed) {
    const auto& group = by_shape[side->input_shape];
    if (common == nullptr || group.size() > common->size()) common = &group;
  }
  const auto common_dims = SplitShape(common->front()->input_shape).dims;
  std::vector<int32_t> common_ranks, odd_ranks;
  for (const RankSide* side : *common) common_ranks.push_back(side->info.rank);
  const bool gloo = !ComparesGpuCollectives(sides);
  std::vector<double> common_compute;
  for (const RankSide* side : *common) common_compute.push_back(RankMeans(*side, gloo).compute);
  const double common_median = Median(common_compute);
  // The odd rank whose compute exceeds the common ranks' the most: the others wait for it.
  const RankSide* slowest = nullptr;
  double excess = 0;
  bool batch_only = true;
  int64_t shaped_min = INT64_MAX;
  for (const RankSide* side : fixed) shaped_min = std::min(shaped_min, side->input_shape_steps);
  for (const RankSide* side : fixed) {
    if (side->input_shape == common->front()->input_shape) continue;
    odd_ranks.push_back(side->info.rank);
    const auto dims = SplitShape(side->input_shape).dims;
    for (size_t d = 1; d < dims.size(); ++d) batch_only = batch_only && dims[d] == common_dims[d];
    const double e = side->steps.empty() ? 0 : RankMeans(*side, gloo).compute - common_median;
    if (slowest == nullptr || e > excess) slowest = side, excess = e;
  }
  Finding f;
  f.id = "dist.rank_mismatch";
  f.rank = odd_ranks.size() == 1 ? odd_ranks.front() : -1;
  f.confidence = shaped_min >= 3 ? Confidence::kHigh : Confidence::kMedium;
  std::string shapes;  // the common shape first
  std::vector<std::pair<std::string, std::vector<const RankSide*>>> groups(by_shape.begin(), by_shape.end());
  std::stable_partition(groups.begin(), groups.end(), [&](const auto& g) { return g.first == common->front()->input_shape; });
  for (const auto& [shape, group] : groups) {
    std::vector<int32_t> ranks;
    for (const RankSide* side : group) ranks.push_back(side->info.rank);
    const Shape sh = SplitShape(shape);
    shapes += fmt::format("{}{} on rank{} {}", shapes.empty() ? "" : ", ", batch_only ? sh.dims.front() : sh.text,
                          ranks.size() == 1 ? "" : "s", RankList(ranks));
  }
  f.title = batch_only
                ? fmt::format("Ranks train on different batch sizes ({}, first input of {}): DDP averages gradients over "
                              "ranks, not samples, and the rank with the most samples sets every rank's pace",
                              shapes, first.op)
                : fmt::format("Ranks train on different input shapes ({}, first input of {}): data-parallel replicas "
                              "should see equal batches",
                              shapes, first.op);
  f.measured = static_cast<double>(odd_ranks.size());
  f.threshold = 0;
  f.measured_unit = "ranks with another shape";
  f.evidence = {{"common_shape", common->front()->input_shape},
                {"ranks_with_common_shape", static_cast<int64_t>(common_ranks.size())},
                {"ranks_with_other_shapes", static_cast<int64_t>(odd_ranks.size())},
                {"steps_with_shapes_min", shaped_min},
                {"method", std::string("first input of each step's first conv/linear op, most common per rank")}};
  for (const RankSide* side : fixed)
    f.examples.push_back(fmt::format("rank {}: {} in {} of {} steps with shapes", side->info.rank, side->input_shape,
                                     side->input_shape_steps, side->shaped_steps));
  // Saving: the equal split of the same inputs. Compute grows with the elements of the input
  // (from the slowest odd rank's extra compute over its extra elements); that rank, brought to the
  // mean elements of all ranks, saves its compute above the mean (none when it is at or below it).
  const auto elements = [](const RankSide* side) {
    double n = 1;
    for (const auto& d : SplitShape(side->input_shape).dims) n *= std::strtod(d.c_str(), nullptr);
    return n;
  };
  double mean_elements = 0;
  for (const RankSide* side : fixed) mean_elements += elements(side) / static_cast<double>(fixed.size());
  const double extra_elements = elements(slowest) - elements(common->front());
  const double per_element = excess > 0 && extra_elements > 0 ? excess / extra_elements : 0;
  const double saving = std::min(excess, per_element * (elements(slowest) - mean_elements));
  StepModel all_steps;
  for (const auto& side : sides) all_steps.steps.insert(all_steps.steps.end(), side.steps.begin(), side.steps.end());
  const StepBasis basis(all_steps, slowest->info.rank);
  if (saving > 0 && basis.has_steps()) {
    SetSaving(f, basis, saving, excess, fmt::format("compute time per step rank {} adds over the others", slowest->info.rank));
    f.evidence.push_back({basis.NsKey("excess_compute"), static_cast<int64_t>(excess)});
    f.evidence.push_back({"saving_method", std::string("its compute per input element, at the mean input of all ranks (an even split of the same global batch)")});
  }
  f.severity = std::max(Severity::kMedium, SeverityForSaving(f));
  SetFix(f, "shapes");
  out.findings.push_back(std::move(f));
}

}  // namespace

void AnalyzeRankMismatch(const std::vector<RankSide>& sides, Report& out) {
  if (sides.size() < 2) return;
  StepCounts(sides, out);
  InputShapes(sides, out);
}

}  // namespace trainrx::analyzers
