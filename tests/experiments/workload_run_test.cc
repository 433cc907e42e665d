// `trainrx run` as a library call (experiments/workload_run.h, through ranks.h's LaunchRanks): a
// shell script stands for trainrx-workload in a temporary exe_dir. A failing rank is an error that
// keeps the rank's exit code (what `trainrx run` exits with); a rank that exits 0 with an unreadable
// result document is an error without one (exit 2); a good run gives its traces and summaries.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "trainrx/experiments/workload_run.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

class WorkloadRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainrx_workload_run_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // trainrx-workload as a script: `body` runs after $r is set to its --result argument.
  void Workload(const std::string& body) {
    const fs::path exe = dir_ / "trainrx-workload";
    std::ofstream(exe) << "#!/bin/sh\n"
                       << "while [ $# -gt 0 ]; do [ \"$1\" = --result ] && r=$2; shift; done\n"
                       << body << "\n";
    chmod(exe.c_str(), 0755);
  }
  WorkloadRun Run() const {
    WorkloadRun run;
    run.workload = "cnn";
    run.output = (dir_ / "t.json").string();
    return run;
  }
  fs::path dir_;
};

TEST_F(WorkloadRunTest, AFailingRankIsAnErrorWithItsExitCode) {
  Workload("exit 3");
  WorkloadTraces out;
  std::ostringstream log;
  const Status st = RunWorkload(Run(), dir_.string(), log, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(st.message(), "rank 0 of cnn: exited with 3");
  EXPECT_EQ(out.rank_exit_code, 3);
}

TEST_F(WorkloadRunTest, AnUnreadableResultIsAnErrorWithoutARankCode) {
  Workload("echo 'not json' > \"$r\"");
  WorkloadTraces out;
  std::ostringstream log;
  const Status st = RunWorkload(Run(), dir_.string(), log, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind((dir_ / "t.json.result.json").string() + ": not a readable run result", 0), 0u)
      << st.message();
  EXPECT_EQ(out.rank_exit_code, 0);
}

TEST_F(WorkloadRunTest, AGoodRunGivesItsTracesAndSummaries) {
  Workload(R"(echo '{"schema":"trainrx.run/1","median_step_ms":5,"samples_per_s":10,"steps":[{"ms":5}]}' > "$r")");
  WorkloadTraces out;
  std::ostringstream log;
  const Status st = RunWorkload(Run(), dir_.string(), log, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out.rank_exit_code, 0);
  EXPECT_EQ(out.traces, std::vector<std::string>{(dir_ / "t.json").string()});
  ASSERT_EQ(out.summary.size(), 1u);
  EXPECT_EQ(out.summary[0], "rank 0: median step 5.00 ms, 10.0 samples/s, loss 0.0000 -> 0.0000");
  EXPECT_EQ(log.str(), "trainrx: wrote " + (dir_ / "t.json").string() + "\n");
}

TEST_F(WorkloadRunTest, BadKnobsAreRefusedBeforeAnyRankStarts) {
  Workload("touch \"$r.started\"; exit 1");
  WorkloadRun run = Run();
  run.sets = {"workers=x"};
  WorkloadTraces out;
  std::ostringstream log;
  const Status st = RunWorkload(run, dir_.string(), log, &out);
  EXPECT_EQ(st.message(), "--set workers=x: knob workers: 'x' is not a non-negative number");
  EXPECT_FALSE(fs::exists(dir_ / "t.json.result.json.started"));
  EXPECT_EQ(out.rank_exit_code, 0);
}

}  // namespace
}  // namespace trainrx::experiments
