// cli::Fail and FailInternal (cli/terminal.h): the command's one mapping of an error's kind to its
// exit code and its line on stderr. Every kind of trainrx::ErrorKind is checked here, with the
// exact line: a changed code or shape fails this test (docs/cli.md's exit-code table, the e2e
// error tests and the Python package rely on them).
#include "terminal.h"

#include <gtest/gtest.h>

#include <string>

namespace trainrx::cli {
namespace {

struct Said {
  int code = 0;
  std::string stderr_text;
};

template <typename F>
Said Capture(F fail) {
  testing::internal::CaptureStderr();
  const int code = fail();
  return {code, testing::internal::GetCapturedStderr()};
}

TEST(TerminalTest, TheExitCodesAreTheDocumentedNumbers) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitFail, 1);
  EXPECT_EQ(kExitInputError, 2);
  EXPECT_EQ(kExitInconclusive, 3);
  EXPECT_EQ(kExitInternalError, 70);  // EX_SOFTWARE
}

TEST(TerminalTest, InvalidInputStatusExitsTwoWithTheMessageAsItIs) {
  const Said s = Capture([] { return Fail(Status::Error("run.json: cannot open: No such file or directory")); });
  EXPECT_EQ(s.code, 2);
  EXPECT_EQ(s.stderr_text, "trainrx: error: run.json: cannot open: No such file or directory\n");
}

TEST(TerminalTest, InternalStatusExitsSeventyAndSaysItIsABug) {
  const Said s = Capture([] { return Fail(Status::Internal("StartProcess: no program to run")); });
  EXPECT_EQ(s.code, 70);
  EXPECT_EQ(s.stderr_text,
            "trainrx: internal error: StartProcess: no program to run (a bug in trainrx: please report it with the "
            "command)\n");
}

TEST(TerminalTest, AnOkStatusReportedAsAnErrorIsABugToo) {
  const Said s = Capture([] { return Fail(Status::Ok()); });
  EXPECT_EQ(s.code, 70);
  EXPECT_EQ(s.stderr_text.rfind("trainrx: internal error: ", 0), 0u) << s.stderr_text;
}

TEST(TerminalTest, TheCommandsOwnErrorsExitTwoInTheOneShape) {
  Said s = Capture([] { return Fail("--format xml", "expected text, json, md or html"); });
  EXPECT_EQ(s.code, 2);
  EXPECT_EQ(s.stderr_text, "trainrx: error: --format xml: expected text, json, md or html\n");
  s = Capture([] { return Fail(std::string("gpt: unknown workload")); });
  EXPECT_EQ(s.code, 2);
  EXPECT_EQ(s.stderr_text, "trainrx: error: gpt: unknown workload\n");
  s = Capture([] { return FailInternal("no subcommand was dispatched"); });
  EXPECT_EQ(s.code, 70);
  EXPECT_EQ(s.stderr_text,
            "trainrx: internal error: no subcommand was dispatched (a bug in trainrx: please report it with the "
            "command)\n");
}

}  // namespace
}  // namespace trainrx::cli
