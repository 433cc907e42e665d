// trainrx export (exports/tables.h): the tables of a set, their partitions, and the rank-by-rank
// seam the Dask path uses (sets::FileSidesJson / AnalyzeFileSides).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "trainrx/exports/plugin.h"
#include "trainrx/exports/tables.h"
#include "trainrx/reports/report.h"
#include "trainrx/sets/analyze_set.h"

namespace trainrx::exports {
namespace {

namespace fs = std::filesystem;

const std::string kDlrm = std::string(TRAINRX_SOURCE_DIR) + "/tests/fixtures/dlrm_8ranks";

// RFC 4180 rows of a CSV file (the writer's quoting undone), header first.
std::vector<std::vector<std::string>> ReadCsv(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(std::move(field)), field.clear();
    } else if (c == '\n') {
      rows.back().push_back(std::move(field)), field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// A table of one partition as column name -> values.
struct Csv {
  std::map<std::string, std::vector<std::string>> cols;
  size_t rows = 0;
  explicit Csv(const fs::path& path) {
    const auto r = ReadCsv(path);
    if (r.empty()) return;
    for (size_t i = 1; i < r.size(); ++i)
      for (size_t c = 0; c < r[0].size() && c < r[i].size(); ++c) cols[r[0][c]].push_back(r[i][c]);
    rows = r.size() - 1;
  }
};

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("trainrx-export-test-{}-{}", getpid(), counter_++);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  ExportSummary Export(const std::vector<std::string>& paths, const std::string& run, bool per_rank = false) {
    ExportOptions o;
    o.run = run;
    o.set.per_rank = per_rank;
    ExportSummary s;
    auto sink = NewCsvSink();
    std::string error;
    EXPECT_TRUE(ExportSet(paths, o, dir_.string(), *sink, &s).ToBool(&error)) << error;
    return s;
  }
  fs::path Part(const std::string& table, const std::string& run, int rank = -1) const {
    fs::path p = dir_ / table / ("run=" + run);
    if (rank >= 0) p /= fmt::format("rank={}", rank);
    return p / "part-0.csv";
  }
  fs::path dir_;
  static inline int counter_ = 0;
};

uint64_t Rows(const ExportSummary& s, const std::string& table) {
  for (const auto& [name, n] : s.rows)
    if (name == table) return n;
  return 0;
}

// The set read merged and rank by rank gives the same tables (the rank-by-rank export reads each
// file again for its events), and the tables agree with the analysis: the kernels' time per rank
// with the trace, the collective each rank arrived last at with dist.straggler's count.
TEST_F(ExportTest, MergedAndRankByRankWriteTheSameTablesAndTheyAgreeWithTheAnalysis) {
  const ExportSummary merged = Export({kDlrm}, "merged");
  const ExportSummary per_rank = Export({kDlrm}, "per_rank", true);
  EXPECT_EQ(merged.strategy, sets::Strategy::kMerged);
  EXPECT_EQ(per_rank.strategy, sets::Strategy::kRankByRank);
  EXPECT_EQ(merged.ranks, 8u);
  for (const char* t : {"ranks", "steps", "ops", "kernels", "copies", "runtime", "collectives"})
    EXPECT_EQ(Rows(merged, t), Rows(per_rank, t)) << t;
  EXPECT_GT(Rows(merged, "kernels"), 1000u);
  // Each rank's critical path; rank by rank from each file's second read, where the other ranks are
  // not seen: a collective's wait for the last rank is not split out as rank_wait there.
  EXPECT_GT(Rows(merged, "critical_path"), 0u);
  EXPECT_GT(Rows(per_rank, "critical_path"), 0u);
  int merged_waits = 0, per_rank_waits = 0;
  for (int32_t rank = 0; rank < 8; ++rank) {
    const Csv m(Part("critical_path", "merged", rank));
    for (const auto& c : m.cols.at("class")) merged_waits += c == "rank_wait";
    const Csv p(Part("critical_path", "per_rank", rank));
    EXPECT_GT(p.rows, 0u) << rank;
    for (const auto& c : p.cols.at("class")) per_rank_waits += c == "rank_wait";
  }
  EXPECT_GT(merged_waits, 0);
  EXPECT_EQ(per_rank_waits, 0);

  sets::SetAnalysis set;
  std::string error;
  ASSERT_TRUE(sets::AnalyzeSet({kDlrm}, {}, &set).ToBool(&error)) << error;
  for (int32_t rank = 0; rank < 8; ++rank) {
    int64_t kernel_ns = 0;
    for (const auto& tr : set.trace.tracks)
      if (tr.rank == rank)
        for (uint32_t i = tr.first_event; i < tr.first_event + tr.event_count; ++i)
          if (set.trace.events[i].kind == profiler::EventKind::kKernel) kernel_ns += set.trace.events[i].dur_ns;
    for (const char* run : {"merged", "per_rank"}) {
      const Csv k(Part("kernels", run, rank));
      int64_t sum = 0;
      for (const auto& d : k.cols.at("dur_ns")) sum += std::stoll(d);
      EXPECT_EQ(sum, kernel_ns) << run << " rank " << rank;
      // Each rank's steps: the analysis's rows, with the same wall time.
      const Csv s(Part("steps", run, rank));
      ASSERT_EQ(s.rows, 1u) << run;
      for (const auto& row : set.report.metrics.steps.steps)
        if (row.rank == rank) {
          EXPECT_EQ(s.cols.at("wall_ns")[0], std::to_string(row.wall_ns));
          // Every declared per-step figure is a column, with the row's value (a GPU trace: all carried).
          for (const analyzers::StepField& f : analyzers::StepFields()) {
            ASSERT_EQ(s.cols.count(f.name), 1u) << f.name;
            if (f.member != &analyzers::StepRow::start_ns) {
              EXPECT_EQ(s.cols.at(f.name)[0], std::to_string(row.*f.member)) << f.name;
            }
          }
        }
    }
  }
  // dist.straggler's rank arrived last most often, as many times as its examples say.
  const analyzers::Finding* straggler = nullptr;
  for (const auto& f : set.report.findings)
    if (f.id == "dist.straggler") straggler = &f;
  ASSERT_NE(straggler, nullptr);
  std::map<int32_t, int> last;
  int instances = 0;
  for (int32_t rank = 0; rank < 8; ++rank) {
    const Csv c(Part("collectives", "merged", rank));
    instances = static_cast<int>(c.rows);
    for (const auto& v : c.cols.at("arrived_last")) last[rank] += v == "true";
  }
  const auto most = std::max_element(last.begin(), last.end(), [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_EQ(most->first, straggler->rank);
  EXPECT_NE(straggler->title.find(fmt::format("arrived last at {} of {} collectives", most->second, instances)),
            std::string::npos)
      << straggler->title;
  // The findings table holds the report's findings, with their family from the catalog.
  const Csv f(Part("findings", "merged"));
  EXPECT_EQ(f.rows, set.report.findings.size());
  EXPECT_EQ(f.cols.at("id")[0], set.report.findings[0].id);
  EXPECT_FALSE(f.cols.at("family")[0].empty());
  EXPECT_EQ(f.cols.at("evidence")[0].front(), '{');
}

// Events get the index of the step they fall in (-1 outside every step); the steps table indexes
// the same steps; CSV quoting keeps names with commas and quotes whole.
TEST_F(ExportTest, EventsCarryTheirStepAndNamesSurviveQuoting) {
  const auto path = (dir_ / "t.json").string();
  std::ofstream(path) << R"J({"traceEvents":[
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":1,"tid":1,"ts":100,"dur":1000},
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":110,"dur":500},
    {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1100,"dur":1000},
    {"ph":"X","cat":"cpu_op","name":"my \"op\", with comma","pid":1,"tid":1,"ts":1110,"dur":500},
    {"ph":"X","cat":"cpu_op","name":"aten::after","pid":1,"tid":1,"ts":5000,"dur":10}]})J";
  const ExportSummary s = Export({path}, "");
  EXPECT_EQ(s.run, "t");
  const Csv ops(Part("ops", "t", 0));
  std::map<std::string, std::string> step_of;
  for (size_t i = 0; i < ops.rows; ++i) step_of[ops.cols.at("name")[i]] = ops.cols.at("step")[i];
  EXPECT_EQ(step_of.at("aten::mm"), "0");
  EXPECT_EQ(step_of.at("my \"op\", with comma"), "1");
  EXPECT_EQ(step_of.at("aten::after"), "-1");
  const Csv steps(Part("steps", "t", 0));
  ASSERT_EQ(steps.rows, 2u);
  EXPECT_EQ(steps.cols.at("step")[1], "1");
  EXPECT_EQ(steps.cols.at("name")[1], "ProfilerStep#1");
  EXPECT_EQ(steps.cols.at("gpu_kernel_ns")[0], "");  // no GPU: null, not 0
  // views.sql names every table written, with its partition columns typed.
  std::ifstream views(dir_ / "views.sql");
  const std::string sql((std::istreambuf_iterator<char>(views)), std::istreambuf_iterator<char>());
  EXPECT_NE(sql.find("CREATE OR REPLACE VIEW ops AS SELECT * FROM read_csv('ops/*/*/*.csv'"), std::string::npos) << sql;
  EXPECT_NE(sql.find("VIEW findings AS SELECT * FROM read_csv('findings/*/*.csv'"), std::string::npos) << sql;
  EXPECT_NE(sql.find("'rank': 'BIGINT'"), std::string::npos);
}

// Many runs in one dataset: exporting a run again replaces its partitions and keeps the others'.
TEST_F(ExportTest, ARunExportedAgainReplacesItselfOnly) {
  const std::string one = kDlrm + "/worker0_step_12.1694128201545.pt.trace.json.gz";
  Export({kDlrm}, "a");
  Export({one}, "b");
  EXPECT_TRUE(fs::exists(Part("kernels", "a", 7)));
  Export({one}, "a");  // run a is now one rank
  EXPECT_FALSE(fs::exists(Part("kernels", "a", 7)));
  EXPECT_TRUE(fs::exists(Part("kernels", "a", 0)));
  EXPECT_TRUE(fs::exists(Part("kernels", "b", 0)));
  EXPECT_EQ(Csv(Part("runs", "a")).rows, 1u);
}

// A sink whose writes fail after `ok` chunks (a full disk half way through an export).
class FailingSink : public TableSink {
 public:
  explicit FailingSink(int ok) : left_(ok) {}
  const char* Extension() const override { return "csv"; }
  StatusOr<std::unique_ptr<TableWriter>> Open(const std::string& path) override {
    auto inner = csv_->Open(path);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<TableWriter>(std::make_unique<Writer>(std::move(*inner), &left_));
  }

 private:
  struct Writer : TableWriter {
    Writer(std::unique_ptr<TableWriter> w, int* left) : w(std::move(w)), left(left) {}
    Status Append(const Table& t) override { return --*left < 0 ? Status::Error("disk full") : w->Append(t); }
    Status Close() override { return w->Close(); }
    std::unique_ptr<TableWriter> w;
    int* left;
  };
  int left_;
  std::unique_ptr<TableSink> csv_ = NewCsvSink();
};

// An export that fails half way says why and leaves no part of its run behind (a query would read
// a half-written run as a whole one); the dataset's other runs stay.
TEST_F(ExportTest, AnExportThatFailsHalfWayLeavesNoPartOfItsRun) {
  Export({kDlrm}, "kept");
  FailingSink sink(20);
  ExportOptions o;
  o.run = "broken";
  ExportSummary s;
  std::string error;
  EXPECT_FALSE(ExportSet({kDlrm}, o, dir_.string(), sink, &s).ToBool(&error));
  EXPECT_NE(error.find("disk full"), std::string::npos) << error;
  for (const auto& table : TableNames()) EXPECT_FALSE(fs::exists(dir_ / table / "run=broken")) << table;
  EXPECT_TRUE(fs::exists(Part("kernels", "kept", 3)));
}

TEST_F(ExportTest, RunNamesAndBadInputs) {
  EXPECT_EQ(RunNameOf("runs/rank0.pt.trace.json.gz"), "rank0");
  EXPECT_EQ(RunNameOf("a b/job:1.json"), "job_1");
  EXPECT_EQ(RunNameOf("traces/dlrm_8ranks/"), "dlrm_8ranks");
  std::string error;
  EXPECT_FALSE(CheckRunName("a/b").ToBool(&error));
  EXPECT_NE(error.find("--run 'a/b'"), std::string::npos) << error;
  EXPECT_FALSE(CheckRunName("..").ok());
  EXPECT_TRUE(CheckRunName("nightly-2026.11.25_1").ok());
  auto sink = NewCsvSink();
  ExportOptions o;
  ExportSummary s;
  o.run = "x/y";
  EXPECT_FALSE(ExportSet({kDlrm}, o, dir_.string(), *sink, &s).ok());
  // Summaries hold no events: said, nothing written.
  std::vector<sets::WrittenSummary> written;
  ASSERT_TRUE(sets::SummarizeSet({kDlrm}, {}, (dir_ / "sum").string(), &written).ok());
  o.run = "s";
  EXPECT_FALSE(ExportSet({(dir_ / "sum").string()}, o, (dir_ / "out").string(), *sink, &s).ToBool(&error));
  EXPECT_NE(error.find("summaries hold no events"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "ops"));
  // No plugin: the error says what is missing and what to install; unknown formats are named.
  auto none = OpenSink("parquet", (dir_ / "nowhere").string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(kParquetPlugin), std::string::npos);
  EXPECT_NE(none.status().message().find("trainrx[sql]"), std::string::npos);
  EXPECT_FALSE(OpenSink("xlsx", ".").ok());
}

#ifdef TRAINRX_PARQUET_PLUGIN_DIR
// The plugin writes Parquet files (the format's magic at both ends) a reader can open; the
// columns' contents are checked against DuckDB in tests/python/tables_test.py.
TEST_F(ExportTest, TheParquetPluginWritesParquet) {
  auto sink = OpenSink("parquet", TRAINRX_PARQUET_PLUGIN_DIR);
  ASSERT_TRUE(sink.ok()) << sink.status().message();
  ExportOptions o;
  o.run = "p";
  ExportSummary s;
  std::string error;
  ASSERT_TRUE(ExportSet({kDlrm}, o, dir_.string(), **sink, &s).ToBool(&error)) << error;
  const fs::path part = dir_ / "kernels" / "run=p" / "rank=0" / "part-0.parquet";
  std::ifstream in(part, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 4), "PAR1");
  EXPECT_EQ(bytes.substr(bytes.size() - 4), "PAR1");
}
#endif

std::string Json(const sets::SetAnalysis& set, const std::vector<std::string>& inputs) {
  reports::RenderOptions options;
  options.inputs = inputs;
  std::ostringstream out;
  reports::WriteReport("json", set.trace, set.report, {}, options, out);
  return std::move(out).str();
}

// The seam trainrx.dask splits the rank-by-rank strategy at: each file's sides made on their own
// (a worker), then the reduce (the client) gives the report of the local path, byte for byte.
TEST_F(ExportTest, FileSidesGiveTheRankByRankReportByteForByte) {
  sets::SetOptions o;
  o.per_rank = true;
  sets::SetAnalysis local;
  std::string error;
  ASSERT_TRUE(sets::AnalyzeSet({kDlrm}, o, &local).ToBool(&error)) << error;
  std::vector<std::string> docs;
  for (const auto& f : local.files) {
    std::string doc;
    ASSERT_TRUE(sets::FileSidesJson(f, {}, "", &doc).ToBool(&error)) << error;
    docs.push_back(std::move(doc));
  }
  sets::SetAnalysis remote;
  ASSERT_TRUE(sets::AnalyzeFileSides(local.files, docs, o, &remote).ToBool(&error)) << error;
  EXPECT_EQ(Json(remote, {kDlrm}), Json(local, {kDlrm}));
  EXPECT_NE(Json(remote, {kDlrm}).find("Tesla V100-SXM2-32GB"), std::string::npos);  // devices travel too
  // A document that is not one names its file.
  docs[3] = "{\"schema\":\"trainrx.summary/1\"}";
  EXPECT_FALSE(sets::AnalyzeFileSides(local.files, docs, o, &remote).ToBool(&error));
  EXPECT_NE(error.find(local.files[3]), std::string::npos) << error;
  EXPECT_NE(error.find("trainrx.file_sides/1"), std::string::npos) << error;
}

}  // namespace
}  // namespace trainrx::exports
