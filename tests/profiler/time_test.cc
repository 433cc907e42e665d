#include "trainrx/profiler/time.h"

#include <gtest/gtest.h>

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
