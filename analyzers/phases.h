// The step phases a CPU range stands for (steps.cc's breakdown; the timeline colours ranges by
// it). Private to analyzers/.
#pragma once

#include <string_view>

namespace trainrx::analyzers {

enum Phase : int { kForward = 0, kBackward = 1, kOptimizer = 2, kData = 3, kNumPhases = 4 };

// The phase a range's name opens, or -1 (an ordinary op: forward when on the step's thread).
//   "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" -> kData
//   "autograd::engine::evaluate_function: AddmmBackward0"         -> kBackward
//   "AddmmBackward0" (PyTorch <= 1.9, on the autograd thread)     -> kBackward
int PhaseOf(std::string_view name);

// A Python DataLoader's batch fetched from its worker processes (the loop's wait for them and the
// batch's crossing): "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__". A
// single-process iterator (num_workers=0) loads in the loop itself.
inline bool IsWorkerLoaderRange(std::string_view name) {
  return name.starts_with("enumerate(DataLoader)#") && name.find("_MultiProcessingDataLoaderIter") != std::string_view::npos;
}
inline bool IsSingleProcessLoaderRange(std::string_view name) {
  return name.starts_with("enumerate(DataLoader)#") && name.find("_SingleProcessDataLoaderIter") != std::string_view::npos;
}

// An autograd node run by the engine, in any PyTorch version's spelling.
bool IsAutogradNode(std::string_view name);

}  // namespace trainrx::analyzers
