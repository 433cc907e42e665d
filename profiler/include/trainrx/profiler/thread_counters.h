// What the calling thread has spent: its CPU time and, where the machine lets a process count them,
// its instructions (user space). For benches and stage breakdowns (analyzers::StageTime, the
// reader's ReadTimings); torch-free.
#pragma once

#include <cstdint>

namespace trainrx::profiler {

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns.
int64_t ThreadCpuNs();

// Instructions the calling thread has retired in user space since its first call (a hardware
// counter opened per thread with perf_event_open, kept open for the thread's life); -1 where the
// machine has none or forbids it (a VM without a virtual PMU, perf_event_paranoid, seccomp).
int64_t ThreadInstructions();

}  // namespace trainrx::profiler
