#include "knobs.h"

#include <gtest/gtest.h>

#include <set>

namespace trainrx::workloads {
namespace {

TEST(WorkloadConfigTest, DefaultsAreTheRecommendedSettingAndChangesAreListed) {
  Config c;
  EXPECT_EQ(c.Get("workers"), "2");
  EXPECT_TRUE(c.Changed().empty());
  ASSERT_TRUE(c.Set("workers=0").ok());
  ASSERT_TRUE(c.Set("amp=bf16").ok());
  EXPECT_EQ(c.Int("workers"), 0);
  EXPECT_EQ(c.Changed(), "workers=0 amp=bf16");
}

TEST(WorkloadConfigTest, BadAssignmentsSayWhatIsWrong) {
  Config c;
  const Status unknown = c.Set("nosuch=1");
  EXPECT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(unknown.message().find("unknown knob 'nosuch'"), std::string::npos);
  EXPECT_NE(unknown.message().find("workers"), std::string::npos);  // lists the known knobs
  EXPECT_EQ(c.Set("workers=-1").message(), "knob workers: '-1' is not a non-negative number");
  EXPECT_EQ(c.Set("workers").message(), "--set expects knob=value, got 'workers'");
  const Status amp = c.Set("amp=fp8");
  EXPECT_FALSE(amp.ok());
  EXPECT_NE(amp.message().find("off | bf16 | fp16"), std::string::npos);
  EXPECT_EQ(c.Get("workers"), "2");  // unchanged by failed assignments
}

TEST(WorkloadConfigTest, PresetsSetTheirKnobsAndUnknownPresetsAreErrors) {
  Config c;
  ASSERT_TRUE(c.ApplyPreset("seeds").ok());
  EXPECT_EQ(c.Int("workers"), 0);
  EXPECT_TRUE(c.Bool("anomaly"));
  const Status fast = c.ApplyPreset("fast");
  EXPECT_FALSE(fast.ok());
  EXPECT_EQ(fast.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(fast.message().find("seeds"), std::string::npos);
}

// A knob's finding, when it has one, is an id an analyzer reports (checked against the analyzers'
// catalog in tests/analyzers/registry_test.cc); accum_sync and empty_cache have bad values that no
// analyzer flags yet, and say so by naming none.
TEST(KnobsTest, KnobsAreUniqueAndEveryPresetKnobExists) {
  std::set<std::string> names;
  for (const auto& k : Knobs()) EXPECT_TRUE(names.insert(k.name).second) << "duplicate knob " << k.name;
  for (const auto& p : Presets())
    for (const auto& [k, v] : p.settings) EXPECT_NE(FindKnob(k), nullptr) << p.name << ": " << k;
}

}  // namespace
}  // namespace trainrx::workloads
