// Module names (issue 12, item 11): findings name the user's nn.Module where module ranges enclose
// the op (the collector's Python hook: "nn.Module: Net.features.0 (Conv2d)"; torch.profiler's
// with_stack frames: "nn.Module: Conv2d_0"), and the module table sums their host time.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/reader.h"

namespace trainrx::analyzers {
namespace {

// One step [0, 1000) us. Net [5, 500) holds features.0 [10, 110) (a biased conv), features.1
// [120, 200) (its batch norm) and head [300, 400) (an item() at 350). An item() at 250 is in Net
// after features.1 ended (the latest range before it is not the one enclosing it), one at 600 is
// in a "## loss ##" annotation outside every module.
constexpr const char* kCollectorTrace = R"J({"traceEvents":[
  {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
  {"ph":"X","cat":"user_annotation","name":"nn.Module: Net","pid":1,"tid":1,"ts":5,"dur":495},
  {"ph":"X","cat":"user_annotation","name":"nn.Module: Net.features.0 (Conv2d)","pid":1,"tid":1,"ts":10,"dur":100},
  {"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":12,"dur":96,
   "args":{"Input Dims":[[8,3,32,32],[16,3,3,3],[16],[],[],[],[]]}},
  {"ph":"X","cat":"user_annotation","name":"nn.Module: Net.features.1 (BatchNorm2d)","pid":1,"tid":1,"ts":120,"dur":80},
  {"ph":"X","cat":"cpu_op","name":"aten::batch_norm","pid":1,"tid":1,"ts":122,"dur":70,
   "args":{"Input Dims":[[8,16,32,32],[16],[16],[16],[16],[],[],[],[]]}},
  {"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":250,"dur":5},
  {"ph":"X","cat":"user_annotation","name":"nn.Module: Net.head (Linear)","pid":1,"tid":1,"ts":300,"dur":100},
  {"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":350,"dur":5},
  {"ph":"X","cat":"user_annotation","name":"## loss ##","pid":1,"tid":1,"ts":590,"dur":30},
  {"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":600,"dur":5}
]})J";

Report AnalyzeText(const std::string& json) {
  profiler::Trace trace;
  const auto st = profiler::ReadTraceBuffer(json, "modules.json", 0, trace);
  EXPECT_TRUE(st.ok()) << st.message();
  return Analyze(trace);
}

const Finding* Find(const Report& r, std::string_view id) {
  for (const auto& f : r.findings)
    if (f.id == id) return &f;
  return nullptr;
}

bool HasExample(const Finding& f, std::string_view text) {
  return std::any_of(f.examples.begin(), f.examples.end(), [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

const NameRow* Row(const NameTable& t, std::string_view name) {
  for (const auto& r : t.rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(ModulesTest, BiasFindingNamesBothModules) {
  const Report r = AnalyzeText(kCollectorTrace);
  const Finding* f = Find(r, "model.bias_before_norm");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(HasExample(*f, "Net.features.0 (Conv2d) -> Net.features.1 (BatchNorm2d): aten::conv2d (bias[16])"))
      << f->examples[0];
}

TEST(ModulesTest, SyncCausesNameTheModuleOrTheAnnotation) {
  const Report r = AnalyzeText(kCollectorTrace);
  const Finding* f = Find(r, "sync.host_device");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->measured, 3.0);
  EXPECT_TRUE(HasExample(*f, ".item(), float(t), bool(t), print(t)) in Net.head (Linear)"));
  EXPECT_TRUE(std::any_of(f->examples.begin(), f->examples.end(), [](const std::string& e) {
    return e.size() > 7 && e.compare(e.size() - 7, 7, " in Net") == 0;  // the read at 250: Net itself
  }));
  EXPECT_FALSE(HasExample(*f, "in Net.features.1"));  // ended before the read at 250
  EXPECT_TRUE(HasExample(*f, "in ## loss ##"));
  for (const auto& e : f->examples) EXPECT_EQ(e.find("nn.Module:"), std::string::npos) << e;
}

TEST(ModulesTest, ModuleTableTotalsAndSelfTimes) {
  const NameTable& t = AnalyzeText(kCollectorTrace).metrics.module_table;
  EXPECT_EQ(t.basis, "step time");
  EXPECT_EQ(t.steps, 1);
  EXPECT_EQ(t.names, 4);
  ASSERT_FALSE(t.rows.empty());
  EXPECT_EQ(t.rows[0].name, "Net");  // by total time
  const NameRow* net = Row(t, "Net");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->count, 1);
  EXPECT_EQ(net->total_ns, 495'000);
  EXPECT_EQ(net->self_ns, (495 - 100 - 80 - 100) * 1000);
  const NameRow* bn = Row(t, "Net.features.1 (BatchNorm2d)");
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->total_ns, 80'000);
  EXPECT_EQ(bn->self_ns, 80'000);
  EXPECT_DOUBLE_EQ(bn->share, 0.08);
}

TEST(ModulesTest, NoModuleRangesNoTableAndPlainExamples) {
  std::string json = kCollectorTrace;
  for (size_t at; (at = json.find("nn.Module: ")) != std::string::npos;) json.replace(at, 11, "range ");
  const Report r = AnalyzeText(json);
  EXPECT_TRUE(r.metrics.module_table.rows.empty());
  const Finding* f = Find(r, "model.bias_before_norm");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(HasExample(*f, " -> Net"));
  // The enclosing annotation is said instead of a module.
  const Finding* s = Find(r, "sync.host_device");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(HasExample(*s, "in range Net.head (Linear)"));
}

// torch.profiler(with_stack=True) names module frames by class and instance: "nn.Module: Conv2d_0".
TEST(ModulesTest, PythonTracerModuleFrames) {
  const Report r = AnalyzeText(R"J({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
    {"ph":"X","cat":"python_function","name":"nn.Module: Sequential_0","pid":1,"tid":1,"ts":5,"dur":300},
    {"ph":"X","cat":"python_function","name":"nn.Module: Conv2d_0","pid":1,"tid":1,"ts":10,"dur":100},
    {"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":12,"dur":96,
     "args":{"Input Dims":[[8,3,32,32],[16,3,3,3],[16],[],[],[],[]]}},
    {"ph":"X","cat":"python_function","name":"nn.Module: BatchNorm2d_0","pid":1,"tid":1,"ts":120,"dur":80},
    {"ph":"X","cat":"cpu_op","name":"aten::batch_norm","pid":1,"tid":1,"ts":122,"dur":70,
     "args":{"Input Dims":[[8,16,32,32],[16],[16],[16],[16],[],[],[],[]]}}
  ]})J");
  const NameRow* conv = Row(r.metrics.module_table, "Conv2d_0");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->total_ns, 100'000);
  const Finding* f = Find(r, "model.bias_before_norm");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(HasExample(*f, "Conv2d_0 -> BatchNorm2d_0: aten::conv2d"));
}

}  // namespace
}  // namespace trainrx::analyzers
