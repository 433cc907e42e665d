// trainrx::profiler CPU wait — how long a program waited for a CPU, and who else used the CPUs
// (a busy machine said out loud).
//
// Linux keeps, per thread, the time it ran and the time it was runnable but waited on a run queue
// (/proc/<pid>/task/<tid>/schedstat: "run_ns wait_ns timeslices", CONFIG_SCHED_INFO). Summed over
// the process's threads, the wait is what another program (or the program's own extra threads) took
// from it. The CPUs the process may run on (its affinity) are read in /proc/stat, so that the time
// other programs used them is the CPUs' busy time less the process's own and its children's
// (DataLoader workers). All figures are cumulative since the process (or the machine) started: the
// collector samples them at step boundaries as counters, and a difference over the steps is the
// steps' figure. The counters live under "trainrx.sched.<what>" (CpuWaitCounterName).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainrx::profiler {

struct CpuWaitSample {
  bool ok = false;              // false: no schedstat here (another OS, a kernel without it)
  int64_t run_ns = 0;           // the process's threads, running
  int64_t wait_ns = 0;          // the process's threads, runnable and waiting for a CPU
  int64_t involuntary = 0;      // involuntary context switches of the process's threads (getrusage)
  int64_t children_run_ns = 0;  // the CPU time of its children, live and waited for (DataLoader workers); -1: unknown
  int64_t cpus_busy_ns = 0;     // the allowed CPUs' busy time, everyone's (user, system, irq, steal); -1: unknown
  int64_t cpus = 0;             // the CPUs the process may run on
};

// Reads the figures now. Allocation-free (plain reads of /proc files into stack buffers); 19 us with
// one thread, 72 us with twelve (2-core VM). `forks`: the processes this one has forked so far, where the
// caller counts them (the probe does): 0 means no child, so children_run_ns is 0 without looking;
// on a kernel that does not list a process's children, the children are found by a scan of /proc
// (a few ms) when `forks` changed and at most every 2 s otherwise, and their CPU read at each call.
// -1: unknown (the caller does not count forks and the kernel does not list children).
CpuWaitSample ReadCpuWait(int64_t forks = -1) noexcept;

// A run (or a trial) whose threads waited for a CPU at least this % of the time they were ready to
// run, with other programs on the CPUs, was on a busy machine: machine.busy's default threshold, and
// a starved trial in experiments. A quiet 2-core VM measured 2.3-4.4 % with both CPUs used by the
// program (cnn, default threads: kernel threads and the recorder's flusher take their turns), 64 %
// beside one spinning shell per CPU (docs/findings.md, machine.busy).
inline constexpr double kBusyWaitPct = 10.0;

// What a span of the run (its steps, a trial's timed steps) got of the CPUs: the differences of
// two samples over `wall_ns`.
struct CpuLoad {
  bool measured = false;
  double wall_ns = 0;
  double run_ns = 0, wait_ns = 0;  // the process's threads
  double involuntary = 0;          // involuntary context switches
  double children_ns = -1;         // its children's CPU time (-1: unknown)
  double others_ns = -1;           // other programs' CPU time on the allowed CPUs (-1: unknown)
  double cpus = 0;
  // The share of the threads' runnable time spent waiting for a CPU: wait / (run + wait).
  double WaitShare() const { return run_ns + wait_ns > 0 ? wait_ns / (run_ns + wait_ns) : 0; }
  // Threads waiting for a CPU on average (wait / wall), CPUs the process used, CPUs others used.
  double WaitingThreads() const { return wall_ns > 0 ? wait_ns / wall_ns : 0; }
  double OwnCpus() const { return wall_ns > 0 ? run_ns / wall_ns : 0; }
  double OtherCpus() const { return wall_ns > 0 && others_ns >= 0 ? others_ns / wall_ns : -1; }
  // Waited for a CPU at least kBusyWaitPct of its runnable time while other programs used a tenth of
  // the CPUs or more (or their use is unknown): the machine was busy. A program whose own threads
  // (or its recorder's) want more CPUs than there are waits too, on a quiet machine (nanoGPT on 2
  // CPUs, default threads: 11.8 % with 0.01 CPUs used by others): that is not a busy machine.
  bool Starved() const;
};
// Other programs held the CPUs: `other_cpus` (CPUs used on average) at least a tenth of the `cpus`
// (of one CPU at least). The one test of machine.busy, a starved trial and the experiments' note.
inline bool OthersOnCpus(double other_cpus, double cpus) { return other_cpus >= 0.1 * (cpus > 1 ? cpus : 1.0); }

// The load between two samples `wall_ns` apart; unmeasured unless both are.
CpuLoad LoadBetween(const CpuWaitSample& first, const CpuWaitSample& last, double wall_ns);

// The counter names the collector writes and the analyzers read.
enum class CpuWaitWhat : uint8_t { kRun, kWait, kInvoluntary, kChildrenRun, kCpusBusy, kCpus };
inline constexpr std::string_view kCpuWaitCounterPrefix = "trainrx.sched.";
// "trainrx.sched.wait_ns"
std::string CpuWaitCounterName(CpuWaitWhat what);

}  // namespace trainrx::profiler
