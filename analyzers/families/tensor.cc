// tensor.cpu_then_copy: a tensor filled on the host by a factory and copied right away
// (torch.zeros(n).to("cuda"), torch.ones(n).to(device, copy=True), torch.randn(n).cuda()): the
// fill runs on the CPU and the copy moves bytes that the device could have written itself
// (torch.zeros(n, device="cuda")). TorchTidy: ExtraCUDACopyPattern.
//
// Signal, on one thread's outermost CPU ops (what the program called; ops.h):
//   op k-1  an init op (aten::fill_, zero_, normal_, uniform_, random_), or an op whose last nested
//           op is one (aten::ones -> empty, fill_; aten::randn -> empty, normal_)
//   op k    aten::to / aten::_to_copy that really copies (an aten::copy_ inside; a no-op .to()
//           returns its input and records no copy)
//   and, when both are recorded, the copied tensor has the init op's shape ("Input Dims"[0]):
//   our stand-in for tensor identity, which Kineto does not record.
// On a GPU trace a memcpy runtime call inside the copy says it crossed to the device (its GPU
// memcpy gives bytes); on a CPU-only trace the copy is an explicit copy=True or a dtype change:
// the same fix (factory with device= / dtype=), smaller stakes.
// Only work inside the steps counts; a trace without steps needs the same fill-then-copy at least
// twice: the HTA sample benchmark_result_*_trace.json.gz (a model built on the CPU, initialized
// with aten::uniform_, then model.to("cuda")) matched once, and a one-time model move is not waste.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include "families.h"
#include "links.h"
#include "scopes.h"
#include "intervals.h"
#include "ops.h"
#include "shapes.h"

namespace trainrx::analyzers {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::Trace;
using profiler::TrackKind;

bool IsInitOp(std::string_view n) {
  static constexpr std::array<std::string_view, 5> kInit = {"aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_",
                                                            "aten::random_"};
  return std::find(kInit.begin(), kInit.end(), n) != kInit.end();
}

// The init op that produced the tensor of outermost op events[i] (itself, or its last nested
// CPU op), or nullptr.
const Event* InitOpOf(const Trace& trace, EventSpan events, size_t i) {
  if (IsInitOp(trace.Name(events[i]))) return &events[i];
  const size_t end = SubtreeEnd(events, i);
  for (size_t j = end; j > i + 1; --j) {
    const Event& e = events[j - 1];
    if (e.kind != EventKind::kCpuOp) continue;
    return IsInitOp(trace.Name(e)) ? &e : nullptr;
  }
  return nullptr;
}

std::optional<std::vector<int64_t>> FirstInputDims(const Trace& trace, const Event& e) {
  const auto d = OpDims(trace, e);
  if (!d || d->empty() || (*d)[0].empty()) return std::nullopt;
  return (*d)[0];
}

std::string DimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The fill-then-copy pairs of a rank's steps: an op that made a tensor (InitOpOf), then aten::to /
// _to_copy of the same shape that copied its data.
struct FillThenCopy {
  int64_t copies = 0, copy_ns = 0, to_device = 0, device_bytes = 0, device_copy_ns = 0, shape_checked = 0;
  std::map<std::string, int64_t> examples;
};
FillThenCopy CountFillThenCopy(const AnalysisContext& ctx, int32_t rank, const StepWindows& in_steps) {
  const Trace& trace = ctx.trace;
  FillThenCopy c;
  auto& [copies, copy_ns, to_device, device_bytes, device_copy_ns, shape_checked, examples] = c;
  // A copy call's GPU memcpy (bytes and device time of its transfer): the dependency model's
  // device work of the call with that correlation id.
  const RankLinks* links = ctx.links.Rank(rank);
  const auto memcpy_of = [&](int64_t correlation) -> const Event* {
    const HostCall* call = links && correlation != profiler::kNoId ? links->CallByCorrelation(correlation) : nullptr;
    const DeviceWork* w = call ? links->FirstWorkOf(*call) : nullptr;
    return w && w->e->kind == EventKind::kMemcpy ? w->e : nullptr;
  };
  for (uint32_t ti : TracksOf(trace, rank, TrackKind::kCpuThread)) {
    const auto events = trace.TrackEvents(ti);
    const std::vector<size_t> outer = OutermostOps(events, 0, events.size());
    for (size_t k = 1; k < outer.size(); ++k) {
      const Event& cur = events[outer[k]];
      const std::string_view name = trace.Name(cur);
      if ((name != "aten::to" && name != "aten::_to_copy") || !in_steps.Contains(cur.ts_ns)) continue;
      const size_t end = SubtreeEnd(events, outer[k]);
      bool copies_data = false;
      const Event* runtime = nullptr;
      for (size_t j = outer[k] + 1; j < end; ++j) {
        const Event& e = events[j];
        const std::string_view n = trace.Name(e);
        if (e.kind == EventKind::kCpuOp && n == "aten::copy_") copies_data = true;
        if ((e.kind == EventKind::kCudaRuntime || e.kind == EventKind::kCudaDriver) && n.find("emcpy") != std::string_view::npos)
          runtime = &e;
      }
      if (!copies_data) continue;
      const Event* init = InitOpOf(trace, events, outer[k - 1]);
      if (!init) continue;
      const auto init_dims = FirstInputDims(trace, *init);
      const auto copy_dims = FirstInputDims(trace, cur);
      if (init_dims && copy_dims) {
        if (*init_dims != *copy_dims) continue;  // another tensor
        ++shape_checked;
      }
      ++copies;
      copy_ns += cur.dur_ns;
      if (runtime) {
        ++to_device;
        if (const Event* m = memcpy_of(runtime->correlation)) {
          device_copy_ns += m->dur_ns;
          if (m->aux != profiler::kNoAux && trace.memcpys[m->aux].bytes > 0) device_bytes += trace.memcpys[m->aux].bytes;
        }
      }
      ++examples[fmt::format("{} -> {}{}{}{}", trace.Name(events[outer[k - 1]]), name,
                             copy_dims ? " of " + DimsText(*copy_dims) : std::string(), runtime ? " (host to device)" : "",
                             WhereIn(ctx.modules, ctx.annotations, cur))];
    }
  }
  return c;
}

}  // namespace

void AnalyzeTensor(const AnalysisContext& ctx, Report& out) {
  const Trace& trace = ctx.trace;
  for (int32_t rank : trace.RankIds()) {
    const StepWindows in_steps(ctx.steps, rank);
    const FillThenCopy c = CountFillThenCopy(ctx, rank, in_steps);
    const auto& [copies, copy_ns, to_device, device_bytes, device_copy_ns, shape_checked, examples] = c;
    if (copies == 0) continue;
    if (in_steps.empty() && std::none_of(examples.begin(), examples.end(), [](const auto& kv) { return kv.second >= 2; }))
      continue;
    const StepBasis basis(ctx.steps, rank);
    const double per_step = basis.Per(copies);
    const double threshold = ctx.thresholds.Get("tensor.cpu_then_copy.min_per_step");
    if (per_step < threshold) continue;
    Finding f;
    f.id = "tensor.cpu_then_copy";
    f.rank = rank;
    f.severity = Severity::kLow;
    f.confidence = shape_checked == copies ? Confidence::kHigh : Confidence::kMedium;
    f.title = to_device > 0
                  ? fmt::format("{:.1f} tensors {} are filled on the host, then copied to the GPU", per_step, basis.unit())
                  : fmt::format("{:.1f} tensors {} are filled, then copied at once (copy=True / dtype change)", per_step,
                                basis.unit());
    f.measured = per_step;
    f.threshold = threshold;
    f.measured_unit = std::string("fill-then-copy ") + basis.unit();
    f.evidence = {{"copies", copies},
                  {"copies_to_device", to_device},
                  {"copy_op_ns", copy_ns},
                  {"device_copy_ns", device_copy_ns},
                  {"device_copy_bytes", device_bytes},
                  {"same_shape_checked", shape_checked}};
    for (const auto& [k, v] : examples) f.examples.push_back(fmt::format("{:.1f} x {} {}", basis.Per(v), k, basis.unit()));
    // The copy op's host time (its launch, and for pageable memory the wait for the transfer);
    // the fill stays (on the device), so it is not counted.
    if (!in_steps.empty()) {
      SetSaving(f, basis, basis.Per(copy_ns), basis.Per(copy_ns), "copy-op time");
    }
    SetFix(f);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace trainrx::analyzers
