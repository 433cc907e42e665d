// sets::AnalyzeSet: one entrance for a set of traces, whichever strategy reads it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "trainrx/sets/analyze_set.h"
#include "trainrx/sets/summary.h"

namespace trainrx::sets {
namespace {

namespace fs = std::filesystem;

class SetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("trainrx-set-test-{}-{}", getpid(), counter_++);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A rank's trace of a job of `world` ranks: two steps of one matmul each.
  std::string Rank(const std::string& name, int rank, int world) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << fmt::format(
        R"J({{"distributedInfo":{{"backend":"nccl","rank":{},"world_size":{}}},"traceEvents":[)J"
        R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":0,"dur":1000}},)J"
        R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":500}},)J"
        R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1000,"dur":1000}},)J"
        R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1010,"dur":500}}]}})J",
        rank, world);
    return path;
  }
  fs::path dir_;
  static inline int counter_ = 0;
};

// Issue 35: above 16 files a set is read rank by rank, and the mixed-jobs check lived only in the
// merged reader: 18 files of two unrelated jobs were analyzed as one job with no word of it.
TEST_F(SetTest, UnrelatedJobsAreCalledOutWhicheverStrategyReadsThem) {
  for (int r = 0; r < 9; ++r) Rank(fmt::format("a{}.json", r), r, 64), Rank(fmt::format("b{}.json", r), r, 8);
  for (const bool per_rank : {false, true}) {
    SetOptions o;
    o.per_rank_above = per_rank ? 16 : 100;  // 18 files: rank by rank, or merged
    SetAnalysis set;
    std::string error;
    ASSERT_TRUE(AnalyzeSet({dir_.string()}, o, &set).ToBool(&error)) << error;
    EXPECT_EQ(set.strategy, per_rank ? Strategy::kRankByRank : Strategy::kMerged);
    EXPECT_EQ(set.files.size(), 18u);
    EXPECT_EQ(set.trace.stats.Count("mixed_jobs"), 2u) << StrategyName(set.strategy);
    o.strict = true;
    EXPECT_FALSE(AnalyzeSet({dir_.string()}, o, &set).ToBool(&error));
    EXPECT_NE(error.find("2 different jobs"), std::string::npos) << error;
    EXPECT_NE(error.find("strict"), std::string::npos) << error;
  }
  // One job's 18 ranks: no mixed-jobs entry either way.
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  for (int r = 0; r < 18; ++r) Rank(fmt::format("r{:02}.json", r), r, 18);
  SetAnalysis set;
  std::string error;
  ASSERT_TRUE(AnalyzeSet({dir_.string()}, {}, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.strategy, Strategy::kRankByRank);
  EXPECT_EQ(set.trace.stats.Count("mixed_jobs"), 0u);
  EXPECT_EQ(set.trace.stats.Count("inconsistent_ranks"), 0u);
  EXPECT_EQ(set.trace.ranks.size(), 18u);
}

// Every way a set cannot be analyzed is the user's input (exit 2), said with the path as given,
// whichever strategy would have read it.
TEST_F(SetTest, ErrorsAreInvalidInputNamingThePath) {
  SetAnalysis set;
  const auto missing = (dir_ / "nosuch.json").string();
  const Status st = AnalyzeSet({missing}, {}, &set);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(st.message(), missing + ": no such file or directory");
  SetOptions per_rank;
  per_rank.per_rank = true;
  const auto not_json = (dir_ / "notes.json").string();
  std::ofstream(not_json) << "notes";
  const Status bad = AnalyzeSet({not_json}, per_rank, &set);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(bad.message().rfind(not_json + ": not a JSON trace", 0), 0u) << bad.message();
  const Status none = AnalyzeSet({}, {}, &set);
  EXPECT_EQ(none.message(), "no trace files given");
  // An asked fix on a set read rank by rank is not replayed: said, not dropped (issue 83).
  const auto good = (dir_ / "one.json").string();
  std::ofstream(good) << R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5}]})";
  per_rank.what_if = {"anomaly_off"};
  const Status asked = AnalyzeSet({good}, per_rank, &set);
  ASSERT_FALSE(asked.ok());
  EXPECT_NE(asked.message().find("--what-if replays a set read as one"), std::string::npos) << asked.message();
  EXPECT_NE(asked.message().find("(--per-rank)"), std::string::npos) << asked.message();
  per_rank.per_rank = false;
  EXPECT_TRUE(AnalyzeSet({good}, per_rank, &set).ok()) << "merged: replayed";
}

// Issue 34: a file cut inside its first event exited 0 with "No problem crossed its threshold".
TEST_F(SetTest, NoEventsReadIsAnErrorNamingTheFileAndTheLoss) {
  const auto cut = (dir_ / "cut.json").string();
  std::ofstream(cut) << R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1)";
  SetAnalysis set;
  std::string error;
  EXPECT_FALSE(AnalyzeSet({cut}, {}, &set).ToBool(&error));
  EXPECT_NE(error.find("cut.json: no events read"), std::string::npos) << error;
  EXPECT_NE(error.find("truncated_trace"), std::string::npos) << error;
  SetOptions per_rank;
  per_rank.per_rank = true;
  EXPECT_FALSE(AnalyzeSet({cut}, per_rank, &set).ToBool(&error));
  EXPECT_NE(error.find("no events read"), std::string::npos) << error;
  EXPECT_FALSE(AnalyzeBuffer(R"({"traceEvents":[]})", "empty.json", {}, &set).ToBool(&error));
  EXPECT_NE(error.find("empty.json: no events read (the trace is empty)"), std::string::npos) << error;
  // One good file beside it: analyzed, the cut said as data loss.
  const auto good = Rank("good.json", 0, 1);
  ASSERT_TRUE(AnalyzeSet({good}, {}, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.report.metrics.steps.steps.size(), 2u);
}

TEST_F(SetTest, SummariesAreReadAsRankSidesAndNotMixedWithTraces) {
  Rank("r0.json", 0, 2);
  Rank("r1.json", 1, 2);
  std::vector<WrittenSummary> written;
  std::string error;
  const auto out = (dir_ / "summaries").string();
  ASSERT_TRUE(SummarizeSet({(dir_ / "r0.json").string(), (dir_ / "r1.json").string()}, {}, out, &written).ToBool(&error)) << error;
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1].rank, 1);
  EXPECT_EQ(written[1].steps, 2u);
  SetAnalysis set;
  ASSERT_TRUE(AnalyzeSet({out}, {}, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.strategy, Strategy::kSummaries);
  EXPECT_EQ(set.trace.ranks.size(), 2u);
  EXPECT_FALSE(AnalyzeSet({out, (dir_ / "r0.json").string()}, {}, &set).ToBool(&error));
  EXPECT_NE(error.find("mix per-rank summaries"), std::string::npos) << error;
}

// Issue 34: the user names the step from outside (`analyze --step NAME`): a Python function of a
// with_stack trace or a record_function range; it wins over torch.profiler's ProfilerStep; a name
// that matches nothing is an error.
TEST_F(SetTest, TheStepTheUserNames) {
  std::string ev;
  for (int i = 0; i < 4; ++i) {
    const double s = 3000.0 * i;
    // One ProfilerStep around two calls of train_step (say, two micro-batches): 4 vs 8 steps.
    ev += fmt::format(R"J({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":1,"tid":1,"ts":{},"dur":3000}},)J", i, s);
    for (int k = 0; k < 2; ++k) {
      ev += fmt::format(R"J({{"ph":"X","cat":"python_function","name":"train.py(57): train_step","pid":1,"tid":1,"ts":{},"dur":1200}},)J",
                        s + 100 + k * 1400);
      ev += fmt::format(R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":1000}},)J", s + 150 + k * 1400);
    }
  }
  ev.pop_back();
  const auto path = (dir_ / "named.json").string();
  std::ofstream(path) << "{\"traceEvents\":[" << ev << "]}";
  SetAnalysis set;
  std::string error;
  ASSERT_TRUE(AnalyzeSet({path}, {}, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.report.metrics.steps.source, "ProfilerStep");
  SetOptions named;
  named.step_name = "train_step";
  ASSERT_TRUE(AnalyzeSet({path}, named, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.report.metrics.steps.source, "named: train_step");
  EXPECT_EQ(set.report.metrics.steps.steps.size() + set.report.metrics.steps.warmup_steps.size(), 8u);
  named.per_rank = true;  // rank by rank names it the same way
  ASSERT_TRUE(AnalyzeSet({path}, named, &set).ToBool(&error)) << error;
  EXPECT_EQ(set.report.metrics.steps.source, "named: train_step");
  named.per_rank = false;
  named.step_name = "trainstep";  // a typo: said, not a report over other steps
  EXPECT_FALSE(AnalyzeSet({path}, named, &set).ToBool(&error));
  EXPECT_NE(error.find("--step trainstep"), std::string::npos) << error;
}

// Issue 35: a rank two files claim moved in two places (the merged reader, the rank-by-rank
// sides), now profiler::MoveClaimedRank for both: the same ranks and sources either way.
TEST_F(SetTest, AClaimedRankMovesTheSameWayWhicheverStrategyReadsTheSet) {
  std::vector<std::string> files;
  for (const std::string name : {"a_rank1.json", "b_rank1.json", "c.json"}) {
    files.push_back((dir_ / name).string());
    std::ofstream(files.back())
        << R"J({"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":0,"dur":1000},)J"
           R"J({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":500}]})J";
  }
  for (const bool per_rank : {false, true}) {
    SetOptions o;
    o.per_rank = per_rank;
    SetAnalysis set;
    std::string error;
    ASSERT_TRUE(AnalyzeSet(files, o, &set).ToBool(&error)) << error;
    EXPECT_EQ(set.strategy, per_rank ? Strategy::kRankByRank : Strategy::kMerged);
    std::map<std::string, std::pair<int32_t, std::string>> by_file;
    for (const auto& r : set.trace.ranks) by_file[fs::path(r.source).filename().string()] = {r.rank, r.rank_source};
    const std::string how = StrategyName(set.strategy);
    EXPECT_EQ(by_file["a_rank1.json"], std::make_pair(1, std::string("file name"))) << how;
    EXPECT_EQ(by_file["b_rank1.json"], std::make_pair(2, std::string("file name (collided with another file; moved)"))) << how;
    EXPECT_EQ(by_file["c.json"], std::make_pair(0, std::string("input order"))) << how;
  }
}

// Issue 35 item 4: the step name went into the rank's config as "\"" + name + "\"" and was read
// back with every quote removed: a range named with a quote or a backslash was never found.
TEST_F(SetTest, AStepNameWithQuotesAndBackslashesIsFound) {
  std::string ev;
  for (int i = 0; i < 4; ++i)
    ev += fmt::format(
        R"J({{"ph":"X","cat":"user_annotation","name":"train \"step\" \\ {{x}}","pid":1,"tid":1,"ts":{},"dur":900}},)J"
        R"J({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":500}},)J",
        1000 * i, 1000 * i + 100);
  ev.pop_back();
  const auto path = (dir_ / "quoted.json").string();
  std::ofstream(path) << "{\"traceEvents\":[" << ev << "]}";
  for (const bool per_rank : {false, true}) {
    SetOptions named;
    named.per_rank = per_rank;
    named.step_name = "train \"step\" \\ {x}";
    SetAnalysis set;
    std::string error;
    ASSERT_TRUE(AnalyzeSet({path}, named, &set).ToBool(&error)) << error;
    EXPECT_EQ(set.report.metrics.steps.source, "named: train \"step\" \\ {x}");
    EXPECT_EQ(set.report.metrics.steps.steps.size() + set.report.metrics.steps.warmup_steps.size(), 4u);
  }
}

}  // namespace
}  // namespace trainrx::sets
