#include "gshare/tensor/first_dim.h"

#include <array>
#include <vector>

#include <gtest/gtest.h>

namespace gshare {
namespace {

Tensor Ints(std::vector<std::int64_t> shape, std::vector<std::int32_t> values) {
  return *Tensor::FromValues<std::int32_t>("x", std::move(shape), values);
}

TEST(FirstDimTest, ConcatenatesAndSlicesBack) {
  const Tensor a = Ints({1, 2}, {1, 2});
  const Tensor b = Ints({2, 2}, {3, 4, 5, 6});
  const std::array<const Tensor*, 2> parts = {&a, &b};
  auto joined = ConcatenateFirstDim("y", parts);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->name(), "y");
  EXPECT_EQ(joined->shape(), (std::vector<std::int64_t>{3, 2}));
  const auto values = *joined->Values<std::int32_t>();
  EXPECT_EQ(std::vector<std::int32_t>(values.begin(), values.end()),
            (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  auto back = SliceFirstDim(*joined, 1, 2);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::move(*back).Renamed("x"), b);
  EXPECT_EQ(SliceFirstDim(*joined, 3, 0)->element_count(), 0);
}

TEST(FirstDimTest, Strings) {
  const Tensor a = *Tensor::FromStrings("s", {1}, {"a"});
  const Tensor b = *Tensor::FromStrings("s", {2}, {"b", "c"});
  const std::array<const Tensor*, 2> parts = {&a, &b};
  auto joined = ConcatenateFirstDim("s", parts);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->strings(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*SliceFirstDim(*joined, 1, 2), b);
}

TEST(FirstDimTest, Mismatches) {
  const Tensor a = Ints({1, 2}, {1, 2});
  const Tensor wide = Ints({1, 3}, {1, 2, 3});
  const Tensor flat = Ints({2}, {1, 2});
  const Tensor scalar = Ints({}, {1});
  const Tensor floats = *Tensor::FromValues<float>("x", {1, 2}, std::vector<float>{1, 2});
  EXPECT_FALSE(ConcatenateFirstDim("x", std::vector<const Tensor*>{&a, &wide}).ok());
  EXPECT_FALSE(ConcatenateFirstDim("x", std::vector<const Tensor*>{&a, &flat}).ok());
  EXPECT_FALSE(ConcatenateFirstDim("x", std::vector<const Tensor*>{&a, &floats}).ok());
  EXPECT_FALSE(ConcatenateFirstDim("x", std::vector<const Tensor*>{&scalar}).ok());
  EXPECT_FALSE(ConcatenateFirstDim("x", std::vector<const Tensor*>{}).ok());
  EXPECT_FALSE(SliceFirstDim(a, 0, 2).ok());
  EXPECT_FALSE(SliceFirstDim(a, -1, 1).ok());
  EXPECT_FALSE(SliceFirstDim(scalar, 0, 1).ok());
}

}  // namespace
}  // namespace gshare
