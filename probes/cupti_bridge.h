// The probes' side of GPU collection: finds libtrainrx_cupti.so (already injected by the CUDA
// driver, or loaded here), forwards external correlation ids from the observer, and collects its
// records into the collector at finish. Torch-free, CUPTI-free (only dlopen/dlsym), so the probes
// build and run the same with or without the CUDA toolkit: without it, or without a device,
// Start() records why in the trace ("gpu_collection") and the session continues CPU-only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace trainrx::probes {

class Collector;
class ProcessSession;

class CuptiBridge {
 public:
  static void Start(ProcessSession& session) noexcept;
  static bool Active() noexcept { return active_.load(std::memory_order_relaxed); }
  static bool PushExternalId(int64_t id) noexcept;
  static void PopExternalId() noexcept;
  static void Collect(Collector& collector) noexcept;
  // Where the backend library is expected: TRAINRX_CUPTI_LIB, else next to the probe library.
  static std::string LibraryPath();

 private:
  static std::atomic<bool> active_;
};

}  // namespace trainrx::probes
