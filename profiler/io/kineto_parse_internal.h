// Declarations shared by the SIMD-compiled parser files: kineto_document.cc (reads the document and
// drives the decoder), kineto_events.cc (EventDecoder) and kineto_metadata.cc. Private to profiler/.
//
// It includes simdjson, whose On-Demand kernel is picked at compile time from the compiler's target
// flags: include it only from files that profiler/CMakeLists.txt compiles with the parser's SIMD
// flags, never from kineto_reader.cc, which must run on any x86-64 to say that the CPU is too old.
#pragma once

#include <tuple>

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::profiler {

inline bool IsJsonWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Every read error has this shape: "<source>: <what was wrong>".
inline ReadStatus SourceError(std::string_view source, std::string_view what) {
  std::string msg(source);
  msg += ": ";
  msg += what;
  return ReadStatus::Error(std::move(msg));
}

// Turns the elements of one source's traceEvents array into the model, one at a time, in file
// order. It owns what spans events: B/E pairing, thread_name metadata, the CPU track cache and the
// event index that messages cite. Malformed events are counted in trace.stats with the file and
// event index ("test.json event #3"), never fatal.
class EventDecoder {
 public:
  // Tracks are created under `rank` (the caller's provisional rank, remapped once the source's
  // distributedInfo is known).
  EventDecoder(Trace& trace, const std::string& source, int32_t rank);

  // One element that is an object. Views into the document stay valid for the call only. False
  // when the object's JSON is broken inside (counted as invalid_field_type): the document cannot be
  // iterated further, the caller resumes at the next event boundary.
  bool Decode(simdjson::ondemand::object obj);
  // One element whose bytes simdjson cannot read at all: counted (invalid_json_event, with its
  // byte offset in the source), skipped.
  void Unreadable(uint64_t byte_offset);
  // The trace and this decoder as they are, to undo a window's fast pass that met a broken event
  // (it is then read again one event at a time). Cheap: sizes, the stats and the open B events.
  struct Checkpoint {
    Trace::Checkpoint trace;
    uint64_t event_index = 0;
    std::vector<std::tuple<uint32_t, StrId, int64_t, EventKind>> open_begins;
    size_t thread_names = 0;
  };
  Checkpoint Mark() const;
  void RollBack(const Checkpoint& mark);
  // One element that is not an object (a number, string, null): counted, skipped.
  void NotAnObject();
  // Elements seen so far, i.e. the index of the next one.
  uint64_t event_index() const { return event_index_; }

  // After the last element and the metadata: counts B events never closed, shifts this source's
  // times by base_time_ns (Kineto writes them relative to it) and names its tracks from
  // thread_name metadata events.
  void Finish(int64_t base_time_ns);

 private:
  void HandleEvent(simdjson::ondemand::object obj);
  bool broken_ = false;  // HandleEvent met a JSON error while iterating the object
  std::string Where() const;
  void Malformed(std::string_view kind);
  uint32_t CpuTrack(int64_t pid, std::string_view pid_name, int64_t tid, std::string_view tid_name);
  uint32_t GpuTrack(int64_t device, int64_t stream);

  Trace& trace_;
  std::string source_;
  int32_t rank_;
  // What this source added starts here (Finish touches only that).
  size_t first_track_, first_event_, first_flow_, first_counter_;
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

// Reads the top-level members around traceEvents (object form only): the text before the
// "traceEvents" key and everything after the array's ']', which the document reader kept aside.
// Fills info's schema_version, base_time_ns, world_size, backend, declared_rank, devices and
// config; errors name `source`.
ReadStatus ReadTopLevelMetadata(std::string_view header, std::string_view trailer, std::string_view source,
                                RankInfo* info);

}  // namespace trainrx::profiler
