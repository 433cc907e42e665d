// The built-in sample trace (examples/sample_cpu_training.json.gz, embedded at build time):
// a PyTorch CPU training loop profiled with torch.autograd.profiler, with num_workers=0, a costly
// dataset, .item() every step and zero_grad() writing zeros. Used by `trainrx analyze --sample`.
#pragma once

#include <string_view>

namespace trainrx::cli {
inline constexpr const char* kSampleTraceName = "sample_cpu_training.json.gz";
std::string_view SampleTrace();
}  // namespace trainrx::cli
