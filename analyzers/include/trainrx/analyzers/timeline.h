// trainrx::analyzers timeline — a few representative steps of a trace, cut down to what a report
// can draw: per rank, one lane per CPU thread (steps, phases, ops to a bounded depth) and per GPU
// stream (kernels, copies), with syncs and data waits marked.
//
// Who calls it: reports/ (the HTML report's timeline). Pure function of the model and its step
// model; no I/O. Threading: reads a finalized Trace, like Analyze().
//
// Why it samples: a 240 MB trace holds ~3 M events; a report that embeds them all is as large as
// the trace and no browser draws it. A window is a whole step (the median one and the slowest one
// of a rank; the first warm-up step when there is one), events narrower than a pixel-sized cutoff
// are left out until the window fits its budget, and every lane says how many it left out. Syncs
// and data waits are kept whatever their length: they are what a reader looks for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainrx/analyzers/analysis.h"
#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// What an event is drawn as. The HTML report's colours and the finding links key on these.
enum class TimelineClass : uint8_t {
  kOp,          // CPU op (aten::...), python frame, other range
  kAnnotation,  // record_function / user range that is not a phase or a step
  kStep,        // ProfilerStep#N, trainrx::step#N
  kData,        // data wait range (enumerate(DataLoader)#...)
  kForward,     // trainrx::forward
  kBackward,    // autograd engine ranges
  kOptimizer,   // Optimizer.step#..., zero_grad
  kRuntime,     // CUDA/HIP runtime or driver call that does not block
  kSync,        // a blocking call (cudaStreamSynchronize, synchronous cudaMemcpy, ...) or a CUPTI sync record
  kKernel,      // GPU kernel
  kMemcpy,      // GPU copy
  kMemset,      // GPU memset
};
const char* TimelineClassName(TimelineClass c);

struct TimelineEvent {
  int64_t ts_ns = 0;   // from the window's start, clipped to the window
  int64_t dur_ns = 0;  // clipped to the window
  uint32_t name = 0;   // index into Timeline::names
  uint8_t depth = 0;   // nesting depth on its lane (0: outermost)
  TimelineClass cls = TimelineClass::kOp;
};

struct TimelineLane {
  std::string label;  // "thread 1234 (python)", "GPU 0 stream 7"
  bool gpu = false;
  std::vector<TimelineEvent> events;  // by start time
  int64_t left_out = 0;  // events of the window on this lane that were not kept (too narrow, too deep)
};

struct TimelineWindow {
  std::string label;  // "rank 0 · step 12 (median)"
  std::string why;    // "median", "slowest", "warm-up", "whole trace"
  int32_t rank = 0;
  int64_t start_ns = 0;  // trace time of the window's start
  int64_t dur_ns = 0;
  int32_t step_index = -1;  // index into StepModel::steps (-1: a warm-up step or no steps)
  std::vector<TimelineLane> lanes;
  int64_t events_in_window = 0;  // on every lane, before sampling
  int64_t events_kept = 0;
};

struct Timeline {
  std::vector<TimelineWindow> windows;
  std::vector<std::string> names;  // event names, shared by all windows
  int32_t ranks_total = 0;         // ranks in the trace
  std::vector<int32_t> ranks_shown;
};

struct TimelineOptions {
  int64_t events_per_window = 6000;  // budget of kept events per window, over all its lanes
  int max_depth = 6;                 // CPU nesting levels drawn (0..max_depth-1)
  int max_ranks = 2;                 // rank 0 (or the first) and the rank with the slowest median step
};

Timeline BuildTimeline(const profiler::Trace& trace, const StepModel& steps,
                       const TimelineOptions& options = TimelineOptions());

}  // namespace trainrx::analyzers
