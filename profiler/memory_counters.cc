#include "trainrx/profiler/memory_counters.h"

#include <malloc.h>

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

std::optional<std::pair<int64_t, int64_t>> ParseMemoryDevice(std::string_view device) {
  const auto number = [](std::string_view s) -> std::optional<int64_t> {
    if (s.empty() || s.size() > 9) return std::nullopt;
    int64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  if (device == "cpu") return std::pair<int64_t, int64_t>{0, -1};
  if (device == "mps") return std::pair<int64_t, int64_t>{13, -1};
  for (const auto& [prefix, type] : {std::pair<std::string_view, int64_t>{"cuda:", 1}, {"xpu:", 12}}) {
    if (!device.starts_with(prefix)) continue;
    if (const auto id = number(device.substr(prefix.size()))) return std::pair<int64_t, int64_t>{type, *id};
    return std::nullopt;
  }
  if (device.starts_with("device")) {
    const size_t colon = device.find(':');
    const auto type = number(device.substr(6, colon == std::string_view::npos ? std::string_view::npos : colon - 6));
    if (!type || colon == std::string_view::npos) return std::nullopt;
    const std::string_view rest = device.substr(colon + 1);
    if (rest == "-1") return std::pair<int64_t, int64_t>{*type, -1};
    if (const auto id = number(rest)) return std::pair<int64_t, int64_t>{*type, *id};
  }
  return std::nullopt;
}

int64_t HeapInUseBytes() noexcept {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

}  // namespace trainrx::profiler
