#include "trainrx/profiler/gpu_records.h"

#include <unordered_map>

namespace trainrx::profiler {

void AppendGpuRecords(Trace& trace, int32_t rank, int64_t pid, const GpuRecords& gpu) {
  std::unordered_map<int64_t, int64_t> external(gpu.external.begin(), gpu.external.end());
  for (const GpuRecord& r : gpu.records) {
    const bool gpu_side = IsGpuKind(r.kind);
    const uint32_t track = gpu_side ? trace.GetOrAddTrack(rank, TrackKind::kGpuStream, r.device, r.stream)
                                    : trace.GetOrAddTrack(rank, TrackKind::kCpuThread, pid, r.tid);
    Event e;
    e.ts_ns = r.ts_ns;
    e.dur_ns = r.dur_ns;
    e.kind = r.kind;
    e.track = track;
    e.correlation = r.correlation;
    if (r.correlation != kNoId) {
      auto it = external.find(r.correlation);
      if (it != external.end()) e.external_id = it->second;
    }
    e.name = trace.strings.Intern(r.name);
    if (r.kind == EventKind::kMemcpy || r.kind == EventKind::kMemset) {
      trace.memcpys.push_back(r.copy);
      e.aux = static_cast<uint32_t>(trace.memcpys.size() - 1);
    }
    trace.AddEvent(e);
  }
  if (!gpu.devices.empty()) {
    for (auto& info : trace.ranks) {
      if (info.rank == rank && info.devices.empty()) info.devices = gpu.devices;
    }
  }
  if (gpu.dropped > 0) {
    trace.stats.Add("cupti_dropped_records", IssueSeverity::kDataLoss, "reported by CUPTI's buffer-completed callback",
                    gpu.dropped);
  }
}

}  // namespace trainrx::profiler
