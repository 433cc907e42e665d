// trainrx::profiler memory counters — how the trace model holds memory: allocator figures as
// counters (Trace::counters) on the thread that allocated, named "trainrx.memory.<what>[<device>]":
//   allocated  bytes allocated by the allocator of <device> after the event (torch.profiler's
//              "Total Allocated"; on CPU counted from the moment profiling started)
//   reserved   bytes the caching allocator holds from the device ("Total Reserved"; 0 on CPU)
//   bytes      the event's own size: > 0 an allocation, < 0 a free
//   oom        an allocation that failed: the bytes it asked for ("[OutOfMemory]")
//   addr       the event's block address ("Addr"), so that a free can be matched to its allocation
//              (a user-space address is below 2^53: exact as a double)
// The reader turns torch.profiler's profile_memory=True instant events ("[memory]",
// "[OutOfMemory]", args Total Allocated / Total Reserved / Bytes / Device Type / Device Id) into
// these; the writer writes counters back as Chrome "C" events, which read back the same. One
// naming, so every reader and analysis of memory agrees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace trainrx::profiler {

enum class MemoryWhat : uint8_t { kAllocated, kReserved, kBytes, kOom, kAddr };

inline constexpr std::string_view kMemoryCounterPrefix = "trainrx.memory.";

// "trainrx.memory.allocated[cuda:0]"
std::string MemoryCounterName(MemoryWhat what, std::string_view device);

struct MemoryCounterId {
  MemoryWhat what = MemoryWhat::kAllocated;
  std::string device;  // "cpu", "cuda:0"
};
// nullopt for any other counter.
std::optional<MemoryCounterId> ParseMemoryCounterName(std::string_view name);

// c10's DeviceType and index as Kineto writes them ("Device Type", "Device Id") -> "cpu",
// "cuda:0" (ROCm builds report their GPUs as CUDA), "xpu:0", "mps", else "device<T>:<I>".
std::string MemoryDeviceName(int64_t type, int64_t id);
// Its inverse, for writing "[memory]" events back: "cuda:1" -> {1, 1}, "cpu" -> {0, -1}; nullopt for
// a name MemoryDeviceName never makes.
std::optional<std::pair<int64_t, int64_t>> ParseMemoryDevice(std::string_view device);

// What the process's malloc holds now, in arenas and in mmapped chunks (CPU tensors above glibc's
// mmap threshold are the latter): glibc's mallinfo2, which walks the arenas' free lists
// (microseconds on a training process's heap). -1 where it is not available (glibc < 2.33, other
// C libraries). The collector's heap samples and the workloads' per-step figures both use it.
int64_t HeapInUseBytes() noexcept;

}  // namespace trainrx::profiler
