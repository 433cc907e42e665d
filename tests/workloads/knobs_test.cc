#include "knobs.h"

#include <gtest/gtest.h>

#include <set>

namespace trainrx::workloads {
namespace {

TEST(WorkloadConfigTest, DefaultsAreTheRecommendedSettingAndChangesAreListed) {
  Config c;
  EXPECT_EQ(c.Get("workers"), "2");
  EXPECT_TRUE(c.Changed().empty());
  std::string error;
  ASSERT_TRUE(c.Set("workers=0", &error)) << error;
  ASSERT_TRUE(c.Set("amp=bf16", &error)) << error;
  EXPECT_EQ(c.Int("workers"), 0);
  EXPECT_EQ(c.Changed(), "workers=0 amp=bf16");
}

TEST(WorkloadConfigTest, BadAssignmentsSayWhatIsWrong) {
  Config c;
  std::string error;
  EXPECT_FALSE(c.Set("nosuch=1", &error));
  EXPECT_NE(error.find("unknown knob 'nosuch'"), std::string::npos);
  EXPECT_NE(error.find("workers"), std::string::npos);  // lists the known knobs
  EXPECT_FALSE(c.Set("workers=-1", &error));
  EXPECT_FALSE(c.Set("workers", &error));
  EXPECT_FALSE(c.Set("amp=fp8", &error));
  EXPECT_NE(error.find("off | bf16 | fp16"), std::string::npos);
  EXPECT_EQ(c.Get("workers"), "2");  // unchanged by failed assignments
}

TEST(WorkloadConfigTest, PresetsSetTheirKnobsAndUnknownPresetsAreErrors) {
  Config c;
  std::string error;
  ASSERT_TRUE(c.ApplyPreset("seeds", &error));
  EXPECT_EQ(c.Int("workers"), 0);
  EXPECT_TRUE(c.Bool("anomaly"));
  EXPECT_FALSE(c.ApplyPreset("fast", &error));
  EXPECT_NE(error.find("seeds"), std::string::npos);
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
