// trainrx::profiler — the one trace model every source fills and every analyzer reads.
//
// Who writes it: the Kineto/Chrome reader (profiler/io/reader.cc), and later our own
// collector (probes/, CUPTI backend). Who reads it: analyzers/ (const Trace&), reports/, the
// Kineto writer. Threading: a Trace is built by one thread, then read-only; concurrent readers
// are fine once Finalize() has run.
//
// Layout, chosen for multi-million-event traces: events are compact fixed-size structs (48 bytes,
// no per-event heap allocation); names are interned once (StrId); rarely used per-event detail
// (memcpy kinds and bytes, operator input shapes) lives in side tables reached through
// Event::aux. After Finalize() events are grouped by track and sorted by start time inside each
// track, so per-thread / per-stream scans are contiguous.
//
// Time is int64 nanoseconds everywhere (ts_ns, dur_ns); conversion from trace units happens in
// exactly one helper (ParseMicrosToNs in time.h).
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trainrx/profiler/config_value.h"

namespace trainrx::profiler {

using StrId = uint32_t;
inline constexpr StrId kNoStr = 0;  // id 0 is always the empty string
inline constexpr uint32_t kNoAux = std::numeric_limits<uint32_t>::max();
inline constexpr int64_t kNoId = -1;

// Interned strings. Views returned by Get() stay valid for the table's lifetime.
class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  StrId Intern(std::string_view s);
  // Returns kNoStr for strings never interned (and for "").
  StrId Find(std::string_view s) const;
  std::string_view Get(StrId id) const { return views_[id]; }
  size_t size() const { return views_.size(); }
  // Forgets the strings interned after the table had `size` entries (Trace::RollBack). Their ids
  // and views become invalid; earlier ones stay valid.
  void Truncate(size_t size);

 private:
  std::deque<std::string> storage_;  // deque: growing never moves stored strings
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, StrId> index_;
};

enum class EventKind : uint8_t {
  kCpuOp,              // ATen op, autograd node, legacy profiler "CPU functions"
  kUserAnnotation,     // record_function ranges, ProfilerStep#N, DataLoader / Optimizer ranges
  kPythonFunction,     // with_stack python frames
  kCudaRuntime,        // cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize, ...
  kCudaDriver,         // cuLaunchKernel, ...
  kKernel,             // GPU kernel
  kMemcpy,             // GPU memcpy (see MemcpyInfo)
  kMemset,             // GPU memset
  kGpuUserAnnotation,  // record_function ranges projected on a GPU stream
  kCudaSync,           // CUPTI synchronization record (Event/Stream/Context Sync)
  kInstant,            // zero-duration marks
  kOther,              // anything else with a duration (profiler spans, overhead, ...)
};
std::string_view EventKindName(EventKind kind);
inline bool IsGpuKind(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset ||
         k == EventKind::kGpuUserAnnotation || k == EventKind::kCudaSync;
}

enum class TrackKind : uint8_t { kCpuThread, kGpuStream, kOther };

// A timeline: one CPU thread or one GPU stream of one rank.
struct Track {
  int32_t rank = 0;
  TrackKind kind = TrackKind::kCpuThread;
  int64_t pid = 0;     // numeric process id (for GPU tracks: the device id)
  int64_t tid = 0;     // numeric thread id (for GPU tracks: the stream id)
  StrId pid_name = kNoStr;  // set when the source used a string pid ("CPU functions", "Spans")
  StrId tid_name = kNoStr;
  int32_t device = -1;      // GPU tracks
  int64_t stream = -1;      // GPU tracks
  StrId name = kNoStr;      // thread_name / stream name metadata
  // Filled by Trace::Finalize(): this track's events are events[first_event, first_event+count).
  uint32_t first_event = 0;
  uint32_t event_count = 0;
};

struct Event {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t correlation = kNoId;  // CUDA correlation id: runtime call <-> kernel/memcpy/memset
  int64_t external_id = kNoId;  // Kineto "External id": CPU op <-> runtime call <-> GPU activity
  StrId name = kNoStr;
  uint32_t track = 0;
  uint32_t aux = kNoAux;        // kMemcpy/kMemset: index into memcpys; ops: index into op_inputs
  EventKind kind = EventKind::kOther;
  uint8_t flags = 0;
  int64_t end_ns() const { return ts_ns + dur_ns; }
};
static_assert(sizeof(Event) == 48, "Event must stay compact");

enum class CopyKind : uint8_t { kUnknown, kHtoD, kDtoH, kDtoD, kHtoH, kPtoP };
enum class MemKind : uint8_t { kUnknown, kPageable, kPinned, kDevice, kManaged, kArray };
std::string_view CopyKindName(CopyKind k);
std::string_view MemKindName(MemKind k);

struct MemcpyInfo {
  int64_t bytes = -1;
  CopyKind copy = CopyKind::kUnknown;
  MemKind src = MemKind::kUnknown;
  MemKind dst = MemKind::kUnknown;
};

// Parses Kineto/CUPTI copy names: "Memcpy HtoD (Pageable -> Device)" -> {kHtoD, kPageable, kDevice}.
MemcpyInfo ParseMemcpyName(std::string_view name);

// Operator inputs as recorded with record_shapes (raw JSON text of "Input Dims" / "Input type",
// interned), or by our collector.
struct OpInputs {
  StrId input_dims = kNoStr;   // e.g. "[[32, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], []]"
  StrId input_types = kNoStr;  // e.g. "[\"float\", \"float\", \"float\", ...]"
  // torch.profiler's "Concrete Inputs" (torch >= 2.1): the scalar and list arguments' values,
  // e.g. "[\"\", \"\", \"\", \"[2, 2]\", \"[1, 1]\", \"[1, 1]\", \"1\"]" (a convolution's stride, padding,
  // dilation, groups). kNoStr where the source has none. Our collector writes the same values, and
  // for a 4-D (5-D) tensor laid out channels-last "channels_last" ("channels_last_3d"), where
  // torch.profiler writes "" (the layout is then unknown).
  StrId concrete = kNoStr;
};

struct Counter {
  uint32_t track = 0;
  StrId name = kNoStr;
  int64_t ts_ns = 0;
  double value = 0;
};

struct Flow {
  int64_t id = 0;
  StrId cat = kNoStr;  // "ac2g" (CPU launch -> GPU activity), "fwdbwd" (forward op -> backward)
  uint32_t track = 0;
  int64_t ts_ns = 0;
  bool is_start = true;
};

// What a synchronization record (torch.profiler's cuda_sync rows with enable_cuda_sync_events,
// MTIA's event_wait) says it waited on: the stream its event was recorded on and the correlation of
// the event-record call (cudaEventRecord). Keyed by the record's track and correlation (that of the
// call that waited: cudaStreamWaitEvent, cudaEventSynchronize ...).
struct SyncWait {
  uint32_t track = 0;            // the sync record's track (the waiting stream, or the device's -1)
  int64_t correlation = kNoId;   // the waiting call's correlation
  int64_t wait_on_stream = -1;   // args.wait_on_stream
  int64_t record_correlation = kNoId;  // args.wait_on_cuda_event_record_corr_id
};

struct DeviceProperties {
  int32_t id = -1;
  std::string name;
  int64_t total_global_mem = 0;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int32_t num_sms = 0;
};

// One per rank (one per input file, or per distributedInfo rank).
struct RankInfo {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string backend;
  std::string source;              // file the rank came from
  std::string rank_source;         // how the rank was determined: distributedInfo / file name / order
  int32_t declared_rank = -1;      // the rank its distributedInfo declared (-1: none)
  // The job the file belongs to, by its distributedInfo: "world_size 8, nccl", or "no
  // distributedInfo". ReadTraces warns when the files it merges are not one job's ranks.
  std::string job;
  std::vector<DeviceProperties> devices;
  int64_t base_time_ns = 0;        // Kineto baseTimeNanoseconds (0 when absent)
  std::string schema_version;
  // Free-form key/value configuration written by our collector ("trainrx" block) or by the
  // source (record_shapes, with_stack...): JSON values, made and read typed (config_value.h).
  std::map<std::string, ConfigValue> config;
  // Clock alignment (analyzers::AlignRankClocks): the ns added to this rank's times to put them on
  // the reference rank's clock (0: not shifted), the outcome ("reference", "shifted", "agrees",
  // "same host", "not aligned"; empty: not attempted, e.g. one rank) and why, in one sentence.
  int64_t clock_shift_ns = 0;
  std::string clock_status;
  std::string clock_note;
};

// Problems met while ingesting, counted by kind (Perfetto's stats table model).
enum class IssueSeverity : uint8_t { kInfo, kDataLoss, kError };
struct IngestStats {
  struct Entry {
    std::string kind;  // e.g. "missing_ts", "negative_dur"
    IssueSeverity severity = IssueSeverity::kDataLoss;
    uint64_t count = 0;
    std::string example;  // where the first one was seen: file and event index
  };
  std::vector<Entry> entries;
  uint64_t events_read = 0;
  uint64_t bytes_read = 0;
  void Add(std::string_view kind, IssueSeverity severity, std::string_view example, uint64_t count = 1);
  uint64_t Count(std::string_view kind) const;
  uint64_t TotalSkipped() const;  // data-loss entries: events or records that were dropped
};

// The allocator of Trace::events: like std::allocator, except that value-initialization
// (resize(n) or vector(n) growing the array) leaves new events unwritten. Trace::Finalize
// scatters the events into a new array on both cores; zeroing it first would cost one pass over
// all the events on one core (and take the page faults there). Event is an aggregate, so an
// allocation creates its objects implicitly (C++20); whoever grows an array this way writes every
// new event before reading it. Copies and push_back are as with std::allocator.
template <typename T>
struct UnwrittenOnGrow : std::allocator<T> {
  UnwrittenOnGrow() = default;
  template <typename U>
  UnwrittenOnGrow(const UnwrittenOnGrow<U>&) noexcept {}
  template <typename U>
  void construct(U*) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using EventArray = std::vector<Event, UnwrittenOnGrow<Event>>;

struct Trace {
  StringTable strings;
  std::vector<Track> tracks;
  EventArray events;
  std::vector<MemcpyInfo> memcpys;
  std::vector<OpInputs> op_inputs;
  std::vector<Counter> counters;
  std::vector<Flow> flows;
  std::vector<SyncWait> sync_waits;
  std::vector<RankInfo> ranks;
  IngestStats stats;

  // Returns the index of the track with this identity, creating it if needed.
  uint32_t GetOrAddTrack(int32_t rank, TrackKind kind, int64_t pid, int64_t tid,
                         StrId pid_name = kNoStr, StrId tid_name = kNoStr);
  uint32_t AddEvent(const Event& e) {
    events.push_back(e);
    return static_cast<uint32_t>(events.size() - 1);
  }
  // Moves every track of rank `from` to rank `to` (the reader parses a file under a provisional
  // rank until its distributedInfo has been read).
  void RemapRank(int32_t from, int32_t to);
  // How a piece read apart (a parsing window's fragment, a journal frame, a trace of its own) maps
  // into this trace: its string ids and tracks to ours, and where its memcpys and op inputs start
  // here (events' aux indices move by them).
  struct PieceIds {
    std::vector<StrId> names;      // the piece's string id -> ours (kNoStr -> kNoStr)
    std::vector<uint32_t> tracks;  // the piece's track -> ours
    uint32_t memcpy_base = 0, inputs_base = 0;
    Event Map(Event e) const {
      e.name = names[e.name];
      e.track = tracks[e.track];
      if (e.aux != kNoAux) e.aux += (e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset) ? memcpy_base : inputs_base;
      return e;
    }
  };
  // The one merge of the reader's pieces (Append, the Kineto reader's fragments, the journal's
  // frames): a piece's tables but its events, with `ids`' names and tracks, and `ids`' bases set.
  // Its events are the caller's to add (in order, with begin / end pairs, or apart on a worker),
  // each through ids.Map.
  void AppendPieceTables(PieceIds& ids, std::span<const MemcpyInfo> memcpys, std::span<const OpInputs> inputs,
                         std::span<const Counter> counters, std::span<const Flow> flows, std::span<const SyncWait> waits);
  // Appends the tracks, events and side-table rows of `src` (finalized or not) on rank `rank`, its
  // strings interned here; not its ranks or stats (an importer's RankInfo is the rank policy's).
  // How an importer that decodes a whole source into a Trace of its own (the collector's journal)
  // hands it to the reader. Leaves the trace unfinalized.
  void Append(const Trace& src, int32_t rank);
  // Groups events by track and sorts each track by (ts asc, dur desc) so enclosing ranges come
  // before what they enclose; fills Track::first_event / event_count. Idempotent. Unsorted
  // tracks are sorted on up to `threads` threads (0: every usable CPU; the same result for any).
  void Finalize(size_t threads = 0);
  bool finalized() const { return finalized_; }

  // Undo for a failed read: a reader only appends (strings, tracks, events, side tables, counters,
  // flows, ranks) and counts in stats, so the state before a read is a handful of sizes plus the
  // stats (a few dozen entries at most). Mark() is O(1) in the trace size and RollBack() costs
  // O(what was added), never a copy of the multi-million-event tables that parsing into a scratch
  // Trace and merging it (remapping every event's name and track) would cost on success.
  // Valid only while the trace has been appended to since Mark(): a Finalize() or RemapRank() of
  // tracks older than the mark in between is not undone (the reader does neither before it fails).
  // Capacity the failed read grew is kept. A table added to Trace needs its size here too.
  struct Checkpoint {
    size_t strings = 0, tracks = 0, events = 0, memcpys = 0, op_inputs = 0, counters = 0, flows = 0, sync_waits = 0, ranks = 0;
    IngestStats stats;
    bool finalized = false;
  };
  Checkpoint Mark() const;
  void RollBack(const Checkpoint& mark);

  std::span<const Event> TrackEvents(uint32_t track) const {
    const Track& t = tracks[track];
    return {events.data() + t.first_event, t.event_count};
  }
  std::string_view Name(const Event& e) const { return strings.Get(e.name); }
  const RankInfo* FindRank(int32_t rank) const;
  RankInfo* FindRankMutable(int32_t rank);
  // Adds delta_ns to every time of one rank: its events, counters and flows, and its
  // base_time_ns (the file's times stay the same relative to it). Order within a track is kept.
  void ShiftRankTime(int32_t rank, int64_t delta_ns);
  std::vector<int32_t> RankIds() const;

 private:
  struct TrackKey {
    int32_t rank;
    TrackKind kind;
    int64_t pid, tid;
    StrId pid_name, tid_name;
    bool operator==(const TrackKey&) const = default;
  };
  struct TrackKeyHash {
    size_t operator()(const TrackKey& k) const noexcept;
  };
  std::unordered_map<TrackKey, uint32_t, TrackKeyHash> track_index_;
  bool finalized_ = false;
};

}  // namespace trainrx::profiler
