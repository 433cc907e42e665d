// trainrx::probes ticks — the clock the observer reads at the start and the end of every recorded
// range, and the map from it to the trace's clock.
//
// Who uses it: the observer (observer.cc) stores ticks in Rec (Collector::NowTicks()); the
// collector's drain (collector.cc) turns them into the trace's clock, the wall clock in ns
// (NowNs(): CLOCK_REALTIME, the clock of Kineto's traces and of our CUPTI records), with a
// TickMap, so nothing past a drain sees a tick. Config samples, the step window and the GPU
// records keep NowNs().
//
// Why ticks: two clock_gettime(CLOCK_REALTIME) calls per op were the largest single part of the
// collector's own per-op cost (issue 34.13; docs/benchmarks.md, "Instructions per op"): each is a
// vDSO call of some 50-70 instructions around a fenced TSC read, where rdtsc is one instruction.
// torch.profiler does the same (c10::getApproximateTime() reads the TSC, and its
// ApproximateClockToUnixTimeConverter maps the ticks to epoch ns after the run).
//
// Source (TickSource): the TSC on x86-64 where the kernel's clocksource is "tsc", i.e. the kernel
// found it invariant and synchronized across CPUs (on a machine whose TSC failed those checks, or
// a VM on kvm-clock or hpet, it is not used); elsewhere CLOCK_REALTIME ns, and the map is the identity.
//
// Threading: the Read* functions on any thread. A TickMap is a value: the collector keeps one under
// its lock and each drain converts with its own copy.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace trainrx::probes {

// Wall clock in ns since the epoch (Kineto also uses the system clock, so our traces and a
// PyTorch-profiler trace of the same run line up; CUPTI is told to use this clock too).
int64_t NowNs() noexcept;

enum class TickSource : uint8_t {
  kRealtime,  // ticks are NowNs()
  kTsc,       // ticks are the TSC (rdtsc)
};

// The source this machine offers: kTsc where the kernel's clocksource is "tsc" (read once from
// /sys/devices/system/clocksource/clocksource0/current_clocksource), else kRealtime.
TickSource DetectTickSource() noexcept;

// Not serialized (no lfence), as c10's getApproximateTime(): it may run a few cycles early or late
// against the instructions around it, which is nothing next to an op.
inline int64_t ReadTsc() noexcept {
#if defined(__x86_64__)
  return static_cast<int64_t>(__rdtsc());
#else
  return 0;
#endif
}

inline int64_t ReadTicks(TickSource source) noexcept { return source == TickSource::kTsc ? ReadTsc() : NowNs(); }

// Ticks -> ns by pairs (ticks, ns) read together, increasing in both: piecewise linear between
// them, so a tick between two pairs is placed within the pairs' own error (the width of the read,
// tens of ns), however long the run; pairs read at every drain follow the kernel's slewing of
// CLOCK_REALTIME (NTP), where one slope from the start would drift by its ppm (1 ppm: 3.6 ms an
// hour) away from the GPU records and the other ranks. Outside the pairs, the slope of the whole
// span (the longest baseline) extends the nearest pair.
//
// Example: pairs (1000, 5'000'000'000) and (3000, 5'000'001'000) (2 ticks a ns): 2000 -> 5'000'000'500,
// 4000 -> 5'000'001'500. With TickSource::kRealtime: ToNs(t) == t.
class TickMap {
 public:
  struct Point {
    int64_t ticks = 0;
    int64_t ns = 0;
  };
  // At most this many pairs (64 KB); past it the last pair moves instead (hours of 2 s flushes).
  static constexpr size_t kMaxPoints = 4096;

  explicit TickMap(TickSource source = TickSource::kRealtime) : source_(source) {}
  // A map for `source` with two pairs read `calibrate_ns` apart (kTsc; spins that long), so that
  // it converts before any drain adds a pair. It holds one pair only if the wall clock was set
  // back in between: then it cannot convert (ToNs returns the ticks), and the caller falls back.
  static TickMap Calibrated(TickSource source, int64_t calibrate_ns = 1'000'000) noexcept;

  TickSource source() const { return source_; }
  // Adds a pair. One not after the last in both ticks and ns (the wall clock was set back) is
  // dropped: the map stays monotonic, and ticks keep their order.
  void Add(Point p) noexcept;
  int64_t ToNs(int64_t ticks) const noexcept;
  const std::vector<Point>& points() const { return points_; }

 private:
  TickSource source_;
  std::vector<Point> points_;
  mutable size_t hint_ = 0;  // the segment of the last conversion: drains convert in near-time order
  mutable double slope_ = 0;  // ns per tick of segment hint_, when slope_valid_ (Add clears it)
  mutable bool slope_valid_ = false;
};

// A pair read now: tsc, clock_gettime, tsc, the narrowest of a few tries (a read preempted in the
// middle is wide), ticks at its middle. With kRealtime, {ns, ns}.
TickMap::Point ReadTickPair(TickSource source) noexcept;

}  // namespace trainrx::probes
