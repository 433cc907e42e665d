// The collector core without LibTorch: buffers, budget, assembly into the model, output naming,
// and the round trip through the Kineto writer and our reader.
#include "collector.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <thread>

#include "session.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/profiler/kineto_writer.h"

namespace trainrx::probes {
namespace {

Rec* AddRange(ThreadBuffer* b, const char* name, RecKind kind, int64_t start, int64_t end, uint8_t flags = 0) {
  Rec* r = b->Append();
  if (!r) return nullptr;
  r->kind = kind;
  r->name = kind == RecKind::kOp ? b->InternStatic(name) : b->InternDynamic(name);
  r->flags = flags;
  r->start_ns = start;
  r->end_ns = end;
  return r;
}

TEST(ChildOutputPathTest, RootKeepsThePathOthersGetRankOrPid) {
  EXPECT_EQ(ChildOutputPath("run.json", true, 3, 77), "run.json");
  EXPECT_EQ(ChildOutputPath("run.json.gz", false, 1, 77), "run.rank1.json.gz");
  EXPECT_EQ(ChildOutputPath("out.d/run.json", false, -1, 77), "out.d/run.pid77.json");
  EXPECT_EQ(ChildOutputPath("trace", false, -1, 5), "trace.pid5");
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
    AddRange(b, "autograd::engine::evaluate_function: AddBackward0", RecKind::kBackward, 2000, 2500);
  });
  worker.join();
  profiler::Trace t = c.Assemble(0, 9000);
  ASSERT_EQ(t.tracks.size(), 2u);
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.Name(t.TrackEvents(0)[0]), "Optimizer.step#SGD.step");
  EXPECT_EQ(t.TrackEvents(0)[0].kind, profiler::EventKind::kUserAnnotation);
  EXPECT_EQ(t.TrackEvents(0)[1].dur_ns, 100);
  EXPECT_EQ(t.TrackEvents(1)[0].kind, profiler::EventKind::kCpuOp);
  // Grad mode becomes counters only where it changes: on, then off.
  int grad = 0;
  for (const auto& ctr : t.counters)
    if (t.strings.Get(ctr.name) == "trainrx.grad_enabled") ++grad;
  EXPECT_EQ(grad, 2);
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
  EXPECT_EQ(t.ranks[0].config.at("unfinished_ranges"), "1");
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

TEST(CollectorTest, DataflowEdgesAndConfigChangesSurviveTheRoundTrip) {
  Collector c;
  c.SetRecording(true);
  c.SetStatic("collector", "\"trainrx probes\"");
  ThreadBuffer* b = c.ThisThread();
  Rec* conv = AddRange(b, "aten::conv2d", RecKind::kOp, 1000, 2000, kGradEnabled);
  conv->aux = b->AddInputs({"[[4, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]", "[\"float\", \"float\", \"float\", \"\", \"\", \"\", \"\"]"});
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
  ASSERT_TRUE(st.ok) << st.error;
  EXPECT_EQ(back.events.size(), 2u);
  ASSERT_EQ(back.flows.size(), 2u);
  EXPECT_EQ(back.strings.Get(back.flows[0].cat), "trainrx.dataflow");
  int anomaly = 0;
  for (const auto& ctr : back.counters)
    if (back.strings.Get(ctr.name) == "trainrx.config.anomaly_mode") ++anomaly;
  EXPECT_EQ(anomaly, 2);
  EXPECT_EQ(back.ranks[0].config.at("collector"), "\"trainrx probes\"");
  const auto& conv_back = back.events[0];
  ASSERT_NE(conv_back.aux, profiler::kNoAux);
  EXPECT_EQ(back.strings.Get(back.op_inputs[conv_back.aux].input_dims), "[[4, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]");
}

}  // namespace
}  // namespace trainrx::probes
