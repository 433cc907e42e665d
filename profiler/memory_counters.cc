#include "trainrx/profiler/memory_counters.h"

#include <string>

namespace trainrx::profiler {
namespace {

constexpr std::string_view kWhat[] = {"allocated", "reserved", "bytes", "oom", "addr"};

}  // namespace

std::string MemoryCounterName(MemoryWhat what, std::string_view device) {
  std::string s(kMemoryCounterPrefix);
  s += kWhat[static_cast<int>(what)];
  s += '[';
  s += device;
  s += ']';
  return s;
}

std::optional<MemoryCounterId> ParseMemoryCounterName(std::string_view name) {
  if (name.substr(0, kMemoryCounterPrefix.size()) != kMemoryCounterPrefix || name.empty() || name.back() != ']')
    return std::nullopt;
  name.remove_prefix(kMemoryCounterPrefix.size());
  const size_t open = name.find('[');
  if (open == std::string_view::npos || open + 2 > name.size()) return std::nullopt;
  for (int w = 0; w < 5; ++w) {
    if (name.substr(0, open) == kWhat[w])
      return MemoryCounterId{static_cast<MemoryWhat>(w), std::string(name.substr(open + 1, name.size() - open - 2))};
  }
  return std::nullopt;
}

std::string MemoryDeviceName(int64_t type, int64_t id) {
  switch (type) {
    case 0: return "cpu";
    case 1: return "cuda:" + std::to_string(id < 0 ? 0 : id);
    case 12: return "xpu:" + std::to_string(id < 0 ? 0 : id);
    case 13: return "mps";
    default: return "device" + std::to_string(type) + ":" + std::to_string(id);
  }
}

}  // namespace trainrx::profiler
