// The collector core without LibTorch: buffers, budget, assembly into the model, the session's
// static config, and the round trip through the Kineto writer and our reader.
#include "collector.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "gpu_test_records.h"
#include "session.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"

namespace trainrx::probes {
namespace {

Rec* AddRange(ThreadBuffer* b, const char* name, RecKind kind, int64_t start, int64_t end, uint8_t flags = 0) {
  Rec* r = b->Append();
  if (!r) return nullptr;
  r->kind = kind;
  r->name = kind == RecKind::kOp ? b->InternStatic(name) : b->InternDynamic(name);
  r->flags = flags;
  r->start_ticks = start;
  r->end_ticks = end;
  return r;
}

TEST(CollectorTest, NothingIsRecordedUntilRecordingStarts) {
  Collector c;
  EXPECT_EQ(c.ThisThread(), nullptr);
  c.SetRecording(true);
  EXPECT_NE(c.ThisThread(), nullptr);
  EXPECT_EQ(c.ThisThread(), c.ThisThread());
}

TEST(CollectorTest, AssemblesOneTrackPerThreadWithNamesAndNesting) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* main = c.ThisThread();
  AddRange(main, "Optimizer.step#SGD.step", RecKind::kUser, 1000, 5000);
  AddRange(main, "aten::add_", RecKind::kOp, 1100, 1200, kGradEnabled);
  AddRange(main, "aten::add_", RecKind::kOp, 1300, 1400, 0);
  std::thread worker([&] {
    ThreadBuffer* b = c.ThisThread();
    ASSERT_NE(b, main);
    AddRange(b, "autograd::engine::evaluate_function: AddBackward0", RecKind::kOp, 2000, 2500);
  });
  worker.join();
  profiler::Trace t = c.Assemble(0, 9000);
  ASSERT_EQ(t.tracks.size(), 2u);
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.Name(t.TrackEvents(0)[0]), "Optimizer.step#SGD.step");
  EXPECT_EQ(t.TrackEvents(0)[0].kind, profiler::EventKind::kUserAnnotation);
  EXPECT_EQ(t.TrackEvents(0)[1].dur_ns, 100);
  EXPECT_EQ(t.TrackEvents(1)[0].kind, profiler::EventKind::kCpuOp);
  // Grad mode becomes counters only where it changes, per thread: on, then off on the main thread;
  // off on the engine's (its per-node range is an op record, FUNCTION scope).
  int grad[2] = {0, 0};
  for (const auto& ctr : t.counters)
    if (t.strings.Get(ctr.name) == "trainrx.grad_enabled" && ctr.track < 2) ++grad[ctr.track];
  EXPECT_EQ(grad[0], 2);
  EXPECT_EQ(grad[1], 1);
  EXPECT_FALSE(c.recording());
}

TEST(CollectorTest, UnfinishedRangesAreClosedAtStopAndCounted) {
  Collector c;
  c.SetRecording(true);
  AddRange(c.ThisThread(), "aten::mm", RecKind::kOp, 1000, 0);
  profiler::Trace t = c.Assemble(0, 4000);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].dur_ns, 3000);
  EXPECT_EQ(t.stats.Count("unfinished_ranges"), 1u);
  EXPECT_EQ(t.ranks[0].config.at("unfinished_ranges").json(), "1");
}

TEST(CollectorTest, BudgetDropsAndCountsInsteadOfGrowing) {
  CollectorOptions o;
  o.max_events = ThreadBuffer::kChunkRecs;  // exactly one chunk
  Collector c(o);
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  int kept = 0;
  for (uint32_t i = 0; i < ThreadBuffer::kChunkRecs + 10; ++i) kept += AddRange(b, "aten::add", RecKind::kOp, 10 + i, 11 + i) != nullptr;
  EXPECT_EQ(kept, static_cast<int>(ThreadBuffer::kChunkRecs));
  EXPECT_EQ(c.TotalDropped(), 10u);
  profiler::Trace t = c.Assemble(0, 1 << 20);
  EXPECT_EQ(t.stats.Count("dropped_records"), 10u);
}

TEST(CollectorTest, AllocatorEventsBecomeMemoryCountersThatRoundTrip) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  ASSERT_NE(b, nullptr);
  AddRange(b, "aten::empty", RecKind::kOp, 100, 200);
  ASSERT_TRUE(b->AppendMemory(150, 4096, 0x7f0000001000, 4096, 0, /*cpu*/ 0, -1));
  ASSERT_TRUE(b->AppendMemory(300, -4096, 0x7f0000001000, 0, 0, 0, -1));
  // A CUDA block with reserved above 4 GiB (the two halves of the record's reserved field).
  ASSERT_TRUE(b->AppendMemory(400, 1 << 20, 0x7f0000100000, 1 << 20, (uint64_t{5} << 30) + 7, /*cuda*/ 1, 0));
  const profiler::Trace direct = c.Assemble(0, 1000);
  std::ostringstream json;
  profiler::WriteKinetoJson(direct, 0, json);
  // Written as torch.profiler writes them: one "[memory]" instant per event, not four counters.
  EXPECT_NE(json.str().find(R"("name":"[memory]")"), std::string::npos);
  EXPECT_EQ(json.str().find(R"("name":"trainrx.memory.bytes[cpu]")"), std::string::npos);
  profiler::Trace t;
  ASSERT_TRUE(profiler::ReadTraceBuffer(json.str(), "m.json", 0, t).ok());
  EXPECT_EQ(t.stats.Count("memory_event_without_figures"), 0u);
  std::map<std::string, std::vector<std::pair<int64_t, double>>> by;
  for (const auto& k : t.counters) by[std::string(t.strings.Get(k.name))].push_back({k.ts_ns, k.value});
  using V = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(by["trainrx.memory.bytes[cpu]"], (V{{150, 4096}, {300, -4096}}));
  EXPECT_EQ(by["trainrx.memory.allocated[cpu]"], (V{{150, 4096}, {300, 0}}));
  EXPECT_EQ(by["trainrx.memory.addr[cpu]"], (V{{150, double(0x7f0000001000)}, {300, double(0x7f0000001000)}}));
  EXPECT_EQ(by.count("trainrx.memory.reserved[cpu]"), 0u);  // 0 on CPU, as Kineto writes it: left out
  EXPECT_EQ(by["trainrx.memory.reserved[cuda:0]"], (V{{400, double((uint64_t{5} << 30) + 7)}}));
  EXPECT_EQ(by["trainrx.memory.allocated[cuda:0]"], (V{{400, double(1 << 20)}}));
  // The records are events of no kind the model has: no op, no unfinished range.
  EXPECT_EQ(direct.ranks[0].config.at("unfinished_ranges").json(), "0");
  size_t ops = 0;
  for (const auto& e : direct.events) ops += e.kind == profiler::EventKind::kCpuOp;
  EXPECT_EQ(ops, 1u);
}

TEST(CollectorTest, AllocatorEventsPastTheBudgetAreDroppedWhole) {
  CollectorOptions o;
  o.max_events = ThreadBuffer::kChunkRecs;  // one chunk: half as many allocator events
  Collector c(o);
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  int kept = 0;
  for (uint32_t i = 0; i < ThreadBuffer::kChunkRecs; ++i) kept += b->AppendMemory(10 + i, 64, 0x1000 + 64 * i, 64, 0, 0, -1);
  EXPECT_EQ(kept, static_cast<int>(ThreadBuffer::kChunkRecs / 2));
  EXPECT_GT(b->dropped(), 0u);
  const profiler::Trace t = c.Assemble(0, 100000);
  size_t bytes = 0;
  for (const auto& k : t.counters) bytes += t.strings.Get(k.name) == "trainrx.memory.bytes[cpu]";
  EXPECT_EQ(bytes, static_cast<size_t>(kept));
}

TEST(CollectorTest, StaticNamesAreVerifiedByContentNotTrustedByPointer) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  char buf[16] = "aten::mm";
  const uint32_t a = b->InternStatic(buf);
  std::strcpy(buf, "aten::bmm");  // same address, new content (a reused buffer)
  const uint32_t second = b->InternStatic(buf);
  EXPECT_NE(a, second);
  EXPECT_EQ(b->names()[second], "aten::bmm");
}

// A RecordFunction named by a std::string it owns (autograd's "evaluate_function: XBackward0") has a
// fresh address each call: found by content (the content cache), the same id each time, and names
// that differ only in their middle or their length never share one.
TEST(CollectorTest, NamesAtFreshAddressesKeepTheirIdsByContent) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const std::vector<std::string> names = {"autograd::engine::evaluate_function: MmBackward0",
                                          "autograd::engine::evaluate_function: AddmmBackward0",
                                          "autograd::engine::evaluate_function: MmBackward", "aten::mm", "aten::m"};
  std::vector<uint32_t> first;
  for (const std::string& n : names) {
    const std::string fresh = n;  // its own address
    first.push_back(b->InternStatic(fresh.c_str()));
    EXPECT_EQ(b->names()[first.back()], n);
  }
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < names.size(); ++i) {
      std::vector<char> elsewhere(names[i].begin(), names[i].end());  // another address each round
      elsewhere.push_back('\0');
      EXPECT_EQ(b->InternStatic(elsewhere.data()), first[i]) << names[i];
    }
  EXPECT_EQ(std::set<uint32_t>(first.begin(), first.end()).size(), names.size());
}

// More operator names than the name cache holds, read in an order that keeps evicting: every read
// gets its name's first id (schema names sit at fixed addresses; the cache is two-way by a hash of
// the address, and a miss goes through the maps).
TEST(CollectorTest, ManyStaticNamesKeepTheirIdsThroughTheCache) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  std::vector<std::string> names;
  for (int i = 0; i < 1200; ++i) names.push_back("aten::op_" + std::to_string(i));
  std::vector<uint32_t> first;
  for (const std::string& n : names) first.push_back(b->InternStatic(n.c_str()));
  EXPECT_EQ(std::set<uint32_t>(first.begin(), first.end()).size(), names.size());
  for (int round = 0; round < 3; ++round)
    for (size_t k = 0; k < names.size(); ++k) {
      const size_t i = (k * 7919 + static_cast<size_t>(round) * 13) % names.size();
      ASSERT_EQ(b->InternStatic(names[i].c_str()), first[i]) << names[i];
      ASSERT_EQ(b->names()[first[i]], names[i]);
    }
}

// A step boundary's snapshot is one call for many keys: each key keeps only its changes.
TEST(CollectorTest, ASnapshotOfManyKeysStoresOnlyTheirChanges) {
  Collector c;
  c.SetRecording(true);
  ThreadBuffer* b = c.ThisThread();
  const std::string keys[3] = {"anomaly_mode", "intra_op_threads", "deterministic_algorithms"};
  const double at_first[3] = {0, 4, 0};
  const double later[3] = {1, 4, 0};
  c.Sample(b, keys, at_first, 3, 1000);
  c.Sample(b, keys, at_first, 3, 1500);  // nothing changed
  c.Sample(b, keys, later, 3, 2000);     // anomaly mode only
  const profiler::Trace t = c.Assemble(0, 3000);
  std::map<std::string, std::vector<double>> seen;
  for (const auto& ctr : t.counters) seen[std::string(t.strings.Get(ctr.name))].push_back(ctr.value);
  EXPECT_EQ(seen["trainrx.config.anomaly_mode"], (std::vector<double>{0, 1}));
  EXPECT_EQ(seen["trainrx.config.intra_op_threads"], (std::vector<double>{4}));
  EXPECT_EQ(seen["trainrx.config.deterministic_algorithms"], (std::vector<double>{0}));
}

TEST(CollectorTest, DataflowEdgesAndConfigChangesSurviveTheRoundTrip) {
  Collector c;
  c.SetRecording(true);
  c.SetStatic("collector", "\"trainrx probes\"");
  ThreadBuffer* b = c.ThisThread();
  Rec* conv = AddRange(b, "aten::conv2d", RecKind::kOp, 1000, 2000, kGradEnabled);
  conv->aux = b->AddInputs({"[[4, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]", "[\"float\", \"float\", \"float\", \"\", \"\", \"\", \"\"]", ""});
  Rec* bn = AddRange(b, "aten::batch_norm", RecKind::kOp, 2100, 2600, kGradEnabled);
  b->AddEdge(b->IndexOf(conv), b->IndexOf(bn));
  c.Sample(b, "anomaly_mode", 0, 900);
  c.Sample(b, "anomaly_mode", 0, 1500);  // unchanged: no new counter
  c.Sample(b, "anomaly_mode", 1, 1800);
  profiler::Trace t = c.Assemble(0, 3000);
  t.ranks[0].base_time_ns = 500;
  std::ostringstream json;
  profiler::WriteKinetoJson(t, 0, json);
  profiler::Trace back;
  const auto st = profiler::ReadTraceBuffer(json.str(), "collected.json", 0, back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.events.size(), 2u);
  ASSERT_EQ(back.flows.size(), 2u);
  EXPECT_EQ(back.strings.Get(back.flows[0].cat), "trainrx.dataflow");
  int anomaly = 0;
  for (const auto& ctr : back.counters)
    if (back.strings.Get(ctr.name) == "trainrx.config.anomaly_mode") ++anomaly;
  EXPECT_EQ(anomaly, 2);
  EXPECT_EQ(back.ranks[0].config.at("collector").json(), "\"trainrx probes\"");
  const auto& conv_back = back.events[0];
  ASSERT_NE(conv_back.aux, profiler::kNoAux);
  EXPECT_EQ(back.strings.Get(back.op_inputs[conv_back.aux].input_dims), "[[4, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]");
}

// --- The step window (record --steps N --skip K) ---

std::vector<WindowAction> Boundaries(StepWindow& w, BoundaryKind kind, int n) {
  std::vector<WindowAction> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(w.OnBoundary(kind, 1000 * (i + 1)));
    if (out.back() == WindowAction::kCloseAtEnd) w.MarkClosed(1000 * (i + 1) + 500);
  }
  return out;
}
using A = WindowAction;

TEST(StepWindowTest, OptimizerStepsOpenAtTheSkippedOneAndCloseAtTheEndOfTheLast) {
  // Skip 3, record 2: optimizer step 3 opens (its end starts step 4), the end of step 5 closes.
  StepWindow w({.skip = 3, .steps = 2});
  EXPECT_FALSE(w.starts_open());
  EXPECT_EQ(Boundaries(w, BoundaryKind::kOptimizerStep, 7),
            (std::vector<A>{A::kNone, A::kNone, A::kOpen, A::kNone, A::kCloseAtEnd, A::kNone, A::kNone}));
  const auto st = w.state();
  EXPECT_TRUE(st.opened && st.closed);
  EXPECT_EQ(st.open_ns, 3000);
  EXPECT_EQ(st.close_ns, 5500);
  EXPECT_EQ(st.boundaries, 7);  // counted after the close too: the report says how many the run had
  EXPECT_FALSE(w.Covers(2999));
  EXPECT_TRUE(w.Covers(4000));
  EXPECT_FALSE(w.Covers(5501));
}

TEST(StepWindowTest, FromTheStartOneMoreOptimizerStepGivesTheStepsAsked) {
  // The first step has no optimizer step before it: 3 inferred steps need 4 optimizer steps.
  StepWindow w({.skip = 0, .steps = 3});
  EXPECT_TRUE(w.starts_open());
  EXPECT_EQ(Boundaries(w, BoundaryKind::kOptimizerStep, 5), (std::vector<A>{A::kNone, A::kNone, A::kNone, A::kCloseAtEnd, A::kNone}));
  EXPECT_TRUE(w.Covers(1));  // open from the session's start
}

TEST(StepWindowTest, StepMarkersOpenAtTheFirstRecordedStepAndCloseAtTheNextOne) {
  StepWindow w({.skip = 2, .steps = 3});
  EXPECT_EQ(Boundaries(w, BoundaryKind::kStepStart, 7),
            (std::vector<A>{A::kNone, A::kNone, A::kOpen, A::kNone, A::kNone, A::kCloseNow, A::kNone}));
  EXPECT_EQ(w.state().close_ns, 6000);
}

TEST(StepWindowTest, OnlyTheFirstKindSeenCountsAndUnboundedNeverActs) {
  StepWindow w({.skip = 1, .steps = 1});
  EXPECT_EQ(w.OnBoundary(BoundaryKind::kStepStart, 10), A::kNone);  // marker 1: step 1, skipped
  for (int i = 0; i < 5; ++i) EXPECT_EQ(w.OnBoundary(BoundaryKind::kOptimizerStep, 20 + i), A::kNone);
  EXPECT_EQ(w.OnBoundary(BoundaryKind::kStepStart, 30), A::kOpen);
  EXPECT_EQ(w.state().boundaries, 2);
  StepWindow all;
  EXPECT_FALSE(all.options().bounded());
  EXPECT_EQ(Boundaries(all, BoundaryKind::kOptimizerStep, 3), (std::vector<A>{A::kNone, A::kNone, A::kNone}));
  EXPECT_TRUE(all.Covers(-5));
}

TEST(StepWindowTest, ARunShorterThanTheSkipRecordsNothingAndSaysSo) {
  StepWindow w({.skip = 10, .steps = 5});
  Boundaries(w, BoundaryKind::kOptimizerStep, 4);
  EXPECT_FALSE(w.state().opened);
  EXPECT_FALSE(w.Covers(2000));
  CollectorOptions o;
  o.window = {.skip = 10, .steps = 5};
  Collector c(o);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.OnStepBoundary(BoundaryKind::kOptimizerStep), A::kNone);
  EXPECT_FALSE(c.recording());
  const profiler::Trace t = c.Assemble(0, NowNs());
  EXPECT_EQ(t.ranks[0].config.at("window_opened").json(), "false");
  EXPECT_EQ(t.ranks[0].config.at("window_run_boundaries").json(), "4");
}

using testing::KernelRecord;
using testing::RuntimeRecord;

TEST(StepWindowTest, TheCollectorKeepsWhatTheWindowCoversAndCountsTheRest) {
  CollectorOptions o;
  o.window = {.skip = 1, .steps = 1};
  Collector c(o);
  const int64_t before = NowNs() - 1'000'000;
  c.Sample(nullptr, "anomaly_mode", 1, before);  // before the window: not part of it
  ASSERT_EQ(c.OnStepBoundary(BoundaryKind::kOptimizerStep), A::kOpen);
  EXPECT_TRUE(c.recording());
  const int64_t inside = NowNs() + 1;
  AddRange(c.ThisThread(), "aten::mm", RecKind::kOp, inside, inside + 50);
  c.Sample(c.ThisThread(), "cudnn_benchmark", 0, inside);
  ASSERT_EQ(c.OnStepBoundary(BoundaryKind::kOptimizerStep), A::kCloseAtEnd);
  c.WindowClosed();
  EXPECT_FALSE(c.recording());
  const int64_t after = NowNs() + 1'000'000;
  profiler::GpuRecords gpu;
  // Launched before the window; launched inside it (the kernel runs after it closed: kept);
  // a kernel without correlation inside it (kept by its time); launched after it.
  gpu.records = {RuntimeRecord(before, 1), KernelRecord(before + 5, 1), RuntimeRecord(inside + 10, 2), KernelRecord(after, 2),
                 KernelRecord(inside + 20, profiler::kNoId), RuntimeRecord(after + 10, 3), KernelRecord(after + 20, 3)};
  gpu.records[1].kind = profiler::EventKind::kKernel;
  c.AddGpuRecords(gpu);
  c.Sample(nullptr, "anomaly_mode", 0, after);  // after it: not either
  const profiler::Trace t = c.Assemble(0, after + 100);
  std::vector<std::string> kernels;
  int runtime = 0, counters = 0;
  for (const auto& e : t.events) {
    if (e.kind == profiler::EventKind::kKernel) kernels.emplace_back(t.Name(e));
    runtime += e.kind == profiler::EventKind::kCudaRuntime;
  }
  for (const auto& ctr : t.counters) counters += t.strings.Get(ctr.name).rfind("trainrx.config.", 0) == 0;
  std::sort(kernels.begin(), kernels.end());
  EXPECT_EQ(kernels, (std::vector<std::string>{"k-1", "k2"}));
  EXPECT_EQ(runtime, 1);
  EXPECT_EQ(counters, 1);  // cudnn_benchmark inside; anomaly_mode's two samples outside
  const auto& cfg = t.ranks[0].config;
  EXPECT_EQ(cfg.at("gpu_records_outside_window").json(), "4");
  EXPECT_EQ(cfg.at("window_closed").json(), "true");
  EXPECT_EQ(cfg.at("window_boundary").json(), "\"Optimizer.step\"");
}

// CUPTI hands buffers back during the run, a thread's buffer at a time: a kernel can arrive
// before the call that launched it, and a long run must not hold its GPU records until it ends.
// Delivered in stages (before the window, during it, after it), the collector keeps what one
// delivery at the end would keep, and holds only what it cannot decide yet.
TEST(StepWindowTest, GpuRecordsDeliveredDuringTheRunAreDecidedAsSoonAsThatIsSafe) {
  CollectorOptions o;
  o.window = {.skip = 1, .steps = 1};
  Collector c(o);
  const int64_t before = NowNs() - 1'000'000;
  auto deliver = [&](std::vector<profiler::GpuRecord> records, std::vector<std::pair<int64_t, int64_t>> external = {}) {
    profiler::GpuRecords g;
    g.records = std::move(records);
    g.external = std::move(external);
    c.AddGpuRecords(std::move(g));
  };
  const profiler::GpuRecord long_kernel = KernelRecord(before + 10, 4, 3'000'000);  // launched before, runs into the window
  // Before the window opens: everything is outside it, and nothing is held.
  deliver({RuntimeRecord(before, 1), KernelRecord(before + 5, 1), RuntimeRecord(before + 6, 4)}, {{1, 11}, {4, 44}});
  EXPECT_EQ(c.GpuRecordsHeld(), 0u);
  ASSERT_EQ(c.OnStepBoundary(BoundaryKind::kOptimizerStep), A::kOpen);
  const int64_t inside = NowNs() + 1;
  AddRange(c.ThisThread(), "aten::mm", RecKind::kOp, inside, inside + 50);
  // Inside: kernel 2 arrives before its launch; the long kernel cannot be decided yet either.
  deliver({KernelRecord(inside + 20, 2), long_kernel}, {{2, 22}});
  EXPECT_EQ(c.GpuRecordsHeld(), 2u);
  deliver({RuntimeRecord(inside + 10, 2)});  // kernel 2's launch: both kept
  EXPECT_EQ(c.GpuRecordsHeld(), 3u);
  ASSERT_EQ(c.OnStepBoundary(BoundaryKind::kOptimizerStep), A::kCloseAtEnd);
  c.WindowClosed();
  const int64_t after = NowNs() + 1'000'000;
  // After: a call made after the window is dropped at once; its kernel waits for the assembly.
  deliver({RuntimeRecord(after + 10, 3), KernelRecord(after + 20, 3), KernelRecord(inside + 30, profiler::kNoId)});
  EXPECT_EQ(c.GpuRecordsHeld(), 5u);  // kernel 2, its launch, the long kernel, kernel 3, the one without correlation
  const profiler::Trace t = c.Assemble(0, after + 100);
  EXPECT_EQ(c.GpuRecordsHeld(), 3u);  // the two undecided kernels were launched outside it
  deliver({RuntimeRecord(inside + 40, 5), KernelRecord(inside + 45, 5)});  // after the assembly: not kept
  EXPECT_EQ(c.GpuRecordsHeld(), 3u);
  std::vector<std::string> kernels;
  int runtime = 0;
  for (const auto& e : t.events) {
    if (e.kind == profiler::EventKind::kKernel) {
      kernels.emplace_back(t.Name(e));
      if (e.correlation == 2) {
        EXPECT_EQ(e.external_id, 22);  // its correlation arrived first
      }
    }
    runtime += e.kind == profiler::EventKind::kCudaRuntime;
  }
  std::sort(kernels.begin(), kernels.end());
  EXPECT_EQ(kernels, (std::vector<std::string>{"k-1", "k2"}));
  EXPECT_EQ(runtime, 1);
  // Runtime 1 and 4, kernel 1 (before); the long kernel and kernel 3 (at assembly); runtime 3.
  EXPECT_EQ(t.ranks[0].config.at("gpu_records_outside_window").json(), "6");
  EXPECT_EQ(t.ranks[0].config.at("gpu_records_over_cap").json(), "0");
}

// GPU records are held up to the collector's cap (as CPU records are); the rest are counted as
// lost, and the trace says so.
TEST(CollectorTest, GpuRecordsPastTheCapAreCountedAsLost) {
  CollectorOptions o;
  o.max_events = 10;
  Collector c(o);
  c.SetRecording(true);
  const int64_t t0 = NowNs();
  AddRange(c.ThisThread(), "aten::mm", RecKind::kOp, t0, t0 + 50);
  profiler::GpuRecords g;
  for (int i = 0; i < 8; ++i) g.records.push_back(KernelRecord(t0 + i, i + 1));
  c.AddGpuRecords(g);
  c.AddGpuRecords(g);  // 16 delivered, 10 held
  EXPECT_EQ(c.GpuRecordsHeld(), 10u);
  const profiler::Trace t = c.Assemble(0, t0 + 1000);
  int kernels = 0;
  for (const auto& e : t.events) kernels += e.kind == profiler::EventKind::kKernel;
  EXPECT_EQ(kernels, 10);
  EXPECT_EQ(t.ranks[0].config.at("gpu_records_over_cap").json(), "6");
  EXPECT_EQ(t.stats.Count("gpu_records_over_cap"), 6u);
}

// Exit handlers run last-registered first. A library loaded after the session began (the CUPTI
// backend and the CUDA runtime it starts) registers its own: without registering the session's
// again, they ran before the trace was assembled, which still needs them (issue 14's exit crash).
// In a forked child: a session begins, records one op, "loads a library" (a handler that checks
// whether the trace is already written), registers the session's handler again and exits.
const char* g_exit_trace_path = nullptr;
void TraceMustAlreadyBeWritten() {
  if (!std::filesystem::exists(g_exit_trace_path)) _exit(7);
}

TEST(ProcessSessionTest, ExitHandlerRegisteredAgainWritesTheTraceBeforeLaterHandlersRun) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("trainrx_exit_order_" + std::to_string(getpid()) + ".json")).string();
  std::filesystem::remove(path);
  for (const bool again : {true, false}) {
    std::filesystem::remove(path);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      unsetenv("TRAINRX_OUTPUT");
      unsetenv("TRAINRX_ROOT_PID");
      setenv("TRAINRX_QUIET", "1", 1);
      SessionConfig config;
      config.output = path;
      config.install_signal_handlers = false;
      config.flush_seconds = 0;
      ProcessSession& s = ProcessSession::Get();
      if (!s.Begin(config)) _exit(3);
      AddRange(s.collector().ThisThread(), "aten::add", RecKind::kOp, 1000, 2000);
      g_exit_trace_path = path.c_str();
      std::atexit(&TraceMustAlreadyBeWritten);
      if (again) ProcessSession::RegisterExitHandlerAgain();
      std::exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "again=" << again;
    // Registered again: written before the later handler looked. Not: that handler ran first.
    EXPECT_EQ(WEXITSTATUS(status), again ? 0 : 7) << "again=" << again;
    if (again) {
      EXPECT_TRUE(std::filesystem::exists(path));
    }
  }
  std::filesystem::remove(path);
}

// Issue 35 item 4: the session's "env" object is written by the one JSON writer (it was built by
// hand around a JsonString helper of its own): a value with a quote, a backslash and a newline
// stays one valid JSON string, and the object reads back from the written trace.
TEST(ProcessSessionTest, EnvironmentSwitchesAreOneValidJsonObject) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("trainrx_env_json_" + std::to_string(getpid()) + ".json")).string();
  std::filesystem::remove(path);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    unsetenv("TRAINRX_OUTPUT");
    unsetenv("TRAINRX_ROOT_PID");
    setenv("TRAINRX_QUIET", "1", 1);
    setenv("CUDA_LAUNCH_BLOCKING", "1\"\\\n", 1);
    SessionConfig config;
    config.output = path;
    config.install_signal_handlers = false;
    config.flush_seconds = 0;
    ProcessSession& s = ProcessSession::Get();
    if (!s.Begin(config)) _exit(3);
    AddRange(s.collector().ThisThread(), "aten::add", RecKind::kOp, 1000, 2000);
    std::exit(0);  // the exit handler writes the trace
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  profiler::Trace t;
  const auto st = profiler::ReadTraces({path}, t);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(t.ranks.size(), 1u);
  const std::string env = t.ranks[0].config.at("env").json();
  EXPECT_TRUE(env.starts_with("{") && env.ends_with("}")) << env;
  EXPECT_NE(env.find(R"("CUDA_LAUNCH_BLOCKING":"1\"\\\n")"), std::string::npos) << env;
  EXPECT_EQ(t.ranks[0].config.at("collector").json(), "\"trainrx probes\"");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace trainrx::probes
