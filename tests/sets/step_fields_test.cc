// A per-step figure is one declaration (analyzers::StepFields, issue 83): every output follows the
// list. Each declared figure is given its own value through its member and must come out of the
// JSON step row, a set summary read back, and the docs of the JSON and the export; the export's
// steps table is held to the list in tests/exports/tables_test.cc, the HTML report's step table by
// tests/e2e/html_check.py. Adding a figure to the list adds it to all of them with no other change.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "trainrx/analyzers/rank_side.h"
#include "trainrx/analyzers/steps.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/sets/analysis_json.h"
#include "trainrx/sets/summary.h"

namespace trainrx::sets {
namespace {

using analyzers::StepField;
using analyzers::StepFields;
using analyzers::StepRow;

// A row whose every declared figure has a value of its own (7, 1007, 2007, ...).
StepRow EveryFigure(bool gpu) {
  StepRow r;
  r.rank = 3;
  r.name = "ProfilerStep#9";
  r.has_gpu = gpu;
  int64_t v = 7;
  for (const StepField& f : StepFields()) r.*f.member = v, v += 1000;
  return r;
}

simdjson::dom::element Parse(simdjson::dom::parser& p, const std::string& json) {
  simdjson::dom::element e;
  EXPECT_EQ(p.parse(json).get(e), simdjson::SUCCESS) << json;
  return e;
}

TEST(StepFieldsTest, TheListIsWellFormed) {
  std::set<std::string> names;
  for (const StepField& f : StepFields()) {
    EXPECT_TRUE(names.insert(f.name).second) << "declared twice: " << f.name;
    EXPECT_TRUE(std::string(f.name).ends_with("_ns")) << f.name << ": every figure is a time in ns";
    EXPECT_FALSE(std::string(f.label).empty()) << f.name;
    EXPECT_FALSE(std::string(f.what).empty()) << f.name;
  }
  EXPECT_GE(names.size(), 12u);
}

TEST(StepFieldsTest, AJsonStepRowCarriesEveryDeclaredFigure) {
  simdjson::dom::parser p;
  for (const bool gpu : {true, false}) {
    const StepRow r = EveryFigure(gpu);
    std::ostringstream out;
    profiler::JsonWriter w(out);
    WriteStepRow(w, r, /*phases=*/true);
    const auto row = Parse(p, out.str());
    for (const StepField& f : StepFields()) {
      int64_t got = -1;
      const bool present = row[f.name].get_int64().get(got) == simdjson::SUCCESS;
      EXPECT_EQ(present, f.CarriedBy(r, true)) << f.name << " gpu=" << gpu;
      if (present) {
        EXPECT_EQ(got, r.*f.member) << f.name;
      }
    }
  }
  // A warm-up row: its head only.
  std::ostringstream out;
  profiler::JsonWriter w(out);
  WriteStepRow(w, EveryFigure(true), /*phases=*/false);
  const auto row = Parse(p, out.str());
  for (const StepField& f : StepFields())
    EXPECT_EQ(row[f.name].error() == simdjson::SUCCESS, f.when == StepField::When::kAlways) << f.name;
}

TEST(StepFieldsTest, ASummaryReadBackHasEveryDeclaredFigure) {
  const auto dir = std::filesystem::temp_directory_path() / ("trainrx_step_fields_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const bool gpu : {true, false}) {
    analyzers::RankSide side;
    side.info.rank = 3;
    side.steps = {EveryFigure(gpu)};
    side.steps_have_gpu = gpu;
    const std::string path = (dir / (gpu ? "gpu.json" : "cpu.json")).string();
    {
      std::ofstream out(path);
      WriteSummary(side, out);
    }
    analyzers::RankSide back;
    const Status st = ReadSummary(path, &back);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(back.steps.size(), 1u);
    const StepRow& r = back.steps[0];
    EXPECT_EQ(r.has_gpu, gpu);
    for (const StepField& f : StepFields()) {
      if (f.CarriedBy(side.steps[0], true)) {
        EXPECT_EQ(r.*f.member, side.steps[0].*f.member) << f.name << " gpu=" << gpu;
      } else if (f.member != &StepRow::data_exposed_ns) {
        EXPECT_EQ(r.*f.member, 0) << f.name << " gpu=" << gpu;
      }
    }
    if (!gpu) {
      EXPECT_EQ(r.data_exposed_ns, r.data_wait_ns);  // no GPU: all of the wait is exposed
    }
  }
  std::filesystem::remove_all(dir);
}

// The JSON schema and the export's table docs name every declared figure.
TEST(StepFieldsTest, TheDocsNameEveryDeclaredFigure) {
  for (const char* doc : {"docs/json-schema.md", "docs/export.md"}) {
    std::ifstream in(std::string(TRAINRX_SOURCE_DIR) + "/" + doc);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(text.empty()) << doc;
    for (const StepField& f : StepFields()) EXPECT_NE(text.find(f.name), std::string::npos) << doc << " lacks " << f.name;
  }
}

}  // namespace
}  // namespace trainrx::sets
