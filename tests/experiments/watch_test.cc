// experiments/watch.h: what `trainrx watch` reads back from a job's folder, on folders written by
// hand as the hook writes them: the ranks' hang stacks as one report (faulthandler's format, as
// Python 3.11 writes it), the captures every rank is done with, and the capture request.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <string>

#include "trainrx/experiments/watch.h"

namespace trainrx::experiments {
namespace {

namespace fs = std::filesystem;

struct Folder {
  fs::path dir;
  Folder() {
    dir = fs::temp_directory_path() / ("trainrx_watch_test_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "metrics");
  }
  ~Folder() { fs::remove_all(dir); }
  void Write(const std::string& name, const std::string& text) const {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << text;
  }
};

const char* kHeader = "trainrx watch: rank {R}, no optimizer step for 3.0 s (the median step 5.00 ms x 20, at least 2 s; "
                      "armed at step 50); every thread's Python stack:\n";

std::string Header(int rank) {
  std::string h = kHeader;
  h.replace(h.find("{R}"), 3, std::to_string(rank));
  return h;
}

TEST(WatchTest, TheHangReportNamesTheCollectiveAndTheRankThatDidNotArrive) {
  Folder f;
  f.Write("metrics/rank0.prom", "trainrx_step_seconds_count{rank=\"0\"} 200\n");
  f.Write("metrics/rank1.prom", "trainrx_step_seconds_count{rank=\"1\"} 200\n");
  f.Write("hang-rank0.txt",
          Header(0) +
              "Thread 0x00007f1 (most recent call first):\n"
              "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
              "  File \"/usr/lib/python3.11/threading.py\", line 1002 in _bootstrap\n\n"
              "Thread 0x00007f2 (most recent call first):\n"
              "  File \"/v/site-packages/torch/distributed/distributed_c10d.py\", line 3252 in all_reduce\n"
              "  File \"/v/site-packages/torch/distributed/c10d_logger.py\", line 81 in wrapper\n"
              "  File \"/job/train.py\", line 70 in main\n"
              "  File \"/job/train.py\", line 90 in <module>\n");
  f.Write("hang-rank1.txt", Header(1) +
                                "Thread 0x00007f3 (most recent call first):\n"
                                "  File \"/job/train.py\", line 65 in main\n"
                                "  File \"/job/train.py\", line 90 in <module>\n");
  const std::string report = HangReport(f.dir.string());
  EXPECT_NE(report.find("rank 0: waits in torch.distributed.all_reduce at train.py:70 in main (innermost: "
                        "distributed_c10d.py:3252 in all_reduce)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 1: not in a collective: at train.py:65 in main"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 0 waiting in all_reduce; not arrived: \n    rank 1 (at train.py:65 in main)"), std::string::npos)
      << report;
  // Armed, not fired (the header alone): no hang. A rank with no stack while another waits is named.
  f.Write("hang-rank1.txt", Header(1));
  const std::string one = HangReport(f.dir.string());
  EXPECT_NE(one.find("rank 1 (no hang stack: still stepping, or not watched)"), std::string::npos) << one;
  f.Write("hang-rank0.txt", Header(0));
  EXPECT_EQ(HangReport(f.dir.string()), "");
}

TEST(WatchTest, ACaptureIsFinishedWhenEveryRankIsDoneOrTheJobEnded) {
  Folder f;
  f.Write("metrics/rank0.prom", "");
  f.Write("metrics/rank1.prom", "");
  f.Write("capture-2/trace-rank0.json", "{}");
  f.Write("capture-2/.done-rank0", "");
  f.Write("capture-2/reason-rank0.json", R"({"reason": "regression", "detail": "1.5x", "rank": 0})");
  EXPECT_TRUE(FinishedCaptures(f.dir.string(), false).empty()) << "rank 1 is still capturing";
  const auto ended = FinishedCaptures(f.dir.string(), true);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].reason, "regression: 1.5x");
  ASSERT_EQ(ended[0].traces.size(), 1u);
  f.Write("capture-2/.done-rank1", "");
  f.Write("capture-2/reason-rank1.json", R"({"reason": "regression", "detail": "1.5x", "rank": 1, "skipped": "busy"})");
  f.Write("capture-1/.done-rank0", "");
  f.Write("capture-1/.done-rank1", "");
  f.Write("capture-1/report.json", "{}");  // analyzed already
  const auto done = FinishedCaptures(f.dir.string(), false);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(fs::path(done[0].folder).filename(), "capture-2");
  EXPECT_NE(done[0].reason.find("skipped on rank 1: busy"), std::string::npos) << done[0].reason;
}

TEST(WatchTest, ACaptureCutShortByTheJobsEndIsNamedAndOnlyFinishedTracesAreRead) {
  Folder f;
  f.Write("metrics/rank0.prom", "");
  f.Write("metrics/rank1.prom", "");
  // Rank 0 finished; rank 1 was killed while writing: a partial trace, its start's reason, no .done.
  f.Write("capture-1/trace-rank0.json", "{}");
  f.Write("capture-1/.done-rank0", "");
  f.Write("capture-1/reason-rank0.json", R"({"reason": "on demand", "rank": 0, "from_step": 812, "to_step": 822})");
  f.Write("capture-1/trace-rank1.json", "{\"traceEv");
  f.Write("capture-1/reason-rank1.json", R"({"reason": "on demand", "rank": 1, "from_step": 812, "unfinished": true})");
  // A capture no rank finished (a job killed inside it): said after the job's end, not before.
  f.Write("capture-2/reason-rank0.json", R"({"reason": "memory", "rank": 0, "from_step": 900, "unfinished": true})");
  EXPECT_TRUE(FinishedCaptures(f.dir.string(), false).empty());
  const auto ended = FinishedCaptures(f.dir.string(), true);
  ASSERT_EQ(ended.size(), 2u);
  ASSERT_EQ(ended[0].traces.size(), 1u) << "rank 1's partial trace is not read";
  EXPECT_EQ(fs::path(ended[0].traces[0]).filename(), "trace-rank0.json");
  EXPECT_EQ(ended[0].unfinished, "rank 1 from step 812");
  EXPECT_TRUE(ended[1].traces.empty());
  EXPECT_EQ(ended[1].unfinished, "rank 0 from step 900");
  EXPECT_EQ(ended[1].reason, "memory");
}

TEST(WatchTest, AFolderOfAnEarlierJobKeepsItsCapturesAndForgetsItsMetrics) {
  Folder f;
  f.Write("bin/trainrx_python/trainrx_hook_watch.py", "");
  f.Write("job/capture-3/report.json", "{}");
  fs::create_directories(f.dir / "job/capture-7");  // empty: no capture (a mount point made ahead)
  f.Write("job/metrics/rank0.prom", "trainrx_step_seconds_count{rank=\"0\"} 900\n");
  f.Write("job/capture-request.json", "{}");
  WatchOptions o;
  o.dir = (f.dir / "job").string();
  o.command = {"python3", "train.py"};
  const auto spec = PrepareWatch(o, (f.dir / "bin").string());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  std::string first;
  for (const auto& e : spec->env)
    if (e.name == "TRAINRX_WATCH_FIRST_CAPTURE") first = e.value;
  EXPECT_EQ(first, "4") << "this job's captures are numbered after the earlier job's capture-3";
  EXPECT_TRUE(fs::exists(f.dir / "job/capture-3/report.json"));
  EXPECT_FALSE(fs::exists(f.dir / "job/metrics/rank0.prom")) << "the earlier job's metrics would read as this job's";
  EXPECT_FALSE(fs::exists(f.dir / "job/capture-request.json"));
  o.command.clear();
  EXPECT_FALSE(PrepareWatch(o, (f.dir / "bin").string()).ok()) << "no command";
}

TEST(WatchTest, AnAnalyzedCapturesFirstFindingsAreMetrics) {
  Folder f;
  EXPECT_EQ(FindingsMetrics((f.dir / "capture-3").string()), "") << "no report: no metrics";
  f.Write("capture-3/report.json", R"({"findings": [
    {"id": "input.dataloader_bound", "severity": "high", "estimated_saving_pct": 61.5},
    {"id": "input.workers", "severity": "medium", "estimated_saving_pct": 0},
    {"id": "steps.slow", "severity": "low"}]})");
  const std::string text = FindingsMetrics((f.dir / "capture-3").string(), 2);
  EXPECT_NE(text.find(R"(trainrx_capture_finding{capture="capture-3",order="1",id="input.dataloader_bound",severity="high"} 61.5)"),
            std::string::npos) << text;
  EXPECT_NE(text.find(R"(order="2",id="input.workers",severity="medium"} 0)"), std::string::npos) << text;
  EXPECT_EQ(text.find("steps.slow"), std::string::npos) << "only the first two: " << text;
  EXPECT_NE(text.find(R"(trainrx_capture_findings{capture="capture-3"} 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE trainrx_capture_finding gauge"), std::string::npos);
}

TEST(WatchTest, AProcessNamesTheFolderItIsWatchedIn) {
  const auto none = WatchedDirOfProcess(1 << 30);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no such process"), std::string::npos) << none.status().message();
  // This test's process is not watched, nor is anything below it.
  const auto self = WatchedDirOfProcess(::getpid());
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.status().message().find("is not a watched job"), std::string::npos) << self.status().message();
  // A shell started with the hook's variable names its folder.
  const std::string cmd = "TRAINRX_WATCH=/tmp/watched-folder sh -c 'sleep 5 & wait' & echo $!";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  long long shell = 0;
  ASSERT_EQ(std::fscanf(p, "%lld", &shell), 1);
  ::pclose(p);
  auto found = WatchedDirOfProcess(shell);
  for (int i = 0; i < 100 && !found.ok(); ++i) {  // until the forked shell has exec'd with its variable
    ::usleep(20000);
    found = WatchedDirOfProcess(shell);
  }
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, "/tmp/watched-folder");
  ::kill(static_cast<pid_t>(shell), SIGTERM);
}

TEST(WatchTest, ACaptureRequestNamesAStepEveryRankReaches) {
  Folder f;
  EXPECT_FALSE(RequestCapture((f.dir / "nowhere").string(), 5).ok());
  EXPECT_FALSE(RequestCapture(f.dir.string(), 5).ok()) << "no rank's metrics: no watched job";
  f.Write("metrics/rank0.prom", "trainrx_step_seconds_count{rank=\"0\"} 1000\ntrainrx_steps_per_second{rank=\"0\"} 200\n");
  f.Write("metrics/rank1.prom", "trainrx_step_seconds_count{rank=\"1\"} 1010\ntrainrx_steps_per_second{rank=\"1\"} 190\n");
  ASSERT_TRUE(RequestCapture(f.dir.string(), 7).ok());
  std::ifstream in(f.dir / "capture-request.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The furthest rank's step, 1010, plus two seconds at the faster rank's pace (400 steps).
  EXPECT_NE(text.find("\"at_step\": 1410"), std::string::npos) << text;
  EXPECT_NE(text.find("\"steps\": 7"), std::string::npos) << text;
  EXPECT_FALSE(RequestCapture(f.dir.string(), 0).ok());
  EXPECT_FALSE(RequestCapture(f.dir.string(), -1).ok());
  // No number: the request names none, so the job captures its watcher's --capture-steps.
  ASSERT_TRUE(RequestCapture(f.dir.string()).ok());
  std::ifstream unset(f.dir / "capture-request.json");
  const std::string own((std::istreambuf_iterator<char>(unset)), std::istreambuf_iterator<char>());
  EXPECT_EQ(own.find("\"steps\""), std::string::npos) << own;
  // One process: the next steps (it takes the request from the step it sees it at).
  fs::remove(f.dir / "metrics/rank1.prom");
  ASSERT_TRUE(RequestCapture(f.dir.string(), 7).ok());
  std::ifstream one(f.dir / "capture-request.json");
  const std::string alone((std::istreambuf_iterator<char>(one)), std::istreambuf_iterator<char>());
  EXPECT_NE(alone.find("\"at_step\": 1005"), std::string::npos) << alone;
}

}  // namespace
}  // namespace trainrx::experiments
