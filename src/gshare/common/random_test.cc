#include "gshare/common/random.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(RandomTest, SameSeedSameSequenceAndKnownValue) {
  Random a(42), b(42), c(43);
  const std::uint64_t first = a.NextU64();
  EXPECT_EQ(first, b.NextU64());
  EXPECT_NE(first, c.NextU64());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.NextU64(), b.NextU64());
}

TEST(RandomTest, DistributionsHaveTheRightMeans) {
  Random rng(1);
  constexpr int kDraws = 200000;
  double uniform = 0, exponential = 0;
  int below = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    uniform += u;
    exponential += rng.Exponential(4.0);
    below += rng.Below(10) < 3 ? 1 : 0;
  }
  EXPECT_NEAR(uniform / kDraws, 0.5, 0.01);
  EXPECT_NEAR(exponential / kDraws, 0.25, 0.01);
  EXPECT_NEAR(static_cast<double>(below) / kDraws, 0.3, 0.01);
}

}  // namespace
}  // namespace gshare
