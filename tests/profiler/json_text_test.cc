// Issue 35 item 4: JSON text values (RankInfo::config, Collector::SetStatic) go through the one
// writer: JsonWriter::Quote builds them, JsonWriter::Unquote reads them back. Before, a value was
// quoted by hand in several places and three of them did not escape: an end reason, a step name or
// a steps source holding a quote, a backslash or a newline made the written trace invalid JSON
// (or, for a step name, a step that was never found).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_view.h"
#include "journal.h"
#include "trainrx/experiments/launch_files.h"
#include "trainrx/profiler/json_writer.h"
#include "trainrx/profiler/reader.h"

namespace trainrx {
namespace {

namespace fs = std::filesystem;
using profiler::JsonWriter;

const std::string kAwkward = "say \"hi\" \\ back\nslash\ttab \x01 caf\xc3\xa9";

TEST(JsonTextTest, QuoteIsTheWritersStringAndUnquoteItsInverse) {
  std::ostringstream os;
  JsonWriter(os).String(kAwkward);
  EXPECT_EQ(JsonWriter::Quote(kAwkward), os.str());
  EXPECT_EQ(JsonWriter::Quote(kAwkward), "\"say \\\"hi\\\" \\\\ back\\nslash\\ttab \\u0001 caf\xc3\xa9\"");
  for (const std::string& s : {std::string(), kAwkward, std::string("plain"), std::string("\"\"\\\\"),
                              std::string("/"), std::string("\b\f\r")}) {
    EXPECT_EQ(JsonWriter::Unquote(JsonWriter::Quote(s)), s) << s;
  }
  // Bytes that are not UTF-8 are written as U+FFFD (Escape's rule) and read back as it.
  EXPECT_EQ(JsonWriter::Unquote(JsonWriter::Quote("a\xff")), "a\xef\xbf\xbd");
}

TEST(JsonTextTest, UnquoteDecodesWhatOtherWritersEscapeAndRefusesWhatIsNotOneString) {
  EXPECT_EQ(JsonWriter::Unquote(R"("a\/b")"), "a/b");
  EXPECT_EQ(JsonWriter::Unquote(R"("\u00e9\u20AC")"), "\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(JsonWriter::Unquote(R"("\ud83d\ude00")"), "\xf0\x9f\x98\x80");  // a surrogate pair
  for (const char* bad : {"", "\"", "abc", "123", "true", "\"a\"b\"", "\"abc", "abc\"", "\"\\x\"", "\"\\\"",
                          "\"\\u12\"", "\"\\u12g4\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"a\nb\""}) {
    EXPECT_EQ(JsonWriter::Unquote(bad), std::nullopt) << bad;
  }
}

TEST(JsonTextTest, ConfigTextDecodesStringsAndLeavesOtherValues) {
  profiler::RankInfo info;
  info.config["end_reason"] = profiler::ConfigValue::String(kAwkward);
  info.config["exit_code"] = profiler::ConfigValue::Number(3);
  info.config["env"] = profiler::ConfigValue::Json(R"({"A":"b"})");
  info.config["incomplete"] = profiler::ConfigValue::Bool(true);
  EXPECT_EQ(info.config["end_reason"].json(), JsonWriter::Quote(kAwkward));  // quoted by the one writer
  EXPECT_EQ(info.config["end_reason"].AsString(), kAwkward);
  EXPECT_EQ(info.config["exit_code"].AsString(), std::nullopt);
  EXPECT_EQ(info.config["exit_code"].AsNumber(), 3.0);
  EXPECT_EQ(info.config["incomplete"].AsNumber(), 1.0);
  EXPECT_EQ(info.config["env"].AsNumber(), std::nullopt);
  EXPECT_EQ(profiler::ConfigValue::Json("1700000000123456789").AsInt(), 1700000000123456789);  // exact, not via double
  EXPECT_EQ(profiler::ConfigValue().json(), "null");
  EXPECT_EQ(analyzers::ConfigText(info, "end_reason"), kAwkward);
  EXPECT_EQ(analyzers::ConfigText(info, "exit_code"), "3");
  EXPECT_EQ(analyzers::ConfigText(info, "env"), R"({"A":"b"})");
  EXPECT_EQ(analyzers::ConfigText(info, "absent"), "");
}

// A killed process's journal made into its trace (FinishJournals) with an end reason that needs
// escaping: the trace was written with the reason as it was ("\"" + reason + "\"") and did not
// read back.
TEST(JsonTextTest, AJournalMadeIntoATraceKeepsAnEndReasonThatNeedsEscaping) {
  const fs::path dir = fs::temp_directory_path() / ("trainrx_json_text_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path trace = dir / "run.json";
  const auto since = fs::file_time_type::clock::now() - std::chrono::seconds(5);
  {
    probes::Collector c;
    c.SetRecording(true);
    c.SetStatic("collector", JsonWriter::Quote("trainrx probes"));
    c.SetStatic("start_ns", "1000000");
    probes::Journal j;
    ASSERT_TRUE(j.Open(trace.string() + ".partial", c, 0, 1'000'000, 2000).ok());
    probes::ThreadBuffer* b = c.ThisThread();
    probes::Rec* r = b->Append();
    ASSERT_NE(r, nullptr);
    r->kind = probes::RecKind::kOp;
    r->name = b->InternDynamic("aten::add");
    r->start_ticks = 1'001'000;
    probes::EndRecord(r, 1'002'000);
    ASSERT_TRUE(j.Flush(c, 1'003'000).ok());
  }  // the process "killed": the journal stays
  const std::string reason = "signal \"SIGKILL\" \\ from\nthe launcher";
  const auto lines = experiments::FinishJournals(trace, since, reason, 2'000'000);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("made it from its journal"), std::string::npos) << lines[0];
  profiler::Trace t;
  const auto st = profiler::ReadTraces({trace.string()}, t);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(analyzers::ConfigText(t.ranks[0], "end_reason"), reason);
  EXPECT_EQ(analyzers::ConfigText(t.ranks[0], "collector"), "trainrx probes");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainrx
