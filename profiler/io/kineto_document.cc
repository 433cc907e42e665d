// The top-level document of a Kineto / Chrome trace, read in windows (the SIMD-compiled half of the
// reader; see kineto_reader.h for the contract and kineto_reader.cc for the entry points and the CPU
// check).
//
// Pipeline (one pass, bounded memory):
//   ByteSource (file | gzip) -> rolling window buffer
//     -> header scan: find "traceEvents":[ (or a bare top-level array)
//     -> splitter: a string-aware depth scanner finds the last complete event in the window
//     -> simdjson On-Demand parses "[" + complete events + "]" -> EventDecoder fills the Trace
//        (kineto_events.cc)
//     -> trailer: everything after the events array, parsed with the header for metadata
//        (kineto_metadata.cc)
//
// Worked example: {"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"k",
// "pid":0,"tid":7,"ts":10.5,"dur":2,"args":{"stream":7,"correlation":3}}],"displayTimeUnit":"ms"}
//   header  = "\"schemaVersion\":1,"    trailer = ",\"displayTimeUnit\":\"ms\"}"
//   event   -> Event{kind=kKernel, ts_ns=10500, dur_ns=2000, correlation=3} on GPU track (dev 0, stream 7)
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "byte_source.h"
#include "kineto_parse.h"
#include "kineto_parse_internal.h"

namespace trainrx::profiler {
namespace {

namespace od = simdjson::ondemand;

// The string-aware scan the header's value skipping and ElementBounds share (the splitter has its
// own, memchr-accelerated one): calls on(c, i) for each { [ } ] , outside strings from b[i] on, and
// stops where on returns false (returning that index), else at end. `in_str` carries across calls.
template <typename On>
size_t ScanOutsideStrings(const char* b, size_t i, size_t end, bool& in_str, On on) {
  for (; i < end; ++i) {
    const char c = b[i];
    if (in_str) {
      if (c == '\\') ++i;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if ((c == '{' || c == '[' || c == '}' || c == ']' || c == ',') && !on(c, i)) return i;
  }
  return end;
}

// Splits one source into its header, its events (handed to the decoder a window at a time) and its
// trailer. Errors name the source and a byte offset; malformed events are the decoder's business.
class DocumentReader {
 public:
  DocumentReader(io::ByteSource& src, const std::string& source, EventDecoder& decoder, IngestStats& stats,
                 size_t window_bytes, bool salvage)
      : src_(src), source_(source), decoder_(decoder), stats_(stats), window_bytes_(window_bytes), salvage_(salvage) {}

  // Reads the whole source: every event goes to the decoder; header() and trailer() are kept.
  ReadStatus Read() {
    buf_.resize(window_bytes_ + simdjson::SIMDJSON_PADDING);
    if (auto st = FindEventsArray(); !st.ok) return st;
    return ScanEvents();
  }
  // A legacy export: the document is the events array, with no header, trailer or metadata.
  bool bare_array() const { return bare_array_; }
  const std::string& header() const { return header_; }
  const std::string& trailer() const { return trailer_; }

 private:
  ReadStatus Fail(std::string_view what) const { return SourceError(source_, what); }
  // Reads more input at the end of the buffer; returns bytes read, 0 at EOF, -1 on error.
  std::ptrdiff_t Fill();
  void Compact();
  ReadStatus FindEventsArray();
  ReadStatus ScanEvents();
  ReadStatus ParseWindow(size_t begin, size_t end);
  // How a simdjson pass over a run of elements ended: all read, at an element whose JSON broke
  // inside (counted by the decoder, included in `handled`), or unreadable from element `handled` on.
  struct Pass {
    size_t handled = 0;
    enum Stop { kAll, kBroken, kUnreadable } stop = kAll;
  };
  Pass FastPass(size_t begin, size_t end);
  std::vector<std::pair<size_t, size_t>> ElementBounds(size_t begin, size_t end) const;
  ReadStatus Salvage(int depth, bool in_str);

  io::ByteSource& src_;
  const std::string& source_;
  EventDecoder& decoder_;
  IngestStats& stats_;
  size_t window_bytes_;
  bool salvage_;

  std::vector<char> buf_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // end of valid data
  uint64_t buf_offset_ = 0;  // file offset of buf_[0]
  // This source's bytes so far (stats_.bytes_read counts every source read into the trace).
  uint64_t source_bytes_ = 0;
  bool bare_array_ = false;
  std::string header_;   // top-level members before "traceEvents" (object form)
  std::string trailer_;  // everything after the events array's ']'
  // Splitter state, carried across refills.
  size_t scan_ = 0;
  int depth_ = 0;
  bool in_string_ = false;

  od::parser parser_;
  std::vector<char> window_;  // "[" + events + "]" + padding
};

std::ptrdiff_t DocumentReader::Fill() {
  if (buf_.size() - end_ < (1u << 16)) {
    Compact();
    if (buf_.size() - end_ < (1u << 16)) {
      buf_.resize(std::max<size_t>(buf_.size() * 2, window_bytes_ + simdjson::SIMDJSON_PADDING));
    }
  }
  const std::ptrdiff_t r = src_.Read(buf_.data() + end_, buf_.size() - end_ - simdjson::SIMDJSON_PADDING);
  if (r > 0) {
    end_ += static_cast<size_t>(r);
    source_bytes_ += static_cast<uint64_t>(r);
    stats_.bytes_read += static_cast<uint64_t>(r);
  }
  return r;
}

void DocumentReader::Compact() {
  if (begin_ == 0) return;
  std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
  buf_offset_ += begin_;
  end_ -= begin_;
  scan_ -= begin_;
  begin_ = 0;
}

// Finds the start of the events: a top-level '[' (legacy export) or the "traceEvents" member.
ReadStatus DocumentReader::FindEventsArray() {
  // Skip whitespace and a UTF-8 BOM.
  for (;;) {
    while (begin_ < end_ && IsJsonWs(buf_[begin_])) ++begin_;
    if (begin_ + 3 <= end_ && static_cast<unsigned char>(buf_[begin_]) == 0xEF &&
        static_cast<unsigned char>(buf_[begin_ + 1]) == 0xBB && static_cast<unsigned char>(buf_[begin_ + 2]) == 0xBF) {
      begin_ += 3;
      continue;
    }
    if (begin_ < end_ && end_ - begin_ >= 3) break;
    const auto r = Fill();
    if (r < 0) return Fail("cannot read: " + src_.error());
    if (r == 0) break;
  }
  while (begin_ < end_ && IsJsonWs(buf_[begin_])) ++begin_;
  if (begin_ >= end_) {
    if (src_.cut_short()) return Fail("truncated: the gzip data ends before any trace text could be inflated");
    return Fail(source_bytes_ == 0 ? "file is empty; expected a PyTorch profiler (Kineto/Chrome) trace"
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
      const auto r = Fill();
      if (r < 0) return Fail("cannot read: " + src_.error());
      if (r == 0) {
        return Fail(fmt::format("truncated or not a trace: the top-level JSON object ends at byte {} "
                                "before a \"traceEvents\" array was found",
                                buf_offset_ + end_));
      }
      p = begin_ + rel;
      return std::nullopt;
    };
    while (p < end_ && (IsJsonWs(buf_[p]) || buf_[p] == ',')) ++p;
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
    while (v < end_ && IsJsonWs(buf_[v])) ++v;
    if (v < end_ && buf_[v] != ':') {  // issue 15: "traceEvents" [ was taken for a member
      return Fail(fmt::format("invalid JSON at byte {}: expected ':' after the member name \"{}\"", buf_offset_ + v, key));
    }
    ++v;
    while (v < end_ && IsJsonWs(buf_[v])) ++v;
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
    bool in_str = false, done = false;
    const size_t i = ScanOutsideStrings(buf_.data(), v, end_, in_str, [&](char c, size_t) {
      if (c == '{' || c == '[') ++depth;
      else if ((c == '}' || c == ']') && depth > 0) --depth;
      else if (c != ',' || depth == 0) done = true;  // the object's end, or the comma after the value
      return !done;
    });
    if (!done) {
      if (auto e = need_more()) return *e;
      continue;
    }
    p = i;
  }
}

// The splitter: scans [scan_, end_) tracking string/depth state relative to the events array.
// Depth 0 is "between events". A ',' at depth 0 is a safe cut; a ']' at depth 0 ends the array.
ReadStatus DocumentReader::ScanEvents() {
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
        const auto r = src_.Read(tmp, sizeof tmp);
        if (r < 0) return Fail("cannot read: " + src_.error());
        if (r == 0) break;
        stats_.bytes_read += static_cast<uint64_t>(r);
        trailer_.append(tmp, static_cast<size_t>(r));
        if (trailer_.size() > (64u << 20)) return Fail("more than 64 MiB of data after the traceEvents array");
      }
      if (bare_array_) {
        for (char c : trailer_) {
          if (!IsJsonWs(c)) return Fail("unexpected data after the top-level event array");
        }
      }
      return {};
    }
    // Window full enough: parse the complete events, keep the partial tail.
    const size_t pending = (last_cut == std::string::npos) ? 0 : last_cut - begin_;
    if (pending >= window_bytes_ / 2) {
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
    const auto r = Fill();
    if (r < 0) return Fail("cannot read: " + src_.error());
    if (r == 0) return Salvage(depth, in_str);
  }
}

// The input ended inside the traceEvents array: a killed run's journal (probes/journal.h), a copy
// cut short, a disk that filled up. Unless strict, the complete events are read, the cut-off one is
// dropped and counted, and a "truncated_trace" data-loss entry says where the file ends, how many
// bytes were dropped and when the last complete event ended, so every report leads with it.
ReadStatus DocumentReader::Salvage(int depth, bool in_str) {
  const bool gzip_cut = src_.cut_short();
  if (!salvage_) {
    return Fail(fmt::format("truncated: the file ends at byte {} inside the traceEvents array "
                            "({} events read before the cut{}); the trace was not fully written",
                            buf_offset_ + end_, decoder_.event_index(), gzip_cut ? ", inside gzip data" : ""));
  }
  // The last element is whole only when the cut fell between events.
  auto elements = ElementBounds(begin_, end_);
  size_t dropped_bytes = 0;
  if (!elements.empty()) {
    const auto [s, e] = elements.back();
    if (depth != 0 || in_str || s == e) {  // cut inside an event, or right after a ','
      dropped_bytes = e - s;
      elements.pop_back();
    }
  }
  const size_t last_whole = elements.empty() ? begin_ : elements.back().second;
  if (auto st = ParseWindow(begin_, last_whole); !st.ok) return st;
  begin_ = end_;
  if (!bare_array_) trailer_ = "}";  // the header's members are whole; metadata after the events is lost
  stats_.Add("truncated_trace", IssueSeverity::kDataLoss,
             fmt::format("{}: the file ends at byte {} inside the traceEvents array{}: {} events read, {} bytes of a "
                         "cut-off event dropped; anything recorded after the last event is missing",
                         source_, buf_offset_ + end_, gzip_cut ? " (inside gzip data)" : "", decoder_.event_index(),
                         dropped_bytes),
             1);
  return {};
}

// The elements of [begin, end) (events separated by commas at depth 0, as the splitter cut them),
// as trimmed byte ranges. Only on the slow path of a window that holds a broken event.
std::vector<std::pair<size_t, size_t>> DocumentReader::ElementBounds(size_t begin, size_t end) const {
  std::vector<std::pair<size_t, size_t>> out;
  const char* b = buf_.data();
  auto push = [&](size_t s, size_t e) {
    while (s < e && IsJsonWs(b[s])) ++s;
    while (e > s && IsJsonWs(b[e - 1])) --e;
    out.push_back({s, e});
  };
  int depth = 0;
  bool in_str = false;
  size_t start = begin;
  ScanOutsideStrings(b, begin, end, in_str, [&](char c, size_t i) {
    if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') --depth;
    else if (depth == 0) {  // a comma between elements
      push(start, i);
      start = i + 1;
    }
    return true;
  });
  push(start, end);
  return out;
}

// One simdjson pass over the elements of [begin, end) into the decoder. Stops at the first element
// whose JSON is broken: On-Demand cannot go on past it (issue 15 saw every later event of an 8 MiB
// window dropped, uncounted, after one `{"name" 5}`).
DocumentReader::Pass DocumentReader::FastPass(size_t begin, size_t end) {
  Pass pass;
  const size_t n = end - begin;
  window_.resize(n + 2 + simdjson::SIMDJSON_PADDING);
  window_[0] = '[';
  std::memcpy(window_.data() + 1, buf_.data() + begin, n);
  window_[n + 1] = ']';
  std::memset(window_.data() + n + 2, 0, simdjson::SIMDJSON_PADDING);
  od::document doc;
  od::array arr;
  if (parser_.iterate(window_.data(), n + 2, window_.size()).get(doc) || doc.get_array().get(arr)) {
    pass.stop = Pass::kUnreadable;  // stage 1 refused the bytes (bad UTF-8, an unclosed string)
    return pass;
  }
  for (auto element : arr) {
    od::value v;
    od::json_type t;
    if (element.get(v) || v.type().get(t)) {
      pass.stop = Pass::kUnreadable;
      return pass;
    }
    if (t != od::json_type::object) {
      decoder_.NotAnObject();
      ++pass.handled;
      continue;
    }
    od::object obj;
    if (v.get_object().get(obj)) {
      pass.stop = Pass::kUnreadable;
      return pass;
    }
    ++pass.handled;
    if (!decoder_.Decode(obj)) {  // counted by the decoder; the document cannot go on
      pass.stop = Pass::kBroken;
      return pass;
    }
  }
  // The iteration ended: past the closing ']' unless it stopped early without saying why.
  const char* loc = nullptr;
  if (doc.current_location().get(loc) != simdjson::OUT_OF_BOUNDS) pass.stop = Pass::kUnreadable;
  return pass;
}

// A window of complete events. A broken event costs itself only: it is counted (with its byte
// offset) and the others are read, so the result does not depend on where windows are cut (issue
// 15: the same input read as valid at >= 8 KiB windows and as invalid at 4 KiB). When the fast
// pass meets one, the window is undone and read again one event at a time, each event its own
// document, cut where the splitter cut it. Broken structure between events (a missing or stray
// comma) is no event to skip: the read fails there.
ReadStatus DocumentReader::ParseWindow(size_t begin, size_t end) {
  while (begin < end && IsJsonWs(buf_[begin])) ++begin;
  while (end > begin && IsJsonWs(buf_[end - 1])) --end;
  if (begin == end) return {};
  const EventDecoder::Checkpoint mark = decoder_.Mark();
  if (FastPass(begin, end).stop == Pass::kAll) return {};
  decoder_.RollBack(mark);
  for (const auto& [s, e] : ElementBounds(begin, end)) {
    if (s == e) {
      return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): an empty element (a stray ',')",
                              buf_offset_ + s, decoder_.event_index()));
    }
    const Pass one = FastPass(s, e);
    if (one.stop == Pass::kBroken || (one.stop == Pass::kAll && one.handled == 1)) continue;
    if (one.handled == 0) {
      decoder_.Unreadable(buf_offset_ + s);
      continue;
    }
    return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): expected ',' between events",
                            buf_offset_ + s, decoder_.event_index()));
  }
  return {};
}

}  // namespace

ReadStatus ParseSource(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                       const ReadOptions& options, RankInfo* info) {
  EventDecoder decoder(trace, name, provisional_rank);
  DocumentReader doc(src, name, decoder, trace.stats, options.window_bytes, !options.strict);
  if (auto st = doc.Read(); !st.ok) return st;
  if (src.cut_short() && trace.stats.Count("truncated_trace") == 0) {
    trace.stats.Add("gzip_cut_short", IssueSeverity::kInfo,
                    name + ": the gzip data ends without its trailer (checksum unchecked); the JSON in it is whole");
  }
  if (!doc.bare_array()) {
    if (auto st = ReadTopLevelMetadata(doc.header(), doc.trailer(), name, info); !st.ok) return st;
  }
  decoder.Finish(info->base_time_ns);
  return {};
}

}  // namespace trainrx::profiler
