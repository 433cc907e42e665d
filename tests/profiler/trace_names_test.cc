// profiler/trace_names.h: per-rank / per-process trace file names built and parsed back in one
// place (issue 35 item 2: the probes' session, the experiments' launch files and `trainrx convert`
// built them three ways; the reader parsed them with a regex; two places moved a claimed rank).
#include "trainrx/profiler/trace_names.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <unistd.h>

#include "trainrx/profiler/reader.h"

namespace trainrx::profiler {
namespace {

using Kind = TraceTag::Kind;

TEST(TraceNamesTest, TagGoesBeforeTheJsonOfTheFileName) {
  EXPECT_EQ(TaggedTracePath("dir/run.json", ".rank1"), "dir/run.rank1.json");
  EXPECT_EQ(TaggedTracePath("run.json.gz", ".rank1"), "run.rank1.json.gz");
  EXPECT_EQ(TaggedTracePath("w.pt.trace.json", ".pid9"), "w.pt.trace.pid9.json");
  EXPECT_EQ(TaggedTracePath("trace", ".pid5"), "trace.pid5");  // no ".json": at the end
  EXPECT_EQ(TaggedTracePath("", ".rank0"), ".rank0");
  // Only the file name is looked at: a ".json" in a directory's name is not the suffix.
  EXPECT_EQ(TaggedTracePath("out.json.d/run.json", ".rank1"), "out.json.d/run.rank1.json");
  EXPECT_EQ(TaggedTracePath("a.json/out", ".rank0"), "a.json/out.rank0");
  EXPECT_EQ(TraceSuffixStart("a.json/out"), 10u);
  EXPECT_EQ(TraceSuffixStart("a/run.json.gz"), 5u);
  EXPECT_EQ(RankTracePath("run.json", 12), "run.rank12.json");
  EXPECT_EQ(PidTracePath("run.json", 77), "run.pid77.json");
}

// The probes' session rule (formerly probes::ChildOutputPath, with these very examples).
TEST(TraceNamesTest, ProcessPathRootKeepsThePathOthersGetRankOrPid) {
  EXPECT_EQ(ProcessTracePath("run.json", true, 3, 77), "run.json");
  EXPECT_EQ(ProcessTracePath("run.json.gz", false, 1, 77), "run.rank1.json.gz");
  EXPECT_EQ(ProcessTracePath("out.d/run.json", false, -1, 77), "out.d/run.pid77.json");
  EXPECT_EQ(ProcessTracePath("trace", false, -1, 5), "trace.pid5");
  EXPECT_EQ(ProcessTracePath("run.json", false, 0, 77), "run.rank0.json");  // rank 0 is a rank
}

TEST(TraceNamesTest, EveryNameBuiltParsesBack) {
  for (const std::string base : {"run.json", "run.json.gz", "trace", "w.pt.trace.json", "out.d/run.json",
                                 "out.json.d/run.json", "a.json/out"}) {
    for (const int64_t rank : {int64_t{0}, int64_t{1}, int64_t{12}, int64_t{std::numeric_limits<int32_t>::max()}}) {
      const std::string path = ProcessTracePath(base, false, rank, 77);
      EXPECT_EQ(ParseTaggedTraceName(path, base), (TraceTag{Kind::kRank, rank})) << path;
      EXPECT_EQ(ParseTaggedTraceName(RankTracePath(base, rank), base), (TraceTag{Kind::kRank, rank})) << path;
      // The reader's looser rule finds the same rank (the base has no "rank" of its own).
      EXPECT_EQ(RankInFileName(path), rank) << path;
    }
    for (const int64_t pid : {int64_t{1}, int64_t{77}, int64_t{4194304}}) {
      const std::string path = ProcessTracePath(base, false, -1, pid);
      EXPECT_EQ(ParseTaggedTraceName(path, base), (TraceTag{Kind::kPid, pid})) << path;
      EXPECT_EQ(RankInFileName(path), -1) << path;
    }
    EXPECT_EQ(ParseTaggedTraceName(ProcessTracePath(base, true, 1, 77), base), std::nullopt) << base;
  }
}

TEST(TraceNamesTest, OnlyTheLaunchsOwnTaggedNamesParse) {
  EXPECT_EQ(ParseTaggedTraceName("run.rank3.json", "run.json"), (TraceTag{Kind::kRank, 3}));
  EXPECT_EQ(ParseTaggedTraceName("run.pid77.json", "run.json"), (TraceTag{Kind::kPid, 77}));
  EXPECT_EQ(ParseTaggedTraceName("run.rank007.json", "run.json"), (TraceTag{Kind::kRank, 7}));
  EXPECT_EQ(ParseTaggedTraceName("run.json", "run.json"), std::nullopt);          // the root's own
  EXPECT_EQ(ParseTaggedTraceName("other.rank1.json", "run.json"), std::nullopt);  // another base
  EXPECT_EQ(ParseTaggedTraceName("run.rank1.json.gz", "run.json"), std::nullopt); // another suffix
  EXPECT_EQ(ParseTaggedTraceName("run.rank1.json", "run.json.gz"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("run.rank.json", "run.json"), std::nullopt);     // no digits
  EXPECT_EQ(ParseTaggedTraceName("run.pid.json", "run.json"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("run.pid-3.json", "run.json"), std::nullopt);
  // Names the old prefix test ("run.rank" ... ".json") took for a launch's traces: not built by
  // any process, so not one of its traces.
  EXPECT_EQ(ParseTaggedTraceName("run.rankings.json", "run.json"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("run.rank1.old.json", "run.json"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("run.pidstats.json", "run.json"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("run.rank99999999999999999999.json", "run.json"), std::nullopt);  // overflow
  EXPECT_EQ(ParseTaggedTraceName("trace.pid5", "trace"), (TraceTag{Kind::kPid, 5}));
  EXPECT_EQ(ParseTaggedTraceName("trace.pid5x", "trace"), std::nullopt);
  EXPECT_EQ(ParseTaggedTraceName("out/run.rank2.json", "out/run.json"), (TraceTag{Kind::kRank, 2}));
}

// The reader's rule, as its regex "rank[-_]?([0-9]+)" (case-insensitive, leftmost match, in the
// file name) had it.
TEST(TraceNamesTest, RankInFileNameAsTheReadersRegexHadIt) {
  EXPECT_EQ(RankInFileName("rank-3.json"), 3);
  EXPECT_EQ(RankInFileName("rank3.json.gz"), 3);
  EXPECT_EQ(RankInFileName("worker_rank_12.pt.trace.json"), 12);
  EXPECT_EQ(RankInFileName("worker_rank0.json"), 0);
  EXPECT_EQ(RankInFileName("RANK7.json"), 7);
  EXPECT_EQ(RankInFileName("Rank_2.json"), 2);
  EXPECT_EQ(RankInFileName("rank007.json"), 7);
  EXPECT_EQ(RankInFileName("dir/run.rank1.json"), 1);
  EXPECT_EQ(RankInFileName("rankrank5.json"), 5);  // the first "rank" followed by digits
  EXPECT_EQ(RankInFileName("rank_5rank6.json"), 5);
  EXPECT_EQ(RankInFileName("ranking.json"), -1);
  EXPECT_EQ(RankInFileName("rank_-3.json"), -1);  // one separator at most
  EXPECT_EQ(RankInFileName("rank--3.json"), -1);
  EXPECT_EQ(RankInFileName("rank .json"), -1);
  EXPECT_EQ(RankInFileName("notes.json"), -1);
  EXPECT_EQ(RankInFileName(""), -1);
  EXPECT_EQ(RankInFileName("rank"), -1);
  EXPECT_EQ(RankInFileName("rank_"), -1);
  EXPECT_EQ(RankInFileName("ran"), -1);
  EXPECT_EQ(RankInFileName("rank9"), 9);  // digits at the very end
  EXPECT_EQ(RankInFileName("rank_3/trace.json"), -1);  // a directory's name says nothing
  EXPECT_EQ(RankInFileName("rank2147483647.json"), std::numeric_limits<int32_t>::max());
  // Digits that do not fit a rank: the regex's std::stoi threw std::out_of_range out of the reader.
  EXPECT_EQ(RankInFileName("rank2147483648.json"), -1);
  EXPECT_EQ(RankInFileName("rank99999999999999999999999.json"), -1);
}

TEST(TraceNamesTest, AClaimedRankMovesToTheNextFreeOne) {
  std::set<int32_t> taken = {0, 1, 3};
  const auto is_taken = [&](int32_t r) { return taken.count(r) > 0; };
  int32_t rank = 2;
  std::string how = "file name";
  EXPECT_FALSE(MoveClaimedRank(&rank, &how, is_taken));  // free: left alone
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(how, "file name");
  rank = 0;
  how = "input order";
  EXPECT_TRUE(MoveClaimedRank(&rank, &how, is_taken));
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(how, "input order (collided with another file; moved)");
  taken.insert(2);
  rank = 1;
  EXPECT_TRUE(MoveClaimedRank(&rank, nullptr, is_taken));
  EXPECT_EQ(rank, 4);
  // Past the largest rank: from 0 again (the loop ++rank overflowed there).
  taken = {std::numeric_limits<int32_t>::max(), 0};
  rank = std::numeric_limits<int32_t>::max();
  EXPECT_TRUE(MoveClaimedRank(&rank, nullptr, is_taken));
  EXPECT_EQ(rank, 1);
}

class TraceNamesReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("trainrx_trace_names_test_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string File(const std::string& name) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << R"J({"traceEvents": [{"ph": "X", "name": "op", "pid": 5, "tid": 5, "ts": 1, "dur": 1}]})J";
    return path;
  }
  std::filesystem::path dir_;
};

// importers.cc's own example: rank1.json -> 1, rank0.json -> 0, then notes.json -> 0 is taken: 2.
TEST_F(TraceNamesReaderTest, TheReaderTakesRanksFromFileNamesAndMovesACollision) {
  Trace t;
  const auto st = ReadTraces({File("rank1.json"), File("rank0.json"), File("notes.json")}, t);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(t.ranks.size(), 3u);
  EXPECT_EQ(t.ranks[0].rank, 1);
  EXPECT_EQ(t.ranks[0].rank_source, "file name");
  EXPECT_EQ(t.ranks[1].rank, 0);
  EXPECT_EQ(t.ranks[2].rank, 2);
  EXPECT_EQ(t.ranks[2].rank_source, "input order (collided with another file; moved)");
}

// A rank in a file name too large for a rank: the reader threw std::out_of_range (std::stoi);
// now the name states no rank and the file goes by input order.
TEST_F(TraceNamesReaderTest, ARankTooLargeInAFileNameIsNoRank) {
  Trace t;
  const auto st = ReadTraces({File("rank99999999999.json")}, t);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.ranks[0].rank, 0);
  EXPECT_EQ(t.ranks[0].rank_source, "input order");
}

}  // namespace
}  // namespace trainrx::profiler
