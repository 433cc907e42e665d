#include "trainrx/profiler/time.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace trainrx::profiler {

namespace {

bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// The value of the eight ASCII digits at p, or -1 when any of the eight bytes is not a digit
// (SWAR: one load, a digit test on all bytes, three multiplies instead of eight dependent steps).
int64_t EightDigits(const char* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  // Every byte is 0x30..0x39: its high nibble is 3, and still 3 after adding 6.
  constexpr uint64_t kHigh = 0xF0F0F0F0F0F0F0F0ull;
  if (((v & kHigh) | (((v + 0x0606060606060606ull) & kHigh) >> 4)) != 0x3333333333333333ull) return -1;
  v = (v & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;                   // pairs of digits
  v = (v & 0x00FF00FF00FF00FFull) * 6553601 >> 16;               // groups of four
  return static_cast<int64_t>((v & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32);
#else
  int64_t v = 0;
  for (int k = 0; k < 8; ++k) {
    if (!IsDigit(p[k])) return -1;
    v = v * 10 + (p[k] - '0');
  }
  return v;
#endif
}

// The exponent form: rare (some writers emit 1.5e+15); through a double.
std::optional<int64_t> ExponentFormToNs(std::string_view s) {
  std::string tmp(s);
  char* end = nullptr;
  const double us = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size() || !std::isfinite(us)) return std::nullopt;
  const double ns = std::nearbyint(us * 1000.0);
  if (std::fabs(ns) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(ns);
}

}  // namespace

// Called twice per event on every trace (ts and dur): the common form, digits[.digits] with at
// most 18 whole digits, is read without a check per digit (< 10^18 fits) and eight digits at a
// time where eight are there; the whole part is range-checked once at the end.
std::optional<int64_t> ParseMicrosToNs(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  const char* p = s.data();
  const char* const end = p + s.size();
  const bool neg = *p == '-';
  if (neg) ++p;
  const char* const first = p;
  uint64_t whole = 0;
  while (end - p >= 8 && p - first <= 10) {  // at most 18 digits in all
    const int64_t v = EightDigits(p);
    if (v < 0) break;
    whole = whole * 100'000'000 + static_cast<uint64_t>(v);
    p += 8;
  }
  constexpr uint64_t kMaxWhole = std::numeric_limits<int64_t>::max() / 1000;
  for (; p < end && IsDigit(*p); ++p) {
    const auto d = static_cast<uint64_t>(*p - '0');
    // From the 19th digit on (leading zeros), checked: 10^18 and more would not fit.
    if (p - first >= 18 && whole > (kMaxWhole - d) / 10) return std::nullopt;
    whole = whole * 10 + d;
  }
  if (p == first) return std::nullopt;
  if (whole > kMaxWhole) return std::nullopt;  // would overflow as ns
  int64_t frac_ns = 0;
  if (p < end && *p == '.') {
    const char* const frac = ++p;
    constexpr int kScale[3] = {100, 10, 1};
    for (int k = 0; k < 3 && p < end && IsDigit(*p); ++k, ++p) frac_ns += (*p - '0') * kScale[k];
    if (p < end && IsDigit(*p)) {
      if (*p >= '5') ++frac_ns;  // round half up on the first sub-ns digit
      while (++p < end && IsDigit(*p)) {
      }
    }
    if (p == frac) return std::nullopt;
  }
  if (p < end && (*p == 'e' || *p == 'E')) return ExponentFormToNs(s);
  if (p != end) return std::nullopt;
  int64_t ns = static_cast<int64_t>(whole) * 1000;  // whole <= kMaxWhole: fits
  if (__builtin_add_overflow(ns, frac_ns, &ns)) return std::nullopt;  // e.g. 9223372036854775.808
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
