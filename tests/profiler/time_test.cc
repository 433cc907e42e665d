#include "trainrx/profiler/time.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>

namespace trainrx::profiler {
namespace {

TEST(ParseMicrosToNsTest, IntegersAndDecimalsAreExact) {
  EXPECT_EQ(ParseMicrosToNs("15"), 15000);
  EXPECT_EQ(ParseMicrosToNs("0.5"), 500);
  // An epoch timestamp with ns digits: a double would lose the last digits.
  EXPECT_EQ(ParseMicrosToNs("1712195495505543.250"), 1712195495505543250);
  EXPECT_EQ(ParseMicrosToNs("1712195495505543.251"), 1712195495505543251);
  EXPECT_EQ(ParseMicrosToNs("-2.5"), -2500);
}

TEST(ParseMicrosToNsTest, SubNanosecondDigitsRoundHalfUp) {
  EXPECT_EQ(ParseMicrosToNs("1.23449"), 1234);
  EXPECT_EQ(ParseMicrosToNs("1.23450"), 1235);
}

TEST(ParseMicrosToNsTest, ExponentForm) { EXPECT_EQ(ParseMicrosToNs("1.5e3"), 1500000); }

TEST(ParseMicrosToNsTest, RejectsNonNumbersAndOverflow) {
  EXPECT_FALSE(ParseMicrosToNs(""));
  EXPECT_FALSE(ParseMicrosToNs("abc"));
  EXPECT_FALSE(ParseMicrosToNs("1."));
  EXPECT_FALSE(ParseMicrosToNs("\"12\""));
  EXPECT_FALSE(ParseMicrosToNs("99999999999999999999"));
  EXPECT_FALSE(ParseMicrosToNs("1e300"));
}

// An independent reading of digits[.digits] in 128-bit arithmetic: ns = whole * 1000 + the first
// three fractional digits, + 1 when the fourth is >= 5; nullopt when that exceeds int64.
std::optional<int64_t> ReferenceMicrosToNs(const std::string& s) {
  size_t i = s[0] == '-' ? 1 : 0;
  const bool neg = i == 1;
  __int128 whole = 0;
  const size_t first = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) whole = std::min<__int128>(whole * 10 + (s[i] - '0'), __int128{1} << 100);
  if (i == first) return std::nullopt;
  __int128 frac = 0;
  if (i < s.size() && s[i] == '.') {
    const size_t f = ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      const int k = static_cast<int>(i - f);
      if (k < 3) frac += (s[i] - '0') * (k == 0 ? 100 : k == 1 ? 10 : 1);
      if (k == 3 && s[i] >= '5') ++frac;
    }
    if (i == f) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const __int128 ns = whole * 1000 + frac;
  if (ns > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return static_cast<int64_t>(neg ? -ns : ns);
}

// The fast path (eight digits at a time, one range check at the end) against the reference, on
// every length of whole part around the 8-, 16- and 18-digit boundaries, leading zeros, fractions
// of 0-6 digits, signs and a stray character anywhere.
TEST(ParseMicrosToNsTest, AgreesWithAReferenceOnRandomText) {
  std::mt19937_64 rng(16);
  auto digits = [&](size_t n, bool leading_zero_ok) {
    std::string d;
    for (size_t k = 0; k < n; ++k) d += static_cast<char>('0' + (k == 0 && !leading_zero_ok ? 1 + rng() % 9 : rng() % 10));
    return d;
  };
  for (int round = 0; round < 200000; ++round) {
    std::string s = rng() % 4 == 0 ? "-" : "";
    s += rng() % 5 == 0 ? std::string(rng() % 4, '0') : "";
    s += digits(rng() % 22, rng() % 2 == 0);
    if (rng() % 3 != 0) s += "." + digits(rng() % 7, true);
    if (rng() % 10 == 0 && !s.empty()) s[rng() % s.size()] = "x./:-9"[rng() % 6];
    if (s.empty()) continue;
    ASSERT_EQ(ParseMicrosToNs(s), ReferenceMicrosToNs(s)) << s;
  }
  // The edges of int64 nanoseconds.
  EXPECT_EQ(ParseMicrosToNs("9223372036854775.807"), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(ParseMicrosToNs("9223372036854775.808"));  // the sum overflows, not the whole part
  EXPECT_FALSE(ParseMicrosToNs("9223372036854776"));
  EXPECT_EQ(ParseMicrosToNs("00000000000000000000001.5"), 1500);  // 23 digits, leading zeros
  EXPECT_EQ(ParseMicrosToNs("12345678 "), 12345678000);           // trailing whitespace (a raw token)
}

TEST(FormatNsAsMicrosTest, RoundTripsThroughParse) {
  char buf[32];
  for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{1712195495505543250}, int64_t{-2500}}) {
    EXPECT_EQ(ParseMicrosToNs(FormatNsAsMicros(ns, buf)), ns) << ns;
  }
  EXPECT_EQ(FormatNsAsMicros(1500, buf), "1.500");
  EXPECT_EQ(FormatNsAsMicros(2000, buf), "2");
}

}  // namespace
}  // namespace trainrx::profiler
