#include "gshare/tensor/tensor.h"

#include <array>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(DataTypeTest, NamesRoundTripAndSizes) {
  for (DataType type : kAllDataTypes) {
    auto parsed = ParseDataType(DataTypeName(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(ElementSizeBytes(DataType::kBool), 1u);
  EXPECT_EQ(ElementSizeBytes(DataType::kFp16), 2u);
  EXPECT_EQ(ElementSizeBytes(DataType::kInt32), 4u);
  EXPECT_EQ(ElementSizeBytes(DataType::kUint64), 8u);
  EXPECT_EQ(ElementSizeBytes(DataType::kBytes), 0u);
  EXPECT_FALSE(IsFixedSize(DataType::kBytes));
  const auto bad = ParseDataType("fp32");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown datatype 'fp32'"), std::string::npos);
  EXPECT_FALSE(ParseDataType("BF16").ok());
}

TEST(TensorTest, ElementCountIsChecked) {
  EXPECT_EQ(*ElementCount(std::vector<std::int64_t>{}), 1);
  EXPECT_EQ(*ElementCount(std::vector<std::int64_t>{2, 3, 4}), 24);
  EXPECT_EQ(*ElementCount(std::vector<std::int64_t>{0, std::numeric_limits<std::int64_t>::max()}),
            0);
  EXPECT_FALSE(ElementCount(std::vector<std::int64_t>{2, -1}).ok());
  EXPECT_FALSE(ElementCount(std::vector<std::int64_t>{1LL << 32, 1LL << 32}).ok());
  EXPECT_FALSE(ElementCount(std::vector<std::int64_t>(65, 1)).ok());
  EXPECT_EQ(*FixedByteSize(DataType::kFp64, 3), 24u);
  EXPECT_FALSE(FixedByteSize(DataType::kFp64, std::numeric_limits<std::int64_t>::max()).ok());
  EXPECT_FALSE(FixedByteSize(DataType::kBytes, 1).ok());
}

TEST(TensorTest, TypedViewsAndChecks) {
  const std::array<float, 6> values = {1, 2, 3, 4, 5, 6};
  auto tensor = Tensor::FromValues<float>("x", {2, 3}, values);
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  EXPECT_EQ(tensor->datatype(), DataType::kFp32);
  EXPECT_EQ(tensor->element_count(), 6);
  EXPECT_EQ(tensor->data_bytes(), 24u);
  auto view = tensor->Values<float>();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)[4], 5.0f);
  const auto wrong = tensor->Values<double>();
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "tensor 'x' is FP32, not FP64");
  EXPECT_FALSE(Tensor::FromValues<float>("x", {4}, values).ok());  // 6 values for 4 elements
}

TEST(TensorTest, FactoriesValidate) {
  const auto short_data = Tensor::FromBytes("w", DataType::kInt32, {2}, std::vector<std::byte>(7));
  ASSERT_FALSE(short_data.ok());
  EXPECT_EQ(short_data.status().message(), "tensor 'w': INT32 of shape [2] needs 8 bytes, got 7");
  EXPECT_FALSE(Tensor::FromBytes("b", DataType::kBool, {1}, {std::byte{2}}).ok());
  EXPECT_TRUE(Tensor::FromBytes("b", DataType::kBool, {2}, {std::byte{0}, std::byte{1}}).ok());
  EXPECT_FALSE(Tensor::FromBytes("s", DataType::kBytes, {0}, {}).ok());
  EXPECT_FALSE(Tensor::FromStrings("s", {2}, {"a"}).ok());
  const auto negative = Tensor::FromStrings("s", {-1}, {});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("tensor 's'"), std::string::npos);
  auto strings = Tensor::FromStrings("s", {2}, {"a", std::string("\0b", 2)});
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(strings->data_bytes(), 3u);
  EXPECT_TRUE(strings->raw_bytes().empty());
  EXPECT_FALSE(strings->Values<std::uint8_t>().ok());
}

TEST(TensorTest, ScalarsAndEmptyTensors) {
  const std::array<std::int64_t, 1> one = {42};
  auto scalar = Tensor::FromValues<std::int64_t>("s", {}, one);
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->element_count(), 1);
  auto empty = Tensor::FromValues<double>("e", {3, 0}, std::span<const double>());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->element_count(), 0);
  EXPECT_TRUE(empty->Values<double>()->empty());
}

TEST(TensorTest, ComparesByValue) {
  const std::array<std::int16_t, 2> a = {1, 2};
  const std::array<std::int16_t, 2> b = {1, 3};
  EXPECT_EQ(*Tensor::FromValues<std::int16_t>("t", {2}, a),
            *Tensor::FromValues<std::int16_t>("t", {2}, a));
  EXPECT_NE(*Tensor::FromValues<std::int16_t>("t", {2}, a),
            *Tensor::FromValues<std::int16_t>("t", {2}, b));
  EXPECT_NE(*Tensor::FromValues<std::int16_t>("t", {2}, a),
            *Tensor::FromValues<std::int16_t>("t", {1, 2}, a));
  Tensor renamed = Tensor::FromValues<std::int16_t>("t", {2}, a).value().Renamed("u");
  EXPECT_EQ(renamed.name(), "u");
}

}  // namespace
}  // namespace gshare
