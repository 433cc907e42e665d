// Memory: the per-device figures of Metrics and memory.growth, from the allocator samples a trace
// carries (profiler/memory_counters.h). Without samples (no profile_memory, a collector that does
// not record memory) the family says nothing: no memory figure is a guess.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "families.h"
#include "trainrx/profiler/memory_counters.h"

namespace trainrx::analyzers {
namespace {

struct Sample {
  int64_t ts_ns;
  double value;
};
struct Series {
  std::vector<Sample> allocated, reserved;
  int64_t events = 0, oom_events = 0, oom_bytes = 0;
};


// The device's total memory from the rank's deviceProperties ("cuda:1" -> device id 1).
int64_t Capacity(const profiler::Trace& trace, int32_t rank, const std::string& device) {
  const profiler::RankInfo* info = trace.FindRank(rank);
  if (!info || device.rfind("cuda:", 0) != 0) return 0;
  const int32_t id = std::atoi(device.c_str() + 5);
  for (const auto& d : info->devices)
    if (d.id == id) return d.total_global_mem;
  return 0;
}

DeviceMemory Summarize(const profiler::Trace& trace, const StepModel& steps, int32_t rank, const std::string& device,
                       Series& s) {
  const auto by_time = [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; };
  std::stable_sort(s.allocated.begin(), s.allocated.end(), by_time);
  std::stable_sort(s.reserved.begin(), s.reserved.end(), by_time);
  DeviceMemory m;
  m.rank = rank;
  m.device = device;
  m.samples = s.events;
  m.capacity = Capacity(trace, rank, device);
  m.oom_events = s.oom_events;
  m.oom_request_bytes = s.oom_bytes;
  for (const auto& x : s.allocated) m.peak_allocated = std::max(m.peak_allocated, static_cast<int64_t>(x.value));
  for (const auto& x : s.reserved) m.peak_reserved = std::max(m.peak_reserved, static_cast<int64_t>(x.value));
  std::vector<int64_t> peaks;
  for (const StepRow& row : steps.steps) {
    if (row.rank != rank) continue;
    const int64_t end = row.start_ns + row.wall_ns;
    auto it = std::upper_bound(s.allocated.begin(), s.allocated.end(), Sample{row.start_ns, 0}, by_time);
    const int64_t start = it == s.allocated.begin() ? -1 : static_cast<int64_t>(std::prev(it)->value);
    int64_t peak = start;
    for (; it != s.allocated.end() && it->ts_ns < end; ++it) peak = std::max(peak, static_cast<int64_t>(it->value));
    m.step_start.push_back(start);
    m.step_peak.push_back(peak);
    if (peak >= 0) peaks.push_back(peak);
  }
  if (!peaks.empty()) {
    std::nth_element(peaks.begin(), peaks.begin() + static_cast<std::ptrdiff_t>(peaks.size() / 2), peaks.end());
    m.median_step_peak = peaks[peaks.size() / 2];
  }
  // Growth: the least-squares slope of the step starts that have a sample before them.
  std::vector<std::pair<double, double>> xy;
  for (size_t i = 0; i < m.step_start.size(); ++i)
    if (m.step_start[i] >= 0) xy.push_back({static_cast<double>(i), static_cast<double>(m.step_start[i])});
  m.growth_steps = static_cast<int64_t>(xy.size());
  for (size_t i = 1; i < xy.size(); ++i) m.increases += xy[i].second > xy[i - 1].second;
  if (xy.size() >= 2) {
    double mx = 0, my = 0;
    for (const auto& [x, y] : xy) mx += x, my += y;
    mx /= static_cast<double>(xy.size()), my /= static_cast<double>(xy.size());
    double sxy = 0, sxx = 0;
    for (const auto& [x, y] : xy) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
    m.growth_per_step = sxx > 0 ? sxy / sxx : 0;
  }
  return m;
}

// memory.growth: what is allocated when a step starts rises step after step. The classic leaks:
// tensors kept "for later" with their graph (outputs, logits, losses appended to a list), caches
// keyed by step, evaluation without no_grad accumulating `total += loss`. A one-off rise (optimizer
// state made at the first step, a cache warming up) is not growth: most step-to-step changes must
// be increases.
void FlagGrowth(const AnalysisContext& ctx, const DeviceMemory& m, Report& out) {
  const auto& th = ctx.thresholds;
  if (m.growth_steps < static_cast<int64_t>(th.Get("memory.growth.min_steps"))) return;
  if (m.growth_per_step < th.Get("memory.growth.min_bytes_per_step")) return;
  const double increase_pct = 100.0 * static_cast<double>(m.increases) / static_cast<double>(m.growth_steps - 1);
  if (increase_pct < th.Get("memory.growth.min_increase_pct")) return;
  int64_t first = -1, last = -1;
  for (int64_t v : m.step_start)
    if (v >= 0) last = v, first = first < 0 ? v : first;
  Finding f;
  f.id = "memory.growth";
  f.rank = m.rank;
  f.severity = Severity::kMedium;
  f.confidence = increase_pct >= 95 ? Confidence::kHigh : Confidence::kMedium;
  f.title = fmt::format("Allocated memory on {} grows by {} every step ({} -> {} over {} steps)", m.device,
                        BytesText(m.growth_per_step), BytesText(static_cast<double>(first)), BytesText(static_cast<double>(last)),
                        m.growth_steps);
  f.measured = m.growth_per_step;
  f.threshold = th.Get("memory.growth.min_bytes_per_step");
  f.measured_unit = "bytes per step (allocated at step start)";
  f.steps = m.growth_steps;
  f.evidence = {{"device", m.device},
                {"growth_bytes_per_step", m.growth_per_step},
                {"allocated_at_first_step_bytes", first},
                {"allocated_at_last_step_bytes", last},
                {"steps", m.growth_steps},
                {"increasing_step_changes_pct", increase_pct},
                {"peak_allocated_bytes", m.peak_allocated}};
  if (m.capacity > 0) {
    f.evidence.push_back({"capacity_bytes", m.capacity});
    const double steps_left = (static_cast<double>(m.capacity) - static_cast<double>(m.peak_allocated)) / m.growth_per_step;
    f.evidence.push_back({"steps_until_full", steps_left});
    if (steps_left < 10000) f.severity = Severity::kHigh;
  }
  f.saving_bound = "memory, not time: the run fails once the device is full";
  f.fix_python =
      "Find what outlives its step: tensors appended to a list keep their whole graph and activations "
      "(append loss.item() or t.detach().cpu()); in evaluation, wrap the loop in torch.no_grad() so "
      "`total += loss` does not keep every batch's graph; caches keyed by step or batch need a bound. In a training "
      "loop that calls backward(), `total += loss` keeps only each step's graph nodes (backward freed the "
      "activations): use `total += loss.item()`. torch.cuda.memory._record_memory_history() shows the allocation's "
      "stack.";
  f.fix_cpp = "Keep no tensor (or tensor with requires_grad history) across steps: store t.detach() or its value; "
              "evaluate under torch::NoGradGuard.";
  out.findings.push_back(std::move(f));
}

}  // namespace

std::string BytesText(double b) {
  const double a = std::abs(b);
  if (a >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

void AnalyzeMemory(const AnalysisContext& ctx, Report& out) {
  const profiler::Trace& trace = ctx.trace;
  std::map<std::pair<int32_t, std::string>, Series> series;  // (rank, device)
  for (const profiler::Counter& c : trace.counters) {
    const std::string_view name = trace.strings.Get(c.name);
    if (name.substr(0, profiler::kMemoryCounterPrefix.size()) != profiler::kMemoryCounterPrefix) continue;
    const auto id = profiler::ParseMemoryCounterName(name);
    if (!id || c.track >= trace.tracks.size()) continue;
    Series& s = series[{trace.tracks[c.track].rank, id->device}];
    switch (id->what) {
      case profiler::MemoryWhat::kAllocated:
        s.allocated.push_back({c.ts_ns, c.value});
        ++s.events;
        break;
      case profiler::MemoryWhat::kReserved: s.reserved.push_back({c.ts_ns, c.value}); break;
      case profiler::MemoryWhat::kBytes: break;
      case profiler::MemoryWhat::kOom:
        ++s.oom_events;
        s.oom_bytes = std::max(s.oom_bytes, static_cast<int64_t>(c.value));
        break;
    }
  }
  for (auto& [key, s] : series) {
    if (s.allocated.empty()) continue;
    DeviceMemory m = Summarize(trace, ctx.steps, key.first, key.second, s);
    FlagGrowth(ctx, m, out);
    out.metrics.memory.push_back(std::move(m));
  }
}

}  // namespace trainrx::analyzers
