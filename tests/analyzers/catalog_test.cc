// The finding catalog (analyzers/catalog.h) against what reads it: every fix template formats, every
// knob it names is a workload knob, every outside-fix token is one the start-up hook reads, and every
// id is documented in docs/findings.md (a new id without docs fails here).
#include "trainrx/analyzers/catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "knobs.h"

namespace trainrx::analyzers {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::filesystem::path(TRAINRX_SOURCE_DIR) / relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CatalogTest, IdsAndVariantsAreUnique) {
  std::set<std::string> ids;
  for (const auto& e : Catalog()) {
    EXPECT_TRUE(ids.insert(e.id).second) << "id " << e.id << " twice";
    ASSERT_FALSE(e.fixes.empty()) << e.id << " has no fix";
    std::set<std::string> names;
    for (const auto& v : e.fixes) EXPECT_TRUE(names.insert(v.name).second) << e.id << ": variant '" << v.name << "' twice";
    if (e.fixes.size() > 1) {
      EXPECT_EQ(names.count(""), 0u) << e.id << ": with several variants each needs a name";
    }
    EXPECT_TRUE(*e.summary) << e.id;
  }
  EXPECT_EQ(FindingIds().size(), Catalog().size());
}

// Every template formats with the names it uses (a stray brace or a name no analyzer passes would
// throw at analysis time instead).
TEST(CatalogTest, EveryFixTemplateFormats) {
  const std::regex name(R"(\{([a-z_]+)[:}])");
  std::set<std::string> names;  // FixArg keeps a pointer to the name
  for (const auto& e : Catalog()) {
    for (const auto& v : e.fixes) {
      std::vector<const char*> used;
      for (const char* text : {v.python, v.cpp, v.knob}) {
        const std::string s(text);
        for (auto it = std::sregex_iterator(s.begin(), s.end(), name); it != std::sregex_iterator(); ++it)
          used.push_back(names.insert((*it)[1].str()).first->c_str());
      }
      std::vector<FixArg> args(used.size());  // sized once: no moves of the variants (GCC 12 warns on them)
      for (size_t i = 0; i < used.size(); ++i) args[i].first = used[i], args[i].second = 12.0;
      FixText t;
      EXPECT_NO_THROW(t = FormatFix(e.id, v.name, args)) << e.id << " variant '" << v.name << "'";
      EXPECT_FALSE(t.python.empty()) << e.id << " variant '" << v.name << "'";
    }
  }
}

TEST(CatalogTest, SetFixFillsTheFindingAndRefusesUnknownVariants) {
  Finding f;
  f.id = "threads.oversubscribed";
  SetFix(f, "threads", {{"n", 2.0}});
  EXPECT_EQ(f.fix_python, "torch.set_num_threads(2) (CPUs / local ranks)");
  EXPECT_EQ(f.fix_cpp, "at::set_num_threads(N) with N = CPUs / local ranks");
  EXPECT_EQ(f.knob, "threads");
  f.id = "batch.small";
  SetFix(f, "", {{"suggest", int64_t{128}}, {"batch", int64_t{32}}, {"half", int64_t{64}}});
  EXPECT_EQ(f.knob, "batch=128");
  EXPECT_NE(f.fix_python.find("--batch-size {batch}\" --grid batch=32,64,128"), std::string::npos) << f.fix_python;
  EXPECT_THROW(SetFix(f, "no_such_variant"), std::invalid_argument);
  f.id = "no.such_finding";
  EXPECT_THROW(SetFix(f), std::invalid_argument);
  EXPECT_EQ(FindCatalogEntry("no.such_finding"), nullptr);
}

// The knobs the catalog names are workload knobs; each knob plants at most one finding.
TEST(CatalogTest, KnobsAreWorkloadKnobs) {
  std::set<std::string> planted;
  for (const auto& e : Catalog()) {
    if (*e.planted_by) {
      EXPECT_NE(workloads::FindKnob(e.planted_by), nullptr) << e.id << ": planted_by " << e.planted_by;
      EXPECT_TRUE(planted.insert(e.planted_by).second) << "knob " << e.planted_by << " plants two findings";
      EXPECT_EQ(FindingPlantedBy(e.planted_by), &e);
    }
    for (const auto& v : e.fixes) {
      const std::string knob(v.knob);
      if (knob.empty()) continue;
      const std::string name = knob.substr(0, knob.find('='));
      EXPECT_NE(workloads::FindKnob(name), nullptr) << e.id << ": knob " << knob;
    }
  }
  EXPECT_EQ(FindingPlantedBy("seed"), nullptr);
}

// `fix --cmd`'s tokens are ones the start-up hook reads, and each comes with its code change.
TEST(CatalogTest, OutsideFixesAreReadByTheStartUpHook) {
  const std::string hook = ReadSource("probes/python/sitecustomize.py");
  ASSERT_FALSE(hook.empty());
  int tokens = 0;
  for (const auto& e : Catalog()) {
    const std::string token(e.outside_token);
    if (token.empty()) continue;
    ++tokens;
    const std::string key = token.substr(0, token.find('='));
    EXPECT_NE(hook.find("\"" + key + "\""), std::string::npos) << e.id << ": the hook does not read " << key;
    EXPECT_TRUE(*e.outside_code) << e.id;
  }
  EXPECT_GE(tokens, 10);
}

// The outside fixes `fix --cmd` measures in-process are tokens of the catalog that the start-up
// hook switches between steps (its _ALT_SWITCHES table); the ones built once stay across processes.
TEST(CatalogTest, SwitchableOutsideFixesAreSwitchedByTheStartUpHook) {
  const std::string hook = ReadSource("probes/python/sitecustomize.py");
  ASSERT_FALSE(hook.empty());
  std::set<std::string> switchable;
  for (const auto& e : Catalog()) {
    const std::string token(e.outside_token);
    if (token.empty() || !OutsideFixSwitches(token)) continue;
    switchable.insert(token);
    EXPECT_NE(hook.find("\"" + token + "\": _alt_"), std::string::npos) << e.id << ": the hook cannot switch " << token;
  }
  EXPECT_EQ(switchable, (std::set<std::string>{"anomaly_off", "cudnn_benchmark", "deterministic_off", "tf32", "zero_grad_none"}));
  for (const char* once : {"workers=2", "pin_memory", "eval_no_grad", "compile_off", ""}) EXPECT_FALSE(OutsideFixSwitches(once)) << once;
}

// docs/findings.md lists every id, and each entry's page exists and names it.
TEST(CatalogTest, EveryIdIsDocumented) {
  const std::string findings = ReadSource("docs/findings.md");
  ASSERT_FALSE(findings.empty());
  for (const auto& e : Catalog()) {
    EXPECT_NE(findings.find(std::string("`") + e.id + "`"), std::string::npos) << e.id << " is not in docs/findings.md";
    const std::string page = ReadSource(e.doc);
    EXPECT_NE(page.find(e.id), std::string::npos) << e.id << " is not on its page " << e.doc;
  }
}

// The catalog is built from one table per family (catalog.cc); put together they keep the order
// catalog.h promises: docs/findings.md's, each id where the page first names it.
TEST(CatalogTest, IdsAreInTheOrderDocsFindingsListsThem) {
  const std::string findings = ReadSource("docs/findings.md");
  size_t last = 0;
  std::string previous = "(start)";
  for (const auto& e : Catalog()) {
    const size_t at = findings.find(std::string("`") + e.id + "`");
    ASSERT_NE(at, std::string::npos) << e.id;
    EXPECT_GT(at, last) << e.id << " comes after " << previous << " in the catalog but before it in docs/findings.md";
    last = at;
    previous = e.id;
  }
}

}  // namespace
}  // namespace trainrx::analyzers
