#include "trainrx/profiler/parallel.h"

#include "trainrx/profiler/env.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
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

namespace {

// One RunTasks call's tasks: taken one at a time by its caller and by the helpers that join it.
struct Batch {
  const std::vector<std::function<void()>>* tasks = nullptr;
  std::vector<std::exception_ptr>* errors = nullptr;
  std::atomic<size_t> next{0};
  size_t wanted = 0;  // helpers it still wants (the pool's lock)
  size_t active = 0;  // helpers working on it (the pool's lock)
  void Work() {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < tasks->size();) {
      try {
        (*tasks)[i]();
      } catch (...) {
        (*errors)[i] = std::current_exception();
      }
    }
  }
};

// Helper threads kept between calls (an analysis makes dozens of RunTasks calls, and starting a
// thread costs ~40 us on a VM: a tenth of a what-if's replay). The caller always works on its own
// batch and waits only for helpers that joined it, so a batch finishes without any helper (a task
// that runs RunTasks itself, every helper busy, or a forked child that has none) and nothing
// deadlocks. Only calls with more than one thread use it: the collector (Finalize(1)) starts no
// thread in the program it observes.
class Pool {
 public:
  static Pool& Get() {
    static std::once_flag once;
    std::call_once(once, [] {
      // A forked child has none of the helpers, and its copies of the pool's condition variables
      // still count the parent's waiters (signalling them can block): the child forgets the pool
      // (an atomic store, nothing allocated between fork and exec) and makes a fresh one if it
      // runs tasks; the parent's is left as it was (its lock held across the fork, so no queue
      // is half written in the child's copy).
      pthread_atfork(
          [] {
            forking_ = current_.load();  // the pool whose lock is held across this fork
            if (forking_ != nullptr) forking_->m_.lock();
          },
          [] {
            if (forking_ != nullptr) forking_->m_.unlock();
          },
          [] { current_.store(nullptr); });
    });
    if (Pool* p = current_.load(std::memory_order_acquire)) return *p;
    auto* fresh = new Pool();  // never destroyed: its helpers wait until the process exits
    Pool* none = nullptr;
    if (current_.compare_exchange_strong(none, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread made it first
    return *none;
  }

  void Run(Batch& b, size_t helpers) {
    {
      std::lock_guard<std::mutex> lock(m_);
      b.wanted = helpers;
      queue_.push_back(&b);
      for (; helpers_ < helpers; ++helpers_) std::thread([this] { Loop(); }).detach();
    }
    wake_.notify_all();
    b.Work();
    std::unique_lock<std::mutex> lock(m_);
    queue_.erase(std::remove(queue_.begin(), queue_.end(), &b), queue_.end());  // no helper joins it now
    done_.wait(lock, [&] { return b.active == 0; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty(); });
      Batch* b = queue_.front();
      ++b->active;
      if (--b->wanted == 0) queue_.pop_front();
      lock.unlock();
      b->Work();
      lock.lock();
      if (--b->active == 0) done_.notify_all();
    }
  }
  static inline std::atomic<Pool*> current_{nullptr};
  static inline thread_local Pool* forking_ = nullptr;  // the forking thread's: prepare and parent run on it
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::deque<Batch*> queue_;
  size_t helpers_ = 0;
};

}  // namespace

void RunTasks(const std::vector<std::function<void()>>& tasks, size_t threads) {
  if (threads == 0) threads = UsableCpus();
  threads = std::min(threads, tasks.size());
  std::vector<std::exception_ptr> errors(tasks.size());
  Batch batch;
  batch.tasks = &tasks;
  batch.errors = &errors;
  if (threads <= 1) batch.Work();
  else Pool::Get().Run(batch, threads - 1);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainrx::profiler
