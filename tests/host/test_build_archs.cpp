// Which architecture lists hold the Hopper prefill kernels (cuda/build_archs.hpp).
#include <gtest/gtest.h>

#include "cuda/build_archs.hpp"

namespace flashbuf::detail {
namespace {

TEST(BuildArchs, Sm90aListsHoldTheHopperKernels) {
  EXPECT_TRUE(archs_hold_sm90a("90a 80"));
  EXPECT_TRUE(archs_hold_sm90a("80 90a"));
  EXPECT_TRUE(archs_hold_sm90a("90a"));
  EXPECT_TRUE(archs_hold_sm90a("90a-real 80-virtual"));
  EXPECT_TRUE(archs_hold_sm90a("90a-virtual"));
}

TEST(BuildArchs, ListsWithoutSm90aOrWithPlainSm90DoNot) {
  EXPECT_FALSE(archs_hold_sm90a("80"));        // sm_80 PTX compiled for a Hopper device: traps
  EXPECT_FALSE(archs_hold_sm90a("90"));        // sm_90 without the a features: traps
  EXPECT_FALSE(archs_hold_sm90a("90-real 80"));
  EXPECT_FALSE(archs_hold_sm90a("90 90a"));    // the driver may load either image
  EXPECT_FALSE(archs_hold_sm90a("90a 90-virtual"));
  EXPECT_FALSE(archs_hold_sm90a("native"));
  EXPECT_FALSE(archs_hold_sm90a(""));
  EXPECT_FALSE(archs_hold_sm90a("none"));
  EXPECT_FALSE(archs_hold_sm90a("900a 89"));
}

}  // namespace
}  // namespace flashbuf::detail
