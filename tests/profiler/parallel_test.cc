// profiler::RunTasks: its helper threads kept between calls (parallel.cc's pool).
#include "trainrx/profiler/parallel.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRAINRX_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TRAINRX_TSAN 1
#endif

namespace trainrx::profiler {
namespace {

// Each task writes its own slot; the sum says every task ran exactly once.
int64_t SumOfSquares(size_t n, size_t threads) {
  std::vector<int64_t> out(n, 0);
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < n; ++i) tasks.push_back([&out, i] { out[i] += static_cast<int64_t>(i * i); });
  RunTasks(tasks, threads);
  return std::accumulate(out.begin(), out.end(), int64_t{0});
}

TEST(RunTasks, EveryTaskRunsOnceOnEveryThreadCountAndCallAfterCall) {
  const int64_t expected = SumOfSquares(500, 1);
  EXPECT_EQ(expected, int64_t{499} * 500 * 999 / 6);
  for (int call = 0; call < 50; ++call)
    for (size_t threads : {2, 3, 4, 8}) ASSERT_EQ(SumOfSquares(500, threads), expected) << threads << " threads, call " << call;
  EXPECT_EQ(SumOfSquares(0, 4), 0);
  EXPECT_EQ(SumOfSquares(1, 4), 0);
}

TEST(RunTasks, ATaskThatRunsTasksItselfFinishesWhateverTheHelpersDo) {
  // Every helper busy in an outer task that waits for an inner batch: the inner batch's caller
  // runs it alone where no helper is free.
  std::vector<int64_t> sums(8, 0);
  std::vector<std::function<void()>> outer;
  for (size_t k = 0; k < sums.size(); ++k) outer.push_back([&sums, k] { sums[k] = SumOfSquares(100 + k, 4); });
  RunTasks(outer, 4);
  for (size_t k = 0; k < sums.size(); ++k) EXPECT_EQ(sums[k], SumOfSquares(100 + k, 1)) << k;
}

TEST(RunTasks, CallersOnSeveralThreadsShareTheHelpers) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        if (SumOfSquares(64, 3) != SumOfSquares(64, 1)) ++wrong;
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(RunTasks, TheFirstExceptionByTaskOrderIsRethrownAfterEveryTaskRan) {
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < 40; ++i)
    tasks.push_back([&ran, i] {
      ++ran;
      if (i == 7 || i == 30) throw std::runtime_error("task " + std::to_string(i));
    });
  try {
    RunTasks(tasks, 3);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task 7");
  }
  EXPECT_EQ(ran.load(), 40);
}

#ifndef TRAINRX_TSAN  // ThreadSanitizer stops a child of a multi-threaded process that starts threads
TEST(RunTasks, AForkedChildRunsTasksWithoutItsParentsHelpers) {
  ASSERT_EQ(SumOfSquares(200, 4), SumOfSquares(200, 1));  // the helpers exist now
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang fails the test instead of stalling the suite
    _exit(SumOfSquares(300, 4) == SumOfSquares(300, 1) && SumOfSquares(300, 2) == SumOfSquares(300, 1) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

}  // namespace
}  // namespace trainrx::profiler
