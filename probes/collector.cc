#include "collector.h"

#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/memory_counters.h"
#include "trainrx/profiler/profiler_steps.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace trainrx::probes {

ThreadBuffer::ThreadBuffer(Collector* owner, uint32_t index, int64_t tid)
    : owner_(owner), index_(index), tid_(tid), tick_source_(owner->tick_source()) {
  names_.emplace_back();  // id 0: ""
}

namespace {
constexpr size_t kChunkBytes = sizeof(Rec) * ThreadBuffer::kChunkRecs;

// A chunk of records is mapped on its own, not taken from malloc: a 160 KB request went down
// malloc's large path, whose malloc_consolidate walks the program's freed small blocks, about
// 100 instructions per record amortized (bench/per_op_instructions.sh, issue 34.13), the
// largest single cost of recording an op. The records are also outside the heap figure that the
// step boundaries sample (observer.cc SampleHeap), as they should be.
Rec* MapChunk() noexcept {
  void* p = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Rec* chunk = static_cast<Rec*>(p);
  for (uint32_t i = 0; i < ThreadBuffer::kChunkRecs; ++i) new (chunk + i) Rec();
  return chunk;
}
}  // namespace

ThreadBuffer::~ThreadBuffer() {
  for (uint32_t c = 0; c < chunk_count_; ++c) munmap(chunks_[c], kChunkBytes);
}

Rec* ThreadBuffer::AppendInNewChunk() noexcept {
  if (chunk_count_ == kMaxChunks || !owner_->ReserveChunk()) {
    if (dropped_++ == 0) owner_->NoteDrop();
    return nullptr;
  }
  Rec* chunk = MapChunk();
  if (chunk == nullptr) {
    if (dropped_++ == 0) owner_->NoteDrop();
    return nullptr;
  }
  chunks_[chunk_count_++] = chunk;
  tail_ = chunk;
  in_chunk_ = 0;
  return Append();
}

bool ThreadBuffer::AppendMemory(int64_t ts_ticks, int64_t bytes, uint64_t addr, uint64_t total_allocated,
                                uint64_t total_reserved, int device_type, int device_index) noexcept {
  Rec* totals = Append();
  if (totals == nullptr) return false;
  totals->start_ticks = static_cast<int64_t>(addr);
  totals->external_id = static_cast<int64_t>(total_allocated);
  totals->name = static_cast<uint32_t>(total_reserved);
  totals->aux = static_cast<uint32_t>(total_reserved >> 32);
  totals->kind = RecKind::kMemoryTotals;
  EndRecord(totals, 1);
  Rec* r = Append();
  if (r == nullptr) return false;  // the totals record alone is skipped by the drain
  r->start_ticks = ts_ticks;
  r->external_id = bytes;
  r->name = (static_cast<uint32_t>(device_type & 0xffff) << 16) | static_cast<uint32_t>(device_index & 0xffff);
  r->kind = RecKind::kMemory;
  EndRecord(r, ts_ticks);  // last: a drain that sees it finished sees the totals before it too
  return true;
}

uint64_t ThreadBuffer::IndexOf(const Rec* r) const {
  for (uint32_t c = 0; c < chunk_count_; ++c) {
    const Rec* base = chunks_[c];
    if (r >= base && r < base + kChunkRecs) return uint64_t{c} * kChunkRecs + static_cast<uint64_t>(r - base);
  }
  return UINT64_MAX;
}

namespace {
// A hash of a name's characters, 8 at a time (FNV-1a's constants over words): autograd's names
// differ in their middles ("...: MmBackward0" / "...: AddmmBackward0"), so every byte counts.
uint64_t HashChars(const char* p, size_t n) noexcept {
  uint64_t h = 1469598103934665603ull ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  h = (h ^ tail) * 1099511628211ull;
  return h ^ (h >> 29);
}
}  // namespace

uint32_t ThreadBuffer::InternDynamic(std::string_view name) noexcept {
  ContentCacheEntry* set = &content_cache_[2 * (HashChars(name.data(), name.size()) & (kCacheSets - 1))];
  for (int way = 0; way < 2; ++way) {
    const ContentCacheEntry& e = set[way];
    if (e.text != nullptr && e.len == name.size() && std::memcmp(e.text, name.data(), name.size()) == 0) return e.id;
  }
  try {
    uint32_t id;
    if (auto it = by_content_.find(name); it != by_content_.end()) {
      id = it->second;
    } else {
      id = static_cast<uint32_t>(names_.size());
      {
        std::lock_guard<std::mutex> lock(side_mu_);
        names_.emplace_back(name);  // a deque: the view below stays valid as it grows
      }
      by_content_.emplace(std::string_view(names_.back()), id);
    }
    set[1] = set[0];
    set[0] = {names_[id].data(), name.size(), id};
    return id;
  } catch (...) {
    return 0;
  }
}

uint32_t ThreadBuffer::InternStaticMiss(const char* name) noexcept {
  StaticCacheEntry* set = &static_cache_[2 * StaticSet(name)];
  const uint32_t id = InternStaticSlow(name);
  set[1] = set[0];
  set[0] = {name, id, names_[id].c_str()};
  return id;
}

uint32_t ThreadBuffer::InternStaticSlow(const char* name) noexcept {
  auto it = by_pointer_.find(name);
  // Verify the content: a pointer is only a cache key, never trusted alone.
  if (it != by_pointer_.end() && std::strcmp(names_[it->second].c_str(), name) == 0) return it->second;
  const size_t before = names_.size();
  const uint32_t id = InternDynamic(name);
  // Only a name's first pointer is kept (a schema's name: stable for the run). A name seen again at
  // another address is a transient std::string (autograd::engine::evaluate_function: XBackward0 is
  // made per node): keying on its address added ~13 map nodes a step, read by the heap samples as
  // the program's growth (issue 49.5). Those take the content lookup above instead.
  if (names_.size() != before) {
    try {
      by_pointer_[name] = id;
    } catch (...) {
    }
  }
  return id;
}

uint32_t ThreadBuffer::AddInputs(RecInputs in) noexcept {
  try {
    std::lock_guard<std::mutex> lock(side_mu_);
    inputs_.push_back(std::move(in));
    return static_cast<uint32_t>(inputs_.size() - 1);
  } catch (...) {
    return UINT32_MAX;
  }
}

void ThreadBuffer::AddEdge(uint64_t from, uint64_t to) noexcept {
  try {
    std::lock_guard<std::mutex> lock(side_mu_);
    edges_.push_back({from, to});
  } catch (...) {
  }
}

namespace {
std::atomic<uint64_t> g_collector_generation{0};
struct ThreadSlot {
  uint64_t generation = 0;
  ThreadBuffer* buffer = nullptr;
};
thread_local ThreadSlot t_slot __attribute__((tls_model("initial-exec")));  // 16 bytes; see observer.cc
}  // namespace

Collector::Collector(CollectorOptions options)
    : options_(options),
      generation_(++g_collector_generation),
      window_(options.window),
      tick_map_(TickMap::Calibrated(options.ticks)) {
  static_config_.emplace_back("max_events", std::to_string(options_.max_events));  // the record cap (what a loss is past)
  if (options_.ticks == TickSource::kTsc && tick_map_.points().size() < 2) {
    // The wall clock was set back while the map calibrated: no TSC ticks for this collector.
    options_.ticks = TickSource::kRealtime;
    tick_map_ = TickMap(TickSource::kRealtime);
  }
}

StepWindow::StepWindow(StepWindowOptions options) : options_(options) { state_.opened = starts_open(); }

WindowAction StepWindow::OnBoundary(BoundaryKind kind, int64_t now_ns) noexcept {
  if (!options_.bounded()) return WindowAction::kNone;
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.kind < 0) state_.kind = static_cast<int>(kind);
  if (state_.kind != static_cast<int>(kind) || state_.closed) {
    if (state_.kind == static_cast<int>(kind)) ++state_.boundaries;
    return WindowAction::kNone;
  }
  const int64_t n = ++state_.boundaries;
  const int64_t skip = std::max<int64_t>(0, options_.skip);
  // The boundary that opens the window and the one that closes it (see the class comment).
  const bool optimizer = kind == BoundaryKind::kOptimizerStep;
  const int64_t open_at = optimizer ? skip : skip + 1;
  // From the start (skip 0), the run's first step has no optimizer step before it to start it,
  // and is not inferred: one more optimizer step gives `steps` inferred steps.
  const int64_t close_at = options_.steps < 0 ? -1
                           : optimizer        ? skip + options_.steps + (skip == 0 ? 1 : 0)
                                              : skip + options_.steps + 1;
  if (!state_.opened) {
    if (n != open_at) return WindowAction::kNone;
    state_.opened = true;
    state_.open_ns = now_ns;
    return n == close_at ? WindowAction::kCloseAtEnd : WindowAction::kOpen;
  }
  if (n != close_at) return WindowAction::kNone;
  if (optimizer) return WindowAction::kCloseAtEnd;
  state_.closed = true;
  state_.close_ns = now_ns;
  return WindowAction::kCloseNow;
}

void StepWindow::MarkClosed(int64_t now_ns) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.closed) return;
  state_.closed = true;
  state_.close_ns = now_ns;
}

StepWindow::State StepWindow::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

bool StepWindow::Covers(int64_t ts_ns) const { return !options_.bounded() || state().Covers(ts_ns); }

WindowAction Collector::OnStepBoundary(BoundaryKind kind) noexcept {
  const WindowAction a = window_.OnBoundary(kind, NowNs());
  if (a == WindowAction::kOpen || a == WindowAction::kCloseAtEnd) SetRecording(true);
  if (a == WindowAction::kCloseNow) SetRecording(false);
  return a;
}

void Collector::WindowClosed() noexcept {
  SetRecording(false);
  window_.MarkClosed(NowNs());
}

bool Collector::ReserveChunk() noexcept {
  const uint64_t max_chunks = std::max<uint64_t>(1, options_.max_events / ThreadBuffer::kChunkRecs);
  const uint64_t n = chunks_reserved_.fetch_add(1, std::memory_order_relaxed);
  if (n < max_chunks) return true;
  chunks_reserved_.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

ThreadBuffer* Collector::ThisThread() noexcept {
  if (!recording()) return nullptr;
  // Keyed by a generation, not the address: a new Collector may reuse a destroyed one's address.
  if (t_slot.generation == generation_) return t_slot.buffer;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
    buffers_.push_back(std::make_unique<ThreadBuffer>(this, static_cast<uint32_t>(buffers_.size()), tid));
    t_slot = {generation_, buffers_.back().get()};
    return t_slot.buffer;
  } catch (...) {
    return nullptr;
  }
}

void Collector::SetStatic(const std::string& key, std::string json_value) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : static_config_) {
    if (kv.first == key) {
      kv.second = std::move(json_value);
      return;
    }
  }
  static_config_.emplace_back(key, std::move(json_value));
}

std::string Collector::Static(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& kv : static_config_)
    if (kv.first == key) return kv.second;
  return {};
}

void Collector::Sample(ThreadBuffer* buf, const std::string& key, double value, int64_t ts_ns) noexcept {
  Sample(buf, &key, &value, 1, ts_ns);
}

void Collector::Sample(ThreadBuffer* buf, const std::string* keys, const double* values, size_t n, int64_t ts_ns) noexcept {
  try {
    if (!window_.Covers(ts_ns)) return;  // outside the step window: not part of the recording
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < n; ++k) {
      const std::string& key = keys[k];
      const auto [it, fresh] = last_sample_.try_emplace(key, values[k]);
      if (!fresh && it->second == values[k]) continue;
      it->second = values[k];
      samples_.push_back({ts_ns, buf ? buf->index() : 0, key, values[k]});
      // The samples are the recorder's heap, not the program's (issue 49.5: three heap samples a
      // step, never released, read as growth): OwnHeapBytes leaves them out of the heap samples.
      sample_key_bytes_ += key.size() > 15 ? key.size() + 1 : 0;  // beyond std::string's inline buffer
    }
    sample_bytes_.store(samples_.capacity() * sizeof(ConfigSample) + sample_key_bytes_, std::memory_order_relaxed);
  } catch (...) {
  }
}

void Collector::AddGpuRecords(profiler::GpuRecords records) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (assembled_) return;  // the trace is made: what CUPTI hands back after it is not part of it
    if (gpu_.devices.empty()) gpu_.devices = std::move(records.devices);
    gpu_.dropped += records.dropped;
    // Past the cap a record is counted, not kept (held = kept + undecided).
    const uint64_t cap = options_.max_events;
    auto keep = [&](profiler::GpuRecord& r, std::vector<profiler::GpuRecord>& into) {
      if (gpu_.records.size() + pending_gpu_.size() >= cap) {
        ++gpu_over_cap_;
        return;
      }
      into.push_back(std::move(r));
    };
    auto keep_external = [&](const std::pair<int64_t, int64_t>& x) {
      if (gpu_.external.size() >= cap) ++gpu_over_cap_;
      else gpu_.external.push_back(x);
    };
    if (!window_.options().bounded()) {
      for (auto& r : records.records) keep(r, gpu_.records);
      for (const auto& x : records.external) keep_external(x);
      return;
    }
    // Records arrive as CUPTI hands buffers back: any time after they happened, a thread's buffer
    // at a time, so a kernel may come before the call that launched it. Each is decided as soon as
    // that is safe, the same way the trace's assembly would decide it (the window as it stands
    // covers everything that happened up to now): a runtime or driver call by its own time; device
    // work by the call that launched it (kept when that call was made inside the window, even if
    // the work ran after the window closed), dropped at once when it ended before the window
    // opened, else held until its call arrives or the trace is assembled (ResolvePendingGpu).
    const StepWindow::State window = window_.state();
    // Runtime and driver calls, on the CPU side (AppendGpuRecords puts them on their thread's track).
    const auto cpu_side = [](const profiler::GpuRecord& r) { return !profiler::IsGpuKind(r.kind); };
    bool new_calls = false;
    for (auto& r : records.records) {
      if (!cpu_side(r)) continue;
      if (!window.Covers(r.ts_ns)) {
        ++gpu_outside_window_;
        continue;
      }
      if (r.correlation != profiler::kNoId) new_calls |= window_correlations_.insert(r.correlation).second;
      keep(r, gpu_.records);
    }
    for (auto& r : records.records) {
      if (cpu_side(r)) continue;
      if (r.correlation == profiler::kNoId) {
        if (window.Covers(r.ts_ns)) keep(r, gpu_.records);
        else ++gpu_outside_window_;
      } else if (window_correlations_.count(r.correlation)) {
        keep(r, gpu_.records);
      } else if (!window.opened || r.ts_ns + r.dur_ns < window.open_ns) {
        ++gpu_outside_window_;  // launched before the window opened
      } else {
        keep(r, pending_gpu_);
      }
    }
    // An external correlation names a call made before it arrived: none from before the window.
    if (window.opened) {
      for (const auto& x : records.external) keep_external(x);
    }
    if (new_calls && !pending_gpu_.empty()) ResolvePendingGpu(/*final=*/false);
  } catch (...) {
    gpu_dropped_ += records.records.size();
  }
}

void Collector::ResolvePendingGpu(bool final) {
  std::vector<profiler::GpuRecord> still;
  for (auto& r : pending_gpu_) {
    if (window_correlations_.count(r.correlation)) gpu_.records.push_back(std::move(r));
    else if (final) ++gpu_outside_window_;
    else still.push_back(std::move(r));
  }
  pending_gpu_ = std::move(still);
}

size_t Collector::GpuRecordsHeld() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gpu_.records.size() + pending_gpu_.size();
}

uint64_t Collector::TotalDropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& b : buffers_) n += b->dropped();
  return n;
}

uint64_t Collector::TotalRecords() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& b : buffers_) n += b->size();
  return n;
}

size_t Collector::ThreadCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffers_.size();
}

namespace {

std::string ThreadName(int64_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// A kernel's external correlation can arrive in an earlier buffer than the kernel (another
// thread's buffer, a drain before): the cursor keeps every pair it saw, and each drain passes
// on those of its own records.
void PassExternalIds(DrainCursor& cursor, profiler::GpuRecords& gpu) {
  if (gpu.external.empty() && gpu.records.empty()) return;
  for (const auto& [correlation, external] : gpu.external) cursor.external_ids[correlation] = external;
  gpu.external.clear();
  for (const auto& r : gpu.records) {
    if (r.correlation == profiler::kNoId) continue;
    if (auto it = cursor.external_ids.find(r.correlation); it != cursor.external_ids.end()) gpu.external.push_back(*it);
  }
}

// The records of a buffer to emit now, in record order: open ones from earlier drains, then the
// new ones below `n`; those still open (and not final) stay in at.open.
std::vector<uint64_t> ReadyRecords(const ThreadBuffer& b, DrainCursor::Buffer& at, uint64_t n, bool final) {
  std::vector<uint64_t> ready, still_open;
  auto look = [&](uint64_t i) {
    const Rec& r = b.At(i);
    const int64_t end = std::atomic_ref<const int64_t>(r.end_ticks).load(std::memory_order_acquire);
    if (end != 0 || final) ready.push_back(i);
    else still_open.push_back(i);
  };
  for (const uint64_t i : at.open) look(i);
  for (uint64_t i = at.next; i < n; ++i) look(i);
  at.next = n;
  at.open = std::move(still_open);
  return ready;
}

// The side tables are read under the owner's side_mu, which the owner thread takes to add a
// name, an input row or an edge: held only to copy the addresses of the rows added since the
// last drain (deques: rows never move, and never change once added) and the new edges, so an
// owner thread never waits for the conversion below, nor for a flusher that the scheduler
// left without a CPU (SCHED_IDLE) for longer than that copy.
// The final drain may run in a signal handler on a thread that was interrupted while holding
// this lock (a new name being added): it waits a bounded time, then reads as the old
// assembler did, unlocked, rather than deadlock (the owner thread will not run again).
void CopySideTables(const ThreadBuffer& b, DrainCursor::Buffer& at, bool final) {
  std::unique_lock<std::mutex> side(b.side_mu(), std::defer_lock);
  if (final) {
    for (int i = 0; i < 100 && !side.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } else {
    side.lock();
  }
  for (size_t i = at.names.size(); i < b.names().size(); ++i) at.names.push_back(&b.names()[i]);
  for (size_t i = at.inputs.size(); i < b.inputs().size(); ++i) at.inputs.push_back(&b.inputs()[i]);
  const auto& edges = b.edges();
  for (; at.edges < edges.size(); ++at.edges) at.pending_edges.push_back(edges[at.edges]);
}

// Where a buffer's records go: its track, the ids its events and counters use, and the map from
// its records' ticks to the trace's ns.
struct DrainInto {
  profiler::Trace& trace;
  uint32_t track;
  profiler::StrId grad_counter, dataflow_cat;
  const TickMap& ticks;
};

// The ready records as events (a range still open at the final drain ends at stop_ns, counted
// as unfinished), their names and input rows interned on first use, and the grad mode's changes
// as counters.
// An allocator event as the memory counters the reader makes of torch.profiler's "[memory]"
// instants (profiler/memory_counters.h): allocated, reserved (devices only: 0 on CPU, as Kineto
// writes it), bytes, addr, all at the event's time on its thread.
// Device code (RecKind::kMemory's name) -> its counters' names in the trace drained into.
using MemoryNames = std::unordered_map<uint32_t, std::array<profiler::StrId, 4>>;
void EmitMemory(const ThreadBuffer& b, uint64_t i, const DrainInto& into, MemoryNames& memory_names) {
  const Rec& r = b.At(i);
  if (std::atomic_ref<const int64_t>(r.end_ticks).load(std::memory_order_acquire) == 0 || i == 0) return;  // cut mid-write
  const Rec& t = b.At(i - 1);
  if (t.kind != RecKind::kMemoryTotals) return;
  const int type = static_cast<int>(r.name >> 16), index = static_cast<int>(r.name & 0xffff);
  auto [slot, added] = memory_names.try_emplace(r.name);
  auto& names = slot->second;
  if (added) {
    const std::string device = profiler::MemoryDeviceName(type, index == 0xffff ? -1 : index);
    for (int w = 0; w < 4; ++w) {
      static constexpr profiler::MemoryWhat kWhat[] = {profiler::MemoryWhat::kAllocated, profiler::MemoryWhat::kReserved,
                                                       profiler::MemoryWhat::kBytes, profiler::MemoryWhat::kAddr};
      names[w] = into.trace.strings.Intern(profiler::MemoryCounterName(kWhat[w], device));
    }
  }
  auto& counters = into.trace.counters;
  const int64_t ts_ns = into.ticks.ToNs(r.start_ticks);
  counters.push_back({into.track, names[0], ts_ns, static_cast<double>(t.external_id)});
  if (type != 0) {
    const uint64_t reserved = uint64_t{t.name} | (uint64_t{t.aux} << 32);
    counters.push_back({into.track, names[1], ts_ns, static_cast<double>(reserved)});
  }
  counters.push_back({into.track, names[2], ts_ns, static_cast<double>(r.external_id)});
  const int64_t addr = t.start_ticks;  // the totals record holds the block's address there
  if (addr > 0 && addr < (int64_t{1} << 53)) counters.push_back({into.track, names[3], ts_ns, static_cast<double>(addr)});
}

void EmitRecords(const ThreadBuffer& b, const std::vector<uint64_t>& ready, DrainCursor::Buffer& at, int64_t stop_ns,
                 DrainCursor& cursor, const DrainInto& into) {
  using profiler::Event;
  using profiler::EventKind;
  profiler::Trace& trace = into.trace;
  std::vector<profiler::StrId> ids(at.names.size(), profiler::kNoStr);
  std::vector<uint32_t> input_ids(at.inputs.size(), UINT32_MAX);
  MemoryNames memory_names;
  for (const uint64_t i : ready) {
    const Rec& r = b.At(i);
    if (r.kind == RecKind::kMemoryTotals) continue;  // read with its kMemory record
    if (r.kind == RecKind::kMemory) {
      EmitMemory(b, i, into, memory_names);
      continue;
    }
    if (r.start_ticks == 0) continue;  // appended, never filled (dropped mid-way)
    const int64_t start_ns = into.ticks.ToNs(r.start_ticks);
    const int64_t end_ticks = std::atomic_ref<const int64_t>(r.end_ticks).load(std::memory_order_acquire);
    int64_t end_ns = 0;
    if (end_ticks == 0) {
      ++cursor.unfinished;
      end_ns = std::max(start_ns, stop_ns);
    } else {
      end_ns = into.ticks.ToNs(end_ticks);
    }
    Event e;
    e.ts_ns = start_ns;
    e.dur_ns = std::max<int64_t>(0, end_ns - start_ns);
    e.kind = r.kind == RecKind::kUser ? EventKind::kUserAnnotation : EventKind::kCpuOp;
    if (r.name < ids.size()) {
      if (ids[r.name] == profiler::kNoStr) ids[r.name] = trace.strings.Intern(*at.names[r.name]);
      e.name = ids[r.name];
    }
    e.track = into.track;
    if (r.external_id != 0) e.external_id = r.external_id;
    if (r.aux != UINT32_MAX && r.aux < input_ids.size()) {
      if (input_ids[r.aux] == UINT32_MAX) {
        const RecInputs& in = *at.inputs[r.aux];
        trace.op_inputs.push_back({trace.strings.Intern(in.dims), trace.strings.Intern(in.types),
                                   in.concrete.empty() ? profiler::kNoStr : trace.strings.Intern(in.concrete)});
        input_ids[r.aux] = static_cast<uint32_t>(trace.op_inputs.size() - 1);
      }
      e.aux = input_ids[r.aux];
    }
    trace.AddEvent(e);
    if (r.kind == RecKind::kOp) {
      const int grad = (r.flags & kGradEnabled) ? 1 : 0;
      if (grad != at.last_grad) {
        trace.counters.push_back({into.track, into.grad_counter, start_ns, static_cast<double>(grad)});
        at.last_grad = grad;
      }
    }
  }
}

// Dataflow edges whose two records have both been emitted (a later drain takes the others).
void EmitDataflow(const ThreadBuffer& b, DrainCursor::Buffer& at, uint64_t n, bool final, DrainCursor& cursor,
                  const DrainInto& into) {
  std::vector<DataflowEdge> waiting;
  for (const DataflowEdge& edge : at.pending_edges) {
    if (edge.from >= n || edge.to >= n) {  // appended after this drain's snapshot of the buffer
      if (!final) waiting.push_back(edge);
      continue;
    }
    const Rec& from = b.At(edge.from);
    const Rec& to = b.At(edge.to);
    const bool done = final || (std::atomic_ref<const int64_t>(from.end_ticks).load(std::memory_order_acquire) != 0 &&
                                std::atomic_ref<const int64_t>(to.end_ticks).load(std::memory_order_acquire) != 0);
    if (!done) {
      waiting.push_back(edge);
      continue;
    }
    const int64_t id = cursor.next_flow_id++;
    into.trace.flows.push_back({id, into.dataflow_cat, into.track, into.ticks.ToNs(from.start_ticks), true});
    into.trace.flows.push_back({id, into.dataflow_cat, into.track, into.ticks.ToNs(to.start_ticks), false});
  }
  at.pending_edges = std::move(waiting);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Collector::StaticConfig() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_config_;
}

void Collector::Drain(profiler::Trace& trace, int32_t rank, DrainCursor& cursor, bool final, int64_t stop_ns) {
  const int64_t pid = getpid();
  // Copies under the lock, the work outside it: a thread taking a config sample never waits for
  // a drain.
  std::vector<ThreadBuffer*> buffers;
  std::vector<ConfigSample> samples;
  profiler::GpuRecords gpu;
  TickMap ticks;
  // A pair read now: the records this drain emits end before it, or so little after that the
  // map's slope carries them. (Two drains at once may add theirs out of order: the map drops the
  // earlier one.)
  const TickMap::Point pair = ReadTickPair(options_.ticks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    tick_map_.Add(pair);
    ticks = tick_map_;
    for (const auto& b : buffers_) buffers.push_back(b.get());
    if (cursor.samples < samples_.size()) samples.assign(samples_.begin() + static_cast<std::ptrdiff_t>(cursor.samples), samples_.end());
    cursor.samples = samples_.size();
    if (cursor.gpu_records < gpu_.records.size()) {
      gpu.records.assign(gpu_.records.begin() + static_cast<std::ptrdiff_t>(cursor.gpu_records), gpu_.records.end());
    }
    if (cursor.gpu_external < gpu_.external.size()) {
      gpu.external.assign(gpu_.external.begin() + static_cast<std::ptrdiff_t>(cursor.gpu_external), gpu_.external.end());
    }
    if (!cursor.gpu_devices && !gpu_.devices.empty()) {
      gpu.devices = gpu_.devices;
      cursor.gpu_devices = true;
    }
    cursor.gpu_records = gpu_.records.size();
    cursor.gpu_external = gpu_.external.size();
    if (final) gpu.dropped = gpu_.dropped;
  }
  PassExternalIds(cursor, gpu);
  cursor.buffers.resize(std::max(cursor.buffers.size(), buffers.size()));

  const profiler::StrId grad_counter = trace.strings.Intern("trainrx.grad_enabled");
  const profiler::StrId dataflow_cat = trace.strings.Intern("trainrx.dataflow");
  std::vector<uint32_t> tracks(buffers.size());
  for (ThreadBuffer* b : buffers) {
    DrainCursor::Buffer& at = cursor.buffers[b->index()];
    const uint64_t n = b->size();  // acquire: records below n were appended (maybe not filled)
    const uint32_t track = trace.GetOrAddTrack(rank, profiler::TrackKind::kCpuThread, pid, b->tid());
    tracks[b->index()] = track;
    if (!at.named) {
      const std::string tname = ThreadName(b->tid());
      if (!tname.empty()) trace.tracks[track].name = trace.strings.Intern(tname);
      at.named = true;
    }
    const std::vector<uint64_t> ready = ReadyRecords(*b, at, n, final);
    CopySideTables(*b, at, final);
    const DrainInto into{trace, track, grad_counter, dataflow_cat, ticks};
    EmitRecords(*b, ready, at, stop_ns, cursor, into);
    EmitDataflow(*b, at, n, final, cursor, into);
  }
  for (const ConfigSample& s : samples) {
    const uint32_t track = s.buffer < buffers.size() ? tracks[s.buffer]
                                                      : trace.GetOrAddTrack(rank, profiler::TrackKind::kCpuThread, pid, pid);
    // Config keys ("anomaly_mode") go under trainrx.config.; full names (the memory counters,
    // profiler/memory_counters.h) as they are.
    const bool full = s.key.rfind("trainrx.", 0) == 0;
    trace.counters.push_back({track, trace.strings.Intern(full ? s.key : "trainrx.config." + s.key), s.ts_ns, s.value});
  }
  if (!gpu.records.empty() || !gpu.devices.empty() || gpu.dropped) profiler::AppendGpuRecords(trace, rank, pid, gpu);
}

profiler::Trace Collector::Assemble(int32_t rank, int64_t stop_ns) {
  SetRecording(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Wait (bounded) for callbacks in flight on other threads.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (const auto& b : buffers_) {
      while (b->busy.load(std::memory_order_seq_cst) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
  }

  profiler::Trace trace;
  profiler::RankInfo info;
  info.rank = rank;
  info.source = "trainrx collector";
  info.rank_source = "collector";
  for (const auto& [k, v] : StaticConfig()) info.config[k] = profiler::ConfigValue::Json(v);
  trace.ranks.push_back(std::move(info));
  // Ranges still open close where the recording ended: the window's end when it closed.
  const StepWindow::State window = window_.state();
  {
    // Device work whose launching call never arrived inside the window was launched outside it.
    // From here on, what CUPTI hands back (after the last flush) is not part of this trace.
    std::lock_guard<std::mutex> lock(mu_);
    ResolvePendingGpu(/*final=*/true);
    assembled_ = true;
  }
  DrainCursor cursor;
  Drain(trace, rank, cursor, /*final=*/true, window.closed ? std::min(stop_ns, window.close_ns) : stop_ns);

  const uint64_t dropped = TotalDropped();
  const uint64_t unfinished = cursor.unfinished;
  uint64_t gpu_dropped = gpu_dropped_.load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    gpu_dropped += gpu_.dropped;
  }
  // Losses go both to stats (for this process) and to the "trainrx" block (so a reader of the
  // written file reports them too).
  auto& cfg = trace.ranks[0].config;
  cfg["dropped_records"] = profiler::ConfigValue::Number(dropped);
  if (const int64_t first = first_drop_ns_.load(); first > 0) cfg["first_dropped_ns"] = profiler::ConfigValue::Number(first);
  cfg["unfinished_ranges"] = profiler::ConfigValue::Number(unfinished);
  cfg["cupti_dropped_records"] = profiler::ConfigValue::Number(gpu_dropped);
  uint64_t over_cap = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    over_cap = gpu_over_cap_;
  }
  cfg["gpu_records_over_cap"] = profiler::ConfigValue::Number(over_cap);
  if (over_cap) {
    trace.stats.Add("gpu_records_over_cap", profiler::IssueSeverity::kDataLoss,
                    "GPU records and correlations past the collector's cap (TRAINRX_MAX_EVENTS); record fewer steps",
                    over_cap);
  }
  if (dropped) trace.stats.Add("dropped_records", profiler::IssueSeverity::kDataLoss, "collector budget exhausted", dropped);
  if (unfinished) trace.stats.Add("unfinished_ranges", profiler::IssueSeverity::kInfo, "closed at stop time", unfinished);
  // The step window: what was recorded of the run (analyzers::FindRecordedWindows reads it).
  if (window_.options().bounded()) {
    cfg["window_skip"] = profiler::ConfigValue::Number(window_.options().skip);
    cfg["window_steps"] = profiler::ConfigValue::Number(window_.options().steps);
    cfg["window_boundary"] = profiler::ConfigValue::String(
        window.kind < 0                                                  ? "none"
        : window.kind == static_cast<int>(BoundaryKind::kOptimizerStep) ? "Optimizer.step"
                                                                         : "step markers");
    cfg["window_run_boundaries"] = profiler::ConfigValue::Number(window.boundaries);
    cfg["window_opened"] = profiler::ConfigValue::Bool(window.opened);
    cfg["window_closed"] = profiler::ConfigValue::Bool(window.closed);
    std::lock_guard<std::mutex> lock(mu_);
    cfg["gpu_records_outside_window"] = profiler::ConfigValue::Number(gpu_outside_window_);
  }
  // ProfilerStep#N as torch.profiler writes them, so HTA and other tools find our steps; the
  // analyzer reads them back as the steps they were made from (profiler_steps_from).
  const std::string steps_from = profiler::AddProfilerSteps(trace, rank, std::max<int64_t>(0, window_.options().skip) + 1);
  if (!steps_from.empty()) cfg["profiler_steps_from"] = profiler::ConfigValue::String(steps_from);
  trace.Finalize(1);  // on this thread: the collector starts no threads in the observed program
  return trace;
}

}  // namespace trainrx::probes
