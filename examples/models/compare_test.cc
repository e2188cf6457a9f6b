#include "examples/models/compare.h"

#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace gshare::examples {
namespace {

TEST(CompareOutputsTest, IdenticalOutputsPass) {
  const std::vector<float> r = {1.0F, -2.0F, 0.5F, 0.0F};
  auto c = CompareOutputs(r, r, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->within_tolerance);
  EXPECT_EQ(c->worst_relative_error, 0.0);
}

TEST(CompareOutputsTest, ErrorIsMeasuredAgainstTheRowsLargestReference) {
  // Row 0 has scale 10: an error of 5e-4 on a logit near zero is 5e-5 of the row, within 1e-4.
  const std::vector<float> reference = {10.0F, 0.0001F, 1.0F, 2.0F};
  std::vector<float> actual = {10.0F, 0.0006F, 1.0F, 2.0F};
  auto c = CompareOutputs(actual, reference, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->within_tolerance);
  EXPECT_NEAR(c->worst_relative_error, 5e-5, 1e-7);
  EXPECT_EQ(c->worst_row, 0);
  EXPECT_EQ(c->worst_column, 1);
  EXPECT_DOUBLE_EQ(c->worst_row_scale, 10.0);

  // Row 1 has scale 2: an error of 4e-4 there is 2e-4 of the row, beyond 1e-4.
  actual[2] = 1.0004F;
  c = CompareOutputs(actual, reference, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->within_tolerance);
  EXPECT_EQ(c->worst_row, 1);
  EXPECT_EQ(c->worst_column, 0);
  EXPECT_EQ(c->worst_actual, 1.0004F);
  EXPECT_EQ(c->worst_reference, 1.0F);
  EXPECT_NE(c->ToString().find("[1, 0]"), std::string::npos);
  // A looser tolerance accepts it.
  c = CompareOutputs(actual, reference, 2, 1e-3);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->within_tolerance);
}

TEST(CompareOutputsTest, NonFiniteActualAndZeroRowsFail) {
  const std::vector<float> reference = {1.0F, 2.0F, 0.0F, 0.0F};
  std::vector<float> actual = {std::numeric_limits<float>::quiet_NaN(), 2.0F, 0.0F, 0.0F};
  auto c = CompareOutputs(actual, reference, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->within_tolerance);
  EXPECT_EQ(c->worst_row, 0);

  actual = {1.0F, 2.0F, 0.0F, 1e-30F};  // an all-zero reference row must match exactly
  c = CompareOutputs(actual, reference, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->within_tolerance);
  EXPECT_EQ(c->worst_row, 1);
}

TEST(CompareOutputsTest, RejectsMalformedArguments) {
  const std::vector<float> three = {1.0F, 2.0F, 3.0F};
  const std::vector<float> four = {1.0F, 2.0F, 3.0F, 4.0F};
  EXPECT_EQ(CompareOutputs(three, four, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareOutputs(three, three, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareOutputs(four, four, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareOutputs(four, four, 2, 0.0).status().code(), StatusCode::kInvalidArgument);
  const std::vector<float> bad_reference = {1.0F, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(CompareOutputs(std::span<const float>(four).first(2), bad_reference, 2).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare::examples
