// trainrx::profiler time helpers: the ONE place trace time units become int64 nanoseconds.
//
// Kineto writes microseconds as JSON numbers, integers (older traces) or decimals with up to
// three fractional digits (ns resolution, since 2023). A double cannot hold an epoch timestamp in
// µs with ns precision (1.7e18 ns > 2^53), so we parse the number's text, not a double.
//   "1712195495505543.250" -> 1712195495505543250
//   "15"                   -> 15000
//   "0.5"                  -> 500
//   "1.23456"              -> 1235  (sub-ns digits rounded half up)
//   "1.5e3"                -> 1500000 (exponent form: exact within double precision)
// Returns std::nullopt for text that is not a number or overflows int64 nanoseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace trainrx::profiler {

std::optional<int64_t> ParseMicrosToNs(std::string_view number_text);

// What the reader accepts, so that no time arithmetic can overflow int64 (fuzzed input
// with timestamps near +-9.2e18 ns made signed overflow, undefined behaviour, at 12 sites).
// Timestamps and baseTimeNanoseconds within +-2.5e18 ns (epoch nanoseconds reach 2.5e18 in 2049),
// so an absolute time is within [-5e18, 5e18] and a difference of two never overflows; a duration
// at most 1e15 ns (11.6 days: a whole training run fits); and all the events of a read together
// at most 2^62 ns of duration, so any sum of durations an analysis forms fits.
inline constexpr int64_t kMaxAbsTimeNs = 2'500'000'000'000'000'000;
inline constexpr int64_t kMaxDurationNs = 1'000'000'000'000'000;
inline constexpr int64_t kMaxTotalDurationNs = int64_t{1} << 62;

// The IEEE double nearest to ns / 1000, i.e. exactly what a JSON reader that parses numbers as
// doubles (strtod, Python's json/float(), pandas) gets from the µs text FormatNsAsMicros(ns) writes.
// Such readers lose the ns digits of epoch timestamps: 1712195495519689047 ns -> 1712195495519689.0
// (a double holds only quarter-µs steps at 1.7e15 µs). Used to reproduce other tools' numbers.
double NsToMicrosDouble(int64_t ns);

// How Holistic Trace Analysis (HTA 0.5.0 .. 0.6.1, hta/common/trace_parser.py,
// round_down_time_stamps) turns an event with float µs times into integer µs: with the file's "ts" and
// "dur" as doubles, end = ts + dur (double sum), then ts = ceil(ts), end = floor(end), dur = end - ts.
// A sub-µs event can come out with dur = -1 µs. ts_ns / dur_ns are the values as written in the file
// (relative to baseTimeNanoseconds when the file has one).
struct MicrosSpan {
  int64_t ts_us = 0, end_us = 0;
};
MicrosSpan HtaRoundedMicros(int64_t ts_ns, int64_t dur_ns);

// Inverse for writing: ns -> "µs with three decimals" text without rounding ("1234.567").
// Writes into buf (>= 32 bytes) and returns the view.
std::string_view FormatNsAsMicros(int64_t ns, char* buf);

}  // namespace trainrx::profiler
