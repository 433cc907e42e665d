#include "trainrx/profiler/parallel.h"

#include "trainrx/profiler/env.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>

namespace trainrx::profiler {

size_t UsableCpus() {
  if (const char* env = std::getenv(env::kThreads)) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<size_t>(std::min(n, 256L));
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<size_t>(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

void RunTasks(const std::vector<std::function<void()>>& tasks, size_t threads) {
  if (threads == 0) threads = UsableCpus();
  threads = std::min(threads, tasks.size());
  std::vector<std::exception_ptr> errors(tasks.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < tasks.size();) {
      try {
        tasks[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainrx::profiler
