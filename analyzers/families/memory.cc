// Memory: the per-device figures of Metrics and memory.growth, from the allocator samples a trace
// carries (profiler/memory_counters.h). Without samples (no profile_memory, a collector that does
// not record memory) the family says nothing: no memory figure is a guess.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <tuple>

#include "config_view.h"
#include "families.h"
#include "ops.h"
#include "scopes.h"
#include "trainrx/analyzers/batch.h"
#include "trainrx/analyzers/mann_whitney.h"
#include "trainrx/profiler/memory_counters.h"

namespace trainrx::analyzers {
namespace {

struct Sample {
  int64_t ts_ns;
  double value;
};
// One allocation or free whose block address is known (profile_memory's "Addr", our collector's
// allocation events): what lets a free be matched to its allocation.
struct BlockEvent {
  int64_t ts_ns;
  int64_t bytes;  // > 0 allocated, < 0 freed
  double addr;
  uint32_t track;
};
struct Series {
  std::vector<Sample> allocated, reserved;
  std::vector<BlockEvent> blocks;
  std::optional<BlockEvent> pending;  // a "bytes" counter waiting for its event's "addr"
  int64_t events = 0, oom_events = 0, oom_bytes = 0;
  int64_t oom_ts = -1;
  uint32_t oom_track = 0;
  bool oom_from_mark = false;
  // From the start-up hook's CUDA marks: the device's memory (get_device_properties) and the
  // allocator's retry counter at the first and last mark.
  int64_t mark_capacity = 0;
  int64_t retries_first = -1, retries_last = 0;
  int64_t mark_peak = -1;  // the run-wide peak the last mark reported
  int64_t mark_reserved_peak = -1;  // and reserved's
};


// The device's total memory and where it came from: a GPU's from the rank's deviceProperties
// ("cuda:1" -> device id 1); the CPU's from our collector's block (the process's memory limit:
// RLIMIT_DATA/RLIMIT_AS, its cgroup, or the machine's memory). A user's figure
// (--threshold memory.capacity_bytes) stands in where the trace states none.
std::pair<int64_t, std::string> Capacity(const profiler::Trace& trace, const Thresholds& thresholds, int32_t rank, const std::string& device) {
  const profiler::RankInfo* info = trace.FindRank(rank);
  if (info && device.rfind("cuda:", 0) == 0) {
    const int32_t id = std::atoi(device.c_str() + 5);
    for (const auto& d : info->devices)
      if (d.id == id && d.total_global_mem > 0) return {d.total_global_mem, "deviceProperties"};
  }
  if (info && device == "cpu") {
    const ConfigView config(trace, rank);
    if (const auto bytes = config.Static("memory_capacity_bytes"); bytes && *bytes > 0) {
      const std::string source = ConfigText(*info, "memory_capacity_source");
      return {static_cast<int64_t>(*bytes), source.empty() ? "system memory" : source};
    }
  }
  const double given = thresholds.Get("memory.capacity_bytes");
  if (given > 0) return {static_cast<int64_t>(given), "--threshold memory.capacity_bytes"};
  return {0, ""};
}

// A capacity the user declared (record --memory-cap, --threshold memory.capacity_bytes), as
// against one the trace or the machine states.
bool DeclaredCapacity(std::string_view source) { return source == "memory cap" || source.starts_with("--threshold"); }

// The op whose allocation failed: the innermost CPU op running on `track` at `ts` (profile_memory's
// [OutOfMemory] event), or, for our start-up hook's mark (written after the exception unwound the
// ops), the last op started before it. "" when none.
std::string OpAt(const profiler::Trace& trace, uint32_t track, int64_t ts, bool running) {
  if (track >= trace.tracks.size()) return "";
  std::string_view best;
  int64_t best_ts = INT64_MIN;
  for (const profiler::Event& e : trace.TrackEvents(track)) {
    if (e.ts_ns > ts) break;
    if (e.kind == profiler::EventKind::kCpuOp && (!running || e.end_ns() >= ts) && e.ts_ns >= best_ts) best = trace.Name(e), best_ts = e.ts_ns;
  }
  if (best.empty()) return "";
  // The outermost op around it says what the program asked for ("aten::empty in aten::conv2d").
  for (const profiler::Event& e : trace.TrackEvents(track)) {
    if (e.ts_ns > best_ts) break;
    if (e.kind == profiler::EventKind::kCpuOp && e.end_ns() >= best_ts && e.ts_ns < best_ts)
      return fmt::format("{} in {}", best, trace.Name(e));
  }
  return std::string(best);
}

// "trainrx::out_of_memory cuda:0 2147483648" (the start-up hook's mark of an uncaught
// out-of-memory error) -> (device, bytes asked).
// "trainrx::cuda_memory cuda:0 allocated=1 reserved=2 peak=3 retries=0 ooms=0 capacity=4" (the
// start-up hook's CUDA caching allocator figures after an optimizer step) -> device and figures.
struct CudaMark {
  std::string device;
  std::map<std::string, int64_t, std::less<>> figures;
};
std::optional<CudaMark> CudaMemoryMark(std::string_view name) {
  constexpr std::string_view kMark = "trainrx::cuda_memory ";
  if (!name.starts_with(kMark)) return std::nullopt;
  name.remove_prefix(kMark.size());
  CudaMark mark;
  size_t at = 0;
  while (at < name.size()) {
    size_t end = name.find(' ', at);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view word = name.substr(at, end - at);
    if (mark.device.empty()) mark.device = std::string(word);
    else if (const size_t eq = word.find('='); eq != std::string_view::npos)
      mark.figures[std::string(word.substr(0, eq))] = std::atoll(std::string(word.substr(eq + 1)).c_str());
    at = end + 1;
  }
  if (mark.device.rfind("cuda:", 0) != 0 || !mark.figures.count("allocated")) return std::nullopt;
  return mark;
}

std::optional<std::pair<std::string, int64_t>> OomMark(std::string_view name) {
  constexpr std::string_view kMark = "trainrx::out_of_memory ";
  if (!name.starts_with(kMark)) return std::nullopt;
  name.remove_prefix(kMark.size());
  const size_t space = name.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  return std::pair{std::string(name.substr(0, space)), std::atoll(std::string(name.substr(space + 1)).c_str())};
}

// The start times of the rank's CPU operators, sorted: what separates a heap sample from a step's
// start (Summarize).
std::vector<int64_t> OpStarts(const profiler::Trace& trace, int32_t rank) {
  std::vector<int64_t> out;
  for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
    if (trace.tracks[t].rank != rank || trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
    for (const profiler::Event& e : trace.TrackEvents(t))
      if (e.kind == profiler::EventKind::kCpuOp) out.push_back(e.ts_ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The median (ops.h's nearest-rank quantile); -1 for none: "no sample", as the figures say it.
int64_t Median(std::vector<int64_t> v) { return v.empty() ? -1 : Quantile(v, 0.5); }

// Reserved memory given back inside a step (a fall between two of the step's samples, `reserved`
// sorted by time): the steps that gave some back, and the bytes a step on average.
void CountReleases(const StepModel& steps, int32_t rank, const std::vector<Sample>& reserved, DeviceMemory& m) {
  double released = 0;
  for (const StepRow& row : steps.steps) {
    if (row.rank != rank || reserved.empty()) continue;
    const int64_t end = row.start_ns + row.wall_ns;
    auto it = std::upper_bound(reserved.begin(), reserved.end(), Sample{row.start_ns, 0},
                               [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; });
    double prev = it == reserved.begin() ? -1 : std::prev(it)->value;
    bool fell = false;
    for (; it != reserved.end() && it->ts_ns < end; ++it) {
      if (prev >= 0 && it->value < prev) fell = true, released += prev - it->value;
      prev = it->value;
    }
    m.release_steps += fell;
  }
  if (!m.step_start.empty()) m.released_bytes_per_step = released / static_cast<double>(m.step_start.size());
}

DeviceMemory Summarize(const profiler::Trace& trace, const StepModel& steps, const Thresholds& thresholds, int32_t rank, const std::string& device, Series& s) {
  const auto by_time = [](const Sample& a, const Sample& b) { return a.ts_ns < b.ts_ns; };
  std::stable_sort(s.allocated.begin(), s.allocated.end(), by_time);
  std::stable_sort(s.reserved.begin(), s.reserved.end(), by_time);
  DeviceMemory m;
  m.rank = rank;
  m.device = device;
  m.samples = s.events;
  std::tie(m.capacity, m.capacity_source) = Capacity(trace, thresholds, rank, device);
  if (m.capacity == 0 && s.mark_capacity > 0) m.capacity = s.mark_capacity, m.capacity_source = "torch.cuda.get_device_properties";
  m.alloc_retries = s.retries_first < 0 ? 0 : s.retries_last - s.retries_first;
  m.oom_events = s.oom_events;
  m.oom_request_bytes = s.oom_bytes;
  m.oom_ts_ns = s.oom_ts;
  if (s.oom_events > 0) m.oom_op = OpAt(trace, s.oom_track, s.oom_ts, !s.oom_from_mark);
  for (const auto& x : s.allocated) m.peak_allocated = std::max(m.peak_allocated, static_cast<int64_t>(x.value));
  for (const auto& x : s.reserved) {
    if (static_cast<int64_t>(x.value) <= m.peak_reserved) continue;
    m.peak_reserved = static_cast<int64_t>(x.value);
    // profile_memory writes both totals on one event: the allocated sample of the same moment.
    auto it = std::upper_bound(s.allocated.begin(), s.allocated.end(), x, by_time);
    m.allocated_at_peak_reserved = it == s.allocated.begin() ? -1 : static_cast<int64_t>(std::prev(it)->value);
  }
  std::vector<int64_t> peaks, counts;
  // A sampled series (heap samples at step boundaries, the CUDA marks at step ends: no allocation
  // events, which say every change) tells a step's start only from a sample taken at that start
  // (within max(2 ms, 5 % of the step), before it or a moment after):
  // the last sample before it can be the previous step's peak, when the boundary's own sample is
  // missing (the collector skips it while a journal flush builds its buffers, and a flusher starved
  // of CPU on 2 busy cores held three boundaries of pytorch/examples imagenet: their "starts" read
  // as the 515 MB peak, a 65 kB-a-step leak that the flat 207.5 MB of the steps before did not show).
  // An earlier sample still tells the start when no operator ran between it and the start (issue
  // 81.6): a script that marks its own steps (ProfilerStep of a torch.profiler schedule,
  // record_function markers) starts them a while after the optimizer step's sample, 2 ms quiet and
  // 130 ms beside another program, where every step lost its start and a 128 KiB-a-step leak its
  // finding. Nothing ran there, so nothing was allocated there.
  const bool sampled = s.blocks.empty();
  std::optional<std::vector<int64_t>> op_starts;  // made on first need
  const auto op_between = [&](int64_t from, int64_t to) {
    if (!op_starts) op_starts = OpStarts(trace, rank);
    const auto first = std::upper_bound(op_starts->begin(), op_starts->end(), from);
    return first != op_starts->end() && *first < to;
  };
  for (const StepRow& row : steps.steps) {
    if (row.rank != rank) continue;
    const int64_t end = row.start_ns + row.wall_ns;
    auto it = std::upper_bound(s.allocated.begin(), s.allocated.end(), Sample{row.start_ns, 0}, by_time);
    int64_t start = it == s.allocated.begin() ? -1 : static_cast<int64_t>(std::prev(it)->value);
    if (sampled) {  // the boundary's sample: just before the start, else written a moment after it
      const int64_t tol = std::max<int64_t>(2'000'000, row.wall_ns / 20);
      if (start >= 0 && row.start_ns - std::prev(it)->ts_ns > tol && op_between(std::prev(it)->ts_ns, row.start_ns)) start = -1;
      if (start < 0 && it != s.allocated.end() && it->ts_ns - row.start_ns <= tol) start = static_cast<int64_t>(it->value);
    }
    int64_t peak = start;
    int64_t inside = 0;
    for (; it != s.allocated.end() && it->ts_ns < end; ++it) peak = std::max(peak, static_cast<int64_t>(it->value)), ++inside;
    counts.push_back(inside);
    m.step_start.push_back(start);
    m.step_peak.push_back(peak);
    if (peak >= 0) peaks.push_back(peak);
  }
  m.median_step_peak = Median(peaks);
  m.median_step_samples = std::max<int64_t>(0, Median(counts));
  CountReleases(steps, rank, s.reserved, m);
  // Growth: the Theil-Sen slope of the step starts that have a sample before them (GrowthOf).
  const StepGrowth g = GrowthOf(m.step_start);
  m.growth_per_step = g.per_step, m.growth_steps = g.steps, m.increases = g.increases;
  return m;
}

// How many samples a step could hold: memory per sample from the median step's rise above its
// start (activations and what the step makes; what is resident at the start, parameters, gradients,
// optimizer state, stays), against `usable_pct` of the capacity. Never a figure no batch could reach
// (issue 49.10): a rise smaller than one sample of the step's input (the heap sampled at boundaries
// misses the activations) gives no per-sample size; and on a CPU the machine's memory is no
// capacity to fill with a batch: only a declared one (record --memory-cap, --threshold
// memory.capacity_bytes) gives a headroom.
void Headroom(const AnalysisContext& ctx, const BatchEstimate& batch, DeviceMemory& m) {
  // The step's peak holds one micro-batch's activations (gradient accumulation runs its forwards
  // one after another): the samples of one forward.
  const int64_t samples = batch.micro_steps > 1 ? batch.micro_batch : batch.samples;
  if (samples <= 0) return;
  m.micro_steps = batch.micro_steps;
  std::vector<int64_t> rises, starts;
  for (size_t i = 0; i < m.step_start.size(); ++i)
    if (m.step_start[i] >= 0 && m.step_peak[i] >= 0) rises.push_back(m.step_peak[i] - m.step_start[i]), starts.push_back(m.step_start[i]);
  const int64_t rise = Median(rises), start = Median(starts);
  m.samples_per_step = samples;
  if (rise <= 0) return;  // no sample inside the steps: the rise is not seen
  const double per_sample = static_cast<double>(rise) / static_cast<double>(samples);
  if (per_sample < static_cast<double>(batch.sample_elements)) return;  // less than a byte per input element: not seen
  m.bytes_per_sample = per_sample;
  if (m.capacity <= 0) return;
  if (m.device == "cpu" && !DeclaredCapacity(m.capacity_source)) return;
  const double usable = ctx.thresholds.Get("batch.small.usable_pct") / 100.0 * static_cast<double>(m.capacity) - static_cast<double>(start);
  m.fits_samples = usable > 0 ? static_cast<int64_t>(usable / m.bytes_per_sample) : 0;
}

// Where growth is allocated: blocks allocated inside a step and never freed before the recording
// ended (or the last step did), grouped by the op that allocated them (the innermost CPU op running at the allocation, and
// its outermost op: "aten::empty_like in aten::mse_loss"). Only blocks of the steps before the last
// two count (a block of the last steps may be freed after the recording ended), and a site must
// leave blocks behind in at least half of those steps: a one-off block (optimizer state made at the
// first step, gradients allocated once) is not growth. Needs block addresses: without them (heap
// samples, a trace without profile_memory) there is no site.
struct GrowthSite {
  std::string site;
  double bytes_per_step = 0;
  double blocks_per_step = 0;
  int64_t steps_seen = 0;
};
std::vector<GrowthSite> GrowthSites(const AnalysisContext& ctx, int32_t rank, std::vector<BlockEvent> blocks) {
  const profiler::Trace& trace = ctx.trace;
  std::vector<std::pair<int64_t, int64_t>> steps;  // [start, end) of this rank's steps
  for (const StepRow& row : ctx.steps.steps)
    if (row.rank == rank) steps.push_back({row.start_ns, row.start_ns + row.wall_ns});
  if (steps.size() < 4 || blocks.empty()) return {};
  std::stable_sort(blocks.begin(), blocks.end(), [](const BlockEvent& a, const BlockEvent& b) { return a.ts_ns < b.ts_ns; });
  std::unordered_map<double, size_t> live;  // address -> allocation's index in blocks
  // Frees after the last step are the program's teardown (a recording that runs to the exit sees
  // the interpreter free what was kept): what the steps left behind is what lives at their end.
  const int64_t steps_end = steps.back().second;
  for (size_t i = 0; i < blocks.size() && blocks[i].ts_ns < steps_end; ++i) {
    if (blocks[i].bytes > 0) live[blocks[i].addr] = i;
    else if (blocks[i].bytes < 0) live.erase(blocks[i].addr);
  }
  const size_t counted = steps.size() - 2;  // steps whose blocks had time to be freed
  struct Survivor {
    uint32_t track;
    int64_t ts_ns;
    int64_t bytes;
    size_t step;
  };
  std::vector<Survivor> survivors;
  for (const auto& [addr, i] : live) {
    const BlockEvent& b = blocks[i];
    auto it = std::upper_bound(steps.begin(), steps.end(), std::pair<int64_t, int64_t>{b.ts_ns, INT64_MAX});
    if (it == steps.begin()) continue;
    const size_t k = static_cast<size_t>(std::prev(it) - steps.begin());
    if (k >= counted || b.ts_ns >= steps[k].second) continue;
    survivors.push_back({b.track, b.ts_ns, b.bytes, k});
  }
  if (survivors.empty()) return {};
  std::sort(survivors.begin(), survivors.end(),
            [](const Survivor& a, const Survivor& b) { return std::tie(a.track, a.ts_ns) < std::tie(b.track, b.ts_ns); });
  // One sweep per track: the ops open at each survivor's allocation.
  struct Acc {
    std::set<std::string> modules;
    int64_t bytes = 0, blocks = 0;
    std::set<size_t> steps;
  };
  std::map<std::string, Acc> by_site;
  size_t s = 0;
  while (s < survivors.size()) {
    const uint32_t track = survivors[s].track;
    std::vector<const profiler::Event*> open;
    const auto events = track < trace.tracks.size() ? trace.TrackEvents(track) : std::span<const profiler::Event>{};
    size_t e = 0;
    for (; s < survivors.size() && survivors[s].track == track; ++s) {
      const Survivor& v = survivors[s];
      for (; e < events.size() && events[e].ts_ns <= v.ts_ns; ++e)
        if (events[e].kind == profiler::EventKind::kCpuOp) open.push_back(&events[e]);
      // Ops that ended before the allocation leave (the stack is kept in start order).
      std::erase_if(open, [&](const profiler::Event* o) { return o->end_ns() < v.ts_ns; });
      std::string site = "outside any op";
      if (!open.empty()) {
        const std::string_view inner = trace.Name(*open.back());
        site = open.size() > 1 ? fmt::format("{} in {}", inner, trace.Name(*open.front())) : std::string(inner);
      }
      Acc& a = by_site[site];
      a.bytes += v.bytes, ++a.blocks, a.steps.insert(v.step);
      // Module ranges cover only the first model calls (the start-up hook's): the modules seen there.
      if (const std::string_view module = ctx.modules.Of(v.track, v.ts_ns, v.ts_ns); !module.empty() && a.modules.size() < 4)
        a.modules.insert(std::string(module));
    }
  }
  std::vector<GrowthSite> out;
  for (const auto& [site, a] : by_site) {
    if (2 * a.steps.size() < counted) continue;
    out.push_back({a.modules.empty() ? site : fmt::format("{} ({})", site, fmt::join(a.modules, ", ")), static_cast<double>(a.bytes) / static_cast<double>(counted),
                   static_cast<double>(a.blocks) / static_cast<double>(counted), static_cast<int64_t>(a.steps.size())});
  }
  std::sort(out.begin(), out.end(), [](const GrowthSite& a, const GrowthSite& b) { return a.bytes_per_step > b.bytes_per_step; });
  return out;
}

// memory.growth: what is allocated when a step starts rises step after step. The classic leaks:
// tensors kept "for later" with their graph (outputs, logits, losses appended to a list), caches
// keyed by step, evaluation without no_grad accumulating `total += loss`. Decided by consistency and
// by what the rise means, never by an absolute floor (a 128 kB-a-step leak is a leak; issue 49.2):
//   * consistent: most step-to-step changes are increases (a one-off rise, optimizer state made at
//     the first step or a cache warming up, is not growth), and the rise is a trend over the steps'
//     order (Mann-Kendall, one-sided): noise that happens to drift is not;
//   * it matters: the recording's rise is a real share of what was allocated at its start, or the
//     capacity is full within a run's length of steps at this rate.
void FlagGrowth(const AnalysisContext& ctx, const DeviceMemory& m, const std::vector<BlockEvent>& blocks, Report& out) {
  const auto& th = ctx.thresholds;
  if (m.growth_steps < static_cast<int64_t>(th.Get("memory.growth.min_steps")) || m.growth_per_step <= 0) return;
  const double increase_pct = 100.0 * static_cast<double>(m.increases) / static_cast<double>(m.growth_steps - 1);
  if (increase_pct < th.Get("memory.growth.min_increase_pct")) return;
  std::vector<double> series;
  for (int64_t v : m.step_start)
    if (v >= 0) series.push_back(static_cast<double>(v));
  const double trend_p = MannKendallP(series);
  if (trend_p > th.Get("memory.growth.max_p")) return;
  const double rise = m.growth_per_step * static_cast<double>(m.growth_steps - 1);
  const double rise_pct = 100.0 * rise / std::max(1.0, series.front());
  const double steps_left = m.capacity > 0 ? (static_cast<double>(m.capacity) - static_cast<double>(m.peak_allocated)) / m.growth_per_step : -1;
  const bool fills = steps_left >= 0 && steps_left <= th.Get("memory.growth.max_steps_to_full");
  if (rise_pct < th.Get("memory.growth.min_rise_pct") && !fills) return;
  int64_t first = -1, last = -1;
  for (int64_t v : m.step_start)
    if (v >= 0) last = v, first = first < 0 ? v : first;
  Finding f;
  f.id = "memory.growth";
  f.rank = m.rank;
  f.severity = Severity::kMedium;
  f.confidence = increase_pct >= 95 ? Confidence::kHigh : Confidence::kMedium;
  f.title = fmt::format("Allocated memory on {} grows by {} every step ({} -> {} over {} steps{})", m.device,
                        BytesText(m.growth_per_step), BytesText(static_cast<double>(first)), BytesText(static_cast<double>(last)),
                        m.growth_steps,
                        steps_left >= 0 ? fmt::format("; its {} full in about {:.0f} more steps", BytesText(static_cast<double>(m.capacity)), steps_left)
                                        : std::string());
  if (rise_pct >= th.Get("memory.growth.min_rise_pct")) {
    f.measured = rise_pct;
    f.threshold = th.Get("memory.growth.min_rise_pct");
    f.measured_unit = "% rise of allocated memory at step start over the recording";
  } else {  // a small share of a large process, but the capacity fills at this rate within a run
    f.measured = steps_left;
    f.threshold = th.Get("memory.growth.max_steps_to_full");
    f.measured_unit = "steps until the capacity is full at this rate";
  }
  f.steps = m.growth_steps;
  f.evidence = {{"device", m.device},
                {"growth_bytes_per_step", m.growth_per_step},
                {"allocated_at_first_step_bytes", first},
                {"allocated_at_last_step_bytes", last},
                {"steps", m.growth_steps},
                {"rise_over_recording_pct", rise_pct},
                {"increasing_step_changes_pct", increase_pct},
                {"trend_p", trend_p},
                {"peak_allocated_bytes", m.peak_allocated}};
  if (m.capacity > 0) {
    f.evidence.push_back({"capacity_bytes", m.capacity});
    f.evidence.push_back({"capacity_source", m.capacity_source});
    f.evidence.push_back({"steps_until_full", steps_left});
    if (steps_left < 10000) f.severity = Severity::kHigh;
  }
  const std::vector<GrowthSite> sites = GrowthSites(ctx, m.rank, blocks);
  std::string where;
  for (size_t i = 0; i < sites.size() && i < 3; ++i) {
    const std::string k = i == 0 ? "allocated_in" : fmt::format("allocated_in_{}", i + 1);
    f.evidence.push_back({k, sites[i].site});
    f.evidence.push_back({k + "_bytes_per_step", sites[i].bytes_per_step});
    f.evidence.push_back({k + "_blocks_per_step", sites[i].blocks_per_step});
    where += fmt::format("{}{} ({} a step)", i == 0 ? "" : ", ", sites[i].site, BytesText(sites[i].bytes_per_step));
  }
  if (!sites.empty()) {
    f.title += fmt::format("; blocks never freed are allocated in {}", where);
    f.confidence = Confidence::kHigh;
  } else if (blocks.empty()) {
    f.evidence.push_back({"allocation_sites", std::string("not recorded: record with --memory-events (or torch.profiler "
                                                          "profile_memory=True) to name the op that allocates what stays")});
  }
  f.saving_bound = "memory, not time: the run fails once the device is full";
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// memory.fragmentation: the caching allocator holds far more than is allocated at its peak, on a
// device that is nearly full. The difference is cached free blocks, split so that a large request
// fits none of them: the allocator then frees its whole cache and retries cudaMalloc (a stall of
// the step, seen as reserved falling inside steps), and fails sooner than the allocated figure says.
// Reserved far above allocated on a device with room to spare is only a cache: not flagged.
void FlagFragmentation(const AnalysisContext& ctx, const DeviceMemory& m, Report& out) {
  const auto& th = ctx.thresholds;
  if (m.capacity <= 0 || m.peak_reserved <= 0 || m.allocated_at_peak_reserved < 0) return;
  const double waste = static_cast<double>(m.peak_reserved - m.allocated_at_peak_reserved);
  const double waste_pct = 100.0 * waste / static_cast<double>(m.peak_reserved);
  const double reserved_pct = 100.0 * static_cast<double>(m.peak_reserved) / static_cast<double>(m.capacity);
  // The allocator's own word (our CUDA marks): a retry is a cudaMalloc that failed, the cache freed
  // and the request tried again: fragmentation that already stalls steps.
  const bool retried = m.alloc_retries >= th.Get("memory.fragmentation.min_retries");
  if (!retried &&
      (waste_pct < th.Get("memory.fragmentation.min_waste_pct") || reserved_pct < th.Get("memory.fragmentation.min_reserved_pct")))
    return;
  Finding f;
  f.id = "memory.fragmentation";
  f.rank = m.rank;
  f.severity = reserved_pct >= 95 || m.release_steps > 0 || retried ? Severity::kHigh : Severity::kMedium;
  f.confidence = retried ? Confidence::kHigh : Confidence::kMedium;  // else totals only, not the allocator's blocks
  if (retried)
    f.title = fmt::format("The CUDA caching allocator on {} retried {} allocation{} (freed its cache and called cudaMalloc again); "
                          "reserved {} of {}, {} allocated then", m.device, m.alloc_retries, m.alloc_retries == 1 ? "" : "s",
                          BytesText(static_cast<double>(m.peak_reserved)), BytesText(static_cast<double>(m.capacity)),
                          BytesText(static_cast<double>(m.allocated_at_peak_reserved)));
  else f.title = fmt::format("{} reserves {} ({:.0f} % of its {}) while {} is allocated: {} ({:.0f} %) is cached or fragmented",
                        m.device, BytesText(static_cast<double>(m.peak_reserved)), reserved_pct,
                        BytesText(static_cast<double>(m.capacity)), BytesText(static_cast<double>(m.allocated_at_peak_reserved)),
                        BytesText(waste), waste_pct);
  f.measured = waste_pct;
  f.threshold = th.Get("memory.fragmentation.min_waste_pct");
  f.measured_unit = "% of reserved not allocated, at reserved's peak";
  f.evidence = {{"device", m.device},
                {"peak_reserved_bytes", m.peak_reserved},
                {"allocated_at_peak_reserved_bytes", m.allocated_at_peak_reserved},
                {"capacity_bytes", m.capacity},
                {"reserved_pct_of_capacity", reserved_pct},
                {"steps_with_reserved_released", m.release_steps},
                {"allocator_retries", m.alloc_retries}};
  f.saving_bound = fmt::format("memory, not time: {} the allocator holds without using it", BytesText(waste));
  SetFix(f);
  out.findings.push_back(std::move(f));
}

// A call of torch.cuda.empty_cache(): our start-up hook's range, or the Python frame of a
// with_stack trace ("torch/cuda/memory.py(222): empty_cache").
bool IsEmptyCacheCall(const profiler::Trace& trace, const profiler::Event& e) {
  if (e.kind == profiler::EventKind::kUserAnnotation) return trace.Name(e) == "torch.cuda.empty_cache";
  if (e.kind != profiler::EventKind::kPythonFunction) return false;
  const std::string_view name = trace.Name(e);
  return name.ends_with(": empty_cache") && name.find("memory.py") != std::string_view::npos;
}

// Whether the rank has device work (kernels, copies, runtime calls) in the trace: a GPU run.
bool HasDeviceWork(const profiler::Trace& trace, int32_t rank) {
  for (uint32_t t = 0; t < trace.tracks.size(); ++t)
    if (trace.tracks[t].rank == rank && trace.tracks[t].kind == profiler::TrackKind::kGpuStream && !trace.TrackEvents(t).empty()) return true;
  for (uint32_t t : TracksOf(trace, rank, profiler::TrackKind::kCpuThread))
    for (const profiler::Event& e : trace.TrackEvents(t))
      if (e.kind == profiler::EventKind::kCudaRuntime) return true;
  return false;
}

bool IsDeviceMallocOrFree(std::string_view name) {
  return name == "cudaMalloc" || name == "cudaFree" || name == "hipMalloc" || name == "hipFree";
}

// memory.empty_cache: torch.cuda.empty_cache() inside the training loop (seed articles recommend it
// "to free memory"). Each call synchronizes the device and hands the allocator's free segments back
// to the driver; the next step pays cudaMalloc for them again. Seen as the call in most steps, or,
// on a trace with profile_memory, as reserved memory falling inside most steps (then possibly the
// allocator's own retries: the evidence says which was seen).
// The empty_cache calls in a rank's steps (one per call: our range inside the Python frame is the
// same call), the steps with one, the user's line of each, and the device mallocs and frees there.
struct EmptyCacheCalls {
  int64_t calls = 0, call_ns = 0, malloc_calls = 0, malloc_ns = 0;
  std::set<int64_t> steps_with_call;
  std::map<std::string, int64_t> sites;  // the user's line of each counted call (issue 49.12)
};
EmptyCacheCalls CountEmptyCache(const profiler::Trace& trace, int32_t rank, const StepWindows& windows) {
  EmptyCacheCalls c;
  auto& [calls, call_ns, malloc_calls, malloc_ns, steps_with_call, sites] = c;
  for (uint32_t t : TracksOf(trace, rank, profiler::TrackKind::kCpuThread)) {
    int64_t covered_until = INT64_MIN;  // our range inside the Python frame is one call
    CallSites frames(trace);
    for (const profiler::Event& e : trace.TrackEvents(t)) {
      if (e.kind == profiler::EventKind::kCudaRuntime && IsDeviceMallocOrFree(trace.Name(e))) {
        if (windows.Index(e.ts_ns) >= 0) ++malloc_calls, malloc_ns += e.dur_ns;
        continue;
      }
      const bool frame = frames.Visit(e);
      if (e.ts_ns < covered_until || !IsEmptyCacheCall(trace, e)) continue;
      const int64_t step = windows.Index(e.ts_ns);
      if (step < 0) continue;
      covered_until = e.end_ns();
      ++calls, call_ns += e.dur_ns;
      steps_with_call.insert(step);
      // with_stack's own frame of the call is the innermost: the user's line is the one around it.
      if (const std::string_view site = frames.UserSite(); !site.empty() && !(frame && site == CallSiteText(trace, e)))
        ++sites[std::string(site)];
    }
  }
  return c;
}

void FlagEmptyCache(const AnalysisContext& ctx, int32_t rank, Report& out) {
  const StepBasis basis(ctx.steps, rank);
  if (!basis.has_steps()) return;  // a call outside a training loop is not this finding
  const profiler::Trace& trace = ctx.trace;
  const StepWindows windows(ctx.steps, rank);
  const EmptyCacheCalls counted = CountEmptyCache(trace, rank, windows);
  const auto& [calls, call_ns, malloc_calls, malloc_ns, steps_with_call, sites] = counted;
  const DeviceMemory* released = nullptr;
  for (const DeviceMemory& m : out.metrics.memory)
    if (m.rank == rank && m.release_steps > 0 && (!released || m.release_steps > released->release_steps)) released = &m;
  const double steps = static_cast<double>(basis.steps());
  const double call_pct = 100.0 * static_cast<double>(steps_with_call.size()) / steps;
  const double release_pct = released ? 100.0 * static_cast<double>(released->release_steps) / steps : 0;
  const double min_pct = ctx.thresholds.Get("memory.empty_cache.min_step_pct");
  if (call_pct < min_pct && release_pct < min_pct) return;
  Finding f;
  f.id = "memory.empty_cache";
  f.rank = rank;
  f.steps = basis.steps();
  f.measured = std::max(call_pct, release_pct);
  f.threshold = min_pct;
  f.measured_unit = "% of steps";
  if (call_pct >= min_pct) {
    f.confidence = Confidence::kHigh;
    f.title = fmt::format("torch.cuda.empty_cache() is called in {} of {} steps ({:.1f} calls per step)", steps_with_call.size(),
                          basis.steps(), basis.Per(static_cast<double>(calls)));
  } else {
    f.confidence = Confidence::kMedium;
    f.title = fmt::format("Reserved memory on {} is given back to the device in {} of {} steps ({} a step): "
                          "torch.cuda.empty_cache() or the allocator's retries",
                          released->device, released->release_steps, basis.steps(), BytesText(released->released_bytes_per_step));
  }
  f.evidence = {{"steps_with_call", static_cast<int64_t>(steps_with_call.size())},
                {basis.Key("calls"), basis.Per(static_cast<double>(calls))},
                {basis.NsKey("call_time"), basis.Per(static_cast<double>(call_ns))},
                {basis.Key("device_malloc_free_calls"), basis.Per(static_cast<double>(malloc_calls))},
                {basis.NsKey("device_malloc_free_time"), basis.Per(static_cast<double>(malloc_ns))}};
  for (const auto& [site, n] : sites) f.examples.push_back(fmt::format("{} x torch.cuda.empty_cache() from {}", n, site));
  if (released) {
    f.evidence.push_back({"device", released->device});
    f.evidence.push_back({"steps_with_reserved_released", released->release_steps});
    f.evidence.push_back({"released_bytes_per_step", released->released_bytes_per_step});
  }
  // No device allocator in the trace (a CPU run): the call does nothing here, so nothing is saved
  // here either (issue 49.6: a CPU-only timm trace got GPU advice ranked as a problem). Said at
  // info level for the run on a GPU, with no saving.
  const bool cpu_only = malloc_calls == 0 && !released && !HasDeviceWork(trace, rank);
  if (cpu_only) {
    f.severity = Severity::kInfo;
    f.title += ": a no-op on this CPU run, a cost once it runs on a GPU";
    f.saving_bound = "none on this CPU run: the call does nothing without a device allocator";
    f.examples.push_back("no device allocator here (a CPU run): the call does nothing now; on a GPU each call returns the "
                         "cache to the driver and the next step allocates it again");
  } else {
    const double cost = basis.Per(static_cast<double>(call_ns + malloc_ns));
    SetSaving(f, basis, cost, cost, "time in the calls and in cudaMalloc/cudaFree inside the steps");
    f.severity = std::max(SeverityForSaving(f), Severity::kLow);
  }
  SetFix(f);
  out.findings.push_back(std::move(f));
}

}  // namespace

StepGrowth GrowthOf(const std::vector<int64_t>& per_step) {
  StepGrowth g;
  std::vector<std::pair<double, double>> xy;
  for (size_t i = 0; i < per_step.size(); ++i)
    if (per_step[i] >= 0) xy.push_back({static_cast<double>(i), static_cast<double>(per_step[i])});
  g.steps = static_cast<int64_t>(xy.size());
  for (size_t i = 1; i < xy.size(); ++i) g.increases += xy[i].second > xy[i - 1].second;
  if (xy.size() < 2) return g;
  // Theil-Sen: the median of the slopes of all pairs. A one-off jump (optimizer state made at the
  // first step: +21.7 MB for minGPT's AdamW) moves a least-squares slope by about 6 x jump / n^2
  // per step (627 kB "a step" over 14 steps of a program whose steps then grow by 7 kB, issue
  // 49.5); it moves the median of the pairwise slopes by nothing. A steady leak is the same either
  // way. Past 400 values every k-th is used (at most ~80 000 pairs).
  std::vector<std::pair<double, double>> pts;
  const size_t stride = (xy.size() + 399) / 400;
  for (size_t i = 0; i < xy.size(); i += stride) pts.push_back(xy[i]);
  std::vector<double> slopes;
  slopes.reserve(pts.size() * (pts.size() - 1) / 2);
  for (size_t i = 0; i < pts.size(); ++i)
    for (size_t j = i + 1; j < pts.size(); ++j) slopes.push_back((pts[j].second - pts[i].second) / (pts[j].first - pts[i].first));
  if (slopes.empty()) return g;
  const size_t mid = slopes.size() / 2;
  std::nth_element(slopes.begin(), slopes.begin() + static_cast<std::ptrdiff_t>(mid), slopes.end());
  g.per_step = slopes[mid];
  if (slopes.size() % 2 == 0) g.per_step = 0.5 * (g.per_step + *std::max_element(slopes.begin(), slopes.begin() + static_cast<std::ptrdiff_t>(mid)));
  return g;
}

// batch.small: the device is underused (the GPU idles or waits on launches: gpu.idle,
// gpu.launch_bound) while the step's peak leaves most of its memory free. A larger batch gives the
// device more work per launch; how many more samples fit is estimated from the memory one sample
// takes (the step's rise above what is resident). On a CPU there is no such underuse signal: the
// finding is made only against a capacity the user declared (record --memory-cap, or
// --threshold memory.capacity_bytes: the stand-in for a device's memory); the Memory table shows
// the headroom either way. Run after the families (it reads their findings).
void FlagBatchSmall(const AnalysisContext& ctx, Report& report) {
  const auto& th = ctx.thresholds;
  std::vector<Finding> found;
  for (const DeviceMemory& m : report.metrics.memory) {
    if (m.capacity <= 0 || m.fits_samples <= 0 || m.samples_per_step <= 0 || m.median_step_peak < 0) continue;
    const double peak_pct = 100.0 * static_cast<double>(m.median_step_peak) / static_cast<double>(m.capacity);
    const double factor = static_cast<double>(m.fits_samples) / static_cast<double>(m.samples_per_step);
    if (peak_pct > th.Get("batch.small.max_peak_pct") || factor < th.Get("batch.small.min_factor")) continue;
    std::string underuse;
    const bool cpu = m.device == "cpu";
    if (cpu) {
      if (DeclaredCapacity(m.capacity_source))
        underuse = "a CPU run measured against a declared memory cap (" + m.capacity_source + ")";
    } else {
      for (const Finding& g : report.findings)
        if ((g.id == "gpu.idle" || g.id == "gpu.launch_bound") && (g.rank == m.rank || g.rank == -1)) {
          underuse = g.id + ": " + g.title;
          break;
        }
    }
    if (underuse.empty()) continue;
    // A power of two at or below what fits, at most 8x: a step to try, not a promise.
    int64_t suggest = m.samples_per_step;
    while (suggest * 2 <= m.fits_samples && suggest * 2 <= m.samples_per_step * 8) suggest *= 2;
    // A peak from a few samples a step (the heap at backward's start) misses what backward allocates:
    // the estimate is then an upper bound (train_planted.py under a 1.5 GB cap: 10 069 estimated,
    // batch 4 000 ran, 8 000 did not).
    const bool sampled = m.median_step_samples <= 3;
    Finding f;
    f.id = "batch.small";
    f.rank = m.rank;
    f.severity = cpu ? Severity::kLow : Severity::kMedium;
    // One batch size seen: memory per sample is a linear estimate.
    f.confidence = sampled ? Confidence::kLow : Confidence::kMedium;
    std::string label = BatchLabel(m);
    label[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[0])));
    f.title = fmt::format("{} uses {:.0f} % of {}'s {} at its peak; {} {:.0f}x as many samples fit ({})",
                          label, peak_pct, m.device, BytesText(static_cast<double>(m.capacity)),
                          sampled ? "up to" : "about", factor, m.fits_samples);
    f.measured = peak_pct;
    f.threshold = th.Get("batch.small.max_peak_pct");
    f.measured_unit = "% of capacity at the median step's peak";
    f.evidence = {{"device", m.device},
                  {"samples_per_step", m.samples_per_step},
                  {"micro_steps", static_cast<int64_t>(m.micro_steps)},
                  {"median_step_peak_bytes", m.median_step_peak},
                  {"capacity_bytes", m.capacity},
                  {"capacity_source", m.capacity_source},
                  {"bytes_per_sample", m.bytes_per_sample},
                  {"fits_samples", m.fits_samples},
                  {"median_step_samples", m.median_step_samples},
                  {"underused", underuse}};
    f.saving_bound = "not estimated from one batch size: trainrx sweep measures samples per second per batch";
    SetFix(f, "", {{"suggest", suggest}, {"batch", m.samples_per_step}, {"half", std::max(m.samples_per_step, suggest / 2)}});
    found.push_back(std::move(f));
  }
  std::move(found.begin(), found.end(), std::back_inserter(report.findings));
}

std::string BatchLabel(const DeviceMemory& m) {
  return m.micro_steps > 1 ? fmt::format("micro-batch {} ({} a step)", m.samples_per_step, m.micro_steps)
                           : fmt::format("batch {}", m.samples_per_step);
}

std::string BytesText(double b) {
  const double a = std::abs(b);
  if (a >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

namespace {

using MemorySeries = std::map<std::pair<int32_t, std::string>, Series>;  // (rank, device)

// The allocator's counters (torch.profiler's memory events, our collector's): per rank and device,
// allocated and reserved samples, blocks, out-of-memory events.
MemorySeries CollectCounters(const profiler::Trace& trace) {
  MemorySeries series;
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
      case profiler::MemoryWhat::kBytes:
        s.pending = BlockEvent{c.ts_ns, static_cast<int64_t>(c.value), 0, c.track};
        break;
      case profiler::MemoryWhat::kAddr:
        // The reader and our collector write an event's counters together: bytes, then addr.
        if (s.pending && s.pending->ts_ns == c.ts_ns && s.pending->track == c.track && s.pending->bytes != 0) {
          s.pending->addr = c.value;
          s.blocks.push_back(*s.pending);
        }
        s.pending.reset();
        break;
      case profiler::MemoryWhat::kOom:
        if (s.oom_events == 0) s.oom_ts = c.ts_ns, s.oom_track = c.track;
        ++s.oom_events;
        s.oom_bytes = std::max(s.oom_bytes, static_cast<int64_t>(c.value));
        break;
    }
  }
  return series;
}

// The start-up hook's marks: the CUDA caching allocator's figures after each optimizer step (the
// device's samples), and a run that died of an out-of-memory error (our recorder sees no allocator
// event): one failure on its device, unless the trace has that device's own events.
void CollectMarks(const profiler::Trace& trace, MemorySeries& series) {
  for (uint32_t t = 0; t < trace.tracks.size(); ++t) {
    if (trace.tracks[t].kind != profiler::TrackKind::kCpuThread) continue;
    for (const profiler::Event& e : trace.TrackEvents(t)) {
      if (e.kind != profiler::EventKind::kUserAnnotation) continue;
      if (const auto cuda = CudaMemoryMark(trace.Name(e))) {
        Series& s = series[{trace.tracks[t].rank, cuda->device}];
        const auto get = [&](const char* key) { const auto it = cuda->figures.find(key); return it == cuda->figures.end() ? -1 : it->second; };
        // The run-wide peak, when it rose since the last mark, happened in this step: a sample just
        // before the mark (steps whose peak did not rise show their end figure: a lower bound).
        const int64_t peak = get("peak");
        if (peak > s.mark_peak && peak > get("allocated")) s.allocated.push_back({e.ts_ns - 1, static_cast<double>(peak)});
        s.mark_peak = std::max(s.mark_peak, peak);
        s.allocated.push_back({e.ts_ns, static_cast<double>(get("allocated"))});
        ++s.events;
        // The same for reserved's run-wide peak (hooks since 2026-11-28 write it: a mark at an
        // out-of-memory error has the failed step's peak allocated above what is still reserved).
        const int64_t reserved_peak = get("reserved_peak");
        if (reserved_peak > s.mark_reserved_peak && reserved_peak > get("reserved"))
          s.reserved.push_back({e.ts_ns - 1, static_cast<double>(reserved_peak)});
        s.mark_reserved_peak = std::max(s.mark_reserved_peak, reserved_peak);
        if (get("reserved") >= 0) s.reserved.push_back({e.ts_ns, static_cast<double>(get("reserved"))});
        if (get("capacity") > 0) s.mark_capacity = get("capacity");
        if (const int64_t r = get("retries"); r >= 0) {
          if (s.retries_first < 0) s.retries_first = r;
          s.retries_last = r;
        }
        continue;
      }
      const auto mark = OomMark(trace.Name(e));
      if (!mark) continue;
      Series& s = series[{trace.tracks[t].rank, mark->first}];
      if (s.oom_events > 0 && !s.oom_from_mark) continue;
      if (s.oom_events == 0) s.oom_ts = e.ts_ns, s.oom_track = t, s.oom_from_mark = true;
      ++s.oom_events;
      s.oom_bytes = std::max(s.oom_bytes, mark->second);
    }
  }
}

// Each (rank, device) with something to summarize: allocator samples, or an out-of-memory error.
MemorySeries SeriesToSummarize(const profiler::Trace& trace) {
  MemorySeries series = CollectCounters(trace);
  CollectMarks(trace, series);
  std::erase_if(series, [](const auto& kv) { return kv.second.allocated.empty() && kv.second.oom_events == 0; });
  return series;
}

}  // namespace

std::vector<DeviceMemory> MemoryFigures(const profiler::Trace& trace, const StepModel& steps, const Thresholds& thresholds) {
  MemorySeries series = SeriesToSummarize(trace);
  std::vector<DeviceMemory> out;
  for (auto& [key, s] : series) out.push_back(Summarize(trace, steps, thresholds, key.first, key.second, s));
  return out;
}

void AnalyzeMemory(const AnalysisContext& ctx, Report& out) {
  const profiler::Trace& trace = ctx.trace;
  MemorySeries series = SeriesToSummarize(trace);
  const auto batch = series.empty() ? std::nullopt : SamplesPerStep(trace, ctx.steps);
  for (auto& [key, s] : series) {
    DeviceMemory m = Summarize(trace, ctx.steps, ctx.thresholds, key.first, key.second, s);
    if (batch) Headroom(ctx, *batch, m);
    FlagGrowth(ctx, m, s.blocks, out);
    FlagFragmentation(ctx, m, out);
    out.metrics.memory.push_back(std::move(m));
  }
  // Every rank: empty_cache calls show without allocator samples too (with_stack traces, our hook).
  std::set<int32_t> ranks;
  for (const auto& t : trace.tracks) ranks.insert(t.rank);
  for (int32_t rank : ranks) FlagEmptyCache(ctx, rank, out);
}

}  // namespace trainrx::analyzers
