// The top-level document of a Kineto / Chrome trace, read in windows (the SIMD-compiled half of the
// reader; see reader.h for the contract and reader.cc for the entry points and the CPU
// check).
//
// Pipeline (one pass, bounded memory):
//   ByteSource (file | gzip) -> rolling window buffer
//     -> header scan: find "traceEvents":[ (or a bare top-level array)
//     -> splitter: a string-aware depth scanner finds the last complete event in the window and
//        counts the elements before it
//     -> WindowPipeline: the window's events are copied out as "[" + complete events + "]" and
//        parsed on a worker thread (simdjson On-Demand -> WindowDecoder -> Fragment), while this
//        thread reads and splits the next ones
//     -> SourceAssembler appends the fragments to the Trace in file order (kineto_events.cc)
//     -> trailer: everything after the events array, parsed with the header for metadata
//        (kineto_metadata.cc)
//
// Worked example: {"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"k",
// "pid":0,"tid":7,"ts":10.5,"dur":2,"args":{"stream":7,"correlation":3}}],"displayTimeUnit":"ms"}
//   header  = "\"schemaVersion\":1,"    trailer = ",\"displayTimeUnit\":\"ms\"}"
//   event   -> Event{kind=kKernel, ts_ns=10500, dur_ns=2000, correlation=3} on GPU track (dev 0, stream 7)
#include <fmt/format.h>

#if defined(__AVX2__) && defined(__PCLMUL__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "byte_source.h"
#include "kineto_parse.h"
#include "kineto_parse_internal.h"
#include "trainrx/profiler/parallel.h"

namespace trainrx::profiler {
namespace {

namespace od = simdjson::ondemand;

// The string-aware scan the header's value skipping and ElementBounds share (the splitter has its
// own, vectorized one): calls on(c, i) for each { [ } ] , outside strings from b[i] on, and
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

// The splitter: finds where one element of the events array ends and the next begins, so windows
// can be cut between events and parsed apart. It tracks string, escape and depth state across
// calls (the input arrives in pieces); depth 0 is "between events", so a ',' at depth 0 is a safe
// cut and a ']' at depth 0 ends the array. It also counts the elements (commas at depth 0), which
// gives each window the index of its first element before anyone parses it.
//
// Vectorized where the CPU allows (the parser files are compiled for x86-64-v3): 64 bytes at a
// time, quotes become an in-string mask by a carry-less multiply (prefix XOR), and only the
// structural characters outside strings are visited, one bit at a time. A block holding a
// backslash (rare in traces: escaped quotes in names) goes through the byte loop, which knows
// escapes; so does the tail of the input.
struct Splitter {
  static constexpr size_t kNone = std::string::npos;
  // Carried across calls.
  int depth = 0;
  bool in_str = false;
  bool escaped = false;  // the previous byte was a backslash inside a string
  uint64_t commas = 0;   // commas at depth 0 so far
  // Results of one call.
  size_t last_cut = kNone;  // the last comma at depth 0
  uint64_t cut_commas = 0;  // `commas` including that comma
  size_t array_end = kNone;  // the ']' that closes the events array
  size_t unbalanced = kNone;  // a '}' or ']' with nothing open
  bool stopped() const { return array_end != kNone || unbalanced != kNone; }

  // One structural character outside strings; false where the scan must stop.
  bool Structural(char c, size_t i) {
    switch (c) {
      case '{': case '[': ++depth; return true;
      case '}':
        if (--depth < 0) return unbalanced = i, false;
        return true;
      case ']':
        if (depth == 0) return array_end = i, false;
        --depth;
        return true;
      case ',':
        if (depth == 0) {
          last_cut = i;
          cut_commas = ++commas;
        }
        return true;
      default: return true;
    }
  }
  // Bits [from, to) of a 64-bit mask (0 <= from <= to <= 64).
  static uint64_t BitsBetween(size_t from, size_t to) {
    const uint64_t below_to = to >= 64 ? ~uint64_t{0} : (uint64_t{1} << to) - 1;
    const uint64_t below_from = from >= 64 ? ~uint64_t{0} : (uint64_t{1} << from) - 1;
    return below_to & ~below_from;
  }
  // Commas at depth 0 (bits of a block at b[base]).
  void TakeCommas(uint64_t m, size_t base) {
    if (m == 0) return;
    commas += static_cast<uint64_t>(__builtin_popcountll(m));
    cut_commas = commas;
    last_cut = base + 63 - static_cast<size_t>(__builtin_clzll(m));
  }
  // Byte at a time over b[i, end).
  void ScanBytes(const char* b, size_t i, size_t end) {
    for (; i < end; ++i) {
      const char c = b[i];
      if (in_str) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_str = false;
        continue;
      }
      if (c == '"') in_str = true;
      else if ((c == '{' || c == '[' || c == '}' || c == ']' || c == ',') && !Structural(c, i)) return;
    }
  }
  // Scans b[i, end) until the end or a stop (stopped()).
  void Scan(const char* b, size_t i, size_t end) {
    last_cut = array_end = unbalanced = kNone;
#if defined(__AVX2__) && defined(__PCLMUL__)
    auto mask = [](__m256i lo, __m256i hi, char c) {
      const __m256i v = _mm256_set1_epi8(c);
      return static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, v)))) |
             static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, v)))) << 32;
    };
    for (; i + 64 <= end; i += 64) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 32));
      if (escaped || mask(lo, hi, '\\') != 0) {
        ScanBytes(b, i, i + 64);
        if (stopped()) return;
        continue;
      }
      const uint64_t quotes = mask(lo, hi, '"');
      // Bit k: inside a string after byte k (an opening quote counts as inside, a closing one not).
      const uint64_t inside = static_cast<uint64_t>(_mm_cvtsi128_si64(
                                  _mm_clmulepi64_si128(_mm_set_epi64x(0, static_cast<int64_t>(quotes)), _mm_set1_epi8(-1), 0))) ^
                              (in_str ? ~uint64_t{0} : 0);
      if (__builtin_popcountll(quotes) & 1) in_str = !in_str;
      const uint64_t opens = (mask(lo, hi, '{') | mask(lo, hi, '[')) & ~inside;
      const uint64_t closes = (mask(lo, hi, '}') | mask(lo, hi, ']')) & ~inside;
      const int closed = __builtin_popcountll(closes);
      if (depth > closed) {  // inside an event for the whole block: no depth-0 comma, no stop
        depth += __builtin_popcountll(opens) - closed;
        continue;
      }
      // Only the brackets are visited; the commas of each stretch at depth 0 are taken at once.
      const uint64_t commas = mask(lo, hi, ',') & ~inside;
      uint64_t brackets = opens | closes;
      size_t zero_from = 0;  // the current stretch at depth 0 starts here (when depth == 0)
      while (brackets != 0) {
        const size_t k = static_cast<size_t>(__builtin_ctzll(brackets));
        brackets &= brackets - 1;
        if (depth == 0) TakeCommas(commas & BitsBetween(zero_from, k), i);
        if (!Structural(b[i + k], i + k)) return;
        if (depth == 0) zero_from = k + 1;
      }
      if (depth == 0) TakeCommas(commas & BitsBetween(zero_from, 64), i);
    }
#endif
    ScanBytes(b, i, end);
  }
};

// The elements of b[begin, end) (events separated by commas at depth 0, as the splitter cut them),
// as trimmed byte ranges. Only on slow paths: a window that holds a broken event, a cut-off file.
std::vector<std::pair<size_t, size_t>> ElementBounds(const char* b, size_t begin, size_t end) {
  std::vector<std::pair<size_t, size_t>> out;
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

// One window of complete events on its way through the pipeline.
struct WindowJob {
  std::vector<char> text;    // from `start`: "[" + events + "]" + simdjson padding
  size_t start = 0;          // where the JSON starts in text (a reader buffer handed over whole)
  size_t size = 0;           // JSON bytes: the events and the two brackets
  const char* json() const { return text.data() + start; }
  size_t capacity() const { return text.size() - start; }
  uint64_t offset = 0;       // source offset of text[1]
  uint64_t first_index = 0;  // index of the window's first element in the source
  uint64_t elements = 0;     // elements the splitter counted
  Fragment fragment;
  Status status;
  bool done = false;  // guarded by WindowPipeline::mu_
  // After the merge: the fragment's events still to be written into the trace (on a worker).
  EventCopy copy;
  bool copied = false;  // guarded by WindowPipeline::mu_
};

// Parses windows into fragments: one On-Demand pass, and one event at a time after a broken
// event. One per thread (it owns a simdjson parser).
class WindowParser {
 public:
  WindowParser(const std::string& source, int32_t rank) : source_(source), decoder_(source, rank) {}
  void Parse(WindowJob& job);

 private:
  Status Fail(std::string_view what) const { return SourceError(source_, what); }
  // How a simdjson pass over a run of elements ended: all read, at an element whose JSON broke
  // inside (counted by the decoder, included in `handled`), or unreadable from element `handled` on.
  struct Pass {
    size_t handled = 0;
    enum Stop { kAll, kBroken, kUnreadable } stop = kAll;
  };
  // json[0, n) is "[" + elements + "]", padded to `capacity`.
  Pass FastPass(const char* json, size_t n, size_t capacity);
  Status ParseOneAtATime(WindowJob& job, size_t begin, size_t end);

  const std::string& source_;
  WindowDecoder decoder_;
  od::parser parser_;
  std::vector<char> scratch_;  // one element at a time
};

// One simdjson pass over the elements of a window into the decoder. Stops at the first element
// whose JSON is broken: On-Demand cannot go on past it (issue 15 saw every later event of an 8 MiB
// window dropped, uncounted, after one `{"name" 5}`).
WindowParser::Pass WindowParser::FastPass(const char* json, size_t n, size_t capacity) {
  Pass pass;
  od::document doc;
  od::array arr;
  if (parser_.iterate(json, n, capacity).get(doc) || doc.get_array().get(arr)) {
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
void WindowParser::Parse(WindowJob& job) {
  decoder_.Begin(&job.fragment, job.first_index);
  const char* b = job.json();
  size_t begin = 1, end = job.size - 1;
  while (begin < end && IsJsonWs(b[begin])) ++begin;
  while (end > begin && IsJsonWs(b[end - 1])) --end;
  if (begin == end) {  // nothing but whitespace between two commas, or an empty array
    if (job.elements > 0) {
      job.status = Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): an empty element (a stray ',')",
                                    job.offset, job.first_index));
    }
    return;
  }
  if (FastPass(b, job.size, job.capacity()).stop != Pass::kAll) {
    decoder_.Begin(&job.fragment, job.first_index);  // undone, read again one at a time
    job.status = ParseOneAtATime(job, begin, end);
    if (!job.status.ok()) return;
  }
  if (job.fragment.elements != job.elements) {  // the splitter and the decoder disagree: our bug
    job.status = Status::Internal(fmt::format("{}: the window at byte {} holds {} elements by the splitter's count and "
                                              "{} by the parser's; please report it with the file",
                                              source_, job.offset, job.elements, job.fragment.elements));
  }
}

Status WindowParser::ParseOneAtATime(WindowJob& job, size_t begin, size_t end) {
  const char* b = job.json();
  for (const auto& [s, e] : ElementBounds(b, begin, end)) {
    const uint64_t at = job.offset + (s - 1);
    if (s == e) {
      return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): an empty element (a stray ',')",
                              at, decoder_.event_index()));
    }
    const size_t n = e - s;
    scratch_.resize(n + 2 + simdjson::SIMDJSON_PADDING);
    scratch_[0] = '[';
    std::memcpy(scratch_.data() + 1, b + s, n);
    scratch_[n + 1] = ']';
    std::memset(scratch_.data() + n + 2, 0, simdjson::SIMDJSON_PADDING);
    const Pass one = FastPass(scratch_.data(), n + 2, scratch_.size());
    if (one.stop == Pass::kBroken || (one.stop == Pass::kAll && one.handled == 1)) continue;
    if (one.handled == 0) {
      decoder_.Unreadable(at);
      continue;
    }
    return Fail(fmt::format("invalid JSON in traceEvents near byte {} (event #{}): expected ',' between events", at,
                            decoder_.event_index()));
  }
  return {};
}

// Parses one source's windows on worker threads while the reading thread splits the next ones,
// and merges the fragments into the trace in file order on the reading thread. The merge leaves
// writing a fragment's events into the trace (most of its cost: a pass over every event, in memory
// another core wrote) to the workers, which take such copies before the next window; each copy
// writes its own range of the event array, sized by the merge, which never moves it while copies
// are pending (SourceAssembler::CanCopyApart), and every copy is done before Finish() returns. At
// most workers + kSpareWindows windows exist at once, merged or not (memory: that many windows and
// fragments). With no workers, or for a source that fits in one window, windows are parsed and
// their events written on the reading thread.
class WindowPipeline {
 public:
  // Windows beyond one per worker that may wait, parsed or queued, for their turn to merge. Merging
  // is in file order, so a window that takes long holds up those after it; with only 2 spare, a
  // worker sat idle behind it (about 10 % of both cores while reading the 240 MB trace, perf).
  static constexpr size_t kSpareWindows = 6;
  WindowPipeline(const std::string& source, int32_t rank, SourceAssembler& assembler, size_t workers, ReadTimings* timings)
      : source_(source), rank_(rank), assembler_(assembler), workers_(workers), timings_(timings), inline_parser_(source, rank) {}
  ~WindowPipeline() {
    DrainCopies();  // on an error path too: no worker may write into the trace after this
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WindowPipeline(const WindowPipeline&) = delete;
  WindowPipeline& operator=(const WindowPipeline&) = delete;

  // A job to fill (a recycled one when it can); waits for, and merges, the oldest window while
  // the most that may exist are in flight.
  Status Acquire(std::unique_ptr<WindowJob>* job) {
    ReapCopies(false);
    while (in_order_.size() + copying_.size() >= workers_ + kSpareWindows) {
      if (!copying_.empty()) {
        HelpOrWaitForACopy();
      } else if (auto st = MergeFinished(true); !st.ok()) {
        return st;
      }
    }
    if (free_.empty()) {
      *job = std::make_unique<WindowJob>();
    } else {
      *job = std::move(free_.back());
      free_.pop_back();
    }
    (*job)->status = {};
    (*job)->done = false;
    return {};
  }
  // Queues a filled job, or parses it here (no workers, or the source's only window), then merges
  // the windows that are finished, in order. Returns the first error in file order.
  Status Submit(std::unique_ptr<WindowJob> job, bool last) {
    WindowJob* j = job.get();
    in_order_.push_back(std::move(job));
    if (workers_ == 0 || (last && threads_.empty())) {
      const ChargedTo charged(Part(&ReadTimings::parse));
      inline_parser_.Parse(*j);
      j->done = true;
    } else {
      if (threads_.empty()) {
        for (size_t i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        queue_.push_back(j);
      }
      work_cv_.notify_one();
    }
    return MergeFinished(false);
  }
  // Waits for every window and merges them.
  Status Finish() {
    while (!in_order_.empty()) {
      if (auto st = MergeFinished(true); !st.ok()) {
        DrainCopies();
        return st;
      }
    }
    DrainCopies();
    assembler_.FlushIssues();
    return {};
  }

 private:
  void Work() {
    WindowParser parser(source_, rank_);
    for (;;) {
      WindowJob* job = nullptr;
      bool copy = false;
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stop_ || !copies_.empty() || !queue_.empty(); });
        if (stop_) return;
        if (!copies_.empty()) {  // first: a copy frees a window, and the reader may wait for one
          job = copies_.front();
          copies_.pop_front();
          copy = true;
        } else {
          job = queue_.front();
          queue_.pop_front();
        }
      }
      if (copy) {
        const ChargedTo charged(Part(&ReadTimings::copy));
        job->copy.Run();
      } else {
        const ChargedTo charged(Part(&ReadTimings::parse));
        parser.Parse(*job);
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        (copy ? job->copied : job->done) = true;
      }
      done_cv_.notify_all();
    }
  }
  // Moves jobs whose copy is done to free_; with wait, first runs the copies no worker has taken
  // yet here and waits for those under way, so that every copy is done.
  void ReapCopies(bool wait) {
    if (copying_.empty()) return;
    std::unique_lock<std::mutex> l(mu_);
    if (wait) {
      while (RunAQueuedCopy(l)) {
      }
      done_cv_.wait(l, [&] {
        return std::all_of(copying_.begin(), copying_.end(), [](const auto& j) { return j->copied; });
      });
    }
    for (size_t i = 0; i < copying_.size();) {
      if (copying_[i]->copied) {
        free_.push_back(std::move(copying_[i]));
        copying_[i] = std::move(copying_.back());
        copying_.pop_back();
      } else {
        ++i;
      }
    }
  }
  void DrainCopies() { ReapCopies(true); }
  // With mu_ held (l): runs a copy no worker has taken yet on this thread (mu_ released meanwhile);
  // false when there is none.
  bool RunAQueuedCopy(std::unique_lock<std::mutex>& l) {
    if (copies_.empty()) return false;
    WindowJob* j = copies_.front();
    copies_.pop_front();
    l.unlock();
    {
      const ChargedTo charged(Part(&ReadTimings::copy));
      j->copy.Run();
    }
    l.lock();
    j->copied = true;
    return true;
  }
  // Runs a copy no worker has taken yet here, or else waits until a copy under way is done.
  void HelpOrWaitForACopy() {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!RunAQueuedCopy(l)) {
        done_cv_.wait(l, [&] {
          return std::any_of(copying_.begin(), copying_.end(), [](const auto& j) { return j->copied; });
        });
      }
    }
    ReapCopies(false);
  }
  // Merges finished windows from the oldest on; with wait, waits for the oldest first.
  Status MergeFinished(bool wait) {
    while (!in_order_.empty()) {
      WindowJob* j = in_order_.front().get();
      {
        std::unique_lock<std::mutex> l(mu_);
        if (!j->done) {
          if (!wait) break;
          done_cv_.wait(l, [&] { return j->done; });
        }
      }
      wait = false;
      if (!j->status.ok()) return j->status;
      if (workers_ > 0 && assembler_.CanCopyApart(j->fragment)) {
        {
          const ChargedTo charged(Part(&ReadTimings::merge));
          assembler_.Merge(j->fragment, &j->copy);
        }
        {
          std::lock_guard<std::mutex> l(mu_);
          j->copied = false;
          copies_.push_back(j);
        }
        work_cv_.notify_one();
        copying_.push_back(std::move(in_order_.front()));
      } else {
        DrainCopies();  // this merge may move the event array (B/E events, or no room left)
        const ChargedTo charged(Part(&ReadTimings::merge));
        assembler_.Merge(j->fragment);
        free_.push_back(std::move(in_order_.front()));
      }
      in_order_.pop_front();
    }
    return {};
  }

  const std::string& source_;
  int32_t rank_;
  SourceAssembler& assembler_;
  size_t workers_;
  ReadTimings* timings_;
  // A part of the timings, when asked for (nullptr: not).
  ReadTimings::Part* Part(ReadTimings::Part ReadTimings::*part) const { return timings_ ? &(timings_->*part) : nullptr; }
  WindowParser inline_parser_;
  std::deque<std::unique_ptr<WindowJob>> in_order_;  // submitted, not merged yet (file order)
  std::vector<std::unique_ptr<WindowJob>> free_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<WindowJob*> queue_;  // submitted, not taken by a worker yet
  std::vector<std::unique_ptr<WindowJob>> copying_;  // merged, their events being copied
  std::deque<WindowJob*> copies_;  // merged, their copy not taken by a worker yet
  bool stop_ = false;
};

// Splits one source into its header, its events (handed to the decoder a window at a time) and its
// trailer. Errors name the source and a byte offset; malformed events are the decoder's business.
class DocumentReader {
 public:
  DocumentReader(io::ByteSource& src, const std::string& source, WindowPipeline& pipeline, IngestStats& stats,
                 size_t window_bytes, bool salvage)
      : src_(src), source_(source), pipeline_(pipeline), stats_(stats), window_bytes_(window_bytes), salvage_(salvage) {}

  // Reads the whole source: every event goes to the decoder; header() and trailer() are kept.
  Status Read() {
    buf_.resize(window_bytes_ + simdjson::SIMDJSON_PADDING);
    if (auto st = FindEventsArray(); !st.ok()) return st;
    return ScanEvents();
  }
  // A legacy export: the document is the events array, with no header, trailer or metadata.
  bool bare_array() const { return bare_array_; }
  const std::string& header() const { return header_; }
  const std::string& trailer() const { return trailer_; }

 private:
  Status Fail(std::string_view what) const { return SourceError(source_, what); }
  // Reads more input at the end of the buffer; returns bytes read, 0 at EOF, -1 on error.
  std::ptrdiff_t Fill();
  void Compact();
  Status FindEventsArray();
  Status ScanEvents();
  // Hands buf_[begin, end), `elements` complete elements, to the pipeline.
  Status Emit(size_t begin, size_t end, uint64_t elements, bool last);
  Status Salvage(int depth, bool in_str);

  io::ByteSource& src_;
  const std::string& source_;
  WindowPipeline& pipeline_;
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
  size_t scan_ = 0;  // bytes [begin_, scan_) have been through split_
  Splitter split_;
  uint64_t next_index_ = 0;  // index of the element at begin_
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

// Moves the unconsumed bytes to buf_[1]: buf_[0] stays free for the '[' of the window they start.
void DocumentReader::Compact() {
  if (begin_ <= 1) return;
  const size_t shift = begin_ - 1;
  std::memmove(buf_.data() + 1, buf_.data() + begin_, end_ - begin_);
  buf_offset_ += shift;
  end_ -= shift;
  scan_ -= shift;
  begin_ = 1;
}

// Finds the start of the events: a top-level '[' (legacy export) or the "traceEvents" member.
Status DocumentReader::FindEventsArray() {
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
    auto need_more = [&]() -> std::optional<Status> {
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

// Splits [scan_, end_) (Splitter); parses windows of at least half window_bytes_ of complete events
// as they form, refills, and at the array's end hands over the last window and reads the trailer.
Status DocumentReader::ScanEvents() {
  for (;;) {
    split_.Scan(buf_.data(), scan_, end_);
    if (split_.unbalanced != Splitter::kNone) {
      return Fail(fmt::format("invalid JSON at byte {}: unbalanced '}}' inside traceEvents", buf_offset_ + split_.unbalanced));
    }
    const size_t array_end = split_.array_end, last_cut = split_.last_cut;
    const uint64_t commas = split_.commas, cut_commas = split_.cut_commas;
    if (array_end != std::string::npos) {
      // The last window: one element more than its commas, unless it is empty ("[]", "[ ]").
      size_t b = begin_;
      while (b < array_end && IsJsonWs(buf_[b])) ++b;
      if (auto st = Emit(begin_, array_end, commas + (b < array_end ? 1 : 0), true); !st.ok()) return st;
      if (auto st = pipeline_.Finish(); !st.ok()) return st;
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
      // The elements before the cut: one per comma at depth 0 up to and including it. Emit
      // consumes through the cut (begin_ moves past it, the buffer may be a new one).
      if (auto st = Emit(begin_, last_cut, cut_commas, false); !st.ok()) return st;
      // Rescan the unconsumed tail from begin_ at depth 0 (it starts right after a cut).
      scan_ = begin_;
      split_ = Splitter{};
      continue;
    }
    scan_ = end_;
    const auto r = Fill();
    if (r < 0) return Fail("cannot read: " + src_.error());
    if (r == 0) return Salvage(split_.depth, split_.in_str);
  }
}

// The input ended inside the traceEvents array: a killed run's journal (probes/journal.h), a copy
// cut short, a disk that filled up. Unless strict, the complete events are read, the cut-off one is
// dropped and counted, and a "truncated_trace" data-loss entry says where the file ends, how many
// bytes were dropped and when the last complete event ended, so every report leads with it.
Status DocumentReader::Salvage(int depth, bool in_str) {
  const bool gzip_cut = src_.cut_short();
  if (auto st = pipeline_.Finish(); !st.ok()) return st;
  if (!salvage_) {
    return Fail(fmt::format("truncated: the file ends at byte {} inside the traceEvents array "
                            "({} events read before the cut{}); the trace was not fully written",
                            buf_offset_ + end_, next_index_, gzip_cut ? ", inside gzip data" : ""));
  }
  // The last element is whole only when the cut fell between events.
  auto elements = ElementBounds(buf_.data(), begin_, end_);
  size_t dropped_bytes = 0;
  if (!elements.empty()) {
    const auto [s, e] = elements.back();
    if (depth != 0 || in_str || s == e) {  // cut inside an event, or right after a ','
      dropped_bytes = e - s;
      elements.pop_back();
    }
  }
  const size_t last_whole = elements.empty() ? begin_ : elements.back().second;
  if (auto st = Emit(begin_, last_whole, elements.size(), true); !st.ok()) return st;
  if (auto st = pipeline_.Finish(); !st.ok()) return st;
  begin_ = end_;
  if (!bare_array_) trailer_ = "}";  // the header's members are whole; metadata after the events is lost
  stats_.Add("truncated_trace", IssueSeverity::kDataLoss,
             fmt::format("{}: the file ends at byte {} inside the traceEvents array{}: {} events read, {} bytes of a "
                         "cut-off event dropped; anything recorded after the last event is missing",
                         source_, buf_offset_ + end_, gzip_cut ? " (inside gzip data)" : "", next_index_,
                         dropped_bytes),
             1);
  return {};
}

Status DocumentReader::Emit(size_t begin, size_t end, uint64_t elements, bool last) {
  std::unique_ptr<WindowJob> job;
  if (auto st = pipeline_.Acquire(&job); !st.ok()) return st;
  const size_t n = end - begin;
  job->offset = buf_offset_ + begin;
  job->first_index = next_index_;
  job->elements = elements;
  job->size = n + 2;
  next_index_ += elements;
  if (!last && begin > 0) {
    // Hand the buffer over whole, not its bytes: the byte before the window (consumed: a ',', the
    // array's '[' or whitespace) becomes its '[', the cut ',' its ']'. The reader goes on in the
    // job's old buffer with only the unconsumed tail (a part of one event) copied into it.
    // The tail goes to next[1]: next[0] is the byte the next window's '[' takes, so that window
    // is handed over too rather than copied.
    std::vector<char> next = std::move(job->text);
    next.resize(buf_.size());
    const size_t tail = end_ - (end + 1);
    std::memcpy(next.data() + 1, buf_.data() + end + 1, tail);
    job->text = std::move(buf_);
    buf_ = std::move(next);
    job->start = begin - 1;
    job->text[begin - 1] = '[';
    job->text[end] = ']';
    std::memset(job->text.data() + end + 1, 0, simdjson::SIMDJSON_PADDING);  // within: Fill leaves it
    buf_offset_ += end;
    end_ = tail + 1;
    begin_ = 1;
  } else {
    job->start = 0;
    job->text.resize(n + 2 + simdjson::SIMDJSON_PADDING);
    job->text[0] = '[';
    std::memcpy(job->text.data() + 1, buf_.data() + begin, n);
    job->text[n + 1] = ']';
    std::memset(job->text.data() + n + 2, 0, simdjson::SIMDJSON_PADDING);
    if (!last) begin_ = end + 1;
  }
  return pipeline_.Submit(std::move(job), last);
}

}  // namespace

Status ParseSource(io::ByteSource& src, const std::string& name, int32_t provisional_rank, Trace& trace,
                       const ReadOptions& options, RankInfo* info) {
  // Room for the source's events up front (at most one per 100 bytes: Kineto's take about 175,
  // ours 115), so that merging the windows never moves the events already merged; pages the
  // events do not reach are never touched. Grown at least twofold when several sources add up.
  if (const uint64_t hint = src.SizeHint(); hint > 0) {
    const uint64_t want = trace.events.size() + std::min<uint64_t>(hint / 100, uint64_t{16} << 20);
    if (want > trace.events.capacity()) trace.events.reserve(std::max<uint64_t>(want, 2 * trace.events.capacity()));
  }
  SourceAssembler assembler(trace, name);
  // One thread: parse on this one; else that many workers (at most 16) while this one splits.
  const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads) : UsableCpus();
  WindowPipeline pipeline(name, provisional_rank, assembler, threads > 1 ? std::min<size_t>(threads, 16) : 0, options.timings);
  DocumentReader doc(src, name, pipeline, trace.stats, options.window_bytes, !options.strict);
  if (auto st = doc.Read(); !st.ok()) {
    // A window still in the pipeline comes earlier in the file than what the reading thread met:
    // its error is the one a one-thread read reports.
    if (auto earlier = pipeline.Finish(); !earlier.ok()) return earlier;
    return st;
  }
  if (src.cut_short() && trace.stats.Count("truncated_trace") == 0) {
    trace.stats.Add("gzip_cut_short", IssueSeverity::kInfo,
                    name + ": the gzip data ends without its trailer (checksum unchecked); the JSON in it is whole");
  }
  if (!doc.bare_array()) {
    if (auto st = ReadTopLevelMetadata(doc.header(), doc.trailer(), name, info); !st.ok()) return st;
  }
  assembler.Finish(info->base_time_ns);
  return {};
}

}  // namespace trainrx::profiler
