// experiments/record.h ParseBytes: `--memory-cap` as given on the command line, one owner of its
// message ("--memory-cap TEXT: not a size ...", said by `record` and `sweep` alike).
#include <gtest/gtest.h>

#include "trainrx/experiments/record.h"

namespace trainrx::experiments {
namespace {

TEST(ParseBytesTest, SizesInPowersOf1024) {
  EXPECT_EQ(*ParseBytes("1.5G"), 1610612736u);
  EXPECT_EQ(*ParseBytes("800M"), 800u * 1048576u);
  EXPECT_EQ(*ParseBytes("800MiB"), 800u * 1048576u);
  EXPECT_EQ(*ParseBytes("2k"), 2048u);
  EXPECT_EQ(*ParseBytes("1048576"), 1048576u);
}

TEST(ParseBytesTest, ANonSizeIsAnInputErrorNamingTheOption) {
  for (const char* text : {"lots", "", "0", "-1G", "5T", "1e30", "1e-320", "nan", "G"}) {
    const StatusOr<uint64_t> v = ParseBytes(text);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_EQ(v.status().kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(v.status().message(), std::string("--memory-cap ") + text + ": not a size (e.g. 1.5G, 800M, 1048576)");
  }
}

}  // namespace
}  // namespace trainrx::experiments
