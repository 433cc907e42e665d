// Both cores: the one place trainrx decides how many threads to use and runs work on them (the
// trace reader's windows, the analyzers, the per-rank summaries).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace trainrx::profiler {

// CPUs this process may run on (taskset and cgroup cpusets count), at least 1. TRAINRX_THREADS,
// when set to a positive number, overrides it (1: everything on the calling thread).
size_t UsableCpus();

// Runs every task once on up to `threads` threads, the calling thread included (0 = UsableCpus()),
// and returns when all are done. Tasks must not depend on each other; each writes only its own
// output, so the result is the same for every thread count. An exception thrown by a task is
// rethrown here (the first, by task order) after the others finished.
void RunTasks(const std::vector<std::function<void()>>& tasks, size_t threads = 0);

}  // namespace trainrx::profiler
