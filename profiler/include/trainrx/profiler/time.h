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

// Inverse for writing: ns -> "µs with three decimals" text without rounding ("1234.567").
// Writes into buf (>= 32 bytes) and returns the view.
std::string_view FormatNsAsMicros(int64_t ns, char* buf);

}  // namespace trainrx::profiler
