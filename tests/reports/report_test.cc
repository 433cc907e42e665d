#include <fmt/format.h>
#include "trainrx/reports/report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <functional>
#include <sstream>

#include "trainrx/profiler/reader.h"
#include "trainrx/reports/gate.h"
#include "trainrx/reports/html.h"

namespace trainrx::reports {
namespace {

// RenderOptions naming only what was analyzed (a designated initializer leaving the other members
// out warns under -Wmissing-field-initializers).
RenderOptions Inputs(std::vector<std::string> inputs) {
  RenderOptions o;
  o.inputs = std::move(inputs);
  return o;
}

constexpr const char* kTrace = R"J({"traceEvents":[
  {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
  {"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":1,"dur":500},
  {"ph":"X","cat":"cpu_op","name":"aten::item \"quoted\"","pid":1,"tid":1,"ts":600,"dur":5},
  {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":600,"dur":5,"args":{"stream":7,"correlation":1}},
  {"ph":"X","name":"broken","pid":1,"tid":1,"ts":1}
]})J";

struct Fixture {
  profiler::Trace trace;
  analyzers::Report report;
  analyzers::Thresholds th;
  Fixture() {
    EXPECT_TRUE(th.Set("what_if.steps", 0).ok());  // the loader's measured 50 %, not the replay's bound of it
    EXPECT_TRUE(profiler::ReadTraceBuffer(kTrace, "r.json", 0, trace).ok());
    report = analyzers::Analyze(trace, th);
  }
};

TEST(JsonReportTest, HasTheDocumentedSchema) {
  Fixture f;
  std::ostringstream out;
  WriteJson(f.trace, f.report, f.th, Inputs({"r.json"}), out);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_FALSE(p.parse(out.str()).get(doc)) << out.str();
  EXPECT_EQ(std::string_view(doc["schema"]), kJsonSchema);
  EXPECT_EQ(int64_t(doc["ingest"]["skipped_events"]), 1);
  EXPECT_EQ(std::string_view(doc["ingest"]["issues"].at(0)["kind"]), "missing_dur");
  EXPECT_EQ(int64_t(doc["steps"]["count"]), 1);
  EXPECT_EQ(int64_t(doc["steps"]["median_ns"]), 1'000'000);
  EXPECT_NEAR(double(doc["metrics"]["step_breakdown"]["data_wait"]), 0.5, 1e-9);
  ASSERT_EQ(simdjson::dom::array(doc["metrics"]["temporal_breakdown"]).size(), 0u);  // kernel has no runtime call
  bool found = false;
  for (auto finding : simdjson::dom::array(doc["findings"])) {
    if (std::string_view(finding["id"]) == "input.dataloader_bound") {
      found = true;
      EXPECT_NEAR(double(finding["estimated_saving_pct"]), 50.0, 1e-9);
      EXPECT_EQ(std::string_view(finding["severity"]), "high");
      EXPECT_EQ(std::string_view(finding["fix"]["knob"]), "workers");
    }
  }
  EXPECT_TRUE(found);
  EXPECT_DOUBLE_EQ(double(doc["thresholds"]["input.dataloader_bound.share_pct"]), 5.0);
}

TEST(TextReportTest, DataLossFirstThenStepsAndFindings) {
  Fixture f;
  std::ostringstream out;
  WriteText(f.trace, f.report, f.th, Inputs({"r.json"}), out);
  const std::string s = out.str();
  const size_t loss = s.find("skipped missing_dur: 1");
  const size_t steps = s.find("Steps");
  const size_t finding = s.find("input.dataloader_bound");
  ASSERT_NE(loss, std::string::npos) << s;
  ASSERT_NE(steps, std::string::npos);
  ASSERT_NE(finding, std::string::npos);
  EXPECT_LT(loss, steps);
  EXPECT_LT(steps, finding);
  EXPECT_EQ(s.find("\033["), std::string::npos);  // no color unless asked
  std::ostringstream colored;
  RenderOptions color;
  color.color = true;
  WriteText(f.trace, f.report, f.th, color, colored);
  EXPECT_NE(colored.str().find("\033["), std::string::npos);
}

TEST(MarkdownReportTest, TablesAndEscaping) {
  Fixture f;
  std::ostringstream out;
  WriteMarkdown(f.trace, f.report, f.th, Inputs({"r.json"}), out);
  const std::string s = out.str();
  EXPECT_NE(s.find("| phase | share of step |"), std::string::npos) << s;
  EXPECT_NE(s.find("**1. `input.dataloader_bound`**"), std::string::npos) << s;
  EXPECT_NE(s.find("\\_SingleProcessDataLoaderIter"), std::string::npos) << s;
}

// Without steps the report gives totals: no "per step", no share of a step, anywhere (issue 12).
TEST(TextReportTest, NoStepsNoPerStepWords) {
  profiler::Trace trace;
  const auto path = std::filesystem::path(TRAINRX_SOURCE_DIR) / "tests" / "fixtures" / "no_steps_planted.json";
  ASSERT_TRUE(profiler::ReadTraces({path.string()}, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  ASSERT_FALSE(report.findings.empty());
  for (int md = 0; md < 2; ++md) {
    std::ostringstream out;
    if (md) WriteMarkdown(trace, report, th, {}, out);
    else WriteText(trace, report, th, {}, out);
    const std::string s = out.str();
    for (const char* bad : {"per step", "per-step", "per_step", "of the step", "of steps"})
      EXPECT_EQ(s.find(bad), std::string::npos) << "'" << bad << "' in:\n" << s;
    EXPECT_NE(s.find("over the whole trace"), std::string::npos) << s;
  }
}

// The stalled-steps caveat names a few steps and counts the rest (issue 81.10: 50 names on one line).
TEST(TextReportTest, TheDataStallCaveatNamesAFewStepsAndCountsTheRest) {
  std::string ev;
  for (int i = 0; i < 40; ++i) {  // 40 steps, 10 with an 8 ms stall (the worst quarter), the rest 0.2 ms
    const int s = i * 10000;
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":10000}},)J", i, s);
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":{},"dur":{}}},)J",
                      s, i % 4 == 1 ? 8000 : 200);
  }
  ev.pop_back();
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraceBuffer("{\"traceEvents\":[" + ev + "]}", "stalls.json", 0, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  std::ostringstream out;
  WriteText(trace, report, th, {}, out);
  const std::string s = out.str();
  const size_t at = s.find("caveat: 10 steps (");
  ASSERT_NE(at, std::string::npos) << s;
  const std::string line = s.substr(at, s.find('\n', at) - at);
  EXPECT_NE(line.find(" and 6 more)"), std::string::npos) << line;
  size_t named = 0;
  for (size_t p = 0; (p = line.find("ProfilerStep#", p)) != std::string::npos; ++p) ++named;
  EXPECT_EQ(named, 4u) << line;
}

// Several ranks: the step count says it is all ranks' and how many each had (issue 60: "399 steps"
// was two ranks' 199 + 200). The 8-rank DLRM job has one step on each rank: "8 steps (...) in all on
// 8 ranks, 1 per rank, median ...".
TEST(TextReportTest, StepsOfSeveralRanksSayPerRank) {
  profiler::Trace trace;
  const auto dir = std::filesystem::path(TRAINRX_SOURCE_DIR) / "tests" / "fixtures" / "dlrm_8ranks";
  ASSERT_TRUE(profiler::ReadTraces({dir.string()}, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  std::ostringstream out;
  WriteText(trace, report, th, {}, out);
  EXPECT_NE(out.str().find(" in all on 8 ranks, 1 per rank, median"), std::string::npos) << out.str().substr(0, 2000);
  // Every finding of one rank says which (issue 60.7), in text and markdown; a one-rank report does not.
  analyzers::Report labelled = report;
  analyzers::Finding f;
  f.id = "sync.host_device", f.rank = 3, f.title = "a sync a step";
  labelled.findings = {f};
  for (int md = 0; md < 2; ++md) {
    std::ostringstream s;
    if (md) WriteMarkdown(trace, labelled, th, {}, s);
    else WriteText(trace, labelled, th, {}, s);
    EXPECT_NE(s.str().find("rank 3: a sync a step"), std::string::npos) << s.str();
  }
  labelled.metrics.steps.steps.clear();
  labelled.findings[0].rank = 0;
  std::ostringstream one;
  WriteText(trace, labelled, th, {}, one);
  EXPECT_EQ(one.str().find("rank 0: a sync"), std::string::npos) << one.str();
}

// A run that did not finish is said first, before the data-loss counts, in every format.
TEST(TextReportTest, UnfinishedRunIsSaidFirst) {
  profiler::Trace trace;
  const auto path = std::filesystem::path(TRAINRX_SOURCE_DIR) / "tests" / "fixtures" / "crashed_run.json";
  ASSERT_TRUE(profiler::ReadTraces({path.string()}, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  for (int md = 0; md < 2; ++md) {
    std::ostringstream out;
    if (md) WriteMarkdown(trace, report, th, {}, out);
    else WriteText(trace, report, th, {}, out);
    const std::string s = out.str();
    const size_t warn = s.find("did not finish"), read = s.find("events read");
    ASSERT_NE(warn, std::string::npos) << s;
    EXPECT_LT(warn, read) << s;
    EXPECT_NE(s.find("SIGSEGV"), std::string::npos) << s;
    EXPECT_NE(s.find("3 complete steps"), std::string::npos) << s;
    EXPECT_EQ(s.find("No problem crossed its threshold."), std::string::npos) << s;  // not "healthy"
  }
  std::ostringstream json;
  WriteJson(trace, report, th, {}, json);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_FALSE(p.parse(json.str()).get(doc)) << json.str();
  EXPECT_FALSE(bool(doc["run"]["finished"]));
  EXPECT_EQ(std::string_view(doc["run"]["unfinished"].at(0)["end_reason"]), "SIGSEGV");
  EXPECT_EQ(int64_t(doc["run"]["unfinished"].at(0)["recorded_ns"]), 31'300'000);
}

// A CUDA out-of-memory error in the run's first step (an H200, 2026-11-28: batch 65536): no
// optimizer step, so no allocator sample unless the failure's own figures came; the peak is then
// "not sampled", never "0 B".
TEST(TextReportTest, AnOutOfMemoryWithNoAllocatorSampleSaysSoNotZeroBytes) {
  const auto text = [](bool figures) {
    std::string j = R"J({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::batch_norm","pid":1,"tid":1,"ts":100,"dur":50},)J";
    if (figures)
      j += R"J({"ph":"X","cat":"user_annotation","name":"trainrx::cuda_memory cuda:0 allocated=21000000000 reserved=22000000000 peak=125000000000 reserved_peak=126000000000 retries=1 ooms=1 capacity=150000000000","pid":1,"tid":1,"ts":900,"dur":1},)J";
    j += R"J({"ph":"X","cat":"user_annotation","name":"trainrx::out_of_memory cuda:0 68719476736","pid":1,"tid":1,"ts":901,"dur":1}]})J";
    profiler::Trace trace;
    EXPECT_TRUE(profiler::ReadTraceBuffer(j, "oom.json", 0, trace).ok());
    analyzers::Thresholds th;
    std::ostringstream out;
    WriteText(trace, analyzers::Analyze(trace, th), th, {}, out);
    return out.str();
  };
  const std::string without = text(false), with = text(true);
  EXPECT_NE(without.find("ran out of memory on cuda:0"), std::string::npos) << without;
  EXPECT_NE(without.find("allocated before it: not sampled"), std::string::npos) << without;
  EXPECT_EQ(without.find("peak allocated 0 B"), std::string::npos) << without;
  // The run's peaks (the failed step's), reserved's too: the figures at the failure were read after
  // the failed step freed its tensors (an H200, 2026-11-28: "peak allocated 125.09 GB ..., reserved
  // 107.91 GB", reserved below allocated).
  EXPECT_NE(with.find("peak allocated 125.00 GB of 150.00 GB, peak reserved 126.00 GB"), std::string::npos) << with;
}

// Files of two jobs merged: a warning before any figure, naming which files form which job.
TEST(TextReportTest, MixedJobsWarnFirstWithTheirFiles) {
  profiler::Trace trace;
  const auto dir = std::filesystem::path(TRAINRX_SOURCE_DIR) / "tests" / "fixtures" / "mixed_jobs";
  ASSERT_TRUE(profiler::ReadTraces({dir.string()}, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  std::ostringstream out;
  WriteText(trace, report, th, {}, out);
  const std::string s = out.str();
  const size_t warn = s.find("WARNING: files of 2 different jobs");
  ASSERT_NE(warn, std::string::npos) << s;
  EXPECT_LT(warn, s.find("events read")) << s;
  EXPECT_NE(s.find("{world_size 8, nccl: " + (dir / "jobB_rank0.json").string() + "}"), std::string::npos) << s;
  EXPECT_EQ(s.find("skipped mixed_jobs"), std::string::npos) << s;  // nothing was skipped
  std::ostringstream json;
  WriteJson(trace, report, th, {}, json);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_FALSE(p.parse(json.str()).get(doc)) << json.str();
  EXPECT_EQ(std::string_view(doc["ranks"].at(2)["job"]), "world_size 8, nccl");
  EXPECT_EQ(std::string_view(doc["ingest"]["issues"].at(0)["severity"]), "error");
}

// The operator and kernel tables: after the step table in text and Markdown (names cut), in full
// in JSON with the other row; without steps their shares are of the trace span.
constexpr const char* kLongKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, ...)";
std::string OpsTrace(bool steps) {
  return std::string(R"J({"traceEvents":[)J") +
         (steps ? R"J({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},)J" : "") +
         R"J({"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":10,"dur":100},
  {"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":20,"dur":60},
  {"ph":"X","cat":"cpu_op","name":"aten::relu","pid":1,"tid":1,"ts":200,"dur":10},
  {"ph":"X","cat":"kernel","name":")J" + std::string(kLongKernel) + R"J(","pid":0,"tid":7,"ts":30,"dur":40,"args":{"stream":7,"correlation":1}},
  {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":90,"dur":10,"args":{"stream":7,"correlation":2}}
]})J";
}

TEST(TextReportTest, OpAndKernelTablesAfterTheStepTable) {
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraceBuffer(OpsTrace(true), "ops.json", 0, trace).ok());
  analyzers::Thresholds th;
  std::string error;
  ASSERT_TRUE(th.Set("report.top_n", 2).ToBool(&error)) << error;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  for (int md = 0; md < 2; ++md) {
    std::ostringstream out;
    if (md) WriteMarkdown(trace, report, th, {}, out);
    else WriteText(trace, report, th, {}, out);
    const std::string s = out.str();
    const size_t steps = s.find("Steps"), ops = s.find("Top operators (by self time)"), kernels = s.find("Top GPU kernels");
    ASSERT_NE(ops, std::string::npos) << s;
    ASSERT_NE(kernels, std::string::npos) << s;
    EXPECT_LT(steps, ops);
    EXPECT_LT(ops, kernels);
    EXPECT_NE(s.find("of step time"), std::string::npos) << s;
    EXPECT_NE(s.find("other (1 ops)"), std::string::npos) << s;
    EXPECT_EQ(s.find(kLongKernel), std::string::npos) << "kernel name not cut:\n" << s;
    EXPECT_NE(s.find("at::native::vectorized"), std::string::npos) << s;  // "void " dropped, head kept
  }
  // Text: aten::addmm self 60 us = 6.0 % of the 1 ms step; aten::linear self 40 us, total 100 us.
  std::ostringstream text;
  WriteText(trace, report, th, {}, text);
  EXPECT_NE(text.str().find("aten::addmm"), std::string::npos);
  EXPECT_NE(text.str().find("6.0%"), std::string::npos) << text.str();

  std::ostringstream json;
  WriteJson(trace, report, th, {}, json);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_FALSE(p.parse(json.str()).get(doc)) << json.str();
  const auto op_table = doc["metrics"]["op_table"];
  EXPECT_EQ(std::string_view(op_table["basis"]), "step time");
  EXPECT_EQ(std::string_view(op_table["rows"].at(0)["name"]), "aten::addmm");
  EXPECT_EQ(int64_t(op_table["rows"].at(0)["self_ns"]), 60'000);
  EXPECT_EQ(int64_t(op_table["rows"].at(1)["total_ns"]), 100'000);
  EXPECT_EQ(int64_t(op_table["rows"].at(1)["self_ns"]), 40'000);
  EXPECT_EQ(std::string_view(op_table["other"]["name"]), "other (1 ops)");
  EXPECT_EQ(int64_t(op_table["other"]["self_ns"]), 10'000);
  EXPECT_TRUE(op_table["other"]["total_ns"].error());  // totals nest across names: not summed
  const auto kernel_table = doc["metrics"]["kernel_table"];
  EXPECT_EQ(std::string_view(kernel_table["rows"].at(0)["name"]), kLongKernel);  // in full
  EXPECT_NEAR(double(kernel_table["rows"].at(0)["share"]), 0.8, 1e-9);
  EXPECT_TRUE(kernel_table["other"].is_null());
}

TEST(TextReportTest, OpTableWithoutStepsSharesOfTheTraceSpan) {
  profiler::Trace trace;
  ASSERT_TRUE(profiler::ReadTraceBuffer(OpsTrace(false), "ops.json", 0, trace).ok());
  analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  for (int md = 0; md < 2; ++md) {
    std::ostringstream out;
    if (md) WriteMarkdown(trace, report, th, {}, out);
    else WriteText(trace, report, th, {}, out);
    const std::string s = out.str();
    EXPECT_NE(s.find("Top operators (by self time)"), std::string::npos) << s;
    EXPECT_NE(s.find("of trace span"), std::string::npos) << s;
    for (const char* bad : {"per step", "of the step", "of steps", "step time"})
      EXPECT_EQ(s.find(bad), std::string::npos) << "'" << bad << "' in:\n" << s;
  }
}

}  // namespace
}  // namespace trainrx::reports

// Issue 15: every name from a trace or a command line is escaped in every format: an op named like
// markup, quotes, a CDATA end, line breaks, control bytes and bytes that are not UTF-8 never make a
// report invalid (JSON parses strictly, XML has no raw markup or forbidden bytes, a Markdown table
// row stays one row).
namespace trainrx::reports {
namespace {

const std::string kHostile = std::string("<script>alert(1)</script> & \"q\" ]]> | `x` *y* [l](u)\nrow\x01\x02 bad\xff\xfe end");

TEST(EscapingTest, HostileNamesInJsonMarkdownAndXml) {
  profiler::Trace trace;
  std::string json = R"J({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
    {"ph":"X","cat":"cpu_op","name":"NAME","pid":1,"tid":1,"ts":10,"dur":500}]})J";
  ASSERT_TRUE(profiler::ReadTraceBuffer(json, "hostile.json", 0, trace).ok());
  // The reader only takes valid UTF-8; our collector and C++ callers can hand in anything.
  for (auto& e : trace.events)
    if (trace.Name(e) == "NAME") e.name = trace.strings.Intern(kHostile);
  const analyzers::Thresholds th;
  const analyzers::Report report = analyzers::Analyze(trace, th);
  ASSERT_FALSE(report.metrics.op_table.rows.empty());

  std::ostringstream js;
  WriteJson(trace, report, th, Inputs({kHostile}), js);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(js.str()).get(doc), simdjson::SUCCESS) << js.str();

  std::ostringstream md;
  WriteMarkdown(trace, report, th, Inputs({kHostile}), md);
  const std::string m = md.str();
  EXPECT_EQ(m.find("<script>"), std::string::npos);
  EXPECT_EQ(m.find('\x01'), std::string::npos);
  EXPECT_EQ(m.find('\xff'), std::string::npos);
  for (size_t at = 0; (at = m.find("alert(1)", at)) != std::string::npos; ++at) {  // each row stays one line
    const size_t line_start = m.rfind('\n', at) + 1, line_end = m.find('\n', at);
    const std::string line = m.substr(line_start, line_end - line_start);
    EXPECT_NE(line.find(" end"), std::string::npos) << line;
  }

  experiments::GateReport gate;
  gate.spec = gate.baseline_file = kHostile;
  gate.warnings = {kHostile};
  experiments::MetricDecision metric;
  metric.name = kHostile;
  metric.unit = "ms";
  metric.verdict = experiments::GateVerdict::kFail;
  gate.metrics = {metric};
  std::ostringstream junit, gmd;
  WriteGateJunit(gate, junit);
  WriteGateMarkdown(gate, gmd);
  EXPECT_EQ(gmd.str().find("<script>"), std::string::npos) << gmd.str();
  EXPECT_EQ(gmd.str().find('\xff'), std::string::npos);
  const std::string x = junit.str();
  EXPECT_EQ(x.find("<script>"), std::string::npos) << x;
  EXPECT_EQ(x.find("]]>"), std::string::npos);
  EXPECT_EQ(x.find('\x01'), std::string::npos);
  EXPECT_EQ(x.find('\xff'), std::string::npos);
  EXPECT_NE(x.find("&lt;script&gt;"), std::string::npos);
  // Issue 37: a fail with its explanation carries the diff's top row in the failure's text, escaped.
  gate.explained = true;
  analyzers::DiffRow top;
  top.kind = "op";
  top.name = kHostile;
  top.note = "new in B";
  top.b = top.contribution_ns = 1.5e6;
  gate.why.ranked = {top};
  std::ostringstream explained;
  WriteGateJunit(gate, explained);
  const std::string xe = explained.str();
  const size_t failure = xe.find("<failure"), failure_end = xe.find("</failure>");
  ASSERT_NE(failure_end, std::string::npos) << xe;
  const std::string body = xe.substr(failure, failure_end - failure);
  EXPECT_NE(body.find("why (one more run of each side"), std::string::npos) << body;
  EXPECT_NE(body.find("+1.500 ms per step (new in B"), std::string::npos) << body;
  EXPECT_EQ(xe.find("<script>"), std::string::npos) << xe;

  // HTML: the names travel inside the embedded JSON document, which no name can close.
  const auto check_page = [&](const std::string& page, const char* what) {
    SCOPED_TRACE(what);
    size_t closes = 0;
    for (size_t at = 0; (at = page.find("</script", at)) != std::string::npos; ++at) ++closes;
    EXPECT_EQ(closes, 3u) << "error catcher, data, app: a name closed a script element";
    EXPECT_EQ(page.find("<script>alert"), std::string::npos);
    EXPECT_EQ(page.find('\x01'), std::string::npos);
    EXPECT_EQ(page.find('\xff'), std::string::npos);
    const std::string open = "<script type=\"application/json\" id=\"trainrx-data\">";
    const size_t from = page.find(open) + open.size(), to = page.find("</script>", from);
    ASSERT_NE(to, std::string::npos);
    simdjson::dom::parser hp;
    simdjson::dom::element hdoc;
    ASSERT_EQ(hp.parse(page.substr(from, to - from)).get(hdoc), simdjson::SUCCESS);
    // Decoded, the name is back (invalid bytes as U+FFFD): the page's script shows it as text.
    std::function<bool(simdjson::dom::element)> has = [&](simdjson::dom::element e) {
      if (e.is_string()) return std::string_view(e.get_string().value()).find("<script>alert(1)</script> & \"q\"") != std::string_view::npos;
      simdjson::dom::array arr;
      simdjson::dom::object obj;
      if (e.get(arr) == simdjson::SUCCESS) {
        for (auto x : arr) if (has(x)) return true;
      } else if (e.get(obj) == simdjson::SUCCESS) {
        for (auto f : obj) if (has(f.value)) return true;
      }
      return false;
    };
    EXPECT_TRUE(has(hdoc));
  };
  std::ostringstream page, gate_page;
  WriteHtml(trace, report, th, Inputs({kHostile}), page);
  WriteGateHtml(gate, gate_page);
  check_page(page.str(), "analysis");
  check_page(gate_page.str(), "gate");
}

}  // namespace
}  // namespace trainrx::reports
