// The reader's importers (profiler/io/importer.h, issue 53): a collector's journal is read directly
// into the trace, with no Kineto JSON in between, and gives the trace the JSON round trip gave
// (decode, write as Kineto JSON, parse again: what the reader did before), on real recordings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "byte_source.h"
#include "importer.h"
#include "trainrx/profiler/journal_format.h"
#include "trainrx/profiler/reader.h"
#include "trainrx/profiler/kineto_writer.h"

namespace trainrx::profiler {
namespace {

namespace fs = std::filesystem;

// What the reader did before: the journal decoded, written as Kineto JSON, and that text parsed.
Trace ViaJson(const std::string& journal, const std::string& name) {
  JournalContents contents;
  EXPECT_TRUE(DecodeJournal(journal, name, &contents).ok());
  contents.trace.Finalize(1);
  std::ostringstream json;
  WriteKinetoJson(contents.trace, contents.trace.ranks[0].rank, json);
  Trace t;
  std::string error;
  EXPECT_TRUE(ReadTraceBuffer(json.str(), name, -1, t).ToBool(&error)) << error;
  return t;
}

std::string Written(const Trace& t) {
  std::ostringstream out;
  WriteKinetoJson(t, t.ranks.front().rank, out);
  return out.str();
}

// The ingest entries (events_read aside: the JSON text counts its metadata rows as elements).
std::string Stats(const Trace& t) {
  std::string s;
  for (const auto& e : t.stats.entries) s += fmt::format("{} {} {} {}\n", e.kind, static_cast<int>(e.severity), e.count, e.example);
  return s;
}

class ImporterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ImporterTest, AJournalReadsDirectlyAsTheJsonRoundTripDid) {
  Trace recorded;
  std::string error;
  ASSERT_TRUE(ReadTraces({std::string(TRAINRX_SOURCE_DIR) + "/" + GetParam()}, recorded).ToBool(&error)) << error;
  ASSERT_GT(recorded.events.size(), 1000u);
  const std::string journal = EncodeJournal(recorded, recorded.ranks.front().rank, 5);
  const std::string name = "run.json.partial";
  Trace old_way = ViaJson(journal, name);
  // The JSON route's one addition: the Kineto writer's "displayTimeUnit", read back from its text
  // into the config (a recording that had one keeps it both ways).
  if (!recorded.ranks.front().config.count("displayTimeUnit")) old_way.ranks.front().config.erase("displayTimeUnit");
  Trace direct;
  ASSERT_TRUE(ReadTraceBuffer(journal, name, -1, direct).ToBool(&error)) << error;
  EXPECT_EQ(direct.events.size(), old_way.events.size());
  EXPECT_TRUE(Written(direct) == Written(old_way));  // (not EXPECT_EQ: megabytes of JSON on failure)
  EXPECT_EQ(Stats(direct), Stats(old_way));
  EXPECT_EQ(direct.stats.events_read, direct.events.size() + direct.counters.size() + direct.flows.size());
  const RankInfo& a = direct.ranks.front();
  const RankInfo& b = old_way.ranks.front();
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.declared_rank, b.declared_rank);
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.rank_source, b.rank_source);
  EXPECT_EQ(a.config.size(), b.config.size());
  for (const auto& [k, v] : b.config) {
    ASSERT_TRUE(a.config.count(k)) << k;
    EXPECT_EQ(a.config.at(k).json(), v.json()) << k;
  }

  // From a file, plain or gzip'd (the byte source inflates for every importer).
  const fs::path dir = fs::temp_directory_path() / fmt::format("trainrx-importers-{}", getpid());
  fs::create_directories(dir);
  std::string gz;
  ASSERT_TRUE(io::GzipCompress(journal, &gz));
  std::ofstream(dir / "run.json.partial", std::ios::binary) << journal;
  std::ofstream(dir / "run.json.partial.gz", std::ios::binary) << gz;
  for (const char* file : {"run.json.partial", "run.json.partial.gz"}) {
    Trace t;
    ASSERT_TRUE(ReadTraces({(dir / file).string()}, t).ToBool(&error)) << error;
    EXPECT_TRUE(Written(t) == Written(old_way)) << file;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Recordings, ImporterTest,
                         ::testing::Values("examples/sample_cpu_training.json.gz",       // CPU loop, our collector
                                           "tests/fixtures/h100/train_gpu.trainrx.json.gz"));  // kernels, copies, memory

// The importer is chosen by the first bytes, never by the name; a source too short to sniff goes to
// the Kineto importer, whose error says what a trace should be.
TEST(Importers, ChosenByTheFirstBytes) {
  const auto importers = Importers();
  ASSERT_GE(importers.size(), 2u);
  EXPECT_STREQ(importers.back().name, "Kineto JSON");
  std::string journal;
  EncodeJournalHeader(0, 0, {}, &journal);
  EXPECT_TRUE(importers.front().recognizes(journal.substr(0, kSniffBytes)));
  EXPECT_FALSE(importers.front().recognizes("{\"traceEvents\":[]}"));
  Trace t;
  std::string error;
  EXPECT_TRUE(ReadTraceBuffer(journal, "trace.json", -1, t).ToBool(&error)) << error;  // named .json, read as a journal
  EXPECT_EQ(t.ranks.size(), 1u);
  Trace u;
  EXPECT_FALSE(ReadTraceBuffer("{", "x.json", -1, u).ToBool(&error));
  EXPECT_NE(error.find("x.json"), std::string::npos) << error;
  EXPECT_TRUE(u.events.empty());
  // A journal cut inside its header: an error naming the source, the trace as it was.
  EXPECT_FALSE(ReadTraceBuffer(journal.substr(0, 12), "y.partial", -1, u).ToBool(&error));
  EXPECT_NE(error.find("y.partial"), std::string::npos) << error;
  EXPECT_TRUE(u.ranks.empty());
}

// A folder scan reads the names importers claim (Importer::folder_suffixes), not a journal left
// beside its trace nor other files; a folder with none says which names it looked for.
TEST(Importers, AFolderScanReadsTheNamesImportersClaim) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("trainrx-scan-{}", getpid());
  fs::create_directories(dir / "none");
  for (const char* f : {"rank1.json", "rank0.json.gz", "rank0.json.partial", "notes.txt"}) std::ofstream(dir / f) << "x";
  std::ofstream(dir / "none" / "notes.txt") << "x";
  const auto files = ExpandTracePaths({dir.string()});
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(*files, (std::vector<std::string>{(dir / "rank0.json.gz").string(), (dir / "rank1.json").string()}));
  // Named on its own, any file is read (its first bytes decide the importer).
  const auto named = ExpandTracePaths({(dir / "rank0.json.partial").string()});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->size(), 1u);
  const auto none = ExpandTracePaths({(dir / "none").string()});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("*.json, *.json.gz"), std::string::npos) << none.status().message();
  EXPECT_TRUE(ClaimedInFolder("a.pt.trace.json"));
  EXPECT_FALSE(ClaimedInFolder("a.json.partial"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace trainrx::profiler
