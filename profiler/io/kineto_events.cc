// WindowDecoder: one element of traceEvents -> a window's Fragment (the decode stage of the pipeline
// described in kineto_document.cc, run on worker threads); SourceAssembler: fragments -> the model,
// in file order. SIMD-compiled with the rest of the parser.
//
// Worked example, one element:
//   {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10.5,"dur":2,"args":{"stream":7,"correlation":3}}
//   -> Event{kind=kKernel, ts_ns=10500, dur_ns=2000, correlation=3} on GPU track (dev 0, stream 7)
// Phases: X complete, B/E paired per track, i/I/n/R instants, s/f/t flows, C counters, M metadata
// (thread_name); anything else is counted as "unsupported_phase" (info, not data loss).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <charconv>
#include <optional>

#include "kineto_parse_internal.h"
#include "trainrx/profiler/memory_counters.h"
#include "trainrx/profiler/time.h"

namespace trainrx::profiler {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kMalformedNotObject = "event_not_an_object";
constexpr std::string_view kMissingPh = "missing_ph";
constexpr std::string_view kMissingTs = "missing_ts";
constexpr std::string_view kInvalidTs = "invalid_ts";
constexpr std::string_view kMissingDur = "missing_dur";
constexpr std::string_view kInvalidDur = "invalid_dur";
constexpr std::string_view kNegativeDur = "negative_dur";
constexpr std::string_view kTsOutOfRange = "ts_out_of_range";    // |ts| > 2.5e18 ns (time.h)
constexpr std::string_view kDurOutOfRange = "dur_out_of_range";  // dur > 1e15 ns (11.6 days)
constexpr std::string_view kMissingName = "missing_name";
constexpr std::string_view kInvalidPidTid = "invalid_pid_or_tid";
constexpr std::string_view kInvalidField = "invalid_field_type";
constexpr std::string_view kUnreadableEvent = "invalid_json_event";
constexpr std::string_view kInvalidShapes = "invalid_input_shapes";
constexpr std::string_view kUnmatchedEnd = "unmatched_end_event";
constexpr std::string_view kUnclosedBegin = "unclosed_begin_event";
constexpr std::string_view kUnsupportedPhase = "unsupported_phase";
// A "[memory]" / "[OutOfMemory]" event whose args hold some allocator figures but not the total
// allocated or the device (args before the name are not looked at: Kineto writes the name first).
constexpr std::string_view kMemoryWithoutFigures = "memory_event_without_figures";

// Whether `s` is exactly one JSON value of arrays, numbers, strings and true/false/null, what
// "Input Dims" and "Input type" hold. On-Demand hands out an array's raw text after skipping it by
// its brackets, without checking the grammar inside ("[[1 2]]" passes), and the writer puts the text
// back verbatim (issue 15: `convert` wrote a file Python's json rejected). Hand-written rather than a
// simdjson DOM parse per op: this runs once per op with shapes (millions in a large trace) over a
// few dozen bytes, where a DOM parse would copy and pad each one. UTF-8 was checked by stage 1.
class ShapeJsonCheck {
 public:
  static bool Valid(std::string_view s) {
    ShapeJsonCheck c(s);
    if (!c.Value(0)) return false;
    c.Ws();
    return c.i_ == s.size();
  }

 private:
  explicit ShapeJsonCheck(std::string_view s) : s_(s) {}
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool Digits() {
    const size_t from = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > from;
  }
  bool Number() {
    if (s_[i_] == '-') ++i_;
    if (!Digits()) return false;
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !Digits())) return false;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    for (++i_; i_ < s_.size(); ++i_) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (++i_ >= s_.size()) return false;
      if (s_[i_] == 'u') {
        for (int k = 0; k < 4; ++k)
          if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
      } else if (std::string_view("\"\\/bfnrt").find(s_[i_]) == std::string_view::npos) {
        return false;
      }
    }
    return false;
  }
  bool Value(int depth) {
    Ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '"') return String();
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    for (std::string_view lit : {"true", "false", "null"}) {
      if (s_.substr(i_, lit.size()) == lit) return i_ += lit.size(), true;
    }
    if (c != '[' || depth >= 32) return false;
    ++i_;
    Ws();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      if (!Value(depth + 1)) return false;
      Ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_++] == ']') return true;
      if (s_[i_ - 1] != ',') return false;
    }
  }
  std::string_view s_;
  size_t i_ = 0;
};

// Raw key text of an object field (no unescaping: trace keys never contain escapes, and a key
// that did would simply not match a known name).
std::string_view RawKey(od::field& f) {
  const char* p = f.key().raw();
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // Most keys ("ph", "ts", "name", "args", ...) end in their first 8 bytes: find the closing quote
  // there a word at a time (the input is padded: 8 bytes from a key's start are always readable).
  // The lowest byte flagged by the zero-byte test is exact; a backslash before the quote, or no
  // quote, takes the byte loop.
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const auto zero_bytes = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  const uint64_t quote = zero_bytes(w ^ (kOnes * '"')), backslash = zero_bytes(w ^ (kOnes * '\\'));
  if (quote != 0 && (backslash == 0 || __builtin_ctzll(backslash) > __builtin_ctzll(quote))) {
    return {p, static_cast<size_t>(__builtin_ctzll(quote) / 8)};
  }
#endif
  const char* q = p;
  while (*q != '"') {
    if (*q == '\\') ++q;
    ++q;
  }
  return {p, static_cast<size_t>(q - p)};
}

// The keys the decoder reads. A key is recognized by comparing the bytes at its start with the
// name and its closing quote, a compare of a few bytes fixed at compile time, with no search for
// where the key ends (the input is padded: the bytes are readable). Raw text, no unescaping: trace
// keys never hold escapes, and one that did matches nothing (its raw bytes differ), as before.
template <size_t N>
bool KeyIs(const char* raw, const char (&name_and_quote)[N]) {
  return std::memcmp(raw, name_and_quote, N - 1) == 0;
}

enum class EventKey { kPh, kTs, kId, kCat, kPid, kTid, kDur, kName, kArgs, kOther };
EventKey EventKeyOf(const char* k) {
  switch (k[0]) {
    case 'p': return KeyIs(k, "ph\"") ? EventKey::kPh : KeyIs(k, "pid\"") ? EventKey::kPid : EventKey::kOther;
    case 't': return KeyIs(k, "ts\"") ? EventKey::kTs : KeyIs(k, "tid\"") ? EventKey::kTid : EventKey::kOther;
    case 'i': return KeyIs(k, "id\"") ? EventKey::kId : EventKey::kOther;
    case 'c': return KeyIs(k, "cat\"") ? EventKey::kCat : EventKey::kOther;
    case 'd': return KeyIs(k, "dur\"") ? EventKey::kDur : EventKey::kOther;
    case 'n': return KeyIs(k, "name\"") ? EventKey::kName : EventKey::kOther;
    case 'a': return KeyIs(k, "args\"") ? EventKey::kArgs : EventKey::kOther;
    default: return EventKey::kOther;
  }
}

enum class ArgKey { kExternalId, kCorrelation, kDevice, kStream, kBytes, kInputDims, kInputType, kConcreteInputs, kName, kWaitOnStream, kWaitOnRecord, kOther };
ArgKey ArgKeyOf(const char* k) {
  switch (k[0]) {
    case 'E': return KeyIs(k, "External id\"") ? ArgKey::kExternalId : ArgKey::kOther;
    case 'c': return KeyIs(k, "correlation\"") ? ArgKey::kCorrelation : ArgKey::kOther;
    case 'd': return KeyIs(k, "device\"") ? ArgKey::kDevice : ArgKey::kOther;
    case 's': return KeyIs(k, "stream\"") ? ArgKey::kStream : ArgKey::kOther;
    case 'b': return KeyIs(k, "bytes\"") ? ArgKey::kBytes : ArgKey::kOther;
    case 'C': return KeyIs(k, "Concrete Inputs\"") ? ArgKey::kConcreteInputs : ArgKey::kOther;
    case 'I':
      return KeyIs(k, "Input Dims\"") ? ArgKey::kInputDims : KeyIs(k, "Input type\"") ? ArgKey::kInputType : ArgKey::kOther;
    case 'n': return KeyIs(k, "name\"") ? ArgKey::kName : ArgKey::kOther;
    case 'w':  // cuda_sync rows (enable_cuda_sync_events), MTIA's event_wait
      return KeyIs(k, "wait_on_stream\"")                      ? ArgKey::kWaitOnStream
             : KeyIs(k, "wait_on_cuda_event_record_corr_id\"") ? ArgKey::kWaitOnRecord
                                                                 : ArgKey::kOther;
    default: return ArgKey::kOther;
  }
}

// An int64 from a JSON number or numeric string; nullopt otherwise.
std::optional<int64_t> GetInt(od::value v) {
  od::json_type t;
  if (v.type().get(t)) return std::nullopt;
  if (t == od::json_type::number) {
    int64_t i;
    if (!v.get_int64().get(i)) return i;
    double d;
    if (!v.get_double().get(d) && d >= -9.2e18 && d <= 9.2e18) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (t == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return std::nullopt;
    int64_t i;
    auto r = std::from_chars(s.data(), s.data() + s.size(), i);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return i;
  }
  return std::nullopt;
}

// pid / tid: numbers, or strings like "CPU functions", "stream 7", "Spans".
struct IdValue {
  int64_t num = 0;
  std::string_view str;  // valid until the next string is read from the same document
  bool present = false;
  bool ok = true;
};
IdValue GetId(od::value v) {
  IdValue id;
  id.present = true;
  od::json_type t;
  if (v.type().get(t)) {
    id.ok = false;
    return id;
  }
  if (t == od::json_type::number) {
    int64_t i;
    if (!v.get_int64().get(i)) {
      id.num = i;
      return id;
    }
    uint64_t u;
    if (!v.get_uint64().get(u)) {
      id.num = static_cast<int64_t>(u);
      return id;
    }
    id.ok = false;
    return id;
  }
  if (t == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) {
      id.ok = false;
      return id;
    }
    int64_t i;
    auto r = std::from_chars(s.data(), s.data() + s.size(), i);
    if (!s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size()) id.num = i;
    else id.str = s;
    return id;
  }
  id.ok = false;
  return id;
}

EventKind KindFromCat(std::string_view cat, bool* known) {
  *known = true;
  switch (cat.size()) {
    case 6:
      if (cat == "cpu_op") return EventKind::kCpuOp;
      if (cat == "Kernel" || cat == "kernel") return EventKind::kKernel;
      if (cat == "Memcpy") return EventKind::kMemcpy;
      if (cat == "Memset") return EventKind::kMemset;
      break;
    case 7:
      if (cat == "Runtime") return EventKind::kCudaRuntime;
      break;
    case 8:
      if (cat == "Operator" || cat == "operator") return EventKind::kCpuOp;
      break;
    case 9:
      if (cat == "cuda_sync") return EventKind::kCudaSync;
      break;
    case 10:
      if (cat == "gpu_memcpy") return EventKind::kMemcpy;
      if (cat == "gpu_memset") return EventKind::kMemset;
      break;
    case 11:
      if (cat == "cuda_driver") return EventKind::kCudaDriver;
      break;
    case 12:
      if (cat == "cuda_runtime") return EventKind::kCudaRuntime;
      if (cat == "mtia_runtime") return EventKind::kCudaRuntime;  // MTIA's runtime calls (runFunction ...)
      break;
    case 15:
      if (cat == "user_annotation") return EventKind::kUserAnnotation;
      if (cat == "python_function") return EventKind::kPythonFunction;
      if (cat == "mtia_ccp_events") return EventKind::kKernel;  // MTIA's device work (DeviceKindOf refines it)
      break;
    case 19:
      if (cat == "gpu_user_annotation") return EventKind::kGpuUserAnnotation;
      break;
  }
  *known = false;
  return EventKind::kOther;
}

// MTIA's device events (cat mtia_ccp_events, as HTA reads them): DMA requests are copies, the
// device-side halves of recordEvent / waitOnEvent are synchronization records, the rest kernels.
EventKind MtiaDeviceKind(std::string_view name) {
  if (name.rfind("dma", 0) == 0) return EventKind::kMemcpy;
  if (name == "event_record" || name == "event_wait") return EventKind::kCudaSync;
  return EventKind::kKernel;
}

}  // namespace

size_t RecentStrings::Slot(std::string_view s) {
  const size_t n = s.size(), k = std::min<size_t>(n, 8);
  uint64_t first = 0, last = 0;
  std::memcpy(&first, s.data(), k);
  std::memcpy(&last, s.data() + n - k, k);
  return static_cast<size_t>(((first * 0x9E3779B97F4A7C15ull) ^ (last * 0xC2B2AE3D27D4EB4Full) ^ n) >> (64 - kBits));
}

StrId RecentStrings::Find(const StringTable& table, std::string_view s) const {
  const StrId id = slots_[Slot(s)];
  return id != kNoStr && table.Get(id) == s ? id : kNoStr;  // "" is never cached: it is kNoStr
}

StrId RecentStrings::Intern(StringTable& table, std::string_view s) {
  StrId& cached = slots_[Slot(s)];
  if (cached != kNoStr && table.Get(cached) == s) return cached;
  return cached = table.Intern(s);  // "" interns as kNoStr, which leaves the slot empty
}

void Fragment::Clear() {
  trace.RollBack(Trace::Checkpoint{});
  first_index.clear();
  begin_ends.clear();
  thread_names.clear();
  elements = 0;
}

void WindowDecoder::Begin(Fragment* out, uint64_t first_index) {
  out_ = out;
  t_ = &out->trace;
  out_->Clear();
  first_index_ = first_index;
  last_pid_ = last_tid_ = INT64_MIN;  // the cached track was the previous fragment's
  last_pid_name_ = last_tid_name_ = kNoStr;
  recent_names_.Clear();  // the fragment's string ids start again
  recent_shapes_.Clear();
}

bool WindowDecoder::Decode(od::object obj) {
  broken_ = false;
  HandleEvent(obj);
  ++out_->elements;
  ++t_->stats.events_read;
  return !broken_;
}

void WindowDecoder::Unreadable(uint64_t byte_offset) {
  Note(kUnreadableEvent, IssueSeverity::kDataLoss, fmt::format("{} event #{} at byte {}", source_, event_index(), byte_offset));
  ++out_->elements;
  ++t_->stats.events_read;
}

void WindowDecoder::NotAnObject() {
  Malformed(kMalformedNotObject);
  ++out_->elements;
}

std::string WindowDecoder::Where() const { return fmt::format("{} event #{}", source_, event_index()); }

void WindowDecoder::Malformed(std::string_view kind) { Note(kind, IssueSeverity::kDataLoss, Where()); }

void WindowDecoder::Note(std::string_view kind, IssueSeverity severity, const std::string& example) {
  const size_t kinds = t_->stats.entries.size();
  t_->stats.Add(kind, severity, example);
  if (t_->stats.entries.size() > kinds) out_->first_index.push_back(event_index());
}

uint32_t WindowDecoder::CpuTrack(int64_t pid, std::string_view pid_name, int64_t tid, std::string_view tid_name) {
  const StrId pn = pid_name.empty() ? kNoStr : t_->strings.Intern(pid_name);
  const StrId tn = tid_name.empty() ? kNoStr : t_->strings.Intern(tid_name);
  if (pid == last_pid_ && tid == last_tid_ && pn == last_pid_name_ && tn == last_tid_name_) return last_track_;
  last_pid_ = pid;
  last_tid_ = tid;
  last_pid_name_ = pn;
  last_tid_name_ = tn;
  last_track_ = t_->GetOrAddTrack(rank_, TrackKind::kCpuThread, pid, tid, pn, tn);
  return last_track_;
}

uint32_t WindowDecoder::GpuTrack(int64_t device, int64_t stream) {
  return t_->GetOrAddTrack(rank_, TrackKind::kGpuStream, device, stream);
}

namespace {

// One event's fields as read (the views are valid for the call only).
struct RawEvent {
  std::string_view ph, cat, ts_text, dur_text;
  StrId name = kNoStr;
  bool has_name = false, bad_type = false, bad_shapes = false;
  IdValue pid, tid;
  int64_t external_id = kNoId, correlation = kNoId, device = -1, stream = -1, bytes = -1, flow_id = kNoId;
  int64_t wait_on_stream = -1, wait_on_record = kNoId;
  bool flow_id_present = false;
  StrId input_dims = kNoStr, input_types = kNoStr, concrete_inputs = kNoStr, meta_name = kNoStr;
  std::vector<std::pair<StrId, double>> counter_values;
  // torch.profiler's profile_memory events (memory_counters.h): their figures, read only for them.
  bool memory_event = false, oom_event = false;
  std::optional<int64_t> mem_allocated, mem_reserved, mem_bytes, mem_type, mem_id, mem_addr;
};

// The string tables an event's names and shapes are interned into.
struct EventStrings {
  StringTable& table;
  RecentStrings& names;
  RecentStrings& shapes;
};

// Input Dims / Input type: the array's raw text, checked, interned; bad_shapes when not valid.
void ReadShapes(od::value av, EventStrings& s, RawEvent& ev, StrId* out) {
  std::string_view raw;
  od::array a;
  if (!av.get_array().get(a) && !a.raw_json().get(raw)) {
    if (const StrId seen = s.shapes.Find(s.table, raw)) *out = seen;  // checked before
    else if (ShapeJsonCheck::Valid(raw)) *out = s.shapes.Intern(s.table, raw);
    else ev.bad_shapes = true;
  }
}

// One "args" field: the ids, device and stream, bytes, shapes, a metadata name, a counter's
// series (ph "C"), a memory event's figures.
void ReadArg(od::field& af, EventStrings& s, RawEvent& ev) {
  const ArgKey akey = ArgKeyOf(af.key().raw());
  od::value av = af.value();
  switch (akey) {
    case ArgKey::kExternalId:
      if (auto x = GetInt(av)) ev.external_id = *x;
      break;
    case ArgKey::kCorrelation:
      if (auto x = GetInt(av)) ev.correlation = *x;
      break;
    case ArgKey::kDevice:
      if (auto x = GetInt(av)) ev.device = *x;
      break;
    case ArgKey::kStream:
      if (auto x = GetInt(av)) ev.stream = *x;
      break;
    case ArgKey::kBytes:
      if (auto x = GetInt(av)) ev.bytes = *x;
      break;
    case ArgKey::kWaitOnStream:
      if (auto x = GetInt(av)) ev.wait_on_stream = *x;
      break;
    case ArgKey::kWaitOnRecord:
      if (auto x = GetInt(av)) ev.wait_on_record = *x;
      break;
    case ArgKey::kInputDims: ReadShapes(av, s, ev, &ev.input_dims); break;
    case ArgKey::kInputType: ReadShapes(av, s, ev, &ev.input_types); break;
    case ArgKey::kConcreteInputs: ReadShapes(av, s, ev, &ev.concrete_inputs); break;
    case ArgKey::kName: {
      std::string_view str;
      if (!av.get_string().get(str)) ev.meta_name = s.table.Intern(str);
      break;
    }
    case ArgKey::kOther:
      if (ev.ph == "C") {
        double d;
        if (!av.get_double().get(d)) ev.counter_values.emplace_back(s.table.Intern(RawKey(af)), d);
      } else if (ev.memory_event) {
        const std::string_view k = RawKey(af);
        std::optional<int64_t>* slot = k == "Total Allocated" ? &ev.mem_allocated
                                       : k == "Total Reserved" ? &ev.mem_reserved
                                       : k == "Bytes"          ? &ev.mem_bytes
                                       : k == "Device Type"    ? &ev.mem_type
                                       : k == "Device Id"      ? &ev.mem_id
                                       : k == "Addr"           ? &ev.mem_addr
                                                               : nullptr;
        if (slot) *slot = GetInt(av);
      }
      break;
  }
}

// The "args" object; false when its JSON is broken inside.
bool ReadArgs(od::value v, EventStrings& s, RawEvent& ev) {
  od::object args;
  if (v.get_object().get(args)) return true;
  if (ev.has_name) {
    const std::string_view n = s.table.Get(ev.name);
    ev.oom_event = n == "[OutOfMemory]";
    ev.memory_event = ev.oom_event || n == "[memory]";
  }
  for (auto af_result : args) {
    od::field af;
    if (std::move(af_result).get(af)) return false;
    ReadArg(af, s, ev);
  }
  return true;
}

// The event's fields; false when its JSON is broken inside (the caller counts it).
bool ReadEvent(od::object obj, EventStrings& s, RawEvent& ev) {
  for (auto field_result : obj) {
    od::field field;
    if (std::move(field_result).get(field)) return false;
    const EventKey key = EventKeyOf(field.key().raw());
    od::value v = field.value();
    switch (key) {
      case EventKey::kPh:  // views from get_string stay valid until the next window is parsed
        if (v.get_string().get(ev.ph)) ev.bad_type = true;
        break;
      case EventKey::kTs: ev.ts_text = v.raw_json_token(); break;
      case EventKey::kId:
        if (auto id = GetInt(v)) {
          ev.flow_id = *id;
          ev.flow_id_present = true;
        }
        break;
      case EventKey::kCat:
        if (v.get_string().get(ev.cat)) ev.bad_type = true;
        break;
      case EventKey::kPid: ev.pid = GetId(v); break;
      case EventKey::kTid: ev.tid = GetId(v); break;
      case EventKey::kDur: ev.dur_text = v.raw_json_token(); break;
      case EventKey::kName: {
        std::string_view str;
        if (v.get_string().get(str)) ev.bad_type = true;
        else {
          ev.name = s.names.Intern(s.table, str);
          ev.has_name = true;
        }
        break;
      }
      case EventKey::kArgs:
        if (!ReadArgs(v, s, ev)) return false;
        break;
      case EventKey::kOther: break;
    }
  }
  return true;
}

// The event's time by its phase: a duration for "X" (or the kind of problem with it), none yet for
// "B"/"E", an instant for "i"/"I"/"n"/"R". Returns "" when the event stays, kUnsupportedPhase for
// other phases, else the malformation.
std::string_view PhaseTime(const RawEvent& ev, Event& e) {
  const char p0 = ev.ph[0];
  if (p0 == 'X' && ev.ph.size() == 1) {
    if (ev.dur_text.empty()) return kMissingDur;
    const auto dur = ParseMicrosToNs(ev.dur_text);
    if (!dur) return kInvalidDur;
    if (*dur < 0) return kNegativeDur;
    if (*dur > kMaxDurationNs) return kDurOutOfRange;
    e.dur_ns = *dur;
  } else if ((p0 == 'B' || p0 == 'E') && ev.ph.size() == 1) {
    // handled below, after the track is known
  } else if ((p0 == 'i' || p0 == 'I' || p0 == 'n' || p0 == 'R') && ev.ph.size() == 1) {
    e.kind = EventKind::kInstant;
    e.dur_ns = 0;
  } else {
    return kUnsupportedPhase;
  }
  return {};
}

// A memory instant's figures as memory counters on its thread. False when it has some figures but
// not the total or the device (a loss); args with none of them are our own writer's copy of the
// instant (its figures went out as counters), not a loss.
bool AddMemoryCounters(Trace& t, const RawEvent& ev, const Event& e) {
  if (!ev.mem_allocated || !ev.mem_type) return !(ev.mem_allocated || ev.mem_reserved || ev.mem_bytes || ev.mem_type || ev.mem_id);
  const std::string device = MemoryDeviceName(*ev.mem_type, ev.mem_id.value_or(-1));
  const auto add = [&](MemoryWhat what, double value) {
    t.counters.push_back({e.track, t.strings.Intern(MemoryCounterName(what, device)), e.ts_ns, value});
  };
  add(MemoryWhat::kAllocated, static_cast<double>(*ev.mem_allocated));
  if (ev.mem_reserved) add(MemoryWhat::kReserved, static_cast<double>(*ev.mem_reserved));
  if (ev.mem_bytes) add(ev.oom_event ? MemoryWhat::kOom : MemoryWhat::kBytes, static_cast<double>(*ev.mem_bytes));
  // Below 2^53 (user-space addresses), exact as a double; a larger one would be rounded: left out.
  if (ev.mem_addr && !ev.oom_event && *ev.mem_addr > 0 && *ev.mem_addr < (int64_t{1} << 53))
    add(MemoryWhat::kAddr, static_cast<double>(*ev.mem_addr));
  return true;
}

// Adds a complete event with its side table row: a memcpy's info, or an op's input shapes.
void AddWithSideTable(Trace& t, const RawEvent& ev, Event& e) {
  // The side table follows the event's final kind (e.kind): an instant with a memcpy category is
  // an instant, and readers of Event::aux pick the table by e.kind (a fuzzer found an "i" event of
  // cat gpu_memcpy whose memcpy index was read as an op-inputs index).
  if (e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset) {
    MemcpyInfo info = e.kind == EventKind::kMemcpy ? ParseMemcpyName(t.strings.Get(ev.name)) : MemcpyInfo{};
    info.bytes = ev.bytes;
    e.aux = static_cast<uint32_t>(t.memcpys.size());
    t.memcpys.push_back(info);
  } else if (ev.input_dims != kNoStr || ev.input_types != kNoStr) {
    e.aux = static_cast<uint32_t>(t.op_inputs.size());
    t.op_inputs.push_back({ev.input_dims, ev.input_types, ev.concrete_inputs});
  }
  t.AddEvent(e);
}

}  // namespace

void WindowDecoder::HandleEvent(od::object obj) {
  RawEvent ev;
  EventStrings strings{t_->strings, recent_names_, recent_shapes_};
  if (!ReadEvent(obj, strings, ev)) {
    broken_ = true;
    return Malformed(kInvalidField);
  }
  if (ev.bad_type) return Malformed(kInvalidField);
  if (ev.bad_shapes) {  // the event stays; its shapes are dropped, said as info
    Note(kInvalidShapes, IssueSeverity::kInfo, Where());
    ev.input_dims = ev.input_types = ev.concrete_inputs = kNoStr;
  }
  if (ev.ph.empty()) return Malformed(kMissingPh);
  const IdValue &pid = ev.pid, &tid = ev.tid;
  if ((pid.present && !pid.ok) || (tid.present && !tid.ok)) return Malformed(kInvalidPidTid);

  const char p0 = ev.ph[0];
  if (p0 == 'M' && ev.ph.size() == 1) {
    if (ev.has_name && t_->strings.Get(ev.name) == "thread_name" && ev.meta_name != kNoStr) {
      out_->thread_names.push_back({pid.num, tid.num, ev.meta_name});
    }
    return;
  }

  if (ev.ts_text.empty()) return Malformed(kMissingTs);
  const auto ts = ParseMicrosToNs(ev.ts_text);
  if (!ts) return Malformed(kInvalidTs);
  if (*ts > kMaxAbsTimeNs || *ts < -kMaxAbsTimeNs) return Malformed(kTsOutOfRange);

  if ((p0 == 's' || p0 == 'f' || p0 == 't') && ev.ph.size() == 1) {
    if (!ev.flow_id_present) return Malformed(kInvalidField);
    Flow f;
    f.id = ev.flow_id;
    f.cat = t_->strings.Intern(ev.cat);
    f.track = CpuTrack(pid.num, pid.str, tid.num, tid.str);
    f.ts_ns = *ts;
    f.is_start = (p0 == 's');
    t_->flows.push_back(f);
    return;
  }
  if (p0 == 'C' && ev.ph.size() == 1) {
    const uint32_t track = CpuTrack(pid.num, pid.str, tid.num, tid.str);
    for (const auto& [series, value] : ev.counter_values) {
      const StrId cname = ev.counter_values.size() == 1 && ev.has_name ? ev.name : series;
      t_->counters.push_back({track, cname, *ts, value});
    }
    return;
  }

  bool known_cat = true;
  EventKind kind = ev.cat.empty() ? EventKind::kCpuOp : KindFromCat(ev.cat, &known_cat);
  if (ev.cat.empty() && pid.str == "CUDA functions") kind = EventKind::kKernel;  // legacy export, use_cuda=True
  if (!known_cat) kind = EventKind::kOther;
  if (kind == EventKind::kKernel && ev.cat == "mtia_ccp_events") kind = MtiaDeviceKind(t_->strings.Get(ev.name));

  Event e;
  e.ts_ns = *ts;
  e.kind = kind;
  e.name = ev.name;
  e.external_id = ev.external_id;
  e.correlation = ev.correlation;
  if (const std::string_view problem = PhaseTime(ev, e); !problem.empty()) {
    if (problem == kUnsupportedPhase) return Note(kUnsupportedPhase, IssueSeverity::kInfo, Where());
    return Malformed(problem);
  }
  if (!ev.has_name && p0 != 'E') return Malformed(kMissingName);

  if (IsGpuKind(kind)) {
    const int64_t dev = ev.device >= 0 ? ev.device : pid.num;
    const int64_t str = ev.stream >= 0 ? ev.stream : tid.num;
    e.track = GpuTrack(dev, str);
  } else {
    e.track = CpuTrack(pid.num, pid.str, tid.num, tid.str);
  }

  // A memory event stays an instant (as before); its figures become memory counters on its thread.
  if (ev.memory_event && e.kind == EventKind::kInstant && !AddMemoryCounters(*t_, ev, e))
    Note(kMemoryWithoutFigures, IssueSeverity::kDataLoss, Where());
  // A sync record that names what it waited on (-1: an event never recorded, nothing to tie).
  if (e.kind == EventKind::kCudaSync && ev.wait_on_stream >= 0 && e.correlation != kNoId)
    t_->sync_waits.push_back({e.track, e.correlation, ev.wait_on_stream, ev.wait_on_record});
  if (p0 == 'B' || p0 == 'E') {  // paired across windows by SourceAssembler
    out_->begin_ends.push_back({t_->events.size(), event_index(), e, p0 == 'B'});
    return;
  }
  AddWithSideTable(*t_, ev, e);
}

SourceAssembler::SourceAssembler(Trace& trace, const std::string& source)
    : trace_(trace),
      source_(source),
      first_track_(trace.tracks.size()),
      first_event_(trace.events.size()),
      first_flow_(trace.flows.size()),
      first_counter_(trace.counters.size()) {}

void EventCopy::Run() const {
  const EventArray& src = from->trace.events;
  for (size_t i = 0; i < src.size(); ++i) dst[i] = ids.Map(src[i]);
}

bool SourceAssembler::CanCopyApart(const Fragment& f) const {
  return f.begin_ends.empty() && trace_.events.capacity() - trace_.events.size() >= f.trace.events.size();
}

void SourceAssembler::Merge(const Fragment& f, EventCopy* copy) {
  const Trace& ft = f.trace;
  std::vector<StrId>& names = ids_.names;
  names.resize(ft.strings.size());
  names[0] = kNoStr;
  for (StrId i = 1; i < ft.strings.size(); ++i) names[i] = trace_.strings.Intern(ft.strings.Get(i));
  ids_.tracks.resize(ft.tracks.size());
  for (size_t i = 0; i < ft.tracks.size(); ++i) {
    const Track& t = ft.tracks[i];
    ids_.tracks[i] = trace_.GetOrAddTrack(t.rank, t.kind, t.pid, t.tid, names[t.pid_name], names[t.tid_name]);
  }
  trace_.AppendPieceTables(ids_, ft.memcpys, ft.op_inputs, ft.counters, ft.flows, ft.sync_waits);
  if (copy != nullptr) {
    const size_t at = trace_.events.size();
    trace_.events.resize(at + ft.events.size());  // unwritten (UnwrittenOnGrow); within capacity: nothing moves
    copy->from = &f;
    copy->dst = trace_.events.data() + at;
    copy->ids = ids_;
  } else {
    size_t next_be = 0;
    for (size_t i = 0; i <= ft.events.size(); ++i) {
      while (next_be < f.begin_ends.size() && f.begin_ends[next_be].at == i) BeginOrEnd(f.begin_ends[next_be++]);
      if (i == ft.events.size()) break;
      trace_.events.push_back(ids_.Map(ft.events[i]));
    }
  }
  for (size_t k = 0; k < ft.stats.entries.size(); ++k) AddIssue(f.first_index[k], ft.stats.entries[k]);
  trace_.stats.events_read += ft.stats.events_read;
  for (const auto& tn : f.thread_names) thread_names_.push_back({tn.pid, tn.tid, names[tn.name]});
}

void SourceAssembler::BeginOrEnd(const Fragment::BeginEnd& be) {
  Event e = be.e;
  e.name = ids_.names[e.name];
  e.track = ids_.tracks[e.track];
  if (be.begin) {
    open_begins_.push_back({e.track, e.name, e.ts_ns, e.kind});
    return;
  }
  auto malformed = [&](std::string_view kind) {
    AddIssue(be.index, {std::string(kind), IssueSeverity::kDataLoss, 1, fmt::format("{} event #{}", source_, be.index)});
  };
  // Close the innermost open range of this track.
  for (size_t k = open_begins_.size(); k-- > 0;) {
    if (open_begins_[k].track == e.track) {
      const PendingBegin b = open_begins_[k];
      open_begins_.erase(open_begins_.begin() + static_cast<std::ptrdiff_t>(k));
      if (e.ts_ns < b.ts) return malformed(kNegativeDur);
      if (e.ts_ns - b.ts > kMaxDurationNs) return malformed(kDurOutOfRange);
      e.dur_ns = e.ts_ns - b.ts;
      e.ts_ns = b.ts;
      e.name = b.name;
      e.kind = b.kind;
      trace_.AddEvent(e);
      return;
    }
  }
  malformed(kUnmatchedEnd);
}

void SourceAssembler::AddIssue(uint64_t first_index, const IngestStats::Entry& entry) {
  for (auto& [index, e] : issues_) {
    if (e.kind == entry.kind) {  // seen in an earlier window, or earlier in this one
      e.count += entry.count;
      return;
    }
  }
  issues_.emplace_back(first_index, entry);
}

void SourceAssembler::FlushIssues() {
  std::stable_sort(issues_.begin(), issues_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [index, e] : issues_) trace_.stats.Add(e.kind, e.severity, e.example, e.count);
  issues_.clear();
}

void SourceAssembler::Finish(int64_t base_time_ns) {
  FlushIssues();
  for (size_t k = 0; k < open_begins_.size(); ++k) trace_.stats.Add(kUnclosedBegin, IssueSeverity::kDataLoss, source_);
  open_begins_.clear();
  if (base_time_ns != 0) {
    for (size_t i = first_event_; i < trace_.events.size(); ++i) trace_.events[i].ts_ns += base_time_ns;
    for (size_t i = first_flow_; i < trace_.flows.size(); ++i) trace_.flows[i].ts_ns += base_time_ns;
    for (size_t i = first_counter_; i < trace_.counters.size(); ++i) trace_.counters[i].ts_ns += base_time_ns;
  }
  for (const auto& tn : thread_names_) {
    for (size_t t = first_track_; t < trace_.tracks.size(); ++t) {
      Track& tr = trace_.tracks[t];
      const bool gpu_match = tr.kind == TrackKind::kGpuStream && tr.device == tn.pid && tr.stream == tn.tid;
      const bool cpu_match = tr.kind == TrackKind::kCpuThread && tr.pid == tn.pid && tr.tid == tn.tid;
      if (gpu_match || cpu_match) tr.name = tn.name;
    }
  }
}

}  // namespace trainrx::profiler
