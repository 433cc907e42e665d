// torch.profiler's own backend (Kineto, CPU activity, no shapes) started on this thread, for the
// benches that put it beside our probe (probe_overhead.cc, per_op_instructions.cc). False where
// this LibTorch cannot start it (a build without the profiler): the caller leaves that mode out.
#pragma once

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <exception>
#include <set>

inline bool StartTorchProfiler() {
  namespace tprof = torch::autograd::profiler;
  try {
    const tprof::ProfilerConfig config(tprof::ProfilerState::KINETO);
    const std::set<tprof::ActivityType> activities{tprof::ActivityType::CPU};
    tprof::prepareProfiler(config, activities);
    tprof::enableProfiler(config, activities);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch.profiler (Kineto) mode left out: %s\n", e.what());
    return false;
  }
}
