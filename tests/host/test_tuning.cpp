// Host tests of the tuning overrides: the process-wide setter (flashbuf/tuning.hpp), the
// environment variables the tools read (tools/tuning_env.hpp) and what the Hopper prefill
// launcher makes of them (cuda/prefill_grid_knob.hpp, host-only).
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cuda/prefill_grid_knob.hpp"
#include "flashbuf/flashbuf.hpp"
#include "flashbuf/tuning.hpp"
#include "tuning_env.hpp"

namespace {

using namespace flashbuf;

// Restores the overrides and the variables a test changed.
class Tuning : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = tuning_overrides(); }
  void TearDown() override {
    set_tuning_overrides(saved_);
    for (const char* name : kNames) unsetenv(name);
  }
  static constexpr const char* kNames[] = {"FLASHBUF_DECODE_SPLITS", "FLASHBUF_DECODE_MERGE", "FLASHBUF_DECODE_RING",
                                           "FLASHBUF_PREFILL_GRID"};
  TuningOverrides saved_;
};

TEST_F(Tuning, DefaultsLeaveEveryChoiceToTheLibrary) {
  for (const char* name : kNames) unsetenv(name);
  const TuningOverrides t = tools::tuning_overrides_from_environment();
  EXPECT_EQ(t.decode_splits, 0);
  EXPECT_EQ(t.decode_merge, DecodeMergeOverride::automatic);
  EXPECT_TRUE(t.decode_deep_ring);
  EXPECT_EQ(t.prefill_grid, PrefillGridOverride::automatic);
  EXPECT_EQ(t.prefill_grid_blocks, 0);
  set_tuning_overrides(t);
  const detail::PersistentGridKnob knob = detail::persistent_grid_knob();
  EXPECT_FALSE(knob.off);
  EXPECT_FALSE(knob.forced);
  EXPECT_EQ(knob.cap, 0);
}

TEST_F(Tuning, SetterRoundTripsAndRejectsNegativeCounts) {
  TuningOverrides t;
  t.decode_splits = 7;
  t.decode_merge = DecodeMergeOverride::workspace;
  t.decode_deep_ring = false;
  t.prefill_grid = PrefillGridOverride::per_block;
  set_tuning_overrides(t);
  const TuningOverrides got = tuning_overrides();
  EXPECT_EQ(got.decode_splits, 7);
  EXPECT_EQ(got.decode_merge, DecodeMergeOverride::workspace);
  EXPECT_FALSE(got.decode_deep_ring);
  EXPECT_EQ(got.prefill_grid, PrefillGridOverride::per_block);
  EXPECT_TRUE(detail::persistent_grid_knob().off);

  TuningOverrides bad;
  bad.decode_splits = -1;
  try {
    set_tuning_overrides(bad);
    FAIL() << "decode_splits -1 accepted";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.argument(), "decode_splits");
  }
  EXPECT_EQ(tuning_overrides().decode_splits, 7) << "a rejected call must change nothing";
  bad = TuningOverrides{};
  bad.prefill_grid_blocks = -2;
  EXPECT_THROW(set_tuning_overrides(bad), ArgumentError);
}

TEST_F(Tuning, EnvironmentVariablesMapToOverrides) {
  setenv("FLASHBUF_DECODE_SPLITS", "12", 1);
  setenv("FLASHBUF_DECODE_MERGE", "cluster", 1);
  setenv("FLASHBUF_DECODE_RING", "shared", 1);
  setenv("FLASHBUF_PREFILL_GRID", "3", 1);
  tools::apply_tuning_environment();
  const TuningOverrides t = tuning_overrides();
  EXPECT_EQ(t.decode_splits, 12);
  EXPECT_EQ(t.decode_merge, DecodeMergeOverride::cluster);
  EXPECT_FALSE(t.decode_deep_ring);
  const detail::PersistentGridKnob knob = detail::persistent_grid_knob();
  EXPECT_TRUE(knob.forced);
  EXPECT_FALSE(knob.off);
  EXPECT_EQ(knob.cap, 3);

  setenv("FLASHBUF_PREFILL_GRID", "on", 1);
  tools::apply_tuning_environment();
  EXPECT_TRUE(detail::persistent_grid_knob().forced);
  EXPECT_EQ(detail::persistent_grid_knob().cap, 0);
  setenv("FLASHBUF_PREFILL_GRID", "off", 1);
  tools::apply_tuning_environment();
  EXPECT_TRUE(detail::persistent_grid_knob().off);
  EXPECT_FALSE(detail::persistent_grid_knob().forced);
  setenv("FLASHBUF_DECODE_MERGE", "workspace", 1);
  tools::apply_tuning_environment();
  EXPECT_EQ(tuning_overrides().decode_merge, DecodeMergeOverride::workspace);
}

TEST_F(Tuning, BadValuesNameTheirVariable) {
  const struct {
    const char* name;
    const char* value;
  } cases[] = {{"FLASHBUF_DECODE_SPLITS", "0"},  {"FLASHBUF_DECODE_SPLITS", "many"},
               {"FLASHBUF_DECODE_SPLITS", "-4"}, {"FLASHBUF_DECODE_MERGE", "clusters"},
               {"FLASHBUF_DECODE_RING", "deep"}, {"FLASHBUF_PREFILL_GRID", "maybe"},
               {"FLASHBUF_PREFILL_GRID", "0"}};
  for (const auto& c : cases) {
    for (const char* name : kNames) unsetenv(name);
    setenv(c.name, c.value, 1);
    try {
      tools::tuning_overrides_from_environment();
      ADD_FAILURE() << c.name << "=" << c.value << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.value), std::string::npos) << e.what();
    }
  }
}

}  // namespace
