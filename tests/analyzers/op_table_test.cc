// The operator and kernel tables (analyzers/op_table.cc): counts, inclusive and self time from the
// call nesting on each thread, the step scope, top-N folding and the no-steps basis.
#include <gtest/gtest.h>

#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

// One step [0, 1000) us on thread 1. Thread 1: A [10,110) holds B [20,50) (holding C [25,35)) and,
// through an annotation, C [70,90); A [200,260) holds A [210,230) (recursion). Thread 2: B
// [300,400) holding C [310,330); D [500,505). After the step: A [2000,2100) and a k1 kernel.
// Kernels in the step: k1 twice 10 us, k2 30 us, k3 5 us.
//   A: count 3, total 100+60 = 160 (the nested A counts once), self (100-30-20)+(60-20)+20 = 110
//   B: count 2, total 130, self (30-10)+(100-20) = 100;  C: 3, 50, 50;  D: 1, 5, 5
constexpr const char* kSteps = R"J(
  {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},)J";
constexpr const char* kBody = R"J(
  {"ph":"X","cat":"cpu_op","name":"A","pid":1,"tid":1,"ts":10,"dur":100},
  {"ph":"X","cat":"cpu_op","name":"B","pid":1,"tid":1,"ts":20,"dur":30},
  {"ph":"X","cat":"cpu_op","name":"C","pid":1,"tid":1,"ts":25,"dur":10},
  {"ph":"X","cat":"user_annotation","name":"ann","pid":1,"tid":1,"ts":60,"dur":40},
  {"ph":"X","cat":"cpu_op","name":"C","pid":1,"tid":1,"ts":70,"dur":20},
  {"ph":"X","cat":"cpu_op","name":"A","pid":1,"tid":1,"ts":200,"dur":60},
  {"ph":"X","cat":"cpu_op","name":"A","pid":1,"tid":1,"ts":210,"dur":20},
  {"ph":"X","cat":"cpu_op","name":"B","pid":1,"tid":2,"ts":300,"dur":100},
  {"ph":"X","cat":"cpu_op","name":"C","pid":1,"tid":2,"ts":310,"dur":20},
  {"ph":"X","cat":"cpu_op","name":"D","pid":1,"tid":2,"ts":500,"dur":5},
  {"ph":"X","cat":"cpu_op","name":"A","pid":1,"tid":1,"ts":2000,"dur":100},
  {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":100,"dur":10,"args":{"stream":7,"correlation":1}},
  {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":120,"dur":10,"args":{"stream":7,"correlation":2}},
  {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":140,"dur":30,"args":{"stream":7,"correlation":3}},
  {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":180,"dur":5,"args":{"stream":7,"correlation":4}},
  {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":3000,"dur":10,"args":{"stream":7,"correlation":5}}
]})J";

Report AnalyzeText(bool with_steps, double top_n = 15) {
  const std::string json = std::string(R"({"traceEvents":[)") + (with_steps ? kSteps : "") + kBody;
  profiler::Trace trace;
  EXPECT_TRUE(profiler::ReadTraceBuffer(json, "ops.json", 0, trace).ok());
  Thresholds th;
  std::string error;
  EXPECT_TRUE(th.Set("report.top_n", top_n).ToBool(&error)) << error;
  return Analyze(trace, th);
}

void ExpectRow(const NameRow& r, const char* name, int64_t count, int64_t total_us, int64_t self_us) {
  EXPECT_EQ(r.name, name);
  EXPECT_EQ(r.count, count) << name;
  EXPECT_EQ(r.total_ns, total_us * 1000) << name;
  EXPECT_EQ(r.self_ns, self_us * 1000) << name;
}

TEST(OpTableTest, SelfTimeAndCountsFromNestingOnTwoThreads) {
  const NameTable& t = AnalyzeText(true).metrics.op_table;
  EXPECT_EQ(t.basis, "step time");
  EXPECT_EQ(t.steps, 1);
  EXPECT_EQ(t.basis_ns, 1'000'000);
  EXPECT_EQ(t.names, 4);
  EXPECT_EQ(t.other_names, 0);
  ASSERT_EQ(t.rows.size(), 4u);  // by self time; the A after the step is left out
  ExpectRow(t.rows[0], "A", 3, 160, 110);
  ExpectRow(t.rows[1], "B", 2, 130, 100);
  ExpectRow(t.rows[2], "C", 3, 50, 50);
  ExpectRow(t.rows[3], "D", 1, 5, 5);
  EXPECT_DOUBLE_EQ(t.rows[0].mean_ns, 60'000.0);  // (100 + 60 + 20) / 3 us
  EXPECT_DOUBLE_EQ(t.rows[0].share, 0.16);
  EXPECT_DOUBLE_EQ(t.rows[0].self_share, 0.11);
}

TEST(OpTableTest, KernelTableByTotalTime) {
  const NameTable& t = AnalyzeText(true).metrics.kernel_table;
  EXPECT_EQ(t.basis, "kernel time");
  EXPECT_EQ(t.basis_ns, 55'000);  // the k1 after the step is left out
  ASSERT_EQ(t.rows.size(), 3u);
  ExpectRow(t.rows[0], "k2", 1, 30, 30);
  ExpectRow(t.rows[1], "k1", 2, 20, 20);
  ExpectRow(t.rows[2], "k3", 1, 5, 5);
  EXPECT_DOUBLE_EQ(t.rows[1].mean_ns, 10'000.0);
  EXPECT_DOUBLE_EQ(t.rows[0].share, 30.0 / 55.0);
}

TEST(OpTableTest, TopNFoldsTheRestIntoOther) {
  const Report r = AnalyzeText(true, 2);
  const NameTable& ops = r.metrics.op_table;
  ASSERT_EQ(ops.rows.size(), 2u);
  EXPECT_EQ(ops.rows[1].name, "B");
  EXPECT_EQ(ops.other_names, 2);
  EXPECT_EQ(ops.other.name, "other (2 ops)");
  EXPECT_EQ(ops.other.count, 4);
  EXPECT_EQ(ops.other.self_ns, 55'000);
  EXPECT_DOUBLE_EQ(ops.other.self_share, 0.055);
  EXPECT_FALSE(ops.other_has_total);  // op totals nest across names: not summed
  const NameTable& k = r.metrics.kernel_table;
  ASSERT_EQ(k.rows.size(), 2u);
  EXPECT_EQ(k.other.name, "other (1 kernels)");
  ExpectRow(k.other, "other (1 kernels)", 1, 5, 5);
  EXPECT_TRUE(k.other_has_total);
  EXPECT_DOUBLE_EQ(k.other.share, 5.0 / 55.0);
}

TEST(OpTableTest, NoStepsWholeTraceAndSharesOfTheSpan) {
  const Report r = AnalyzeText(false);
  const NameTable& ops = r.metrics.op_table;
  EXPECT_EQ(ops.basis, "trace span");
  EXPECT_EQ(ops.steps, 0);
  EXPECT_EQ(ops.basis_ns, 3'000'000);  // first event 10 us to the last end 3010 us
  ExpectRow(ops.rows[0], "A", 4, 260, 210);
  EXPECT_EQ(r.metrics.kernel_table.basis_ns, 65'000);
}

}  // namespace
}  // namespace trainrx::analyzers
