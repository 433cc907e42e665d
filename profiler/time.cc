#include "trainrx/profiler/time.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace trainrx::profiler {

std::optional<int64_t> ParseMicrosToNs(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  bool neg = false;
  size_t i = 0;
  if (s[0] == '-') {
    neg = true;
    i = 1;
  }
  // Fast exact path: digits[.digits]
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    const int d = s[i] - '0';
    if (whole > (kMax / 1000 - d) / 10) return std::nullopt;  // would overflow as ns
    whole = whole * 10 + d;
  }
  if (digits == 0) return std::nullopt;
  int64_t frac_ns = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int scale = 100;
    size_t frac_digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++frac_digits) {
      const int d = s[i] - '0';
      if (scale > 0) {
        frac_ns += d * scale;
        scale /= 10;
      } else if (scale == 0) {
        if (d >= 5) ++frac_ns;  // round half up on the first sub-ns digit
        scale = -1;
      }
    }
    if (frac_digits == 0) return std::nullopt;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    // Exponent form: rare (some writers emit 1.5e+15); fall back to a double.
    std::string tmp(s);
    char* end = nullptr;
    const double us = std::strtod(tmp.c_str(), &end);
    if (end != tmp.c_str() + tmp.size() || !std::isfinite(us)) return std::nullopt;
    const double ns = std::nearbyint(us * 1000.0);
    if (std::fabs(ns) >= 9.2e18) return std::nullopt;
    return static_cast<int64_t>(ns);
  }
  if (i != s.size()) return std::nullopt;
  const int64_t ns = whole * 1000 + frac_ns;
  return neg ? -ns : ns;
}

double NsToMicrosDouble(int64_t ns) {
  // Below 2^53 both ns and 1000 are exact doubles and IEEE division rounds the exact quotient once.
  constexpr int64_t k2p53 = int64_t{1} << 53;
  if (ns > -k2p53 && ns < k2p53) return static_cast<double>(ns) / 1000.0;
  // Above, |ns / 1000| >= 2^43, so a double's step there is >= 2^-9 µs and the rounding midpoints are
  // multiples of 2^-10. whole is exact (< 2^53); frac / 1000.0 is off by < 2^-53. The exact value
  // whole + frac/1000 is either a midpoint itself (then frac/1000 is a multiple of 1/8 and exact, so
  // the sum ties the same way) or at least 8/1024000 from one, far more than that error: one
  // correctly rounded addition gives the correctly rounded result (checked against strtod in tests).
  const int64_t whole = ns / 1000, frac = ns % 1000;
  return static_cast<double>(whole) + static_cast<double>(frac) / 1000.0;
}

MicrosSpan HtaRoundedMicros(int64_t ts_ns, int64_t dur_ns) {
  const double ts = NsToMicrosDouble(ts_ns);
  const double end = ts + NsToMicrosDouble(dur_ns);
  return {static_cast<int64_t>(std::ceil(ts)), static_cast<int64_t>(std::floor(end))};
}

std::string_view FormatNsAsMicros(int64_t ns, char* buf) {
  char* p = buf;
  uint64_t mag;
  if (ns < 0) {
    *p++ = '-';
    mag = static_cast<uint64_t>(-(ns + 1)) + 1;
  } else {
    mag = static_cast<uint64_t>(ns);
  }
  p = std::to_chars(p, buf + 28, mag / 1000).ptr;
  const unsigned frac = static_cast<unsigned>(mag % 1000);
  if (frac != 0) {
    *p++ = '.';
    *p++ = static_cast<char>('0' + frac / 100);
    *p++ = static_cast<char>('0' + (frac / 10) % 10);
    *p++ = static_cast<char>('0' + frac % 10);
  }
  return {buf, static_cast<size_t>(p - buf)};
}

}  // namespace trainrx::profiler
