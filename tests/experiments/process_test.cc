// experiments/process.h: the one fork/exec/wait. Its errors are Statuses: a program that cannot
// start is the user's (exit 2 in the command), an empty argv is trainrx's own bug (kInternal: every
// caller checks the user's command first).
#include "trainrx/experiments/process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "trainrx/experiments/launcher.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace trainrx::experiments {
namespace {

TEST(ProcessTest, RunProcessGivesTheProgramsExitCode) {
  ProcessSpec p;
  p.argv = {"/bin/sh", "-c", "exit 3"};
  const StatusOr<int> code = RunProcess(p);
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 3);
  p.argv = {"/nonexistent/trainrx-no-such-program"};
  p.log = "/dev/null";  // its "cannot run" line
  const StatusOr<int> missing = RunProcess(p);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, 127);  // started, then exec failed: the child's own exit code
}

// A user's command's leading assignments set its environment, as a shell's do (issue 81.10:
// `record -- VAR=value cmd` failed "cannot run VAR=value"); a program's path is never one.
TEST(ProcessTest, LeadingAssignmentsOfAUsersCommandSetItsEnvironment) {
  ProcessSpec p;
  p.search_path = true;
  p.argv = {"TRAINRX_T1=4", "TRAINRX_T_2=a=b", "sh", "-c", "test \"$TRAINRX_T1/$TRAINRX_T_2\" = 4/a=b"};
  StatusOr<int> code = RunProcess(p);
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, 0);
  p.argv = {"TRAINRX_T1=4", "sh", "-c", "exit 5"};
  code = RunProcess(p);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 5);
  p.argv = {"1X=4", "true"};  // not a name: the program "1X=4", which does not exist
  p.log = "/dev/null";
  code = RunProcess(p);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 127);
  EXPECT_EQ(SplitCommand("VAR=1 python3 train.py").size(), 3u);  // fix --cmd: StartProcess applies VAR=1
}

TEST(ProcessTest, NoProgramIsTrainrxsBugNotTheUsers) {
  const StatusOr<pid_t> pid = StartProcess(ProcessSpec{});
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().kind(), ErrorKind::kInternal);
  EXPECT_EQ(pid.status().message(), "StartProcess: no program to run");
  const StatusOr<int> code = RunProcess(ProcessSpec{});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().kind(), ErrorKind::kInternal);
}

// A failed trial's log is the program's text: a number too long for a double is no crash (std::stod
// threw std::out_of_range there, which reached main as an internal error).
TEST(ProcessTest, AnOutOfMemoryLineWithAHugeSizeIsRead) {
  const OutOfMemory small = FindOutOfMemory("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_TRUE(small.found);
  EXPECT_EQ(small.request_bytes, int64_t{2} << 30);
  const OutOfMemory huge =
      FindOutOfMemory("RuntimeError: can't allocate memory: Tried to allocate " + std::string(400, '9') + " bytes");
  EXPECT_TRUE(huge.found);
  EXPECT_EQ(huge.request_bytes, std::numeric_limits<int64_t>::max());
}

// A command's trial whose recording was written but cannot be read fails, naming the file (issue
// 61): before, the trial silently measured the whole run's seconds. The launcher records the command
// itself (record.h, no `trainrx record` process between): a stand-in probe folder (files where the
// probes and the start-up hook go) and a stand-in `python` that writes text that is no trace where
// the recording's output goes (TRAINRX_OUTPUT) and exits 0.
TEST(ProcessLauncherTest, AnUnreadableTrialTraceFailsTheTrialNamingTheFile) {
  namespace fs = std::filesystem;
  const fs::path bin = fs::temp_directory_path() / ("trainrx-fake-bin-" + std::to_string(getpid()));
  fs::create_directories(bin / "trainrx_python");
  for (const char* f : {"libtrainrx_probe.so", "libtrainrx_preload.so", "trainrx_python/sitecustomize.py"})
    std::ofstream(bin / f) << "";
  {
    std::ofstream f(bin / "python");
    f << "#!/bin/sh\n"
         "sleep 0.05  # a run's trace is written after it started (file times are coarse)\n"
         "echo 'this is not a trace' > \"$TRAINRX_OUTPUT\"\n";
  }
  ASSERT_EQ(chmod((bin / "python").c_str(), 0755), 0);
  const auto launcher = MakeProcessLauncher(bin.string());
  const std::string cmd = (bin / "python").string() + " train.py";
  const StatusOr<TrialResult> r = launcher->Command(cmd, {"workers=2"});
  ASSERT_FALSE(r.ok()) << "measured " << r->value << " " << r->unit;
  EXPECT_NE(r.status().message().find("cmd.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("python train.py"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("workers=2"), std::string::npos) << r.status().message();
  // Without the start-up hook, fixes applied from outside would silently not be: an error naming it.
  fs::remove(bin / "trainrx_python/sitecustomize.py");
  const StatusOr<TrialResult> no_hook = launcher->Command(cmd, {"workers=2"});
  ASSERT_FALSE(no_hook.ok());
  EXPECT_NE(no_hook.status().message().find("sitecustomize.py"), std::string::npos) << no_hook.status().message();
  std::error_code ec;
  fs::remove_all(bin, ec);
}

}  // namespace
}  // namespace trainrx::experiments
