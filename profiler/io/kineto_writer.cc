#include "trainrx/profiler/kineto_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "byte_source.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/memory_counters.h"

namespace trainrx::profiler {
namespace {

std::string_view CatFor(EventKind k) {
  return k == EventKind::kInstant || k == EventKind::kOther ? std::string_view("Trace") : EventKindName(k);
}

void WriteIds(JsonWriter& w, const Trace& trace, const Track& t) {
  if (t.pid_name != kNoStr) w.Field("pid", trace.strings.Get(t.pid_name));
  else w.Field("pid", t.pid);
  if (t.tid_name != kNoStr) w.Field("tid", trace.strings.Get(t.tid_name));
  else w.Field("tid", t.tid);
}

// An allocation or free held as memory counters (profiler/memory_counters.h: allocated, then
// reserved, bytes or oom, addr, on one track at one time) is written as the one "[memory]" /
// "[OutOfMemory]" instant torch.profiler writes for it, which reads back as the same counters: a
// quarter of the events of four "C" counters, and the form HTA and Perfetto read. Returns the
// counters written (0: counters[i] does not start such an event; it is written as a counter).
size_t WriteMemoryEvent(JsonWriter& w, const Trace& trace, size_t i, int64_t base) {
  const Counter& first = trace.counters[i];
  const auto id = ParseMemoryCounterName(trace.strings.Get(first.name));
  if (!id || id->what != MemoryWhat::kAllocated) return 0;
  const auto device = ParseMemoryDevice(id->device);
  if (!device) return 0;
  std::optional<double> reserved, bytes, oom, addr;
  size_t n = 1;
  for (; i + n < trace.counters.size(); ++n) {
    const Counter& c = trace.counters[i + n];
    if (c.track != first.track || c.ts_ns != first.ts_ns) break;
    const auto next = ParseMemoryCounterName(trace.strings.Get(c.name));
    if (!next || next->device != id->device) break;
    std::optional<double>* slot = next->what == MemoryWhat::kReserved ? &reserved
                                  : next->what == MemoryWhat::kBytes  ? &bytes
                                  : next->what == MemoryWhat::kOom    ? &oom
                                  : next->what == MemoryWhat::kAddr   ? &addr
                                                                      : nullptr;
    if (slot == nullptr || slot->has_value()) break;  // the next event's allocated, or a repeat
    *slot = c.value;
  }
  if (!bytes && !oom) return 0;  // a sample (the heap, the CUDA marks): no event to write
  const auto exact = [](double v) { return static_cast<int64_t>(v); };  // counters hold integers
  w.BeginObject();
  w.Field("ph", "i");
  w.Field("cat", "cpu_instant_event");
  w.Field("s", "t");
  w.Field("name", oom ? "[OutOfMemory]" : "[memory]");
  WriteIds(w, trace, trace.tracks[first.track]);
  w.Key("ts");
  w.MicrosFromNs(first.ts_ns - base);
  w.Key("args");
  w.BeginObject();
  if (reserved) w.Field("Total Reserved", exact(*reserved));
  w.Field("Total Allocated", exact(first.value));
  w.Field("Bytes", exact(oom ? *oom : *bytes));
  if (addr) w.Field("Addr", exact(*addr));
  w.Field("Device Type", device->first);
  w.Field("Device Id", device->second);
  w.EndObject();
  w.EndObject();
  return n;
}

}  // namespace

void WriteKinetoHeader(JsonWriter& w, const Trace& trace, int32_t rank) {
  const RankInfo* info = trace.FindRank(rank);
  w.Field("schemaVersion", int64_t{1});
  if (info) {
    w.Key("deviceProperties");
    w.BeginArray();
    for (const auto& d : info->devices) {
      w.BeginObject();
      w.Field("id", d.id);
      w.Field("name", d.name);
      w.Field("totalGlobalMem", d.total_global_mem);
      w.Field("computeMajor", d.compute_major);
      w.Field("computeMinor", d.compute_minor);
      w.Field("numSms", d.num_sms);
      w.EndObject();
    }
    w.EndArray();
    w.Key("distributedInfo");
    w.BeginObject();
    w.Field("backend", info->backend);
    w.Field("rank", rank);
    w.Field("world_size", info->world_size);
    w.EndObject();
  }
  // Our own block: schema version of what we add, and the collector's config (JSON values).
  w.Key("trainrx");
  w.BeginObject();
  w.Field("schema", fmt::format("{}.0", kTrainrxSchemaMajor));
  if (info) {
    for (const auto& [k, v] : info->config) {
      if (k == "schema") continue;
      w.Key(k);
      w.Raw(v.json());
    }
  }
  w.EndObject();
}

void WriteKinetoEvents(JsonWriter& w, const Trace& trace, int32_t rank, int64_t base) {
  // The sync records' waits (cuda_sync args), by (track, correlation).
  std::vector<std::pair<std::pair<uint32_t, int64_t>, const SyncWait*>> waits;
  for (const SyncWait& sw : trace.sync_waits)
    if (trace.tracks[sw.track].rank == rank) waits.push_back({{sw.track, sw.correlation}, &sw});
  std::sort(waits.begin(), waits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto find_wait = [&](uint32_t track, int64_t correlation) -> const SyncWait* {
    auto it = std::lower_bound(waits.begin(), waits.end(), std::make_pair(track, correlation),
                               [](const auto& a, const std::pair<uint32_t, int64_t>& k) { return a.first < k; });
    return it != waits.end() && it->first == std::make_pair(track, correlation) ? it->second : nullptr;
  };
  for (uint32_t ti = 0; ti < trace.tracks.size(); ++ti) {
    const Track& t = trace.tracks[ti];
    if (t.rank != rank) continue;
    const bool gpu = t.kind == TrackKind::kGpuStream;
    if (t.name != kNoStr) {
      w.BeginObject();
      w.Field("name", "thread_name");
      w.Field("ph", "M");
      WriteIds(w, trace, t);
      w.Key("args");
      w.BeginObject();
      w.Field("name", trace.strings.Get(t.name));
      w.EndObject();
      w.EndObject();
    }
    for (const Event& e : trace.TrackEvents(ti)) {
      w.BeginObject();
      const bool instant = e.kind == EventKind::kInstant;
      w.Field("ph", instant ? "i" : "X");
      if (instant) w.Field("s", "t");
      w.Field("cat", CatFor(e.kind));
      w.Field("name", trace.strings.Get(e.name));
      WriteIds(w, trace, t);
      w.Key("ts");
      w.MicrosFromNs(e.ts_ns - base);
      if (!instant) {
        w.Key("dur");
        w.MicrosFromNs(e.dur_ns);
      }
      w.Key("args");
      w.BeginObject();
      if (e.external_id != kNoId) w.Field("External id", e.external_id);
      if (e.correlation != kNoId) w.Field("correlation", e.correlation);
      if (gpu) {
        w.Field("device", static_cast<int64_t>(t.device));
        w.Field("stream", t.stream);
      }
      if (e.kind == EventKind::kCudaSync && e.correlation != kNoId)
        if (const SyncWait* sw = find_wait(ti, e.correlation)) {
          w.Field("wait_on_stream", sw->wait_on_stream);
          if (sw->record_correlation != kNoId) w.Field("wait_on_cuda_event_record_corr_id", sw->record_correlation);
        }
      if (e.aux != kNoAux) {
        if (e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset) {
          const MemcpyInfo& m = trace.memcpys[e.aux];
          if (m.bytes >= 0) w.Field("bytes", m.bytes);
        } else {
          const OpInputs& in = trace.op_inputs[e.aux];
          if (in.input_dims != kNoStr) {
            w.Key("Input Dims");
            w.Raw(trace.strings.Get(in.input_dims));
          }
          if (in.input_types != kNoStr) {
            w.Key("Input type");
            w.Raw(trace.strings.Get(in.input_types));
          }
          if (in.concrete != kNoStr) {
            w.Key("Concrete Inputs");
            w.Raw(trace.strings.Get(in.concrete));
          }
        }
      }
      w.EndObject();
      w.EndObject();
    }
  }
  for (const Flow& f : trace.flows) {
    const Track& t = trace.tracks[f.track];
    if (t.rank != rank) continue;
    w.BeginObject();
    w.Field("ph", f.is_start ? "s" : "f");
    w.Field("id", f.id);
    WriteIds(w, trace, t);
    w.Key("ts");
    w.MicrosFromNs(f.ts_ns - base);
    w.Field("cat", trace.strings.Get(f.cat));
    w.Field("name", trace.strings.Get(f.cat));
    if (!f.is_start) w.Field("bp", "e");
    w.EndObject();
  }
  for (size_t i = 0; i < trace.counters.size(); ++i) {
    const Counter& c = trace.counters[i];
    const Track& t = trace.tracks[c.track];
    if (t.rank != rank) continue;
    if (const size_t n = WriteMemoryEvent(w, trace, i, base); n > 0) {
      i += n - 1;
      continue;
    }
    w.BeginObject();
    w.Field("ph", "C");
    w.Field("name", trace.strings.Get(c.name));
    WriteIds(w, trace, t);
    w.Key("ts");
    w.MicrosFromNs(c.ts_ns - base);
    w.Key("args");
    w.BeginObject();
    w.Field(trace.strings.Get(c.name), c.value, 17);
    w.EndObject();
    w.EndObject();
  }
}

void WriteKinetoJson(const Trace& trace, int32_t rank, std::ostream& out) {
  JsonWriter w(out);
  const RankInfo* info = trace.FindRank(rank);
  const int64_t base = info ? info->base_time_ns : 0;
  w.BeginObject();
  WriteKinetoHeader(w, trace, rank);
  w.Key("traceEvents");
  w.BeginArray();
  WriteKinetoEvents(w, trace, rank, base);
  w.EndArray();
  w.Field("displayTimeUnit", "ms");
  if (base != 0) w.Field("baseTimeNanoseconds", base);
  w.EndObject();
  out << '\n';
}

namespace {

// Writes `path`, compressed when `named_as` ends with .gz.
Status WriteNamed(const Trace& trace, int32_t rank, const std::string& path, const std::string& name) {
  const bool gz = name.size() > 3 && name.ends_with(".gz");
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status::Error(fmt::format("{}: cannot open for writing", path));
  if (gz) {
    // Whole-rank buffer then one deflate: simple; a streaming deflate would cap memory for
    // multi-GB outputs (not needed yet: we write what we read or collected).
    std::ostringstream s;
    WriteKinetoJson(trace, rank, s);
    std::string packed;
    if (!io::GzipCompress(s.str(), &packed)) return Status::Error(fmt::format("{}: gzip compression failed", path));
    f.write(packed.data(), static_cast<std::streamsize>(packed.size()));
  } else {
    WriteKinetoJson(trace, rank, f);
  }
  f.flush();
  const int flush_errno = f ? 0 : errno;
  f.close();
  if (!f) {
    const int e = flush_errno ? flush_errno : errno;
    return Status::Error(fmt::format("{}: write failed{}", path, e ? fmt::format(" ({})", std::strerror(e)) : ""));
  }
  return {};
}

}  // namespace

Status WriteKinetoFile(const Trace& trace, int32_t rank, const std::string& path) {
  return WriteNamed(trace, rank, path, path);
}

Status ReplaceKinetoFile(const Trace& trace, int32_t rank, const std::string& path) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  Status st = WriteNamed(trace, rank, tmp, path);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::Error(fmt::format("{}: cannot rename {} to it ({})", path, tmp, std::strerror(errno)));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace trainrx::profiler
