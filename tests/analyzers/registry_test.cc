#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/analyzers/catalog.h"

namespace trainrx::analyzers {
namespace {

TEST(ThresholdsTest, UnknownKeyInGetIsAProgrammingError) {
  const Thresholds th;
  try {
    th.Get("no.such.key");
    FAIL() << "Get of an unknown key returned instead of throwing";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'no.such.key'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(th.Get("gpu.idle.idle_pct"), 20.0);
}

TEST(ThresholdsTest, UnknownKeyFromTheUserIsAParseError) {
  Thresholds th;
  std::string error;
  EXPECT_FALSE(th.Parse("gpu.idle.idle_pc=5").ToBool(&error));
  EXPECT_NE(error.find("unknown threshold 'gpu.idle.idle_pc'"), std::string::npos) << error;
  EXPECT_NE(error.find("gpu.idle.idle_pct"), std::string::npos) << error;  // lists the known keys
  EXPECT_TRUE(th.Parse("gpu.idle.idle_pct=5").ToBool(&error)) << error;
  EXPECT_EQ(th.Get("gpu.idle.idle_pct"), 5.0);
}

// Get() throws on an unknown key only when the code path that reads it runs, and some paths need
// traces no fixture has (sm_80+ devices, graph capture...). So read the keys from the analyzers'
// source instead: every `thresholds.Get("...")` literal must be registered.
TEST(ThresholdsTest, EveryKeyTheAnalyzersReadIsRegistered) {
  namespace fs = std::filesystem;
  const fs::path analyzers = fs::path(TRAINRX_SOURCE_DIR) / "analyzers";
  ASSERT_TRUE(fs::is_directory(analyzers)) << analyzers;
  const std::regex call(R"re(thresholds\s*\.\s*Get\s*\()re");
  const std::regex literal_call(R"re(thresholds\s*\.\s*Get\s*\(\s*"([^"]+)"\s*\))re");
  const Thresholds th;
  std::set<std::string> used;
  for (const auto& entry : fs::recursive_directory_iterator(analyzers)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string src = text.str();
    const auto calls = std::distance(std::sregex_iterator(src.begin(), src.end(), call), std::sregex_iterator());
    ptrdiff_t literals = 0;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), literal_call); it != std::sregex_iterator(); ++it) {
      ++literals;
      const std::string key = (*it)[1].str();
      used.insert(key);
      EXPECT_EQ(th.all().count(key), 1u) << entry.path().filename().string() << " reads unregistered threshold '"
                                         << key << "'";
    }
    // A key computed at run time would escape this check: keep them literals.
    EXPECT_EQ(calls, literals) << entry.path().filename().string()
                               << ": a thresholds.Get() whose key is not a string literal";
  }
  EXPECT_GE(used.size(), 15u) << "the scan found too few keys; did the call syntax change?";
}

// Finding ids are typed in the analyzers (f.id = "...", Base("...", ...)): they must be ids of the
// one catalog (catalog.h), and every catalog id must be produced somewhere. The catalog's own
// checks (knobs, outside fixes, docs) are in catalog_test.cc.
TEST(FindingIdsTest, AnalyzersUseTheCatalog) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(TRAINRX_SOURCE_DIR);
  const std::set<std::string> catalog(FindingIds().begin(), FindingIds().end());
  const std::regex id_literal(R"re((?:\.id\s*=\s*|Base\(\s*)"([a-z_]+\.[a-z_0-9]+)")re");
  std::set<std::string> produced;
  for (const auto& entry : fs::recursive_directory_iterator(root / "analyzers")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cc") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string src = text.str();
    for (auto it = std::sregex_iterator(src.begin(), src.end(), id_literal); it != std::sregex_iterator(); ++it) {
      produced.insert((*it)[1].str());
      EXPECT_EQ(catalog.count((*it)[1].str()), 1u) << entry.path().filename().string() << ": id '" << (*it)[1].str()
                                                  << "' is not in FindingIds()";
    }
  }
  for (const auto& id : catalog) EXPECT_EQ(produced.count(id), 1u) << id << " is in FindingIds() but no analyzer reports it";
}

}  // namespace
}  // namespace trainrx::analyzers
