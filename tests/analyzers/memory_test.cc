// Memory (issue 36): torch.profiler's profile_memory events read as memory counters, the per-device
// figures and memory.growth.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <sstream>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/kineto_reader.h"
#include "trainrx/profiler/kineto_writer.h"
#include "trainrx/profiler/memory_counters.h"

namespace trainrx::analyzers {
namespace {

std::string Mem(double ts, int64_t allocated, int64_t bytes, int type = 0, int id = -1, const char* name = "[memory]") {
  return fmt::format(R"J({{"ph":"i","cat":"cpu_instant_event","s":"t","name":"{}","pid":1,"tid":1,"ts":{},)J"
                     R"J("args":{{"Total Reserved":{},"Total Allocated":{},"Bytes":{},"Device Id":{},"Device Type":{},"Addr":1}}}},)J",
                     name, ts, type == 1 ? allocated * 2 : 0, allocated, bytes, id, type);
}

// `steps` steps of 1 ms; at each step's middle an allocation; `start(i)` is what is allocated
// when step i starts (a free brings it back there at the step's end for a flat run).
std::string Steps(int steps, const std::function<int64_t(int)>& start, int type = 0) {
  std::string ev;
  for (int i = 0; i < steps; ++i) {
    const double s = 1000.0 * i;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":1000}},)J",
                      i, s);
    ev += Mem(s + 10, start(i), 100, type, type == 1 ? 0 : -1);
    ev += Mem(s + 500, start(i) + 5'000'000, 5'000'000, type, type == 1 ? 0 : -1);  // the step's activations
    ev += Mem(s + 900, start(i + 1), start(i + 1) - start(i) - 5'000'000, type, type == 1 ? 0 : -1);
  }
  ev.pop_back();
  return "{\"traceEvents\":[" + ev + "]}";
}

Report AnalyzeText(const std::string& json, profiler::Trace* keep = nullptr) {
  profiler::Trace local;
  profiler::Trace& t = keep ? *keep : local;
  const auto st = profiler::ReadTraceBuffer(json, "mem.json", 0, t);
  EXPECT_TRUE(st.ok) << st.error;
  return Analyze(t);
}

bool Has(const Report& r, const char* id) {
  for (const auto& f : r.findings)
    if (f.id == id) return true;
  return false;
}

TEST(MemoryReadTest, ProfileMemoryEventsBecomeCountersThatRoundTrip) {
  profiler::Trace t;
  const std::string json = "{\"traceEvents\":[" + Mem(1, 8192, 8192) + Mem(2, 4096, -4096, 1, 0) +
                           Mem(3, 4096, 1 << 30, 1, 0, "[OutOfMemory]") +
                           R"J({"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":4,"args":{"Total Allocated":5}}]})J";
  ASSERT_TRUE(profiler::ReadTraceBuffer(json, "m.json", 0, t).ok);
  std::map<std::string, std::vector<double>> by_name;
  for (const auto& c : t.counters) by_name[std::string(t.strings.Get(c.name))].push_back(c.value);
  EXPECT_EQ(by_name["trainrx.memory.allocated[cpu]"], std::vector<double>({8192}));
  EXPECT_EQ(by_name["trainrx.memory.bytes[cpu]"], std::vector<double>({8192}));
  EXPECT_EQ(by_name["trainrx.memory.allocated[cuda:0]"], std::vector<double>({4096, 4096}));
  EXPECT_EQ(by_name["trainrx.memory.reserved[cuda:0]"], std::vector<double>({8192, 8192}));
  EXPECT_EQ(by_name["trainrx.memory.oom[cuda:0]"], std::vector<double>({1 << 30}));
  EXPECT_EQ(t.stats.Count("memory_event_without_figures"), 1u);  // the last one: no device
  // Written back (convert) and read again: the same counters, and no loss said for the instants
  // the writer copies without their figures.
  std::ostringstream written;
  profiler::WriteKinetoJson(t, 0, written);
  profiler::Trace again;
  ASSERT_TRUE(profiler::ReadTraceBuffer(written.str(), "again.json", 0, again).ok);
  std::map<std::string, std::vector<double>> again_by_name;
  for (const auto& c : again.counters) again_by_name[std::string(again.strings.Get(c.name))].push_back(c.value);
  EXPECT_EQ(again_by_name, by_name);
  EXPECT_EQ(again.stats.Count("memory_event_without_figures"), 0u);
  const auto id = profiler::ParseMemoryCounterName("trainrx.memory.reserved[cuda:3]");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->what, profiler::MemoryWhat::kReserved);
  EXPECT_EQ(id->device, "cuda:3");
  EXPECT_FALSE(profiler::ParseMemoryCounterName("trainrx.memory.nope[cpu]"));
  EXPECT_FALSE(profiler::ParseMemoryCounterName("trainrx.config.anomaly_mode"));
}

TEST(MemoryTest, SteadyGrowthIsFlaggedWithItsRate) {
  profiler::Trace t;
  const Report r = AnalyzeText(Steps(8, [](int i) { return 10'000'000 + int64_t{2'000'000} * i; }, 1), &t);
  ASSERT_EQ(r.metrics.memory.size(), 1u);
  const auto& m = r.metrics.memory[0];
  EXPECT_EQ(m.device, "cuda:0");
  EXPECT_NEAR(m.growth_per_step, 2'000'000, 1);
  EXPECT_EQ(m.step_start.size(), 8u);
  EXPECT_EQ(m.step_start[0], -1);  // no sample before the first step
  EXPECT_EQ(m.step_start[1], 12'000'000);
  EXPECT_EQ(m.step_peak[1], 17'000'000);
  EXPECT_EQ(m.peak_reserved, 2 * m.peak_allocated);
  ASSERT_TRUE(Has(r, "memory.growth"));
  const Finding& f = *std::find_if(r.findings.begin(), r.findings.end(), [](auto& f) { return f.id == "memory.growth"; });
  EXPECT_NE(f.title.find("2.0 MB every step"), std::string::npos) << f.title;
  EXPECT_EQ(f.estimated_saving_pct, 0);  // memory, not time
}

TEST(MemoryTest, FlatOneOffJumpAndSmallGrowthAreNotGrowth) {
  // Flat: what each step allocates it frees.
  EXPECT_FALSE(Has(AnalyzeText(Steps(8, [](int) { return int64_t{10'000'000}; })), "memory.growth"));
  // A one-off jump (optimizer state made at the first step), then flat.
  EXPECT_FALSE(Has(AnalyzeText(Steps(8, [](int i) { return i < 2 ? int64_t{10'000'000} : int64_t{30'000'000}; })),
                   "memory.growth"));
  // Growth below the threshold (10 kB a step: a list of Python floats, a small cache).
  EXPECT_FALSE(Has(AnalyzeText(Steps(8, [](int i) { return 10'000'000 + int64_t{10'000} * i; })), "memory.growth"));
  // Up and down (variable sequence lengths): not steady.
  EXPECT_FALSE(Has(AnalyzeText(Steps(9, [](int i) { return 10'000'000 + int64_t{3'000'000} * (i % 2) + 300'000 * i; })),
                   "memory.growth"));
  // Too few steps to call it a trend.
  EXPECT_FALSE(Has(AnalyzeText(Steps(3, [](int i) { return 10'000'000 + int64_t{2'000'000} * i; })), "memory.growth"));
}

TEST(MemoryTest, NoSamplesNoFigures) {
  const Report r = AnalyzeText(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":5}]})");
  EXPECT_TRUE(r.metrics.memory.empty());
  EXPECT_FALSE(Has(r, "memory.growth"));
}

}  // namespace
}  // namespace trainrx::analyzers
