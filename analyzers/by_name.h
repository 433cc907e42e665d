// A function of an event's name, asked once per name id: a run repeats its names every step, and
// prefix tests per event add up over millions of them (the phase sweep, the replay's frames).
// Private to analyzers/.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "trainrx/profiler/trace.h"

namespace trainrx::analyzers {

// `classify(name)` -> a byte below 0x80, remembered per name id.
template <typename Classify>
class ByName {
 public:
  ByName(const profiler::Trace& trace, Classify classify)
      : trace_(trace), classify_(std::move(classify)), memo_(trace.strings.size(), 0) {}
  uint8_t operator()(const profiler::Event& e) {
    if (e.name >= memo_.size()) return classify_(trace_.Name(e));
    uint8_t& m = memo_[e.name];
    if (m == 0) m = static_cast<uint8_t>(kAsked | classify_(trace_.Name(e)));
    return static_cast<uint8_t>(m & ~kAsked);
  }

 private:
  static constexpr uint8_t kAsked = 0x80;
  const profiler::Trace& trace_;
  Classify classify_;
  std::vector<uint8_t> memo_;  // per name id: kAsked | its value, 0 before it is asked
};

}  // namespace trainrx::analyzers
