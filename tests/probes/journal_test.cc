// The collector's journal (probes/journal.h) without LibTorch: what a killed process leaves on disk
// reads back as what it recorded up to its last flush, cut anywhere; flushes taken while threads
// keep recording lose nothing and emit nothing twice.
#include "journal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "gpu_test_records.h"
#include "trainrx/profiler/journal_format.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"

namespace trainrx::probes {
namespace {

namespace fs = std::filesystem;

Rec* Begin(ThreadBuffer* b, const char* name, int64_t start) {
  Rec* r = b->Append();
  if (!r) return nullptr;
  r->kind = RecKind::kOp;
  r->name = b->InternDynamic(name);
  r->flags = kGradEnabled;
  r->start_ticks = start;
  return r;
}

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// name -> count, for comparing what two traces hold.
std::map<std::string, int> Names(const profiler::Trace& t) {
  std::map<std::string, int> out;
  for (const auto& e : t.events) ++out[std::string(t.Name(e))];
  return out;
}

// Where the header and each frame of a binary journal end (journal_format.h's layout).
std::vector<size_t> FrameEnds(const std::string& bytes) {
  std::vector<size_t> ends;
  uint32_t len = 0;
  std::memcpy(&len, bytes.data() + 8, 4);
  size_t at = 20 + len;
  ends.push_back(at);
  while (at + 16 <= bytes.size()) {
    std::memcpy(&len, bytes.data() + at + 4, 4);
    at += 16 + len;
    ends.push_back(at);
  }
  return ends;
}

fs::path TempFile(const char* name) {
  const fs::path dir = fs::temp_directory_path() / "trainrx_journal_test";
  fs::create_directories(dir);
  return dir / name;
}

TEST(JournalTest, ACutOffJournalReadsAsWhatWasFlushed) {
  Collector c;
  c.SetRecording(true);
  c.SetStatic("collector", "\"trainrx probes\"");
  ThreadBuffer* b = c.ThisThread();
  const fs::path path = TempFile("cut.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());

  Rec* step = Begin(b, "ProfilerStep#1", 1'000'100);  // open across two flushes
  Rec* conv = Begin(b, "aten::conv2d", 1'000'200);
  conv->aux = b->AddInputs({"[[4, 3, 8, 8], [8, 3, 3, 3]]", "[\"float\", \"float\"]", "[\"\", \"\", \"[2, 2]\"]"});
  EndRecord(conv, 1'000'300);
  ASSERT_TRUE(j.Flush(c, 1'000'350).ok());
  Rec* bn = Begin(b, "aten::batch_norm", 1'000'400);
  b->AddEdge(b->IndexOf(conv), b->IndexOf(bn));
  c.Sample(b, "anomaly_mode", 1, 1'000'410);
  ASSERT_TRUE(j.Flush(c, 1'000'450).ok());  // bn still open: its edge waits
  EndRecord(bn, 1'000'500);
  EndRecord(step, 1'000'600);
  std::thread([&] {
    ThreadBuffer* w = c.ThisThread();
    EndRecord(Begin(w, "aten::copy_", 1'000'510), 1'000'520);
  }).join();
  ASSERT_TRUE(j.Flush(c, 1'000'700).ok());
  EXPECT_EQ(j.stats().flushes, 3u);
  EXPECT_EQ(j.stats().events, 4u);

  const std::string bytes = Slurp(path);
  ASSERT_TRUE(profiler::IsJournal(bytes));  // binary frames: no JSON is written during the run
  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(bytes, "cut.json.partial", -1, back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.stats.Count("journal_cut"), 1u);  // a journal says what it misses
  EXPECT_EQ(back.stats.Count("journal_torn_flush"), 0u);
  EXPECT_EQ(back.ranks[0].config.at("journal_frames").json(), "3");
  profiler::Trace whole = c.Assemble(0, 2'000'000);
  EXPECT_EQ(Names(back), Names(whole));
  EXPECT_EQ(back.flows.size(), 2u);  // conv -> bn, once both ended
  EXPECT_EQ(back.tracks.size(), 2u);
  EXPECT_EQ(back.ranks[0].base_time_ns, 1'000'000);
  EXPECT_EQ(back.ranks[0].config.at("journal_flush_ms").json(), "2000");
  EXPECT_EQ(back.ranks[0].config.at("collector").json(), "\"trainrx probes\"");
  const profiler::Event* conv_back = nullptr;
  for (const auto& e : back.events) if (back.Name(e) == "aten::conv2d") conv_back = &e;
  ASSERT_NE(conv_back, nullptr);
  EXPECT_EQ(conv_back->ts_ns, 1'000'200);
  EXPECT_EQ(conv_back->dur_ns, 100);
  ASSERT_NE(conv_back->aux, profiler::kNoAux);
  EXPECT_EQ(back.strings.Get(back.op_inputs[conv_back->aux].input_dims), "[[4, 3, 8, 8], [8, 3, 3, 3]]");
  // Format 3 (issue 52): the concrete inputs come back too.
  EXPECT_EQ(back.strings.Get(back.op_inputs[conv_back->aux].concrete), "[\"\", \"\", \"[2, 2]\"]");
  int flushes = 0, anomaly = 0;
  for (const auto& ctr : back.counters) {
    flushes += back.strings.Get(ctr.name) == "trainrx.journal";
    anomaly += back.strings.Get(ctr.name) == "trainrx.config.anomaly_mode";
  }
  EXPECT_EQ(flushes, 3);
  EXPECT_EQ(anomaly, 1);

  // Killed mid-write: every prefix past the header reads, as a subset of the whole; a prefix that
  // ends inside a frame has its last flush counted as torn, one at a frame's end has none.
  const std::vector<size_t> ends = FrameEnds(bytes);
  ASSERT_EQ(ends.size(), 4u);  // the header and 3 frames
  for (size_t cut = ends[0]; cut <= bytes.size(); ++cut) {
    profiler::Trace part;
    const auto pst = profiler::ReadTraceBuffer(std::string_view(bytes).substr(0, cut), "cut.json.partial", -1, part);
    ASSERT_TRUE(pst.ok()) << cut << ": " << pst.message();
    const bool at_end = std::find(ends.begin(), ends.end(), cut) != ends.end();
    EXPECT_EQ(part.stats.Count("journal_torn_flush"), at_end ? 0u : 1u) << cut;
    for (const auto& [name, n] : Names(part)) EXPECT_LE(n, Names(whole)[name]) << cut << " " << name;
  }
  // Cut inside the header: an error naming the file, never a crash.
  for (size_t cut = 8; cut < ends[0]; ++cut) {
    profiler::Trace part;
    const auto pst = profiler::ReadTraceBuffer(std::string_view(bytes).substr(0, cut), "cut.json.partial", -1, part);
    EXPECT_FALSE(pst.ok()) << cut;
    EXPECT_NE(pst.message().find("cut.json.partial: a trainrx journal cut off inside its header"), std::string::npos) << pst.message();
  }
  j.Remove();
  EXPECT_FALSE(fs::exists(path));
}

// The heap the journal holds (its reused fragment and frame buffer) is the recorder's, not the
// training's: the collector leaves it out of its heap samples (its record chunks are not in malloc's). A
// flusher starved of CPU drains more at each flush, and these buffers grew with the run: nanoGPT
// recorded on 2 busy cores read as memory.growth of 554 kB a step (flat unobserved).
TEST(JournalTest, TheHeapItHoldsIsLeftOutOfTheHeapSamples) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const fs::path path = TempFile("held.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());
  // Nothing flushed yet, but the fragment's events and the frame's bytes are reserved (malloc's
  // mmapped blocks, 33 MB each) and left out (the record chunks are mapped outside malloc).
  const uint64_t reserved = c.OwnHeapBytes();
  EXPECT_GE(reserved, 2 * (size_t{32} << 20));
  for (int i = 0; i < 20000; ++i) EndRecord(Begin(b, "aten::add", 1'000'100 + 2 * i), 1'000'101 + 2 * i);
  ASSERT_TRUE(j.Flush(c, 1'100'000).ok());
  // 20 000 events drained into the fragment and serialized into the frame buffer: within the
  // reservations, plus the fragment's small tables.
  EXPECT_GE(c.OwnHeapBytes(), reserved);
  EXPECT_LT(c.OwnHeapBytes(), reserved + (size_t{4} << 20));
  j.Remove();
}

// Sanitizers replace malloc (GCC says so with __SANITIZE_*__, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRAINRX_TEST_OWN_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TRAINRX_TEST_OWN_MALLOC 1
#endif
#endif
#if !defined(TRAINRX_TEST_OWN_MALLOC) && defined(__GLIBC__)
// Whether glibc served `p` from its own mapping (the chunk header's IS_MMAPPED bit), not its heap.
bool GlibcMapped(void* p) {
  const auto header = reinterpret_cast<const volatile size_t*>(reinterpret_cast<std::uintptr_t>(p) - sizeof(size_t));
  return (*header & 2) != 0;
}

// The flusher's arrays grow with its drains; glibc raises its mmap threshold (for the whole process)
// to the size of any mmapped block freed below 32 MB, so a flusher that freed a 24 MB block while
// growing would make the program's own 20 MB tensors heap blocks from then on: a recorded program
// that no longer behaves as the unobserved one (nanoGPT's optimizer, docs/record.md). A drain of
// 500 000 events (24 MB of events, ~12 MB of frame) must leave the threshold where it was.
TEST(JournalTest, DrainsNeverMoveTheProgramsMallocThreshold) {
  constexpr size_t kProbe = size_t{20} << 20;
  void* before = std::malloc(kProbe);
  ASSERT_NE(before, nullptr);
  if (!GlibcMapped(before)) {
    std::free(before);
    GTEST_SKIP() << "this process's mmap threshold is already above 20 MB";
  }
  {
    CollectorOptions o;
    o.max_events = 2'000'000;
    Collector c(o);
    c.SetRecording(true);
    ThreadBuffer* b = c.ThisThread();
    const fs::path path = TempFile("threshold.json.partial");
    Journal j;
    ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());
    int64_t t = 1'000'100;
    for (int drain : {10'000, 100'000, 500'000, 10}) {  // the last flush starts after the big one
      for (int i = 0; i < drain; ++i, t += 2) EndRecord(Begin(b, "aten::add", t), t + 1);
      ASSERT_TRUE(j.Flush(c, t + 10).ok());
    }
    j.Remove();
  }
  void* after = std::malloc(kProbe);
  ASSERT_NE(after, nullptr);
  EXPECT_TRUE(GlibcMapped(after)) << "the journal freed a block between 20 and 32 MB: glibc's threshold moved";
  std::free(after);
  std::free(before);
}
#endif

// GPU records reach the collector as CUPTI hands buffers back during the run: the journal
// carries them, so a killed GPU run keeps its kernels, each once, mapped to the op that launched
// them (also when the mapping arrived in an earlier flush than the kernel).
TEST(JournalTest, GpuRecordsDeliveredDuringTheRunAreJournaledOnce) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const fs::path path = TempFile("gpu.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());
  Rec* mm = Begin(b, "aten::mm", 1'000'100);
  mm->external_id = 5;
  EndRecord(mm, 1'000'200);
  profiler::GpuRecords first;
  first.records = {testing::KernelRecord(1'000'300, 1, 50)};
  first.external = {{1, 5}};
  first.devices = {{0, "NVIDIA H100", 80LL << 30, 9, 0, 132}};
  c.AddGpuRecords(first);
  ASSERT_TRUE(j.Flush(c, 1'000'400).ok());
  // Kernel 2's correlation arrives one flush before the kernel (another thread's buffer).
  profiler::GpuRecords early;
  early.external = {{2, 5}};
  c.AddGpuRecords(early);
  ASSERT_TRUE(j.Flush(c, 1'000'450).ok());
  profiler::GpuRecords second;
  second.records = {testing::KernelRecord(1'000'500, 2, 50)};
  c.AddGpuRecords(second);
  ASSERT_TRUE(j.Flush(c, 1'000'600).ok());
  ASSERT_TRUE(j.Flush(c, 1'000'700).ok());  // nothing new: nothing again

  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(Slurp(path), "gpu.json.partial", -1, back);
  ASSERT_TRUE(st.ok()) << st.message();
  const auto names = Names(back);
  EXPECT_EQ(names.count("k1") ? names.at("k1") : 0, 1);
  EXPECT_EQ(names.count("k2") ? names.at("k2") : 0, 1);
  for (const auto& e : back.events) {
    if (back.Name(e) == "k1" || back.Name(e) == "k2") {
      EXPECT_EQ(e.external_id, 5) << back.Name(e);
    }
  }
  j.Remove();
}

// Flushes taken while another thread records (the collector's multi-threaded case; run under
// ThreadSanitizer by scripts/sanitize --tsan): every record ends up in the journal exactly once.
TEST(JournalTest, FlushesWhileThreadsRecordLoseNothingAndRepeatNothing) {
  Collector c;
  c.SetRecording(true);
  const fs::path path = TempFile("concurrent.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1, 10).ok());
  constexpr int kThreads = 3, kRecords = 20000;
  std::atomic<int> done{0}, flushed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadBuffer* b = c.ThisThread();
      for (int i = 0; i < kRecords; ++i) {
        // Halfway, wait for a flush: at least one is taken while every thread is mid-recording
        // (without it a fast machine could finish the threads before the first flush).
        if (i == kRecords / 2) {
          while (flushed.load() == 0) std::this_thread::yield();
        }
        Rec* outer = Begin(b, i % 2 ? "aten::linear" : "aten::conv2d", 10 + i * 10);
        if (i % 100 == 0) outer->aux = b->AddInputs({"[[1]]", "[\"float\"]", ""});
        Rec* inner = Begin(b, t == 0 ? "aten::addmm" : "aten::mm", 11 + i * 10);
        EndRecord(inner, 12 + i * 10);
        if (i % 100 == 0) b->AddEdge(b->IndexOf(outer), b->IndexOf(inner));
        EndRecord(outer, 13 + i * 10);
      }
      ++done;
    });
  }
  int flushes = 0;
  while (done.load() < kThreads) {
    const Status st = j.Flush(c, 5);
    ++flushes;
    flushed.store(flushes);
    if (!st.ok()) {
      for (auto& t : threads) t.join();
      FAIL() << st.message();
    }
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(j.Flush(c, 5).ok());
  EXPECT_GE(flushes, 1);
  EXPECT_EQ(j.stats().events, static_cast<uint64_t>(kThreads) * kRecords * 2);
  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(Slurp(path), "concurrent.json.partial", -1, back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.events.size(), static_cast<size_t>(kThreads) * kRecords * 2);
  EXPECT_EQ(back.flows.size(), static_cast<size_t>(kThreads) * (kRecords / 100) * 2);
  profiler::Trace whole = c.Assemble(0, 1 << 30);
  EXPECT_EQ(Names(back), Names(whole));
  j.Remove();
}

// What an analysis sees of a trace, event by event: thread, name, times, external id, inputs.
using EventRow = std::tuple<int64_t, std::string, int64_t, int64_t, int64_t, std::string, std::string>;
std::vector<EventRow> Rows(const profiler::Trace& t) {
  std::vector<EventRow> rows;
  for (const auto& e : t.events) {
    std::string dims, types;
    if (e.aux != profiler::kNoAux && e.kind == profiler::EventKind::kCpuOp) {
      dims = t.strings.Get(t.op_inputs[e.aux].input_dims);
      types = t.strings.Get(t.op_inputs[e.aux].input_types);
    }
    rows.emplace_back(t.tracks[e.track].tid, std::string(t.Name(e)), e.ts_ns, e.dur_ns, e.external_id, dims, types);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}
// Counters and flows, by name and place (the journal's own flush counter left out).
std::vector<std::tuple<std::string, int64_t, int64_t, double>> CounterRows(const profiler::Trace& t) {
  std::vector<std::tuple<std::string, int64_t, int64_t, double>> rows;
  for (const auto& c : t.counters)
    if (t.strings.Get(c.name) != "trainrx.journal") rows.emplace_back(std::string(t.strings.Get(c.name)), t.tracks[c.track].tid, c.ts_ns, c.value);
  for (const auto& f : t.flows) rows.emplace_back(std::string(t.strings.Get(f.cat)) + (f.is_start ? " s" : " f"), t.tracks[f.track].tid, f.ts_ns, 0);
  std::sort(rows.begin(), rows.end());
  return rows;
}

// The salvage path round-trips: a killed run's binary journal (everything flushed before the
// kill) decodes, through the Kineto writer and reader, to the same events, inputs, counters and
// flows as the trace the process would have written (Assemble, written and read back).
TEST(JournalTest, SalvagedJournalHoldsWhatTheTraceWouldHave) {
  Collector c;
  c.SetRecording(true);
  c.SetStatic("collector", "\"trainrx probes\"");
  const fs::path path = TempFile("roundtrip.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());
  ThreadBuffer* b = c.ThisThread();
  int64_t t = 1'001'000;
  for (int step = 0; step < 6; ++step) {
    Rec* opt = Begin(b, "Optimizer.step#SGD.step", t);
    opt->kind = RecKind::kUser;
    for (int i = 0; i < 40; ++i) {
      Rec* conv = Begin(b, i % 3 ? "aten::conv2d" : "aten::linear", t += 10);
      conv->external_id = b->NextExternalId();
      if (step < 2) conv->aux = b->AddInputs({"[[" + std::to_string(i) + ", 3]]", "[\"float\"]", ""});
      Rec* add = Begin(b, "aten::add", t += 5);
      if (i % 7 == 0) add->flags = 0;  // grad off: a grad-mode counter
      EndRecord(add, t += 5);
      if (i % 5 == 0) b->AddEdge(b->IndexOf(conv), b->IndexOf(add));
      EndRecord(conv, t += 10);
    }
    c.Sample(b, "intra_op_threads", step % 2 ? 2 : 4, t);
    EndRecord(opt, t += 20);
    std::thread([&c, t] {  // a side thread's ops, on their own track
      ThreadBuffer* w = c.ThisThread();
      EndRecord(Begin(w, "aten::copy_", t + 1), t + 3);
    }).join();
    if (step % 2 == 1) {
      ASSERT_TRUE(j.Flush(c, t + 5).ok());
    }
  }
  // The kill: nothing after the last flush. The trace the process would have written then:
  profiler::Trace direct = c.Assemble(0, t + 10);
  std::ostringstream json;
  profiler::WriteKinetoJson(direct, 0, json);
  profiler::Trace written;
  ASSERT_TRUE(profiler::ReadTraceBuffer(json.str(), "direct.json", -1, written).ok());
  profiler::Trace salvaged;
  const auto st = profiler::ReadTraces({path.string()}, salvaged);
  ASSERT_TRUE(st.ok()) << st.message();
  // Assemble adds ProfilerStep#N ranges (the salvage path adds them too, in FinishJournals).
  std::vector<EventRow> want;
  for (const auto& row : Rows(written))
    if (!std::get<1>(row).starts_with("ProfilerStep#")) want.push_back(row);
  EXPECT_EQ(Rows(salvaged), want);
  EXPECT_EQ(CounterRows(salvaged), CounterRows(written));
  EXPECT_EQ(salvaged.stats.Count("journal_torn_flush"), 0u);
  EXPECT_EQ(salvaged.stats.Count("journal_corrupt_frames"), 0u);
  EXPECT_EQ(j.stats().flushes, 3u);
  EXPECT_GT(j.stats().cpu_ns, 0);
  j.Remove();
}

// Damaged journals never crash the reader: a frame whose bytes were changed is skipped and
// counted, a damaged header is an error naming the file, and a frame whose hash is right but whose
// contents point outside its tables (an encoder bug, a hostile file) is rejected as corrupt.
TEST(JournalTest, ACorruptJournalIsCountedOrAnErrorNeverACrash) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const fs::path path = TempFile("corrupt.json.partial");
  Journal j;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000).ok());
  for (int f = 0; f < 3; ++f) {
    for (int i = 0; i < 20; ++i) EndRecord(Begin(b, "aten::mul", 1'000'100 + f * 1000 + i * 10), 1'000'105 + f * 1000 + i * 10);
    ASSERT_TRUE(j.Flush(c, 1'000'900 + f * 1000).ok());
  }
  const std::string bytes = Slurp(path);
  const std::vector<size_t> ends = FrameEnds(bytes);
  ASSERT_EQ(ends.size(), 4u);
  // One byte changed inside the second frame's payload: that frame skipped, the others read.
  std::string damaged = bytes;
  damaged[ends[1] + 40] ^= 0x5a;
  profiler::Trace t;
  auto st = profiler::ReadTraceBuffer(damaged, "corrupt.json.partial", -1, t);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(t.stats.Count("journal_corrupt_frames"), 1u);
  EXPECT_EQ(Names(t)["aten::mul"], 40);
  // The header damaged: an error naming the file.
  damaged = bytes;
  damaged[22] ^= 0x01;
  profiler::Trace h;
  st = profiler::ReadTraceBuffer(damaged, "corrupt.json.partial", -1, h);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("corrupt.json.partial: a trainrx journal whose header is corrupt"), std::string::npos) << st.message();
  // Random damage anywhere past the magic, many times: a result or an error, never a crash.
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    damaged = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) damaged[8 + rng() % (damaged.size() - 8)] = static_cast<char>(rng());
    if (rng() % 3 == 0) damaged.resize(8 + rng() % (damaged.size() - 8));
    profiler::Trace any;
    (void)profiler::ReadTraceBuffer(damaged, "corrupt.json.partial", -1, any);
  }
  // A frame with a right hash whose event names a track it does not hold.
  profiler::Trace bad;
  bad.ranks.push_back({});
  bad.GetOrAddTrack(0, profiler::TrackKind::kCpuThread, 1, 1);
  profiler::Event e;
  e.ts_ns = 1'000'200;
  e.dur_ns = 5;
  e.name = bad.strings.Intern("aten::bad");
  e.track = 3;
  bad.AddEvent(e);
  std::string with_bad = bytes;
  profiler::AppendJournalFrame(bad, 1'005'000, 4, &with_bad);
  profiler::Trace r;
  st = profiler::ReadTraceBuffer(with_bad, "corrupt.json.partial", -1, r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(r.stats.Count("journal_corrupt_frames"), 1u);
  EXPECT_EQ(Names(r).count("aten::bad"), 0u);
  EXPECT_EQ(Names(r)["aten::mul"], 60);
  j.Remove();
}

// Issue 34.13: events are written compactly (varints, times as differences); every field comes
// back as it was, whatever its value: times going back, the largest times a journal accepts,
// negative and absent ids, flags, side-table indices.
TEST(JournalTest, EventsRoundTripThroughTheCompactForm) {
  profiler::Trace t;
  t.ranks.push_back({});
  const uint32_t track = t.GetOrAddTrack(0, profiler::TrackKind::kCpuThread, 7, 7);
  t.op_inputs.push_back({t.strings.Intern("[[2, 3]]"), t.strings.Intern("[\"float\"]")});
  t.memcpys.push_back({});
  constexpr int64_t kMax = int64_t{1} << 61;
  std::vector<profiler::Event> in;
  const auto add = [&](int64_t ts, int64_t dur, int64_t corr, int64_t ext, uint32_t aux, profiler::EventKind kind,
                       uint8_t flags) {
    profiler::Event e;
    e.ts_ns = ts, e.dur_ns = dur, e.correlation = corr, e.external_id = ext, e.aux = aux, e.kind = kind, e.flags = flags;
    e.name = t.strings.Intern("op" + std::to_string(in.size()));
    e.track = track;
    in.push_back(e);
    t.AddEvent(e);
  };
  add(1'000'000, 5, profiler::kNoId, profiler::kNoId, profiler::kNoAux, profiler::EventKind::kCpuOp, 0);
  add(999'000, 0, 0, 42, 0, profiler::EventKind::kCpuOp, 3);  // earlier than the one before
  add(kMax, kMax, INT64_MAX, INT64_MIN, profiler::kNoAux, profiler::EventKind::kOther, 255);
  add(-kMax, 1, -7, profiler::kNoId, 0, profiler::EventKind::kMemcpy, 0);
  add(1'700'000'000'000'000'000, 123'456'789, 1, 1, profiler::kNoAux, profiler::EventKind::kKernel, 1);
  std::string bytes;
  profiler::EncodeJournalHeader(0, 0, {}, &bytes);
  profiler::AppendJournalFrame(t, 1, 1, &bytes);
  profiler::JournalContents out;
  const Status st = profiler::DecodeJournal(bytes, "x.partial", &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out.corrupt_frames, 0u);
  ASSERT_EQ(out.trace.events.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const profiler::Event& e = out.trace.events[i];
    EXPECT_EQ(e.ts_ns, in[i].ts_ns) << i;
    EXPECT_EQ(e.dur_ns, in[i].dur_ns) << i;
    EXPECT_EQ(e.correlation, in[i].correlation) << i;
    EXPECT_EQ(e.external_id, in[i].external_id) << i;
    EXPECT_EQ(e.aux, in[i].aux) << i;
    EXPECT_EQ(e.kind, in[i].kind) << i;
    EXPECT_EQ(e.flags, in[i].flags) << i;
    EXPECT_EQ(out.trace.strings.Get(e.name), "op" + std::to_string(i));
  }
  // Compact: ordinary ops (microseconds apart, a few names, one thread) take under 16 bytes each,
  // a third of their 48 bytes in memory.
  profiler::Trace ops;
  ops.ranks.push_back({});
  const uint32_t main = ops.GetOrAddTrack(0, profiler::TrackKind::kCpuThread, 7, 7);
  for (int i = 0; i < 1000; ++i) {
    profiler::Event e;
    e.ts_ns = 1'700'000'000'000'000'000 + i * 2'345;
    e.dur_ns = 1'000 + i % 700;
    e.name = ops.strings.Intern(i % 2 ? "aten::add" : "aten::mul");
    e.track = main;
    e.flags = 1;
    ops.AddEvent(e);
  }
  std::string frame;
  profiler::AppendJournalFrame(ops, 1, 1, &frame);
  EXPECT_LT(frame.size(), 16u * 1000) << "frame bytes";
  // A frame cut inside its events is a torn frame, not events made up from what is left.
  profiler::JournalContents cut;
  ASSERT_TRUE(profiler::DecodeJournal(std::string_view(bytes).substr(0, bytes.size() - 30), "x.partial", &cut).ok());
  EXPECT_TRUE(cut.trace.events.empty());
  EXPECT_GT(cut.torn_bytes, 0u);
}

// A journal of format 1 (raw 48-byte events: a probe built by an earlier trainrx, which the per-user
// probe cache may still hold) still reads; a format this trainrx does not know is refused by name.
TEST(JournalTest, AFormatOneJournalStillReadsAndAnUnknownFormatIsRefused) {
  profiler::Trace t;
  t.ranks.push_back({});
  const uint32_t track = t.GetOrAddTrack(0, profiler::TrackKind::kCpuThread, 7, 7);
  for (int i = 0; i < 3; ++i) {
    profiler::Event e;
    e.ts_ns = 1'000'100 + i * 100;
    e.dur_ns = 5 + i;
    e.name = t.strings.Intern("aten::old");
    e.track = track;
    t.AddEvent(e);
  }
  std::string bytes;
  profiler::EncodeJournalHeader(0, 0, {}, &bytes);
  bytes[7] = '\x01';
  profiler::AppendJournalFrame(t, 1'000'900, 1, &bytes, 1);
  profiler::Trace old;
  Status st = profiler::ReadTraceBuffer(bytes, "old.json.partial", -1, old);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(old.stats.Count("journal_corrupt_frames"), 0u);
  EXPECT_EQ(Names(old)["aten::old"], 3);
  // The same frame read as format 2 does not check out: counted, never made into events.
  bytes[7] = '\x02';
  profiler::Trace misread;
  ASSERT_TRUE(profiler::ReadTraceBuffer(bytes, "old.json.partial", -1, misread).ok());
  EXPECT_EQ(Names(misread).count("aten::old"), 0u);
  EXPECT_EQ(misread.stats.Count("journal_corrupt_frames"), 1u);
  bytes[7] = '\x07';
  profiler::Trace unknown;
  st = profiler::ReadTraceBuffer(bytes, "new.json.partial", -1, unknown);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("new.json.partial: a trainrx journal of format 7, and this trainrx reads formats 1 to 3"),
            std::string::npos)
      << st.message();
  // Format 2 (op inputs without concrete values, before issue 52) still reads, its inputs intact.
  profiler::Trace two;
  {
    profiler::Event e;
    e.ts_ns = 1'000'100;
    e.dur_ns = 5;
    e.name = two.strings.Intern("aten::mm");
    e.track = two.GetOrAddTrack(0, profiler::TrackKind::kCpuThread, 7, 7);
    e.aux = 0;
    two.AddEvent(e);
  }
  two.op_inputs.push_back({two.strings.Intern("[[2, 3]]"), two.strings.Intern("[\"float\"]"), two.strings.Intern("[\"\"]")});
  std::string v2;
  profiler::EncodeJournalHeader(0, 0, {}, &v2);
  v2[7] = '\x02';
  profiler::AppendJournalFrame(two, 1'000'900, 1, &v2, 2);
  profiler::Trace back2;
  ASSERT_TRUE(profiler::ReadTraceBuffer(v2, "two.json.partial", -1, back2).ok());
  EXPECT_EQ(back2.stats.Count("journal_corrupt_frames"), 0u);
  ASSERT_EQ(back2.op_inputs.size(), 1u);
  EXPECT_EQ(back2.strings.Get(back2.op_inputs[0].input_dims), "[[2, 3]]");
  EXPECT_EQ(back2.op_inputs[0].concrete, profiler::kNoStr);
}

TEST(JournalTest, AnUnwritablePlaceIsAClearErrorAtOpen) {
  Collector c;
  c.SetRecording(true);
  Journal j;
  const Status missing = j.Open("/nonexistent-dir/run.json.partial", c, 0, 1, 2000);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(missing.message().find("/nonexistent-dir/run.json.partial: No such file or directory"), std::string::npos)
      << missing.message();
  EXPECT_FALSE(j.open());
  EXPECT_TRUE(j.Flush(c, 1).ok());  // a closed journal does nothing
  // A full disk: /dev/full refuses every write with ENOSPC.
  Journal full;
  const Status no_space = full.Open("/dev/full", c, 0, 1, 2000);
  EXPECT_FALSE(no_space.ok());
  EXPECT_NE(no_space.message().find("No space left on device"), std::string::npos) << no_space.message();
}

}  // namespace
}  // namespace trainrx::probes
