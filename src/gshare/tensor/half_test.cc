#include "gshare/tensor/half.h"

#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(HalfTest, EveryFiniteHalfRoundTripsThroughDouble) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Half h{static_cast<std::uint16_t>(bits)};
    const double d = HalfToDouble(h);
    if (!std::isfinite(d)) {
      EXPECT_EQ(bits & 0x7c00u, 0x7c00u);
      EXPECT_FALSE(DoubleToHalf(d).has_value());
      continue;
    }
    const auto back = DoubleToHalf(d);
    ASSERT_TRUE(back.has_value()) << bits;
    EXPECT_EQ(back->bits, bits);
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(DoubleToHalf(1.0)->bits, 0x3c00);
  EXPECT_EQ(DoubleToHalf(-2.0)->bits, 0xc000);
  EXPECT_EQ(DoubleToHalf(65504.0)->bits, 0x7bff);
  EXPECT_EQ(DoubleToHalf(-0.0)->bits, 0x8000);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -24))->bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -14))->bits, 0x0400);  // smallest normal
  EXPECT_DOUBLE_EQ(HalfToDouble(Half{0x3555}), 0.333251953125);
}

TEST(HalfTest, RoundsToNearestEvenStraightFromDouble) {
  // 1 + 2^-11 lies halfway between 1 (even mantissa) and 1 + 2^-10: ties go to even.
  EXPECT_EQ(DoubleToHalf(1.0 + std::ldexp(1.0, -11))->bits, 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up to even.
  EXPECT_EQ(DoubleToHalf(1.0 + 3 * std::ldexp(1.0, -11))->bits, 0x3c02);
  // Just above the tie goes up. Through float this would round to the tie first, then down.
  EXPECT_EQ(DoubleToHalf(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))->bits, 0x3c01);
  // Half the smallest subnormal ties to zero; a bit more rounds up to it.
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25))->bits, 0x0000);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25) * 1.5)->bits, 0x0001);
  // Rounding the largest subnormal up carries into the smallest normal.
  EXPECT_EQ(DoubleToHalf(std::ldexp(1023.75, -24))->bits, 0x0400);
  EXPECT_EQ(DoubleToHalf(1e-300)->bits, 0x0000);
}

TEST(HalfTest, OverflowAndNonFiniteAreRefused) {
  EXPECT_TRUE(DoubleToHalf(65519.0).has_value());  // rounds down to 65504
  EXPECT_EQ(DoubleToHalf(65519.0)->bits, 0x7bff);
  EXPECT_FALSE(DoubleToHalf(65520.0).has_value());  // ties to even: infinity
  EXPECT_FALSE(DoubleToHalf(-1e10).has_value());
  EXPECT_FALSE(DoubleToHalf(NAN).has_value());
  EXPECT_FALSE(DoubleToHalf(INFINITY).has_value());
}

}  // namespace
}  // namespace gshare
