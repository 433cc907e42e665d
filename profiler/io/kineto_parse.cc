// Kineto / Chrome-trace parser (the SIMD-compiled half of the reader; see kineto_reader.h for the
// contract and kineto_reader.cc for the public entry points and the CPU check).
//
// Pipeline (one pass, bounded memory):
//   ByteSource (file | gzip) -> rolling window buffer
//     -> header scan: find "traceEvents":[ (or a bare top-level array)
//     -> splitter: a string-aware depth scanner finds the last complete event in the window
//     -> simdjson On-Demand parses "[" + complete events + "]" -> EventBuilder fills the Trace
//     -> trailer: everything after the events array, parsed with the header for metadata
//
// Worked example: {"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"k",
// "pid":0,"tid":7,"ts":10.5,"dur":2,"args":{"stream":7,"correlation":3}}],"displayTimeUnit":"ms"}
//   header  = "\"schemaVersion\":1,"    trailer = ",\"displayTimeUnit\":\"ms\"}"
//   event   -> Event{kind=kKernel, ts_ns=10500, dur_ns=2000, correlation=3} on GPU track (dev 0, stream 7)
#include "kineto_parse.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <regex>

#include "byte_source.h"
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
constexpr std::string_view kMissingName = "missing_name";
constexpr std::string_view kInvalidPidTid = "invalid_pid_or_tid";
constexpr std::string_view kInvalidField = "invalid_field_type";
constexpr std::string_view kUnmatchedEnd = "unmatched_end_event";
constexpr std::string_view kUnclosedBegin = "unclosed_begin_event";
constexpr std::string_view kUnsupportedPhase = "unsupported_phase";

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Raw key text of an object field (no unescaping: trace keys never contain escapes, and a key
// that did would simply not match a known name).
std::string_view RawKey(od::field& f) {
  const char* p = f.key().raw();
  const char* q = p;
  while (*q != '"') {
    if (*q == '\\') ++q;
    ++q;
  }
  return {p, static_cast<size_t>(q - p)};
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
      break;
    case 15:
      if (cat == "user_annotation") return EventKind::kUserAnnotation;
      if (cat == "python_function") return EventKind::kPythonFunction;
      break;
    case 19:
      if (cat == "gpu_user_annotation") return EventKind::kGpuUserAnnotation;
      break;
  }
  *known = false;
  return EventKind::kOther;
}

int32_t RankFromFileName(std::string_view path) {
  // "rank-3.json", "rank3.json.gz", "worker_rank_12.pt.trace.json" -> the digits after "rank".
  const std::string name = std::filesystem::path(path).filename().string();
  static const std::regex re("rank[-_]?([0-9]+)", std::regex::icase);
  std::smatch m;
  if (std::regex_search(name, m, re)) return std::stoi(m[1].str());
  return -1;
}

// ---------------------------------------------------------------------------------------------
class KinetoParser {
 public:
  KinetoParser(Trace& trace, std::string source, int32_t provisional_rank, const ReadOptions& opt)
      : trace_(trace), source_(std::move(source)), rank_(provisional_rank), opt_(opt) {}

  ReadStatus Parse(io::ByteSource& src);
  // Metadata read from the header/trailer (applied by the caller, which resolves ranks).
  RankInfo meta;
  int32_t declared_rank = -1;
  size_t first_track = 0;
  size_t first_event = 0;

 private:
  ReadStatus Fail(std::string what) { return ReadStatus::Error(fmt::format("{}: {}", source_, what)); }
  // Reads more input at the end of the buffer; returns bytes read, 0 at EOF, -1 on error.
  std::ptrdiff_t Fill(io::ByteSource& src);
  void Compact();
  ReadStatus FindEventsArray(io::ByteSource& src);
  ReadStatus ScanEvents(io::ByteSource& src);
  ReadStatus ParseWindow(size_t begin, size_t end);
  void HandleEvent(od::object obj);
  ReadStatus ParseMetadata();
  std::string Where() const { return fmt::format("{} event #{}", source_, event_index_); }
  void Malformed(std::string_view kind) {
    trace_.stats.Add(kind, IssueSeverity::kDataLoss, Where());
  }
  uint32_t CpuTrack(const IdValue& pid, const IdValue& tid);
  uint32_t GpuTrack(int64_t device, int64_t stream);

  Trace& trace_;
  std::string source_;
  int32_t rank_;
  const ReadOptions& opt_;

  std::vector<char> buf_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // end of valid data
  uint64_t buf_offset_ = 0;  // file offset of buf_[0]
  bool bare_array_ = false;
  std::string header_;   // top-level members before "traceEvents" (object form)
  std::string trailer_;  // everything after the events array's ']'
  // Splitter state, carried across refills.
  size_t scan_ = 0;
  int depth_ = 0;
  bool in_string_ = false;

  od::parser parser_;
  std::vector<char> window_;  // "[" + events + "]" + padding
  uint64_t event_index_ = 0;

  struct PendingBegin {
    uint32_t track;
    StrId name;
    int64_t ts;
    EventKind kind;
  };
  std::vector<PendingBegin> open_begins_;
  struct ThreadName {
    int64_t pid, tid;
    StrId name;
  };
  std::vector<ThreadName> thread_names_;
  // Cache of the last CPU track lookup (events of one thread come in runs).
  int64_t last_pid_ = INT64_MIN, last_tid_ = INT64_MIN;
  StrId last_pid_name_ = kNoStr, last_tid_name_ = kNoStr;
  uint32_t last_track_ = 0;
};

std::ptrdiff_t KinetoParser::Fill(io::ByteSource& src) {
  if (buf_.size() - end_ < (1u << 16)) {
    Compact();
    if (buf_.size() - end_ < (1u << 16)) {
      buf_.resize(std::max<size_t>(buf_.size() * 2, opt_.window_bytes + simdjson::SIMDJSON_PADDING));
    }
  }
  const std::ptrdiff_t r = src.Read(buf_.data() + end_, buf_.size() - end_ - simdjson::SIMDJSON_PADDING);
  if (r > 0) {
    end_ += static_cast<size_t>(r);
    trace_.stats.bytes_read += static_cast<uint64_t>(r);
  }
  return r;
}

void KinetoParser::Compact() {
  if (begin_ == 0) return;
  std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
  buf_offset_ += begin_;
  end_ -= begin_;
  scan_ -= begin_;
  begin_ = 0;
}

// Finds the start of the events: a top-level '[' (legacy export) or the "traceEvents" member.
ReadStatus KinetoParser::FindEventsArray(io::ByteSource& src) {
  // Skip whitespace and a UTF-8 BOM.
  for (;;) {
    while (begin_ < end_ && IsWs(buf_[begin_])) ++begin_;
    if (begin_ + 3 <= end_ && static_cast<unsigned char>(buf_[begin_]) == 0xEF &&
        static_cast<unsigned char>(buf_[begin_ + 1]) == 0xBB && static_cast<unsigned char>(buf_[begin_ + 2]) == 0xBF) {
      begin_ += 3;
      continue;
    }
    if (begin_ < end_ && end_ - begin_ >= 3) break;
    const auto r = Fill(src);
    if (r < 0) return Fail("cannot read: " + src.error());
    if (r == 0) break;
  }
  while (begin_ < end_ && IsWs(buf_[begin_])) ++begin_;
  if (begin_ >= end_) {
    return Fail(trace_.stats.bytes_read == 0 ? "file is empty; expected a PyTorch profiler (Kineto/Chrome) trace"
                                             : "file contains only whitespace; expected a trace");
  }
  const char first = buf_[begin_];
  if (first == '[') {
    bare_array_ = true;
    begin_ += 1;
    scan_ = begin_;
    return {};
  }
  if (first != '{') {
    const unsigned char c = static_cast<unsigned char>(first);
    return Fail(fmt::format("not a JSON trace: expected '{{' (Kineto trace object) or '[' (legacy event array) "
                            "at byte {}, found {}",
                            buf_offset_ + begin_, c >= 0x20 && c < 0x7f ? fmt::format("'{}'", first)
                                                                         : fmt::format("byte 0x{:02x}", c)));
  }
  // Scan the top-level object's members until the "traceEvents" key. Members are skipped with a
  // string-aware depth scan; the header is small, so rescanning after a refill is cheap.
  std::vector<std::string> keys_seen;
  size_t p = begin_ + 1;
  for (;;) {
    // State at p: expecting a key (or '}' or ',').
    auto need_more = [&]() -> std::optional<ReadStatus> {
      const size_t rel = p - begin_;
      const auto r = Fill(src);
      if (r < 0) return Fail("cannot read: " + src.error());
      if (r == 0) {
        return Fail(fmt::format("truncated or not a trace: the top-level JSON object ends at byte {} "
                                "before a \"traceEvents\" array was found",
                                buf_offset_ + end_));
      }
      p = begin_ + rel;
      return std::nullopt;
    };
    while (p < end_ && (IsWs(buf_[p]) || buf_[p] == ',')) ++p;
    if (p >= end_) {
      if (auto e = need_more()) return *e;
      continue;
    }
    if (buf_[p] == '}') {
      std::string keys;
      for (const auto& k : keys_seen) keys += (keys.empty() ? "" : ", ") + k;
      return Fail(fmt::format("JSON object has no \"traceEvents\" array (top-level keys: {}); "
                              "expected a PyTorch profiler trace",
                              keys.empty() ? "none" : keys));
    }
    if (buf_[p] != '"') {
      return Fail(fmt::format("invalid JSON at byte {}: expected a member name", buf_offset_ + p));
    }
    // Read the key.
    size_t q = p + 1;
    while (q < end_ && buf_[q] != '"') q += (buf_[q] == '\\') ? 2 : 1;
    if (q >= end_) {
      if (auto e = need_more()) return *e;
      continue;
    }
    const std::string key(buf_.data() + p + 1, q - p - 1);
    size_t v = q + 1;
    while (v < end_ && (IsWs(buf_[v]) || buf_[v] == ':')) ++v;
    if (v >= end_) {
      if (auto e = need_more()) return *e;
      continue;
    }
    if (key == "traceEvents") {
      if (buf_[v] != '[') {
        return Fail(fmt::format("\"traceEvents\" at byte {} is not an array", buf_offset_ + v));
      }
      header_.assign(buf_.data() + begin_ + 1, p - begin_ - 1);
      begin_ = v + 1;
      scan_ = begin_;
      return {};
    }
    keys_seen.push_back(key);
    // Skip the value: scalar up to ',' or '}' at depth 0; containers by depth.
    int depth = 0;
    bool in_str = false;
    size_t i = v;
    bool done = false;
    for (; i < end_; ++i) {
      const char c = buf_[i];
      if (in_str) {
        if (c == '\\') ++i;
        else if (c == '"') in_str = false;
        continue;
      }
      if (c == '"') in_str = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (depth == 0) { done = true; break; }
        --depth;
      } else if (c == ',' && depth == 0) { done = true; break; }
    }
    if (!done) {
      if (auto e = need_more()) return *e;
      continue;
    }
    p = i;
  }
}

// The splitter: scans [scan_, end_) tracking string/depth state relative to the events array.
// Depth 0 is "between events". A ',' at depth 0 is a safe cut; a ']' at depth 0 ends the array.
ReadStatus KinetoParser::ScanEvents(io::ByteSource& src) {
  for (;;) {
    size_t last_cut = std::string::npos;
    size_t array_end = std::string::npos;
    const char* b = buf_.data();
    size_t i = scan_;
    int depth = depth_;
    bool in_str = in_string_;
    while (i < end_) {
      if (in_str) {
        // Jump to the next quote; a quote preceded by an odd run of backslashes is escaped.
        const void* q = std::memchr(b + i, '"', end_ - i);
        if (!q) { i = end_; break; }
        size_t qi = static_cast<const char*>(q) - b;
        size_t bs = 0;
        while (qi - bs > 0 && b[qi - bs - 1] == '\\') ++bs;
        i = qi + 1;
        if ((bs & 1) == 0) in_str = false;
        continue;
      }
      const char c = b[i];
      switch (c) {
        case '"': in_str = true; break;
        case '{': case '[': ++depth; break;
        case '}': --depth; break;
        case ']':
          if (depth == 0) array_end = i;
          else --depth;
          break;
        case ',':
          if (depth == 0) last_cut = i;
          break;
        default: break;
      }
      ++i;
      if (array_end != std::string::npos) break;
      if (depth < 0) {
        return Fail(fmt::format("invalid JSON at byte {}: unbalanced '}}' inside traceEvents", buf_offset_ + i - 1));
      }
    }
    if (array_end != std::string::npos) {
      if (auto st = ParseWindow(begin_, array_end); !st.ok) return st;
      // Trailer: the rest of the input (small: a few metadata members and the closing brace).
      trailer_.assign(buf_.data() + array_end + 1, end_ - array_end - 1);
      begin_ = end_;
      for (;;) {
        char tmp[1 << 16];
        const auto r = src.Read(tmp, sizeof tmp);
        if (r < 0) return Fail("cannot read: " + src.error());
        if (r == 0) break;
        trace_.stats.bytes_read += static_cast<uint64_t>(r);
        trailer_.append(tmp, static_cast<size_t>(r));
        if (trailer_.size() > (64u << 20)) return Fail("more than 64 MiB of data after the traceEvents array");
      }
      return {};
    }
    // Window full enough: parse the complete events, keep the partial tail.
    const size_t pending = (last_cut == std::string::npos) ? 0 : last_cut - begin_;
    if (pending >= opt_.window_bytes / 2) {
      if (auto st = ParseWindow(begin_, last_cut); !st.ok) return st;
      begin_ = last_cut + 1;
      // Rescan the unconsumed tail from begin_ at depth 0 (it starts right after a cut).
      scan_ = begin_;
      depth_ = 0;
      in_string_ = false;
      continue;
    }
    scan_ = i;
    depth_ = depth;
    in_string_ = in_str;
    const auto r = Fill(src);
    if (r < 0) return Fail("cannot read: " + src.error());
    if (r == 0) {
      if (last_cut != std::string::npos) {
        // Salvage nothing: a trace without its closing bracket is truncated; say where.
      }
      return Fail(fmt::format("truncated: the file ends at byte {} inside the traceEvents array "
                              "({} events read before the cut); the trace was not fully written",
                              buf_offset_ + end_, event_index_));
    }
  }
}

ReadStatus KinetoParser::ParseWindow(size_t begin, size_t end) {
  // Trim whitespace; an empty array is fine.
  while (begin < end && IsWs(buf_[begin])) ++begin;
  while (end > begin && IsWs(buf_[end - 1])) --end;
  if (begin == end) return {};
  const size_t n = end - begin;
  window_.resize(n + 2 + simdjson::SIMDJSON_PADDING);
  window_[0] = '[';
  std::memcpy(window_.data() + 1, buf_.data() + begin, n);
  window_[n + 1] = ']';
  std::memset(window_.data() + n + 2, 0, simdjson::SIMDJSON_PADDING);
  od::document doc;
  auto error = parser_.iterate(window_.data(), n + 2, window_.size()).get(doc);
  const uint64_t window_offset = buf_offset_ + begin;
  auto where = [&](od::document& d) -> uint64_t {
    const char* loc = nullptr;
    if (!d.current_location().get(loc) && loc >= window_.data() && loc < window_.data() + n + 2) {
      return window_offset + static_cast<uint64_t>(loc - window_.data()) - 1;
    }
    return window_offset;
  };
  if (error) return Fail(fmt::format("invalid JSON near byte {}: {}", window_offset, simdjson::error_message(error)));
  od::array arr;
  if ((error = doc.get_array().get(arr))) {
    return Fail(fmt::format("invalid JSON near byte {}: {}", window_offset, simdjson::error_message(error)));
  }
  for (auto element : arr) {
    od::value v;
    if ((error = element.get(v))) {
      return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): {}", where(doc), event_index_,
                              simdjson::error_message(error)));
    }
    od::json_type t;
    if ((error = v.type().get(t))) {
      return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): {}", where(doc), event_index_,
                              simdjson::error_message(error)));
    }
    if (t != od::json_type::object) {
      Malformed(kMalformedNotObject);
      ++event_index_;
      continue;
    }
    od::object obj;
    if ((error = v.get_object().get(obj))) {
      return Fail(fmt::format("invalid JSON in traceEvents near byte {}: {}", where(doc), simdjson::error_message(error)));
    }
    HandleEvent(obj);
    ++event_index_;
    ++trace_.stats.events_read;
  }
  return {};
}

uint32_t KinetoParser::CpuTrack(const IdValue& pid, const IdValue& tid) {
  const StrId pn = pid.str.empty() ? kNoStr : trace_.strings.Intern(pid.str);
  const StrId tn = tid.str.empty() ? kNoStr : trace_.strings.Intern(tid.str);
  if (pid.num == last_pid_ && tid.num == last_tid_ && pn == last_pid_name_ && tn == last_tid_name_) return last_track_;
  last_pid_ = pid.num;
  last_tid_ = tid.num;
  last_pid_name_ = pn;
  last_tid_name_ = tn;
  last_track_ = trace_.GetOrAddTrack(rank_, TrackKind::kCpuThread, pid.num, tid.num, pn, tn);
  return last_track_;
}

uint32_t KinetoParser::GpuTrack(int64_t device, int64_t stream) {
  return trace_.GetOrAddTrack(rank_, TrackKind::kGpuStream, device, stream);
}

void KinetoParser::HandleEvent(od::object obj) {
  std::string_view ph, cat, ts_text, dur_text;
  StrId name = kNoStr;
  bool has_name = false, bad_type = false;
  IdValue pid, tid;
  int64_t external_id = kNoId, correlation = kNoId, device = -1, stream = -1, bytes = -1, flow_id = kNoId;
  bool flow_id_present = false;
  StrId input_dims = kNoStr, input_types = kNoStr, meta_name = kNoStr;
  std::vector<std::pair<StrId, double>> counter_values;

  for (auto field_result : obj) {
    od::field field;
    if (std::move(field_result).get(field)) return Malformed(kInvalidField);
    const std::string_view key = RawKey(field);
    od::value v = field.value();
    switch (key.size()) {
      case 2:
        if (key == "ph") {
          // Views from get_string stay valid until the next window is parsed.
          if (v.get_string().get(ph)) bad_type = true;
        } else if (key == "ts") {
          ts_text = v.raw_json_token();
        } else if (key == "id") {
          if (auto id = GetInt(v)) { flow_id = *id; flow_id_present = true; }
        }
        break;
      case 3:
        if (key == "cat") {
          if (v.get_string().get(cat)) bad_type = true;
        } else if (key == "pid") {
          pid = GetId(v);
        } else if (key == "tid") {
          tid = GetId(v);
        } else if (key == "dur") {
          dur_text = v.raw_json_token();
        }
        break;
      case 4:
        if (key == "name") {
          std::string_view s;
          if (v.get_string().get(s)) bad_type = true;
          else {
            name = trace_.strings.Intern(s);
            has_name = true;
          }
        } else if (key == "args") {
          od::object args;
          if (v.get_object().get(args)) break;
          for (auto af_result : args) {
            od::field af;
            if (std::move(af_result).get(af)) { bad_type = true; break; }
            const std::string_view ak = RawKey(af);
            od::value av = af.value();
            if (ak == "External id") {
              if (auto x = GetInt(av)) external_id = *x;
            } else if (ak == "correlation") {
              if (auto x = GetInt(av)) correlation = *x;
            } else if (ak == "device") {
              if (auto x = GetInt(av)) device = *x;
            } else if (ak == "stream") {
              if (auto x = GetInt(av)) stream = *x;
            } else if (ak == "bytes") {
              if (auto x = GetInt(av)) bytes = *x;
            } else if (ak == "Input Dims") {
              std::string_view raw;
              od::array a;
              if (!av.get_array().get(a) && !a.raw_json().get(raw)) input_dims = trace_.strings.Intern(raw);
            } else if (ak == "Input type") {
              std::string_view raw;
              od::array a;
              if (!av.get_array().get(a) && !a.raw_json().get(raw)) input_types = trace_.strings.Intern(raw);
            } else if (ak == "name") {
              std::string_view s;
              if (!av.get_string().get(s)) meta_name = trace_.strings.Intern(s);
            } else if (ph == "C") {
              double d;
              if (!av.get_double().get(d)) counter_values.emplace_back(trace_.strings.Intern(ak), d);
            }
          }
        }
        break;
      default:
        break;
    }
  }
  if (bad_type) return Malformed(kInvalidField);
  if (ph.empty()) return Malformed(kMissingPh);
  if ((pid.present && !pid.ok) || (tid.present && !tid.ok)) return Malformed(kInvalidPidTid);

  const char p0 = ph[0];
  if (p0 == 'M' && ph.size() == 1) {
    if (has_name && trace_.strings.Get(name) == "thread_name" && meta_name != kNoStr) {
      thread_names_.push_back({pid.num, tid.num, meta_name});
    }
    return;
  }

  if (ts_text.empty()) return Malformed(kMissingTs);
  const auto ts = ParseMicrosToNs(ts_text);
  if (!ts) return Malformed(kInvalidTs);

  if ((p0 == 's' || p0 == 'f' || p0 == 't') && ph.size() == 1) {
    if (!flow_id_present) return Malformed(kInvalidField);
    Flow f;
    f.id = flow_id;
    f.cat = trace_.strings.Intern(cat);
    f.track = CpuTrack(pid, tid);
    f.ts_ns = *ts;
    f.is_start = (p0 == 's');
    trace_.flows.push_back(f);
    return;
  }
  if (p0 == 'C' && ph.size() == 1) {
    const uint32_t track = CpuTrack(pid, tid);
    for (const auto& [series, value] : counter_values) {
      const StrId cname = counter_values.size() == 1 && has_name ? name : series;
      trace_.counters.push_back({track, cname, *ts, value});
    }
    return;
  }

  bool known_cat = true;
  EventKind kind = cat.empty() ? EventKind::kCpuOp : KindFromCat(cat, &known_cat);
  if (cat.empty() && pid.str == "CUDA functions") kind = EventKind::kKernel;  // legacy export, use_cuda=True
  if (!known_cat) kind = EventKind::kOther;

  Event e;
  e.ts_ns = *ts;
  e.kind = kind;
  e.name = name;
  e.external_id = external_id;
  e.correlation = correlation;

  if (p0 == 'X' && ph.size() == 1) {
    if (dur_text.empty()) return Malformed(kMissingDur);
    const auto dur = ParseMicrosToNs(dur_text);
    if (!dur) return Malformed(kInvalidDur);
    if (*dur < 0) return Malformed(kNegativeDur);
    if (*ts > 0 && *dur > INT64_MAX - *ts) return Malformed(kInvalidDur);
    e.dur_ns = *dur;
  } else if ((p0 == 'B' || p0 == 'E') && ph.size() == 1) {
    // handled below, after the track is known
  } else if ((p0 == 'i' || p0 == 'I' || p0 == 'n' || p0 == 'R') && ph.size() == 1) {
    e.kind = EventKind::kInstant;
    e.dur_ns = 0;
  } else {
    trace_.stats.Add(kUnsupportedPhase, IssueSeverity::kInfo, Where());
    return;
  }
  if (!has_name && p0 != 'E') return Malformed(kMissingName);

  if (IsGpuKind(kind)) {
    const int64_t dev = device >= 0 ? device : pid.num;
    const int64_t str = stream >= 0 ? stream : tid.num;
    e.track = GpuTrack(dev, str);
  } else {
    e.track = CpuTrack(pid, tid);
  }

  if (p0 == 'B') {
    open_begins_.push_back({e.track, e.name, e.ts_ns, e.kind});
    return;
  }
  if (p0 == 'E') {
    // Close the innermost open range of this track.
    for (size_t k = open_begins_.size(); k-- > 0;) {
      if (open_begins_[k].track == e.track) {
        const PendingBegin b = open_begins_[k];
        open_begins_.erase(open_begins_.begin() + static_cast<std::ptrdiff_t>(k));
        if (e.ts_ns < b.ts) return Malformed(kNegativeDur);
        e.dur_ns = e.ts_ns - b.ts;
        e.ts_ns = b.ts;
        e.name = b.name;
        e.kind = b.kind;
        trace_.AddEvent(e);
        return;
      }
    }
    return Malformed(kUnmatchedEnd);
  }

  if (kind == EventKind::kMemcpy || kind == EventKind::kMemset) {
    MemcpyInfo info = kind == EventKind::kMemcpy ? ParseMemcpyName(trace_.strings.Get(name)) : MemcpyInfo{};
    info.bytes = bytes;
    e.aux = static_cast<uint32_t>(trace_.memcpys.size());
    trace_.memcpys.push_back(info);
  } else if (input_dims != kNoStr || input_types != kNoStr) {
    e.aux = static_cast<uint32_t>(trace_.op_inputs.size());
    trace_.op_inputs.push_back({input_dims, input_types});
  }
  trace_.AddEvent(e);
}

ReadStatus KinetoParser::ParseMetadata() {
  for (size_t k = 0; k < open_begins_.size(); ++k) trace_.stats.Add(kUnclosedBegin, IssueSeverity::kDataLoss, source_);
  open_begins_.clear();
  if (bare_array_) {
    for (char c : trailer_) {
      if (!IsWs(c)) return Fail("unexpected data after the top-level event array");
    }
    return {};
  }
  std::string doc_text = "{" + header_ + "\"traceEvents\":[]" + trailer_;
  simdjson::dom::parser dp;
  simdjson::dom::element root;
  if (auto err = dp.parse(doc_text).get(root)) {
    size_t last = trailer_.find_last_not_of(" \t\r\n");
    if (last == std::string::npos || trailer_[last] != '}') {
      return Fail("truncated: the file ends after the traceEvents array without closing the top-level object");
    }
    return Fail(fmt::format("invalid JSON in the trace's top-level members: {}", simdjson::error_message(err)));
  }
  simdjson::dom::object top;
  if (root.get_object().get(top)) return Fail("top level is not an object");
  for (auto [key, value] : top) {
    if (key == "schemaVersion") {
      meta.schema_version = simdjson::minify(value);
    } else if (key == "baseTimeNanoseconds") {
      int64_t b;
      uint64_t ub;
      if (!value.get_int64().get(b)) meta.base_time_ns = b;
      else if (!value.get_uint64().get(ub) && ub <= static_cast<uint64_t>(INT64_MAX)) meta.base_time_ns = static_cast<int64_t>(ub);
    } else if (key == "distributedInfo") {
      int64_t r, w;
      std::string_view backend;
      if (!value["rank"].get_int64().get(r)) declared_rank = static_cast<int32_t>(r);
      if (!value["world_size"].get_int64().get(w)) meta.world_size = static_cast<int32_t>(w);
      if (!value["backend"].get_string().get(backend)) meta.backend = std::string(backend);
    } else if (key == "deviceProperties") {
      simdjson::dom::array arr;
      if (value.get_array().get(arr)) continue;
      for (auto d : arr) {
        DeviceProperties p;
        int64_t x;
        std::string_view s;
        if (!d["id"].get_int64().get(x)) p.id = static_cast<int32_t>(x);
        if (!d["name"].get_string().get(s)) p.name = std::string(s);
        if (!d["totalGlobalMem"].get_int64().get(x)) p.total_global_mem = x;
        if (!d["computeMajor"].get_int64().get(x)) p.compute_major = static_cast<int32_t>(x);
        if (!d["computeMinor"].get_int64().get(x)) p.compute_minor = static_cast<int32_t>(x);
        if (!d["numSms"].get_int64().get(x)) p.num_sms = static_cast<int32_t>(x);
        meta.devices.push_back(std::move(p));
      }
    } else if (key == "trainrx") {
      // Our collector's config block: {"workload": "cnn", "knobs": {...}, "probe": {...}}
      simdjson::dom::object cfg;
      if (value.get_object().get(cfg)) continue;
      for (auto [ck, cv] : cfg) meta.config[std::string(ck)] = simdjson::minify(cv);
    } else if (key == "record_shapes" || key == "with_stack" || key == "profile_memory" ||
               key == "with_flops" || key == "with_modules" || key == "displayTimeUnit") {
      meta.config[std::string(key)] = simdjson::minify(value);
    }
  }
  return {};
}

ReadStatus KinetoParser::Parse(io::ByteSource& src) {
  first_track = trace_.tracks.size();
  first_event = trace_.events.size();
  const size_t first_flow = trace_.flows.size(), first_counter = trace_.counters.size();
  buf_.resize(opt_.window_bytes + simdjson::SIMDJSON_PADDING);
  if (auto st = FindEventsArray(src); !st.ok) return st;
  if (auto st = ScanEvents(src); !st.ok) return st;
  if (auto st = ParseMetadata(); !st.ok) return st;
  // Kineto writes event times relative to baseTimeNanoseconds when it is present.
  if (meta.base_time_ns != 0) {
    for (size_t i = first_event; i < trace_.events.size(); ++i) trace_.events[i].ts_ns += meta.base_time_ns;
    for (size_t i = first_flow; i < trace_.flows.size(); ++i) trace_.flows[i].ts_ns += meta.base_time_ns;
    for (size_t i = first_counter; i < trace_.counters.size(); ++i) trace_.counters[i].ts_ns += meta.base_time_ns;
  }
  for (const auto& tn : thread_names_) {
    for (size_t t = first_track; t < trace_.tracks.size(); ++t) {
      Track& tr = trace_.tracks[t];
      const bool gpu_match = tr.kind == TrackKind::kGpuStream && tr.device == tn.pid && tr.stream == tn.tid;
      const bool cpu_match = tr.kind == TrackKind::kCpuThread && tr.pid == tn.pid && tr.tid == tn.tid;
      if (gpu_match || cpu_match) tr.name = tn.name;
    }
  }
  return {};
}

}  // namespace

// Parses one source and assigns its rank: distributedInfo.rank, else the hint, else the file
// name, else the first free rank. Collisions (two files claiming one rank) move the later file
// to the next free rank and say so in rank_source.
ReadStatus ParseOneSource(io::ByteSource& src, const std::string& name, int32_t rank_hint, Trace& trace,
                    const ReadOptions& options) {
  constexpr int32_t kProvisional = -1000000;
  KinetoParser parser(trace, name, kProvisional, options);
  if (auto st = parser.Parse(src); !st.ok) {
    // Leave no half-read events of this file behind.
    trace.events.resize(parser.first_event);
    return st;
  }
  auto taken = [&](int32_t r) { return trace.FindRank(r) != nullptr; };
  int32_t rank = -1;
  std::string how;
  if (parser.declared_rank >= 0) {
    rank = parser.declared_rank;
    how = "distributedInfo";
  } else if (rank_hint >= 0) {
    rank = rank_hint;
    how = "given";
  } else if (int32_t fr = RankFromFileName(name); fr >= 0) {
    rank = fr;
    how = "file name";
  } else {
    rank = 0;
    how = "input order";
  }
  if (taken(rank)) {
    while (taken(rank)) ++rank;
    how += " (collided with another file; moved)";
  }
  RankInfo info = std::move(parser.meta);
  info.rank = rank;
  info.source = name;
  info.rank_source = how;
  info.declared_rank = parser.declared_rank;
  info.job = parser.declared_rank >= 0
                 ? fmt::format("world_size {}{}", info.world_size, info.backend.empty() ? "" : ", " + info.backend)
                 : "no distributedInfo";
  // Losses our collector recorded while tracing (its "trainrx" block) are data loss of this trace.
  for (const char* key : {"dropped_records", "cupti_dropped_records", "unfinished_ranges"}) {
    auto it = info.config.find(key);
    if (it == info.config.end()) continue;
    const uint64_t n = std::strtoull(it->second.c_str(), nullptr, 10);
    if (n > 0) {
      trace.stats.Add(fmt::format("collector_{}", key),
                      std::string_view(key) == "unfinished_ranges" ? IssueSeverity::kInfo : IssueSeverity::kDataLoss,
                      fmt::format("{}: reported by the trainrx collector", name), n);
    }
  }
  trace.ranks.push_back(std::move(info));
  trace.RemapRank(kProvisional, rank);
  return {};
}


}  // namespace trainrx::profiler
