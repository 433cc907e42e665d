// A rank's CPU-wait samples (private to analyzers/): the cumulative figures our collector writes as
// "trainrx.sched.<what>" counters at step boundaries (profiler/cpu_wait.h), and what a span of the
// run got of the CPUs from them. machine.busy reads the steady steps' span; the step model asks
// whether slow first steps did more work (warm-up) or waited for a CPU (contention).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "trainrx/profiler/cpu_wait.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// One process's samples: per key, (ts, value) sorted by time.
struct CpuWaitSeries {
  std::map<profiler::CpuWaitWhat, std::vector<std::pair<int64_t, double>>> by_key;
  // The value of `what` at ts: the last sample at or before it (the collector stores a sample only
  // when it changed), else the first.
  std::optional<double> At(profiler::CpuWaitWhat what, int64_t ts) const;
  profiler::CpuWaitSample SampleAt(int64_t ts) const;
  // The sample time nearest `ts`, from the run-time series: the process ran between any two
  // samples, so it changes at every one (the collector stores a sample only when it changed: on a
  // quiet 16-core H200 host the wait stayed put after the third sample, and a lookup by the wait's
  // own times found no sample inside the steps, issue 62).
  int64_t Nearest(int64_t ts) const;
  // The load between the samples nearest `begin` and `end`; `covered` (optional) the share of
  // [begin, end) those samples span. Unmeasured when both are one sample.
  profiler::CpuLoad Between(int64_t begin, int64_t end, double* covered = nullptr) const;
};

// The rank's series: of its processes (a rank is one process; forked loader workers stop
// recording, but keep the series apart should one write), the one with the most samples; nullopt
// with fewer than two (other tools' traces, older recordings).
std::optional<CpuWaitSeries> CpuWaitSeriesOfRank(const profiler::Trace& trace, int32_t rank);

}  // namespace trainrx::analyzers
