// The collector's journal (probes/journal.h) without LibTorch: what a killed process leaves on disk
// reads back as what it recorded up to its last flush, cut anywhere; flushes taken while threads
// keep recording lose nothing and emit nothing twice.
#include "journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "gpu_test_records.h"
#include "trainrx/profiler/kineto_reader.h"

namespace trainrx::probes {
namespace {

namespace fs = std::filesystem;

Rec* Begin(ThreadBuffer* b, const char* name, int64_t start) {
  Rec* r = b->Append();
  if (!r) return nullptr;
  r->kind = RecKind::kOp;
  r->name = b->InternDynamic(name);
  r->flags = kGradEnabled;
  r->start_ns = start;
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
  std::string error;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000, &error)) << error;

  Rec* step = Begin(b, "ProfilerStep#1", 1'000'100);  // open across two flushes
  Rec* conv = Begin(b, "aten::conv2d", 1'000'200);
  conv->aux = b->AddInputs({"[[4, 3, 8, 8], [8, 3, 3, 3]]", "[\"float\", \"float\"]"});
  EndRecord(conv, 1'000'300);
  ASSERT_TRUE(j.Flush(c, 1'000'350, &error)) << error;
  Rec* bn = Begin(b, "aten::batch_norm", 1'000'400);
  b->AddEdge(b->IndexOf(conv), b->IndexOf(bn));
  c.Sample(b, "anomaly_mode", 1, 1'000'410);
  ASSERT_TRUE(j.Flush(c, 1'000'450, &error)) << error;  // bn still open: its edge waits
  EndRecord(bn, 1'000'500);
  EndRecord(step, 1'000'600);
  std::thread([&] {
    ThreadBuffer* w = c.ThisThread();
    EndRecord(Begin(w, "aten::copy_", 1'000'510), 1'000'520);
  }).join();
  ASSERT_TRUE(j.Flush(c, 1'000'700, &error)) << error;
  EXPECT_EQ(j.stats().flushes, 3u);
  EXPECT_EQ(j.stats().events, 4u);

  const std::string bytes = Slurp(path);
  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(bytes, "cut.json.partial", -1, back);
  ASSERT_TRUE(st.ok) << st.error;
  EXPECT_EQ(back.stats.Count("truncated_trace"), 1u);  // never closed: it is cut by design
  EXPECT_EQ(back.stats.Count("journal_cut"), 1u);      // and says what a journal misses
  profiler::Trace whole = c.Assemble(0, 2'000'000);
  EXPECT_EQ(Names(back), Names(whole));
  EXPECT_EQ(back.flows.size(), 2u);  // conv -> bn, once both ended
  EXPECT_EQ(back.tracks.size(), 2u);
  EXPECT_EQ(back.ranks[0].base_time_ns, 1'000'000);
  EXPECT_EQ(back.ranks[0].config.at("journal_flush_ms"), "2000");
  EXPECT_EQ(back.ranks[0].config.at("collector"), "\"trainrx probes\"");
  const profiler::Event* conv_back = nullptr;
  for (const auto& e : back.events) if (back.Name(e) == "aten::conv2d") conv_back = &e;
  ASSERT_NE(conv_back, nullptr);
  EXPECT_EQ(conv_back->ts_ns, 1'000'200);
  EXPECT_EQ(conv_back->dur_ns, 100);
  ASSERT_NE(conv_back->aux, profiler::kNoAux);
  EXPECT_EQ(back.strings.Get(back.op_inputs[conv_back->aux].input_dims), "[[4, 3, 8, 8], [8, 3, 3, 3]]");
  int flushes = 0, anomaly = 0;
  for (const auto& ctr : back.counters) {
    flushes += back.strings.Get(ctr.name) == "trainrx.journal";
    anomaly += back.strings.Get(ctr.name) == "trainrx.config.anomaly_mode";
  }
  EXPECT_EQ(flushes, 3);
  EXPECT_EQ(anomaly, 1);

  // Killed mid-write: every prefix past the header reads, as a subset of the whole.
  const size_t header = bytes.find("\"traceEvents\":[") + 15;
  for (size_t cut = header; cut <= bytes.size(); cut += 7) {
    profiler::Trace part;
    const auto pst = profiler::ReadTraceBuffer(std::string_view(bytes).substr(0, cut), "cut.json.partial", -1, part);
    ASSERT_TRUE(pst.ok) << cut << ": " << pst.error;
    for (const auto& [name, n] : Names(part)) EXPECT_LE(n, Names(whole)[name]) << cut << " " << name;
  }
  j.Remove();
  EXPECT_FALSE(fs::exists(path));
}

// GPU records reach the collector as CUPTI hands buffers back during the run: the journal
// carries them, so a killed GPU run keeps its kernels, each once, mapped to the op that launched
// them (also when the mapping arrived in an earlier flush than the kernel).
TEST(JournalTest, GpuRecordsDeliveredDuringTheRunAreJournaledOnce) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const fs::path path = TempFile("gpu.json.partial");
  Journal j;
  std::string error;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1'000'000, 2000, &error)) << error;
  Rec* mm = Begin(b, "aten::mm", 1'000'100);
  mm->external_id = 5;
  EndRecord(mm, 1'000'200);
  profiler::GpuRecords first;
  first.records = {testing::KernelRecord(1'000'300, 1, 50)};
  first.external = {{1, 5}};
  first.devices = {{0, "NVIDIA H100", 80LL << 30, 9, 0, 132}};
  c.AddGpuRecords(first);
  ASSERT_TRUE(j.Flush(c, 1'000'400, &error)) << error;
  // Kernel 2's correlation arrives one flush before the kernel (another thread's buffer).
  profiler::GpuRecords early;
  early.external = {{2, 5}};
  c.AddGpuRecords(early);
  ASSERT_TRUE(j.Flush(c, 1'000'450, &error)) << error;
  profiler::GpuRecords second;
  second.records = {testing::KernelRecord(1'000'500, 2, 50)};
  c.AddGpuRecords(second);
  ASSERT_TRUE(j.Flush(c, 1'000'600, &error)) << error;
  ASSERT_TRUE(j.Flush(c, 1'000'700, &error)) << error;  // nothing new: nothing again

  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(Slurp(path), "gpu.json.partial", -1, back);
  ASSERT_TRUE(st.ok) << st.error;
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
  std::string error;
  ASSERT_TRUE(j.Open(path.string(), c, 0, 1, 10, &error)) << error;
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
        if (i % 100 == 0) outer->aux = b->AddInputs({"[[1]]", "[\"float\"]"});
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
    const bool ok = j.Flush(c, 5, &error);
    ++flushes;
    flushed.store(flushes);
    if (!ok) {
      for (auto& t : threads) t.join();
      FAIL() << error;
    }
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(j.Flush(c, 5, &error)) << error;
  EXPECT_GE(flushes, 1);
  EXPECT_EQ(j.stats().events, static_cast<uint64_t>(kThreads) * kRecords * 2);
  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(Slurp(path), "concurrent.json.partial", -1, back);
  ASSERT_TRUE(st.ok) << st.error;
  EXPECT_EQ(back.events.size(), static_cast<size_t>(kThreads) * kRecords * 2);
  EXPECT_EQ(back.flows.size(), static_cast<size_t>(kThreads) * (kRecords / 100) * 2);
  profiler::Trace whole = c.Assemble(0, 1 << 30);
  EXPECT_EQ(Names(back), Names(whole));
  j.Remove();
}

TEST(JournalTest, AnUnwritablePlaceIsAClearErrorAtOpen) {
  Collector c;
  c.SetRecording(true);
  Journal j;
  std::string error;
  EXPECT_FALSE(j.Open("/nonexistent-dir/run.json.partial", c, 0, 1, 2000, &error));
  EXPECT_NE(error.find("/nonexistent-dir/run.json.partial: No such file or directory"), std::string::npos) << error;
  EXPECT_FALSE(j.open());
  EXPECT_TRUE(j.Flush(c, 1, &error));  // a closed journal does nothing
  // A full disk: /dev/full refuses every write with ENOSPC.
  Journal full;
  EXPECT_FALSE(full.Open("/dev/full", c, 0, 1, 2000, &error));
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
}

}  // namespace
}  // namespace trainrx::probes
