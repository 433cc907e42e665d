// The finding catalog (analyzers/catalog.h) against what reads it: every fix template formats, every
// knob it names is a workload knob, every outside-fix token is one the start-up hook reads, and every
// id is documented in docs/findings.md (a new id without docs fails here).
#include "trainrx/analyzers/catalog.h"
#include "trainrx/analyzers/analysis.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

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

// The Python start-up hook's source: sitecustomize.py and its parts beside it.
std::string ReadHook() {
  std::string all;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(TRAINRX_SOURCE_DIR) / "probes/python")) {
    if (entry.path().extension() != ".py") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    all += text.str();
  }
  return all;
}

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

// A shell-like split of a suggested command: words, "double-quoted" words kept whole.
std::vector<std::string> Words(const std::string& cmd) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char ch : cmd) {
    if (ch == '"') {
      quoted = !quoted, any = true;
    } else if (ch == ' ' && !quoted) {
      if (any) out.push_back(cur);
      cur.clear(), any = false;
    } else {
      cur += ch, any = true;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

// Issue 49.6: every command a finding suggests parses with the trainrx it ships in (compile.time's
// `trainrx ab --cmd "a" "b"` failed with "--a is required"). Each suggested command is written in
// backticks (a `trainrx <subcommand>` outside them fails here too), and is run with
// TRAINRX_PARSE_ONLY=1: the real command-line parser, nothing executed.
TEST(CatalogTest, EverySuggestedCommandParses) {
  const std::regex name(R"(\{([a-z_]+)[:}])");
  const std::regex bare(R"((^|[^`])trainrx (sweep|fix|ab|gate|diff|record|analyze|run) )");
  std::set<std::string> names, commands;
  for (const auto& e : Catalog()) {
    for (const auto& v : e.fixes) {
      std::vector<const char*> used;
      for (const char* text : {v.python, v.cpp, v.knob}) {
        const std::string t(text);
        for (auto it = std::sregex_iterator(t.begin(), t.end(), name); it != std::sregex_iterator(); ++it)
          used.push_back(names.insert((*it)[1].str()).first->c_str());
      }
      std::vector<FixArg> args(used.size());
      for (size_t i = 0; i < used.size(); ++i) args[i].first = used[i], args[i].second = 12.0;
      const FixText t = FormatFix(e.id, v.name, args);
      for (const std::string* text : {&t.python, &t.cpp}) {
        // Spans between backticks: the odd-numbered pieces.
        std::vector<std::string> pieces;
        size_t at = 0;
        for (size_t tick; (tick = text->find('`', at)) != std::string::npos; at = tick + 1) pieces.push_back(text->substr(at, tick - at));
        pieces.push_back(text->substr(at));
        for (size_t i = 0; i < pieces.size(); ++i) {
          if (i % 2 == 1 && pieces[i].rfind("trainrx ", 0) == 0) commands.insert(pieces[i]);
          if (i % 2 == 0) {
            EXPECT_FALSE(std::regex_search(" " + pieces[i], bare)) << e.id << " variant '" << v.name
                                                                     << "' suggests a command outside backticks: " << pieces[i];
          }
        }
      }
    }
  }
  ASSERT_GE(commands.size(), 5u);
  for (const std::string& cmd : commands) {
    std::vector<std::string> words = Words(cmd);
    words[0] = TRAINRX_CLI;
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store = {"TRAINRX_PARSE_ONLY=1", "PATH=/usr/bin:/bin"};
    std::vector<char*> env;
    for (auto& x : env_store) env.push_back(x.data());
    env.push_back(nullptr);
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, TRAINRX_CLI, &quiet, nullptr, argv.data(), env.data()), 0) << cmd;
    posix_spawn_file_actions_destroy(&quiet);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "does not parse: " << cmd;
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
  const std::string hook = ReadHook();
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
  const std::string hook = ReadHook();
  ASSERT_FALSE(hook.empty());
  std::set<std::string> switchable;
  for (const auto& e : Catalog()) {
    const std::string token(e.outside_token);
    if (token.empty() || !OutsideFixSwitches(token)) continue;
    switchable.insert(token);
    EXPECT_NE(hook.find("\"" + token + "\": _alt_"), std::string::npos) << e.id << ": the hook cannot switch " << token;
  }
  EXPECT_EQ(switchable, (std::set<std::string>{"anomaly_off", "cudnn_benchmark", "deterministic_off", "fused", "tf32", "zero_grad_none"}));
  for (const char* once : {"workers=2", "pin_memory", "eval_no_grad", "compile_off", ""}) EXPECT_FALSE(OutsideFixSwitches(once)) << once;
}

// `fix --cmd --also NAME`: every outside fix is one the start-up hook reads, has a code change (its
// catalog entry's where one names it), and a transform the replay knows where it names one; names
// resolve from a token, a transform or a finding id, and a wrong one is refused naming the known.
TEST(CatalogTest, OutsideFixesAreTheHooksAndResolveFromTheirNames) {
  const std::string hook = ReadHook();
  ASSERT_FALSE(hook.empty());
  const std::vector<std::string> transforms = WhatIfNames();
  for (const OutsideFix& f : OutsideFixes()) {
    EXPECT_NE(hook.find(std::string("\n  ") + f.token), std::string::npos) << f.token << " is not in the hook's list";
    EXPECT_FALSE(OutsideFixCode(std::string(f.token) + (std::string_view(f.token) == "workers" ? "=2" : "")).empty()) << f.token;
    if (*f.transform) {
      EXPECT_NE(std::find(transforms.begin(), transforms.end(), f.transform), transforms.end()) << f.transform;
    }
  }
  for (const auto& e : Catalog())
    if (*e.outside_token) {
      EXPECT_NE(FindOutsideFix(e.outside_token), nullptr) << e.id << ": " << e.outside_token;
    }
  EXPECT_EQ(*ResolveOutsideFix("foreach"), "foreach");
  EXPECT_EQ(*ResolveOutsideFix("workers=4"), "workers=4");
  EXPECT_EQ(*ResolveOutsideFix("fused_optimizer"), "fused");
  EXPECT_EQ(*ResolveOutsideFix("loader_workers"), "workers=2");
  EXPECT_EQ(*ResolveOutsideFix("debug.anomaly_detection"), "anomaly_off");
  EXPECT_EQ(*ResolveOutsideFix("compile_mode=max-autotune"), "compile_mode=max-autotune");
  for (const char* bad : {"workers", "workers=", "workers=0", "workers=two", "fused=1", "drop_bias", "amp", "sync.host_device"}) {
    const StatusOr<std::string> r = ResolveOutsideFix(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("--also ") + bad), std::string::npos) << r.status().message();
  }
  EXPECT_NE(ResolveOutsideFix("amp").status().message().find("known: anomaly_off, zero_grad_none, workers=N"), std::string::npos);
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

// docs/what-if.md's table has a row for every transform of the replay, and each row names the
// findings whose catalog entry uses it.
TEST(CatalogTest, EveryTransformIsDocumented) {
  const std::string doc = ReadSource("docs/what-if.md");
  ASSERT_FALSE(doc.empty());
  for (const std::string& name : WhatIfNames()) {
    const size_t row = doc.find("| `" + name + "` |");
    ASSERT_NE(row, std::string::npos) << name << " has no row in docs/what-if.md";
    const std::string line = doc.substr(row, doc.find('\n', row) - row);
    for (const auto& e : Catalog()) {
      if (name == e.transform) {
        EXPECT_NE(line.find(std::string("`") + e.id + "`"), std::string::npos) << name << ": " << e.id;
      }
    }
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
