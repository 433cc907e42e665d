#include "trainrx/profiler/journal_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>


namespace trainrx::profiler {

namespace {

constexpr char kFrameMagic[4] = {'T', 'R', 'X', 'F'};
constexpr size_t kFramingBytes = 16;  // magic or length word, length, hash

static_assert(std::is_trivially_copyable_v<Event>, "events are copied as bytes");

// A 64-bit hash, 8 bytes a step (~0.3 ns/byte): it detects a torn or corrupted frame, nothing
// more (not cryptographic). A byte-at-a-time FNV-1a would cost ~1 ns/byte, 5 ms a second of
// recording at 110 k records/s.
uint64_t Hash(const char* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  h = (h ^ (tail * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 32);
}

template <typename T>
void Put(std::string* out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutStr(std::string* out, std::string_view s) {
  Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Events, compactly (issue 34.13: in a real run the flusher spent more than half its time in the
// kernel's write of the raw 48-byte events, copying them into the page cache). Per event: a byte of
// flags for the fields that are mostly absent, then varints (7 bits a byte, low first): ts as the
// zigzag difference from the previous event's, dur (zigzag), name, track, kind, and when present
// flags, correlation and external id (zigzag), aux. An op recorded by the collector takes ~8
// bytes. Lossless for any Event (tests/probes/journal_test.cc).
enum : uint8_t { kHasCorrelation = 1, kHasExternal = 2, kHasAux = 4, kHasFlags = 8 };
constexpr size_t kMaxEventBytes = 1 + 10 * 4 + 5 * 3 + 1;  // a flags byte, 4 64-bit and 3 32-bit varints, kind

uint64_t Zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t Unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

void PutEvents(std::string* out, const EventArray& events) {
  const size_t at = out->size();
  out->resize(at + events.size() * kMaxEventBytes);
  char* p = out->data() + at;
  int64_t prev_ts = 0;
  for (const Event& e : events) {
    const uint8_t has = (e.correlation != kNoId ? kHasCorrelation : 0) | (e.external_id != kNoId ? kHasExternal : 0) |
                        (e.aux != kNoAux ? kHasAux : 0) | (e.flags != 0 ? kHasFlags : 0);
    *p++ = static_cast<char>(has);
    // Wrapping difference: lossless for any two int64 times (the decoder adds it back the same way).
    p = PutVarint(p, Zigzag(static_cast<int64_t>(static_cast<uint64_t>(e.ts_ns) - static_cast<uint64_t>(prev_ts))));
    prev_ts = e.ts_ns;
    p = PutVarint(p, Zigzag(e.dur_ns));
    p = PutVarint(p, e.name);
    p = PutVarint(p, e.track);
    *p++ = static_cast<char>(e.kind);
    if (has & kHasFlags) *p++ = static_cast<char>(e.flags);
    if (has & kHasCorrelation) p = PutVarint(p, Zigzag(e.correlation));
    if (has & kHasExternal) p = PutVarint(p, Zigzag(e.external_id));
    if (has & kHasAux) p = PutVarint(p, e.aux);
  }
  out->resize(static_cast<size_t>(p - out->data()));
}

// Frames `payload_start..end` of *out in place: the 16 bytes before it were reserved.
void Seal(std::string* out, size_t framing_at, const char magic[4]) {
  const size_t payload_at = framing_at + kFramingBytes;
  const uint32_t len = static_cast<uint32_t>(out->size() - payload_at);
  const uint64_t h = Hash(out->data() + payload_at, len);
  char* f = out->data() + framing_at;
  std::memcpy(f, magic, 4);
  std::memcpy(f + 4, &len, 4);
  std::memcpy(f + 8, &h, 8);
}

// Bounds-checked reads over one payload; any failure latches `ok` false.
struct Cursor {
  const char* p;
  size_t n;
  size_t at = 0;
  bool ok = true;
  template <typename T>
  T Get() {
    T v{};
    if (!ok || n - at < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!ok || at >= n) break;
      const uint8_t b = static_cast<uint8_t>(p[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;  // cut off, or more than 10 bytes
    return 0;
  }
  uint32_t Varint32() {
    const uint64_t v = Varint();
    if (v > UINT32_MAX) ok = false;
    return static_cast<uint32_t>(v);
  }
  std::string_view Str() {
    const uint32_t len = Get<uint32_t>();
    if (!ok || n - at < len) {
      ok = false;
      return {};
    }
    std::string_view s(p + at, len);
    at += len;
    return s;
  }
  // A count of items of at least `min_bytes` each: never more than the bytes left can hold.
  uint32_t Count(size_t min_bytes) {
    const uint32_t k = Get<uint32_t>();
    if (ok && static_cast<uint64_t>(k) * min_bytes > n - at) ok = false;
    return ok ? k : 0;
  }
};

// A frame's tables as read, with the fragment's own ids (strings[0] is "").
struct TrackRow {
  uint8_t kind;
  int64_t pid, tid;
  uint32_t pid_name, tid_name, name;
  int32_t device;
  int64_t stream;
};
struct FrameTables {
  int64_t flush = 0;
  std::vector<std::string_view> strings;
  std::vector<TrackRow> tracks;
  std::vector<Event> events;
  std::vector<MemcpyInfo> memcpys;
  std::vector<OpInputs> inputs;  // concrete: format 3 (else kNoStr)
  std::vector<Counter> counters;
  std::vector<Flow> flows;
  std::vector<DeviceProperties> devices;
  bool StrOk(uint32_t id) const { return id < strings.size(); }
};

// The track rows; a kind or a string id out of range fails the cursor.
void ReadTracks(Cursor& c, FrameTables& f) {
  const uint32_t n_tracks = c.Count(1 + 8 + 8 + 4 * 3 + 4 + 8);
  f.tracks.resize(n_tracks);
  for (auto& t : f.tracks) {
    t.kind = c.Get<uint8_t>();
    t.pid = c.Get<int64_t>();
    t.tid = c.Get<int64_t>();
    t.pid_name = c.Get<uint32_t>();
    t.tid_name = c.Get<uint32_t>();
    t.name = c.Get<uint32_t>();
    t.device = c.Get<int32_t>();
    t.stream = c.Get<int64_t>();
    if (t.kind > static_cast<uint8_t>(TrackKind::kOther) || !f.StrOk(t.pid_name) || !f.StrOk(t.tid_name) || !f.StrOk(t.name))
      c.ok = false;
  }
}

// The side tables after the events: memcpy infos and op input shapes.
void ReadSideTables(Cursor& c, FrameTables& f, int version) {
  const uint32_t n_memcpys = c.Count(8 + 3);
  f.memcpys.resize(n_memcpys);
  for (auto& m : f.memcpys) {
    m.bytes = c.Get<int64_t>();
    m.copy = static_cast<CopyKind>(std::min<uint8_t>(c.Get<uint8_t>(), static_cast<uint8_t>(CopyKind::kPtoP)));
    m.src = static_cast<MemKind>(std::min<uint8_t>(c.Get<uint8_t>(), static_cast<uint8_t>(MemKind::kArray)));
    m.dst = static_cast<MemKind>(std::min<uint8_t>(c.Get<uint8_t>(), static_cast<uint8_t>(MemKind::kArray)));
  }
  const uint32_t n_inputs = c.Count(version >= 3 ? 12 : 8);
  f.inputs.resize(n_inputs);
  for (OpInputs& in : f.inputs) {
    in.input_dims = c.Get<uint32_t>();
    in.input_types = c.Get<uint32_t>();
    in.concrete = version >= 3 ? c.Get<uint32_t>() : kNoStr;
    if (!f.StrOk(in.input_dims) || !f.StrOk(in.input_types) || !f.StrOk(in.concrete)) c.ok = false;
  }
}

// Counters, flows and device properties.
void ReadCountersFlowsDevices(Cursor& c, FrameTables& f) {
  const size_t n_tracks = f.tracks.size();
  const uint32_t n_counters = c.Count(24);
  f.counters.resize(n_counters);
  for (auto& k : f.counters) {
    k.track = c.Get<uint32_t>();
    k.name = c.Get<uint32_t>();
    k.ts_ns = c.Get<int64_t>();
    k.value = c.Get<double>();
    if (k.track >= n_tracks || !f.StrOk(k.name)) c.ok = false;
  }
  const uint32_t n_flows = c.Count(25);
  f.flows.resize(n_flows);
  for (auto& fl : f.flows) {
    fl.id = c.Get<int64_t>();
    fl.cat = c.Get<uint32_t>();
    fl.track = c.Get<uint32_t>();
    fl.ts_ns = c.Get<int64_t>();
    fl.is_start = c.Get<uint8_t>() != 0;
    if (fl.track >= n_tracks || !f.StrOk(fl.cat)) c.ok = false;
  }
  const uint32_t n_devices = c.Count(4 + 4 + 8 + 12);
  f.devices.resize(n_devices);
  for (auto& d : f.devices) {
    d.id = c.Get<int32_t>();
    d.name = std::string(c.Str());
    d.total_global_mem = c.Get<int64_t>();
    d.compute_major = c.Get<int32_t>();
    d.compute_minor = c.Get<int32_t>();
    d.num_sms = c.Get<int32_t>();
  }
}

// Format 1's events (a probe built by an earlier trainrx, e.g. one in the per-user probe cache):
// the 48-byte Events as they were in memory.
void ReadRawEvents(Cursor& c, FrameTables& f) {
  const uint32_t n = c.Count(sizeof(Event));
  if (!c.ok) return;
  f.events.resize(n);
  if (n) std::memcpy(static_cast<void*>(f.events.data()), c.p + c.at, size_t{n} * sizeof(Event));
  c.at += size_t{n} * sizeof(Event);
}

// The events as PutEvents wrote them (at least 6 bytes each).
void ReadEvents(Cursor& c, FrameTables& f) {
  const uint32_t n = c.Count(6);
  f.events.resize(n);
  int64_t ts = 0;
  for (Event& e : f.events) {
    const uint8_t has = c.Get<uint8_t>();
    ts = static_cast<int64_t>(static_cast<uint64_t>(ts) + static_cast<uint64_t>(Unzigzag(c.Varint())));
    e.ts_ns = ts;
    e.dur_ns = Unzigzag(c.Varint());
    e.name = c.Varint32();
    e.track = c.Varint32();
    e.kind = static_cast<EventKind>(c.Get<uint8_t>());
    e.flags = has & kHasFlags ? c.Get<uint8_t>() : 0;
    e.correlation = has & kHasCorrelation ? Unzigzag(c.Varint()) : kNoId;
    e.external_id = has & kHasExternal ? Unzigzag(c.Varint()) : kNoId;
    e.aux = has & kHasAux ? c.Varint32() : kNoAux;
    if (!c.ok) break;
  }
  if (!c.ok) f.events.clear();
}

// Whether every event's track, name, kind, side-table index and times check out.
bool EventsOk(const FrameTables& f) {
  for (const Event& e : f.events) {
    if (e.track >= f.tracks.size() || !f.StrOk(e.name) || static_cast<uint8_t>(e.kind) > static_cast<uint8_t>(EventKind::kOther))
      return false;
    const bool copy = e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset;
    if (e.aux != kNoAux && e.aux >= (copy ? f.memcpys.size() : f.inputs.size())) return false;
    // Times a run can have (ns since the epoch, well inside int64): no sum below can overflow.
    constexpr int64_t kMaxNs = int64_t{1} << 61;
    if (e.dur_ns < 0 || e.dur_ns > kMaxNs || e.ts_ns < -kMaxNs || e.ts_ns > kMaxNs) return false;
  }
  return true;
}

// Reads one frame's payload (journal format `version`); false when it does not check out.
bool ReadFrame(std::string_view payload, int version, FrameTables& f) {
  Cursor c{payload.data(), payload.size()};
  f.flush = c.Get<int64_t>();
  c.Get<uint64_t>();  // sequence
  const uint32_t n_strings = c.Count(4);
  f.strings.assign(1, std::string_view());
  f.strings.reserve(n_strings + 1);
  for (uint32_t i = 0; i < n_strings && c.ok; ++i) f.strings.push_back(c.Str());
  ReadTracks(c, f);
  if (version == 1) ReadRawEvents(c, f);
  else ReadEvents(c, f);
  ReadSideTables(c, f, version);
  ReadCountersFlowsDevices(c, f);
  if (!c.ok || c.at != c.n) return false;
  // Events: check every index before anything is added.
  return EventsOk(f);
}

// Adds a checked frame to `trace` (rank `rank`): the fragment's ids become the trace's.
void AddFrame(FrameTables& f, int32_t rank, Trace& trace) {
  Trace::PieceIds ids;
  ids.names.assign(f.strings.size(), kNoStr);
  for (size_t i = 1; i < f.strings.size(); ++i) ids.names[i] = trace.strings.Intern(f.strings[i]);
  ids.tracks.resize(f.tracks.size());
  for (uint32_t i = 0; i < f.tracks.size(); ++i) {
    const TrackRow& t = f.tracks[i];
    ids.tracks[i] = trace.GetOrAddTrack(rank, static_cast<TrackKind>(t.kind), t.pid, t.tid, ids.names[t.pid_name],
                                        ids.names[t.tid_name]);
    Track& into = trace.tracks[ids.tracks[i]];
    if (t.name != 0) into.name = ids.names[t.name];
    into.device = t.device;
    into.stream = t.stream;
  }
  trace.AppendPieceTables(ids, f.memcpys, f.inputs, f.counters, f.flows, {});
  trace.events.reserve(trace.events.size() + f.events.size());
  for (const Event& e : f.events) trace.AddEvent(ids.Map(e));
  RankInfo& info = trace.ranks[0];
  for (auto& d : f.devices) {
    if (std::none_of(info.devices.begin(), info.devices.end(), [&](const DeviceProperties& x) { return x.id == d.id; }))
      info.devices.push_back(std::move(d));
  }
}

// Merges one frame's payload into `trace` (rank `rank`); false (and `trace` unchanged) when its
// contents do not check out.
bool MergeFrame(std::string_view payload, int version, int32_t rank, Trace& trace, int64_t* flush_ns) {
  FrameTables f;
  if (!ReadFrame(payload, version, f)) return false;
  AddFrame(f, rank, trace);
  *flush_ns = f.flush;
  return true;
}

}  // namespace

bool IsJournal(std::string_view bytes) {
  // The name only (7 bytes): a journal of any format version is recognised; DecodeJournal reads
  // the formats it knows and refuses the others by number.
  return bytes.size() >= sizeof(kJournalMagic) && std::memcmp(bytes.data(), kJournalMagic, sizeof(kJournalMagic) - 1) == 0;
}

void EncodeJournalHeader(int32_t rank, int64_t base_ns, const std::vector<std::pair<std::string, std::string>>& config,
                         std::string* out) {
  // magic(8) | u32 length | u64 hash | payload
  out->append(kJournalMagic, sizeof(kJournalMagic));
  const size_t fields_at = out->size();
  out->append(12, '\0');
  const size_t payload_at = out->size();
  Put<int32_t>(out, rank);
  Put<int64_t>(out, base_ns);
  Put<uint32_t>(out, static_cast<uint32_t>(config.size()));
  for (const auto& [k, v] : config) {
    PutStr(out, k);
    PutStr(out, v);
  }
  const uint32_t len = static_cast<uint32_t>(out->size() - payload_at);
  const uint64_t h = Hash(out->data() + payload_at, len);
  std::memcpy(out->data() + fields_at, &len, 4);
  std::memcpy(out->data() + fields_at + 4, &h, 8);
}

void AppendJournalFrame(const Trace& fragment, int64_t flush_ns, uint64_t sequence, std::string* out, int format) {
  const size_t at = out->size();
  size_t strings_bytes = 0;
  for (size_t i = 1; i < fragment.strings.size(); ++i) strings_bytes += 4 + fragment.strings.Get(static_cast<StrId>(i)).size();
  out->reserve(at + kFramingBytes + 64 + strings_bytes + fragment.tracks.size() * 48 + fragment.events.size() * kMaxEventBytes +
               fragment.memcpys.size() * 11 + fragment.op_inputs.size() * 12 + fragment.counters.size() * 24 +
               fragment.flows.size() * 25);
  out->append(kFramingBytes, '\0');
  Put<int64_t>(out, flush_ns);
  Put<uint64_t>(out, sequence);
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.strings.size() - 1));
  for (size_t i = 1; i < fragment.strings.size(); ++i) PutStr(out, fragment.strings.Get(static_cast<StrId>(i)));
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.tracks.size()));
  for (const Track& t : fragment.tracks) {
    Put<uint8_t>(out, static_cast<uint8_t>(t.kind));
    Put<int64_t>(out, t.pid);
    Put<int64_t>(out, t.tid);
    Put<uint32_t>(out, t.pid_name);
    Put<uint32_t>(out, t.tid_name);
    Put<uint32_t>(out, t.name);
    Put<int32_t>(out, t.device);
    Put<int64_t>(out, t.stream);
  }
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.events.size()));
  if (format == 1) out->append(reinterpret_cast<const char*>(fragment.events.data()), fragment.events.size() * sizeof(Event));
  else PutEvents(out, fragment.events);
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.memcpys.size()));
  for (const MemcpyInfo& m : fragment.memcpys) {
    Put<int64_t>(out, m.bytes);
    Put<uint8_t>(out, static_cast<uint8_t>(m.copy));
    Put<uint8_t>(out, static_cast<uint8_t>(m.src));
    Put<uint8_t>(out, static_cast<uint8_t>(m.dst));
  }
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.op_inputs.size()));
  for (const OpInputs& in : fragment.op_inputs) {
    Put<uint32_t>(out, in.input_dims);
    Put<uint32_t>(out, in.input_types);
    if (format >= 3) Put<uint32_t>(out, in.concrete);
  }
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.counters.size()));
  for (const Counter& k : fragment.counters) {
    Put<uint32_t>(out, k.track);
    Put<uint32_t>(out, k.name);
    Put<int64_t>(out, k.ts_ns);
    Put<double>(out, k.value);
  }
  Put<uint32_t>(out, static_cast<uint32_t>(fragment.flows.size()));
  for (const Flow& f : fragment.flows) {
    Put<int64_t>(out, f.id);
    Put<uint32_t>(out, f.cat);
    Put<uint32_t>(out, f.track);
    Put<int64_t>(out, f.ts_ns);
    Put<uint8_t>(out, f.is_start ? 1 : 0);
  }
  const std::vector<DeviceProperties> none;
  const auto& devices = fragment.ranks.empty() ? none : fragment.ranks[0].devices;
  Put<uint32_t>(out, static_cast<uint32_t>(devices.size()));
  for (const DeviceProperties& d : devices) {
    Put<int32_t>(out, d.id);
    PutStr(out, d.name);
    Put<int64_t>(out, d.total_global_mem);
    Put<int32_t>(out, d.compute_major);
    Put<int32_t>(out, d.compute_minor);
    Put<int32_t>(out, d.num_sms);
  }
  Seal(out, at, kFrameMagic);
}

Status DecodeJournal(std::string_view bytes, std::string_view name, JournalContents* out) {
  const auto fail = [&](const std::string& what) { return Status::Error(std::string(name) + ": " + what); };
  if (!IsJournal(bytes)) return fail("not a trainrx journal (its first bytes are not \"TRXJRNL\")");
  // Format 1 (raw events) still reads: a probe in the per-user cache may predate format 2.
  const int version = static_cast<uint8_t>(bytes[sizeof(kJournalMagic) - 1]);
  if (const int newest = static_cast<uint8_t>(kJournalMagic[sizeof(kJournalMagic) - 1]); version < 1 || version > newest)
    return fail("a trainrx journal of format " + std::to_string(version) + ", and this trainrx reads formats 1 to " +
                std::to_string(newest) + ": salvage it with the trainrx that recorded it");
  if (bytes.size() < kFramingBytes + 4) return fail("a trainrx journal cut off inside its header (" + std::to_string(bytes.size()) + " bytes)");
  uint32_t len;
  uint64_t h;
  std::memcpy(&len, bytes.data() + 8, 4);
  std::memcpy(&h, bytes.data() + 12, 8);
  const size_t header_at = 20;
  if (len > bytes.size() - header_at) return fail("a trainrx journal cut off inside its header (byte " + std::to_string(bytes.size()) + ")");
  if (Hash(bytes.data() + header_at, len) != h) return fail("a trainrx journal whose header is corrupt (checksum, bytes 0-" + std::to_string(header_at + len) + ")");
  Cursor c{bytes.data() + header_at, len};
  RankInfo info;
  info.rank = c.Get<int32_t>();
  info.base_time_ns = c.Get<int64_t>();
  const uint32_t n = c.Count(8);
  for (uint32_t i = 0; i < n && c.ok; ++i) {
    std::string key(c.Str());
    info.config[key] = ConfigValue::Json(std::string(c.Str()));
  }
  if (!c.ok || c.at != c.n || info.rank < 0) return fail("a trainrx journal whose header is corrupt (its fields)");
  out->trace = Trace();
  out->trace.ranks.push_back(std::move(info));
  const int32_t rank = out->trace.ranks[0].rank;
  size_t at = header_at + len;
  while (at < bytes.size()) {
    const size_t left = bytes.size() - at;
    const char* f = bytes.data() + at;
    if (left < kFramingBytes) {
      if (std::memcmp(f, kFrameMagic, std::min<size_t>(left, 4)) == 0) out->torn_bytes = left;
      else ++out->corrupt_frames, out->corrupt_bytes += left;
      break;
    }
    if (std::memcmp(f, kFrameMagic, 4) != 0) {
      // Not where a frame starts: look for the next one (a frame's bytes were damaged).
      const size_t next = bytes.find(std::string_view(kFrameMagic, 4), at + 1);
      ++out->corrupt_frames;
      out->corrupt_bytes += (next == std::string_view::npos ? bytes.size() : next) - at;
      if (next == std::string_view::npos) break;
      at = next;
      continue;
    }
    std::memcpy(&len, f + 4, 4);
    std::memcpy(&h, f + 8, 8);
    if (len > left - kFramingBytes) {
      out->torn_bytes = left;  // the last flush, cut off while it was written
      break;
    }
    const std::string_view payload(f + kFramingBytes, len);
    int64_t flush_ns = 0;
    const Trace::Checkpoint mark = out->trace.Mark();
    if (Hash(payload.data(), payload.size()) == h && MergeFrame(payload, version, rank, out->trace, &flush_ns)) {
      ++out->frames;
      out->last_flush_ns = std::max(out->last_flush_ns, flush_ns);
    } else {
      out->trace.RollBack(mark);
      ++out->corrupt_frames;
      out->corrupt_bytes += kFramingBytes + len;
    }
    at += kFramingBytes + len;
  }
  auto& cfg = out->trace.ranks[0].config;
  cfg["journal_frames"] = ConfigValue::Number(out->frames);
  if (out->torn_bytes) cfg["journal_torn_bytes"] = ConfigValue::Number(out->torn_bytes);
  if (out->corrupt_frames) {
    cfg["journal_corrupt_frames"] = ConfigValue::Number(out->corrupt_frames);
    cfg["journal_corrupt_bytes"] = ConfigValue::Number(out->corrupt_bytes);
  }
  return {};
}

std::string EncodeJournal(const Trace& trace, int32_t rank, int frames) {
  const RankInfo* found = trace.FindRank(rank);
  RankInfo info = found ? *found : RankInfo{};
  info.rank = rank;
  std::vector<std::pair<std::string, std::string>> config;
  for (const auto& [k, v] : info.config)
    if (k != "schema") config.push_back({k, v.json()});
  std::string bytes;
  EncodeJournalHeader(info.rank, info.base_time_ns, config, &bytes);
  // Each frame a fragment of its own (strings, tracks and side-table rows of its events only), as
  // the collector drains; the rank's events in the trace's order, cut into `frames` parts.
  std::vector<uint32_t> mine;
  for (uint32_t i = 0; i < trace.events.size(); ++i)
    if (trace.tracks[trace.events[i].track].rank == rank) mine.push_back(i);
  const size_t n = mine.size();
  frames = std::max(frames, 1);
  for (int f = 0; f < frames; ++f) {
    Trace part;
    part.ranks.push_back(info);
    std::vector<uint32_t> track_of(trace.tracks.size(), kNoAux);
    for (size_t k = n * f / frames; k < n * (f + 1) / frames; ++k) {
      Event e = trace.events[mine[k]];
      const Track& t = trace.tracks[e.track];
      if (track_of[e.track] == kNoAux) {
        track_of[e.track] = part.GetOrAddTrack(rank, t.kind, t.pid, t.tid, part.strings.Intern(trace.strings.Get(t.pid_name)),
                                               part.strings.Intern(trace.strings.Get(t.tid_name)));
        Track& pt = part.tracks[track_of[e.track]];
        pt.device = t.device, pt.stream = t.stream, pt.name = part.strings.Intern(trace.strings.Get(t.name));
      }
      e.track = track_of[e.track];
      e.name = part.strings.Intern(trace.Name(e));
      if (e.aux != kNoAux) {
        if (e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset) {
          part.memcpys.push_back(trace.memcpys[e.aux]);
          e.aux = static_cast<uint32_t>(part.memcpys.size() - 1);
        } else {
          const OpInputs& in = trace.op_inputs[e.aux];
          part.op_inputs.push_back({part.strings.Intern(trace.strings.Get(in.input_dims)),
                                    part.strings.Intern(trace.strings.Get(in.input_types)),
                                    part.strings.Intern(trace.strings.Get(in.concrete))});
          e.aux = static_cast<uint32_t>(part.op_inputs.size() - 1);
        }
      }
      part.AddEvent(e);
    }
    AppendJournalFrame(part, 1000 + f, static_cast<uint64_t>(f + 1), &bytes);
  }
  return bytes;
}

}  // namespace trainrx::profiler
