#include "trainrx/profiler/trace.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "trainrx/profiler/parallel.h"
#include "trainrx/profiler/sort_runs.h"

namespace trainrx::profiler {

StringTable::StringTable() {
  storage_.emplace_back();
  views_.push_back(storage_.back());
  index_.emplace(views_.back(), kNoStr);
}

StrId StringTable::Intern(std::string_view s) {
  if (s.empty()) return kNoStr;
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  storage_.emplace_back(s);
  const StrId id = static_cast<StrId>(views_.size());
  views_.push_back(storage_.back());
  index_.emplace(views_.back(), id);
  return id;
}

void StringTable::Truncate(size_t size) {
  size = std::max<size_t>(size, 1);  // id 0, the empty string, always stays
  while (views_.size() > size) {
    index_.erase(views_.back());
    views_.pop_back();
    storage_.pop_back();
  }
}

StrId StringTable::Find(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? kNoStr : it->second;
}

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kCudaRuntime: return "cuda_runtime";
    case EventKind::kCudaDriver: return "cuda_driver";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "gpu_memcpy";
    case EventKind::kMemset: return "gpu_memset";
    case EventKind::kGpuUserAnnotation: return "gpu_user_annotation";
    case EventKind::kCudaSync: return "cuda_sync";
    case EventKind::kInstant: return "instant";
    case EventKind::kOther: return "other";
  }
  return "other";
}

std::string_view CopyKindName(CopyKind k) {
  switch (k) {
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kHtoH: return "HtoH";
    case CopyKind::kPtoP: return "PtoP";
    case CopyKind::kUnknown: break;
  }
  return "unknown";
}

std::string_view MemKindName(MemKind k) {
  switch (k) {
    case MemKind::kPageable: return "Pageable";
    case MemKind::kPinned: return "Pinned";
    case MemKind::kDevice: return "Device";
    case MemKind::kManaged: return "Managed";
    case MemKind::kArray: return "Array";
    case MemKind::kUnknown: break;
  }
  return "Unknown";
}

namespace {
MemKind ParseMemKind(std::string_view s) {
  if (s == "Pageable") return MemKind::kPageable;
  if (s == "Pinned") return MemKind::kPinned;
  if (s == "Device") return MemKind::kDevice;
  if (s == "Managed") return MemKind::kManaged;
  if (s == "Array") return MemKind::kArray;
  return MemKind::kUnknown;
}
}  // namespace

// "Memcpy HtoD (Pageable -> Device)"; older Kineto: "Memcpy HtoD (Pinned -> Device)";
// CUPTI also reports PtoP and HtoH. Kineto on ROCm writes "Memcpy DtoH (Device -> Host)" (the
// host side's kind, pageable or pinned, is not said: kUnknown); roctracer's operation names are
// "CopyHostToDevice", "CopyDeviceToHost", "CopyDeviceToDevice", "CopyHostToHost". Anything
// unrecognised stays kUnknown.
MemcpyInfo ParseMemcpyName(std::string_view name) {
  MemcpyInfo info;
  if (name == "CopyHostToDevice") info.copy = CopyKind::kHtoD;
  else if (name == "CopyDeviceToHost") info.copy = CopyKind::kDtoH;
  else if (name == "CopyDeviceToDevice") info.copy = CopyKind::kDtoD;
  else if (name == "CopyHostToHost") info.copy = CopyKind::kHtoH;
  if (info.copy != CopyKind::kUnknown) return info;
  if (name.size() >= 11 && name.substr(0, 7) == "Memcpy ") {
    const std::string_view dir = name.substr(7, 4);
    if (dir == "HtoD") info.copy = CopyKind::kHtoD;
    else if (dir == "DtoH") info.copy = CopyKind::kDtoH;
    else if (dir == "DtoD") info.copy = CopyKind::kDtoD;
    else if (dir == "HtoH") info.copy = CopyKind::kHtoH;
    else if (dir == "PtoP") info.copy = CopyKind::kPtoP;
  }
  const size_t open = name.find('(');
  const size_t arrow = name.find(" -> ");
  const size_t close = name.rfind(')');
  if (open != std::string_view::npos && arrow != std::string_view::npos &&
      close != std::string_view::npos && open < arrow && arrow < close) {
    info.src = ParseMemKind(name.substr(open + 1, arrow - open - 1));
    info.dst = ParseMemKind(name.substr(arrow + 4, close - arrow - 4));
  }
  return info;
}

void IngestStats::Add(std::string_view kind, IssueSeverity severity, std::string_view example, uint64_t count) {
  for (auto& e : entries) {
    if (e.kind == kind) {
      e.count += count;
      return;
    }
  }
  entries.push_back({std::string(kind), severity, count, std::string(example)});
}

uint64_t IngestStats::Count(std::string_view kind) const {
  for (const auto& e : entries)
    if (e.kind == kind) return e.count;
  return 0;
}

uint64_t IngestStats::TotalSkipped() const {
  uint64_t n = 0;
  for (const auto& e : entries)
    if (e.severity == IssueSeverity::kDataLoss) n += e.count;
  return n;
}

size_t Trace::TrackKeyHash::operator()(const TrackKey& k) const noexcept {
  uint64_t h = static_cast<uint64_t>(k.pid) * 0x9E3779B97F4A7C15ULL;
  h ^= static_cast<uint64_t>(k.tid) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(k.rank) << 32) ^ (static_cast<uint64_t>(k.kind) << 8);
  h ^= (static_cast<uint64_t>(k.pid_name) << 20) ^ static_cast<uint64_t>(k.tid_name) * 31;
  return static_cast<size_t>(h);
}

uint32_t Trace::GetOrAddTrack(int32_t rank, TrackKind kind, int64_t pid, int64_t tid,
                              StrId pid_name, StrId tid_name) {
  const TrackKey key{rank, kind, pid, tid, pid_name, tid_name};
  auto it = track_index_.find(key);
  if (it != track_index_.end()) return it->second;
  Track t;
  t.rank = rank;
  t.kind = kind;
  t.pid = pid;
  t.tid = tid;
  t.pid_name = pid_name;
  t.tid_name = tid_name;
  if (kind == TrackKind::kGpuStream) {
    t.device = static_cast<int32_t>(pid);
    t.stream = tid;
  }
  tracks.push_back(t);
  const uint32_t idx = static_cast<uint32_t>(tracks.size() - 1);
  track_index_.emplace(key, idx);
  finalized_ = false;
  return idx;
}

void Trace::RemapRank(int32_t from, int32_t to) {
  track_index_.clear();
  for (uint32_t i = 0; i < tracks.size(); ++i) {
    Track& t = tracks[i];
    if (t.rank == from) t.rank = to;
    track_index_.emplace(TrackKey{t.rank, t.kind, t.pid, t.tid, t.pid_name, t.tid_name}, i);
  }
}

void Trace::AppendPieceTables(PieceIds& ids, std::span<const MemcpyInfo> piece_memcpys, std::span<const OpInputs> inputs,
                              std::span<const Counter> piece_counters, std::span<const Flow> piece_flows,
                              std::span<const SyncWait> waits) {
  ids.memcpy_base = static_cast<uint32_t>(memcpys.size());
  ids.inputs_base = static_cast<uint32_t>(op_inputs.size());
  memcpys.insert(memcpys.end(), piece_memcpys.begin(), piece_memcpys.end());
  for (const OpInputs& in : inputs)
    op_inputs.push_back({ids.names[in.input_dims], ids.names[in.input_types], ids.names[in.concrete]});
  for (Counter c : piece_counters) c.track = ids.tracks[c.track], c.name = ids.names[c.name], counters.push_back(c);
  for (Flow f : piece_flows) f.track = ids.tracks[f.track], f.cat = ids.names[f.cat], flows.push_back(f);
  for (SyncWait w : waits) w.track = ids.tracks[w.track], sync_waits.push_back(w);
}

void Trace::Append(const Trace& src, int32_t rank) {
  PieceIds ids;
  ids.names.assign(src.strings.size(), kNoStr);
  for (StrId i = 1; i < src.strings.size(); ++i) ids.names[i] = strings.Intern(src.strings.Get(i));
  ids.tracks.resize(src.tracks.size());
  for (size_t i = 0; i < src.tracks.size(); ++i) {
    const Track& t = src.tracks[i];
    ids.tracks[i] = GetOrAddTrack(rank, t.kind, t.pid, t.tid, ids.names[t.pid_name], ids.names[t.tid_name]);
    Track& d = tracks[ids.tracks[i]];
    d.device = t.device, d.stream = t.stream;
    if (t.name != kNoStr) d.name = ids.names[t.name];
  }
  AppendPieceTables(ids, src.memcpys, src.op_inputs, src.counters, src.flows, src.sync_waits);
  events.reserve(events.size() + src.events.size());
  for (const Event& e : src.events) events.push_back(ids.Map(e));
  finalized_ = false;
}

// Each track's events (grouped, [first_event, +event_count)) into time order, longest first at
// one instant. Unsorted tracks are sorted on both cores: a large one in two halves at once, then
// merged (stable either way: the result is the same for any thread count).
static void SortEachTrack(EventArray& events, const std::vector<Track>& tracks, size_t threads) {
  auto before = [](const Event& a, const Event& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  };
  constexpr size_t kSplit = 1 << 16;
  std::vector<std::pair<size_t, size_t>> halves;  // [first, mid) and [mid, last) of split tracks
  std::vector<std::function<void()>> sorts;
  for (const Track& t : tracks) {
    const auto first = events.begin() + t.first_event, last = first + t.event_count;
    if (std::is_sorted(first, last, before)) continue;
    if (t.event_count < kSplit) {
      sorts.push_back([=] { SortRuns(first, last, before); });
      continue;
    }
    const auto mid = first + t.event_count / 2;
    halves.push_back({t.first_event, t.first_event + t.event_count});
    sorts.push_back([=] { SortRuns(first, mid, before); });
    sorts.push_back([=] { SortRuns(mid, last, before); });
  }
  RunTasks(sorts, threads);
  std::vector<std::function<void()>> merges;
  for (const auto& [b, e] : halves) {
    const auto first = events.begin() + static_cast<std::ptrdiff_t>(b), last = events.begin() + static_cast<std::ptrdiff_t>(e);
    merges.push_back([=] {
      std::vector<Event> buf;
      MergeAdjacentRuns(first, first + (last - first) / 2, last, before, buf);
    });
  }
  RunTasks(merges, threads);
}

void Trace::Finalize(size_t threads) {
  if (finalized_) return;
  // Counting sort by track (O(n), stable), then sort each track only if it is not already in
  // order: Kineto writes each thread's events mostly sorted, so this is usually a linear pass.
  // The events are cut into parts (one per thread) that are counted, checked and scattered at once;
  // part p writes each track's events after those of parts < p, so the order is the same for any
  // number of parts.
  const size_t n = events.size(), nt = tracks.size();
  const size_t parts = n < (size_t{1} << 16) ? 1 : std::min<size_t>(threads > 0 ? threads : UsableCpus(), 16);
  const auto part_begin = [&](size_t p) { return n * p / parts; };
  std::vector<std::vector<uint32_t>> counts(parts, std::vector<uint32_t>(nt, 0));
  std::vector<char> part_grouped(parts, 1);
  std::vector<std::function<void()>> tasks;
  for (size_t p = 0; p < parts; ++p) {
    tasks.push_back([&, p] {
      uint32_t* c = counts[p].data();
      bool in_order = true;
      for (size_t i = part_begin(p), end = part_begin(p + 1); i < end; ++i) {
        ++c[events[i].track];
        in_order = in_order && (i == 0 || events[i - 1].track <= events[i].track);
      }
      part_grouped[p] = in_order;
    });
  }
  RunTasks(tasks, threads);
  // Each part's counts become where its first event of each track goes.
  uint32_t next = 0;
  for (size_t t = 0; t < nt; ++t) {
    tracks[t].first_event = next;
    for (size_t p = 0; p < parts; ++p) {
      const uint32_t count = counts[p][t];
      counts[p][t] = next;
      next += count;
    }
    tracks[t].event_count = next - tracks[t].first_event;
  }
  if (std::find(part_grouped.begin(), part_grouped.end(), 0) != part_grouped.end()) {
    EventArray sorted(n);  // unwritten (UnwrittenOnGrow): each part writes its own events
    tasks.clear();
    for (size_t p = 0; p < parts; ++p) {
      tasks.push_back([&, p] {
        uint32_t* at = counts[p].data();
        for (size_t i = part_begin(p), end = part_begin(p + 1); i < end; ++i) {
          sorted[at[events[i].track]++] = events[i];
        }
      });
    }
    RunTasks(tasks, threads);
    events.swap(sorted);
  }
  SortEachTrack(events, tracks, threads);
  finalized_ = true;
}

Trace::Checkpoint Trace::Mark() const {
  Checkpoint m;
  m.strings = strings.size();
  m.tracks = tracks.size();
  m.events = events.size();
  m.memcpys = memcpys.size();
  m.op_inputs = op_inputs.size();
  m.counters = counters.size();
  m.flows = flows.size();
  m.sync_waits = sync_waits.size();
  m.ranks = ranks.size();
  m.stats = stats;
  m.finalized = finalized_;
  return m;
}

void Trace::RollBack(const Checkpoint& mark) {
  // Unindex the added tracks. Keys come from the tracks' fields, as RemapRank() builds them; an
  // entry is erased only if it points at the added track, never at an older one with the same key.
  for (size_t i = tracks.size(); i-- > mark.tracks;) {
    const Track& t = tracks[i];
    auto it = track_index_.find(TrackKey{t.rank, t.kind, t.pid, t.tid, t.pid_name, t.tid_name});
    if (it != track_index_.end() && it->second == i) track_index_.erase(it);
  }
  tracks.resize(std::min(tracks.size(), mark.tracks));
  events.resize(std::min(events.size(), mark.events));
  memcpys.resize(std::min(memcpys.size(), mark.memcpys));
  op_inputs.resize(std::min(op_inputs.size(), mark.op_inputs));
  counters.resize(std::min(counters.size(), mark.counters));
  flows.resize(std::min(flows.size(), mark.flows));
  sync_waits.resize(std::min(sync_waits.size(), mark.sync_waits));
  ranks.resize(std::min(ranks.size(), mark.ranks));
  strings.Truncate(mark.strings);
  stats = mark.stats;
  // The events left are those of the mark, in the mark's order: finalized then means finalized now.
  finalized_ = mark.finalized;
}

const RankInfo* Trace::FindRank(int32_t rank) const {
  for (const auto& r : ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

RankInfo* Trace::FindRankMutable(int32_t rank) {
  return const_cast<RankInfo*>(std::as_const(*this).FindRank(rank));
}

void Trace::ShiftRankTime(int32_t rank, int64_t delta_ns) {
  if (delta_ns == 0) return;
  std::vector<char> on(tracks.size(), 0);
  for (size_t i = 0; i < tracks.size(); ++i) on[i] = tracks[i].rank == rank;
  for (Event& e : events)
    if (on[e.track]) e.ts_ns += delta_ns;
  for (Counter& c : counters)
    if (on[c.track]) c.ts_ns += delta_ns;
  for (Flow& f : flows)
    if (on[f.track]) f.ts_ns += delta_ns;
  if (RankInfo* info = FindRankMutable(rank)) info->base_time_ns += delta_ns;
}

std::vector<int32_t> Trace::RankIds() const {
  std::vector<int32_t> ids;
  for (const auto& r : ranks) ids.push_back(r.rank);
  for (const auto& t : tracks)
    if (std::find(ids.begin(), ids.end(), t.rank) == ids.end()) ids.push_back(t.rank);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace trainrx::profiler
