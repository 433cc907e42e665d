#include "trainrx/profiler/cpu_wait.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

namespace trainrx::profiler {
namespace {

// The lines of a /proc file, read through a small stack buffer (no allocation: the collector
// calls this at step boundaries of the program it observes).
class LineReader {
 public:
  explicit LineReader(const char* path) : fd_(::open(path, O_RDONLY | O_CLOEXEC)) {}
  LineReader(int dir, const char* path) : fd_(::openat(dir, path, O_RDONLY | O_CLOEXEC)) {}
  ~LineReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  bool ok() const { return fd_ >= 0; }
  // The next line without its newline, NUL-terminated in the buffer (a line longer than the buffer
  // comes in pieces); nullptr at the end.
  const char* Next() {
    for (;;) {
      char* nl = static_cast<char*>(std::memchr(buf_ + start_, '\n', end_ - start_));
      if (nl != nullptr) {
        *nl = '\0';
        const char* line = buf_ + start_;
        start_ = static_cast<size_t>(nl - buf_) + 1;
        return line;
      }
      if (start_ > 0) {  // keep the partial line, read more behind it
        std::memmove(buf_, buf_ + start_, end_ - start_);
        end_ -= start_;
        start_ = 0;
      }
      if (end_ == sizeof(buf_) - 1) {  // a line longer than the buffer: hand out its piece
        buf_[end_] = '\0';
        end_ = 0;
        return buf_;
      }
      const ssize_t n = fd_ < 0 ? 0 : ::read(fd_, buf_ + end_, sizeof(buf_) - 1 - end_);
      if (n <= 0) {
        if (end_ == 0) return nullptr;
        buf_[end_] = '\0';  // the last line, without a newline
        end_ = 0;
        return buf_;
      }
      end_ += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  char buf_[4096];
  size_t start_ = 0, end_ = 0;
};

// Reads up to `n` unsigned integers separated by spaces from `s`; returns how many.
int ReadNumbers(const char* s, unsigned long long* out, int n) {
  int got = 0;
  while (got < n && *s != '\0') {
    while (*s == ' ') ++s;
    if (*s < '0' || *s > '9') break;
    unsigned long long v = 0;
    while (*s >= '0' && *s <= '9') v = v * 10 + static_cast<unsigned long long>(*s++ - '0');
    out[got++] = v;
  }
  return got;
}

// Calls fn(number, name, folder) for every entry of the folder `path` whose name is a number (a
// pid, a tid), by getdents64 (opendir allocates); false when the folder cannot be opened.
template <typename F>
bool ForEachNumbered(const char* path, F&& fn) {
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char ents[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, ents, sizeof(ents));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
      unsigned short reclen = 0;
      std::memcpy(&reclen, ents + off + 16, sizeof(reclen));
      const char* name = ents + off + 19;
      off += reclen;
      unsigned long long number = 0;
      if (name[0] >= '0' && name[0] <= '9' && ReadNumbers(name, &number, 1) == 1) fn(number, name, dir);
    }
  }
  ::close(dir);
  return true;
}

// Sums schedstat over the process's threads.
bool SumThreads(CpuWaitSample* s) {
  bool any = false;
  const bool listed = ForEachNumbered("/proc/self/task", [&](unsigned long long, const char* name, int dir) {
    // "<tid>/schedstat" in the open folder (snprintf was half of a sample's instructions).
    char path[64];
    const size_t n = std::min(std::strlen(name), sizeof(path) - sizeof("/schedstat"));
    std::memcpy(path, name, n);
    std::memcpy(path + n, "/schedstat", sizeof("/schedstat"));
    LineReader r(dir, path);
    const char* line = r.ok() ? r.Next() : nullptr;
    unsigned long long v[2];
    if (line == nullptr || ReadNumbers(line, v, 2) != 2) return;  // a thread that just ended
    s->run_ns += static_cast<int64_t>(v[0]);
    s->wait_ns += static_cast<int64_t>(v[1]);
    any = true;
  });
  return listed && any;
}

// Field `n` (1-based, as proc(5) numbers them; n >= 3) of /proc/<pid>/stat, and the one after it:
// false when the process is gone. The name (field 2) may hold spaces: fields count from its ')'.
bool StatFields(unsigned long long pid, int n, unsigned long long* out) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%llu/stat", pid);
  LineReader s(path);
  const char* text = s.ok() ? s.Next() : nullptr;
  const char* close = text != nullptr ? std::strrchr(text, ')') : nullptr;
  if (close == nullptr || close[1] == '\0') return false;
  const char* f = close + 2;  // field 3 (state)
  for (int field = 3; field < n; ++field) {
    f = std::strchr(f, ' ');
    if (f == nullptr) return false;
    ++f;
  }
  return ReadNumbers(f, out, 2) == 2;
}

// A child's CPU time (utime + stime, fields 14 and 15); 0 when it is gone.
int64_t ChildRunNs(unsigned long long pid, int64_t tick_ns) {
  unsigned long long t[2];
  return StatFields(pid, 14, t) ? static_cast<int64_t>(t[0] + t[1]) * tick_ns : 0;
}

// The children found by a scan of /proc (ppid, field 4, is this process), kept between calls.
struct ChildScan {
  std::mutex mu;
  int64_t forks = -2;     // the fork count at the last scan
  int64_t scanned_ns = 0;
  unsigned long long pids[256];
  int n = 0;
};
ChildScan& Scan() {
  static ChildScan* s = new ChildScan();  // never destroyed: read at exit
  return *s;
}
void RescanChildren(ChildScan& s) {
  s.n = 0;
  const unsigned long long self = static_cast<unsigned long long>(::getpid());
  ForEachNumbered("/proc", [&](unsigned long long pid, const char*, int) {
    unsigned long long ppid[2] = {0, 0};  // fields 4 (ppid) and 5: StatFields reads two
    if (pid != self && s.n < 256 && StatFields(pid, 4, ppid) && ppid[0] == self) s.pids[s.n++] = pid;
  });
}

int64_t MonotonicNs() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The CPU time of the live children: listed by the kernel (/proc/<pid>/task/<pid>/children,
// CONFIG_PROC_CHILDREN), else found by a scan of /proc (see ReadCpuWait); 0 with no fork; -1 unknown.
int64_t ChildrenRunNs(int64_t forks, int64_t tick_ns) {
  if (forks == 0) return 0;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/children", static_cast<int>(::getpid()));
  LineReader r(path);
  if (r.ok()) {
    int64_t total = 0;
    const char* line = r.Next();
    for (const char* p = line; p != nullptr && *p != '\0';) {
      while (*p == ' ') ++p;
      unsigned long long pid = 0;
      if (ReadNumbers(p, &pid, 1) != 1) break;
      while (*p >= '0' && *p <= '9') ++p;
      total += ChildRunNs(pid, tick_ns);
    }
    return total;
  }
  if (forks < 0) return -1;
  ChildScan& s = Scan();
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t now = MonotonicNs();
  if (forks != s.forks || now - s.scanned_ns >= 2'000'000'000) {
    RescanChildren(s);
    s.forks = forks, s.scanned_ns = now;
  }
  int64_t total = 0;
  for (int i = 0; i < s.n; ++i) total += ChildRunNs(s.pids[i], tick_ns);
  return total;
}

// The allowed CPUs' busy time (/proc/stat "cpuN user nice system idle iowait irq softirq steal").
int64_t CpusBusyNs(const cpu_set_t& allowed, int64_t tick_ns) {
  LineReader r("/proc/stat");
  if (!r.ok()) return -1;
  int64_t busy = 0;
  bool any = false;
  while (const char* line = r.Next()) {
    if (std::strncmp(line, "cpu", 3) != 0) break;  // the per-CPU lines come first
    if (line[3] < '0' || line[3] > '9') continue;   // the "cpu " total line
    unsigned long long cpu = 0;
    if (ReadNumbers(line + 3, &cpu, 1) != 1) continue;
    if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) continue;
    const char* rest = line + 3;
    while (*rest >= '0' && *rest <= '9') ++rest;
    unsigned long long f[8];
    if (ReadNumbers(rest, f, 8) != 8) continue;
    busy += static_cast<int64_t>(f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * tick_ns;
    any = true;
  }
  return any ? busy : -1;
}

}  // namespace

CpuWaitSample ReadCpuWait(int64_t forks) noexcept {
  CpuWaitSample s;
  if (!SumThreads(&s)) return s;
  s.ok = true;
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) s.involuntary = ru.ru_nivcsw;
  const long hz = ::sysconf(_SC_CLK_TCK);
  const int64_t tick_ns = hz > 0 ? 1000000000 / hz : 10000000;
  s.children_run_ns = ChildrenRunNs(forks, tick_ns);
  // Children that ended and were waited for (a DataLoader's workers at the end of an epoch): their CPU
  // moves from the live list to RUSAGE_CHILDREN, so the figure never falls (their time would else be
  // counted as other programs').
  struct rusage done {};
  if (s.children_run_ns >= 0 && ::getrusage(RUSAGE_CHILDREN, &done) == 0)
    s.children_run_ns += (static_cast<int64_t>(done.ru_utime.tv_sec) + done.ru_stime.tv_sec) * 1000000000 +
                         (static_cast<int64_t>(done.ru_utime.tv_usec) + done.ru_stime.tv_usec) * 1000;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    s.cpus = CPU_COUNT(&allowed);
    s.cpus_busy_ns = CpusBusyNs(allowed, tick_ns);
  } else {
    s.cpus_busy_ns = -1;
  }
  return s;
}

CpuLoad LoadBetween(const CpuWaitSample& first, const CpuWaitSample& last, double wall_ns) {
  CpuLoad l;
  if (!first.ok || !last.ok || wall_ns <= 0) return l;
  l.measured = true;
  l.wall_ns = wall_ns;
  // A thread that ended between the samples takes its figures with it: never below zero.
  l.run_ns = std::max(0.0, static_cast<double>(last.run_ns - first.run_ns));
  l.wait_ns = std::max(0.0, static_cast<double>(last.wait_ns - first.wait_ns));
  l.involuntary = std::max(0.0, static_cast<double>(last.involuntary - first.involuntary));
  l.cpus = static_cast<double>(last.cpus);
  const bool children = first.children_run_ns >= 0 && last.children_run_ns >= 0;
  if (children) l.children_ns = std::max(0.0, static_cast<double>(last.children_run_ns - first.children_run_ns));
  if (first.cpus_busy_ns >= 0 && last.cpus_busy_ns >= 0) {
    const double busy = static_cast<double>(last.cpus_busy_ns - first.cpus_busy_ns);
    l.others_ns = std::max(0.0, busy - l.run_ns - (children ? l.children_ns : 0));
  }
  return l;
}

bool CpuLoad::Starved() const {
  if (!measured || 100 * WaitShare() < kBusyWaitPct) return false;
  const double others = OtherCpus();
  return others < 0 || OthersOnCpus(others, cpus);
}

std::string CpuWaitCounterName(CpuWaitWhat what) {
  static constexpr const char* kWhat[] = {"run_ns", "wait_ns", "involuntary", "children_run_ns", "cpus_busy_ns", "cpus"};
  return std::string(kCpuWaitCounterPrefix) + kWhat[static_cast<int>(what)];
}

}  // namespace trainrx::profiler
