// Declarations shared by the SIMD-compiled parser files: kineto_document.cc (reads the document and
// drives the decoders), kineto_events.cc (WindowDecoder, SourceAssembler) and kineto_metadata.cc. Private to profiler/.
//
// It includes simdjson, whose On-Demand kernel is picked at compile time from the compiler's target
// flags: include it only from files that profiler/CMakeLists.txt compiles with the parser's SIMD
// flags, never from reader.cc, which must run on any x86-64 to say that the CPU is too old.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

inline bool IsJsonWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Every read error has this shape: "<source>: <what was wrong>".
inline Status SourceError(std::string_view source, std::string_view what) {
  std::string msg(source);
  msg += ": ";
  msg += what;
  return Status::Error(std::move(msg));
}

// What one window of traceEvents elements decodes to before it joins the trace: a small Trace of
// its own (names, tracks, events, side tables, counters, flows and stats, all with the fragment's
// own ids) plus what only the whole source can settle. Windows decode on worker threads into
// fragments; SourceAssembler appends them to the trace in file order, so the result does not
// depend on the number of threads (ids are given in order of first appearance either way).
struct Fragment {
  Trace trace;
  // The element index of the first event behind each of trace.stats.entries (same order).
  std::vector<uint64_t> first_index;
  // B and E events, paired across windows by SourceAssembler. `at`: how many of the fragment's
  // events came before this one, so the paired range lands where a one-pass reader puts it.
  struct BeginEnd {
    size_t at = 0;
    uint64_t index = 0;  // the element's index in the source (for messages)
    Event e;             // fragment ids
    bool begin = true;
  };
  std::vector<BeginEnd> begin_ends;
  struct ThreadName {
    int64_t pid, tid;
    StrId name;
  };
  std::vector<ThreadName> thread_names;  // thread_name metadata, fragment ids
  uint64_t elements = 0;                 // elements decoded (objects or not)
  void Clear();
};

// Recently interned strings: a direct-mapped cache from a cheap key (length, first and last 8
// bytes) to a string table's id, each hit checked by a full compare. Names and shapes repeat every
// step; a hit spares the table's hash over the whole text (kernel names run to hundreds of bytes).
// Clear() it whenever the table forgets strings (a fragment's table starts again every window).
class RecentStrings {
 public:
  // The id of `s` when the cache holds it, else kNoStr.
  StrId Find(const StringTable& table, std::string_view s) const;
  StrId Intern(StringTable& table, std::string_view s);
  void Clear() { std::fill(slots_.begin(), slots_.end(), kNoStr); }

 private:
  static size_t Slot(std::string_view s);
  static constexpr size_t kBits = 10;
  std::vector<StrId> slots_ = std::vector<StrId>(size_t{1} << kBits, kNoStr);
};

// Turns the elements of one window into a Fragment, one at a time, in file order. Malformed
// events are counted in the fragment's stats with the file and element index ("test.json event
// #3"; the window's first index is given, the splitter counts elements), never fatal.
class WindowDecoder {
 public:
  // Tracks are created under `rank` (the caller's provisional rank, remapped once the source's
  // distributedInfo is known).
  WindowDecoder(const std::string& source, int32_t rank) : source_(source), rank_(rank) {}

  // Starts a window: clears `out` and decodes into it from element `first_index` on.
  void Begin(Fragment* out, uint64_t first_index);
  // One element that is an object. Views into the document stay valid for the call only. False
  // when the object's JSON is broken inside (counted as invalid_field_type): the document cannot be
  // iterated further, the caller resumes at the next event boundary.
  bool Decode(simdjson::ondemand::object obj);
  // One element whose bytes simdjson cannot read at all: counted (invalid_json_event, with its
  // byte offset in the source), skipped.
  void Unreadable(uint64_t byte_offset);
  // One element that is not an object (a number, string, null): counted, skipped.
  void NotAnObject();
  // Index of the next element.
  uint64_t event_index() const { return first_index_ + out_->elements; }

 private:
  void HandleEvent(simdjson::ondemand::object obj);
  std::string Where() const;
  void Malformed(std::string_view kind);
  void Note(std::string_view kind, IssueSeverity severity, const std::string& example);
  uint32_t CpuTrack(int64_t pid, std::string_view pid_name, int64_t tid, std::string_view tid_name);
  uint32_t GpuTrack(int64_t device, int64_t stream);

  std::string source_;
  int32_t rank_;
  Fragment* out_ = nullptr;
  Trace* t_ = nullptr;  // &out_->trace
  uint64_t first_index_ = 0;
  bool broken_ = false;  // HandleEvent met a JSON error while iterating the object
  // Cache of the last CPU track lookup (events of one thread come in runs).
  int64_t last_pid_ = INT64_MIN, last_tid_ = INT64_MIN;
  StrId last_pid_name_ = kNoStr, last_tid_name_ = kNoStr;
  uint32_t last_track_ = 0;
  // Event names, and the shapes' text (kept apart: a hit on shapes skips their JSON check, so it
  // must be text that passed it).
  RecentStrings recent_names_, recent_shapes_;
};

// A fragment's events to be written into the trace's event array with the trace's ids, apart from
// the merge (on a worker: the copy is most of a merge's cost, and merging is serial). Run() reads
// only the fragment and writes only [dst, dst + the fragment's events), which Merge sized.
struct EventCopy {
  const Fragment* from = nullptr;
  Event* dst = nullptr;
  Trace::PieceIds ids;  // the fragment's names, tracks and side-table rows -> the trace's
  void Run() const;
};

// Appends one source's fragments to the trace in file order and owns what spans windows: names
// and tracks mapped to the trace's ids, B/E pairing, thread_name metadata. Single-threaded.
class SourceAssembler {
 public:
  SourceAssembler(Trace& trace, const std::string& source);
  // Whether Merge(f, copy) can leave f's events to an EventCopy: f has no B/E events (they pair
  // in order with the other events) and the trace's event array has room for f's events without
  // moving (the copies still pending write into it).
  bool CanCopyApart(const Fragment& f) const;
  // Merges f; with `copy` (only when CanCopyApart(f)), everything but writing the events: the
  // event array grows by f's events, unwritten, and *copy says how to write them. f must live,
  // unchanged, until copy->Run() has returned.
  void Merge(const Fragment& f, EventCopy* copy = nullptr);
  // After the last fragment: moves what the events' problems were into trace.stats, ordered by
  // the element that showed each kind first (as a one-window read meets them), whatever the
  // windows. Finish() calls it too.
  void FlushIssues();
  // After the last fragment and the metadata: counts B events never closed, shifts this source's
  // times by base_time_ns (Kineto writes them relative to it) and names its tracks from
  // thread_name metadata events.
  void Finish(int64_t base_time_ns);

 private:
  void BeginOrEnd(const Fragment::BeginEnd& be);
  void AddIssue(uint64_t first_index, const IngestStats::Entry& entry);

  Trace& trace_;
  std::string source_;
  // What this source added starts here (Finish touches only that).
  size_t first_track_, first_event_, first_flow_, first_counter_;
  Trace::PieceIds ids_;  // the fragment being merged -> the trace (names, tracks, side-table rows)
  struct PendingBegin {
    uint32_t track;
    StrId name;
    int64_t ts;
    EventKind kind;
  };
  std::vector<PendingBegin> open_begins_;
  std::vector<Fragment::ThreadName> thread_names_;  // trace ids
  std::vector<std::pair<uint64_t, IngestStats::Entry>> issues_;  // by kind, with its first element
};

// Reads the top-level members around traceEvents (object form only): the text before the
// "traceEvents" key and everything after the array's ']', which the document reader kept aside.
// Fills info's schema_version, base_time_ns, world_size, backend, declared_rank, devices and
// config; errors name `source`.
Status ReadTopLevelMetadata(std::string_view header, std::string_view trailer, std::string_view source,
                                RankInfo* info);

}  // namespace trainrx::profiler
