#include "gshare/tensor/tensor_spec.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

Tensor Floats(std::string name, std::vector<std::int64_t> shape) {
  auto count = ElementCount(shape);
  std::vector<float> values(static_cast<std::size_t>(*count), 1.0f);
  return Tensor::FromValues<float>(std::move(name), std::move(shape),
                                   std::span<const float>(values))
      .value();
}

TEST(TensorSpecTest, ChecksDeclarations) {
  const TensorSpec image{"image", DataType::kFp32, {-1, 3, 224, 224}};
  EXPECT_TRUE(CheckTensorSpecs(std::vector{image}, "inputs", true).ok());
  EXPECT_TRUE(CheckTensorSpecs({}, "inputs", true).ok());
  const auto message = [](std::vector<TensorSpec> specs, bool batched = true) {
    const Status status = CheckTensorSpecs(specs, "inputs", batched);
    return status.ok() ? std::string("ok") : status.message();
  };
  EXPECT_EQ(message({{"", DataType::kFp32, {-1}}}), "inputs[0]: the name is empty");
  EXPECT_EQ(message({{"a\nb", DataType::kFp32, {-1}}}),
            "inputs[0]: a tensor's name is printable ASCII of at most 256 bytes");
  EXPECT_EQ(message({image, image}), "inputs: 'image' appears twice");
  EXPECT_EQ(message({{"x", DataType::kFp32, {}}}),
            "inputs 'x': the shape has 0 dimensions; 1 to 16, the first the batch dimension");
  EXPECT_EQ(message({{"x", DataType::kFp32, {4, 2}}}),
            "inputs 'x': the first dimension is the batch dimension of a batching model and must "
            "be -1, not 4");
  EXPECT_EQ(message({{"x", DataType::kFp32, {4, 2}}}, false), "ok");
  EXPECT_EQ(message({{"x", DataType::kFp32, {-1, -3}}}),
            "inputs 'x': dimension -3 is neither -1 (any size) nor from 0 to 2^40");
  EXPECT_EQ(message({{"x", DataType::kFp32, {-1, kMaxTensorSpecDim + 1}}}),
            "inputs 'x': dimension 1099511627777 is neither -1 (any size) nor from 0 to 2^40");
  std::vector<TensorSpec> many(kMaxTensorSpecs + 1, image);
  EXPECT_EQ(message(many), "inputs: 65 tensors; at most 64");
}

TEST(TensorSpecTest, InputsFitWhereEveryFixedDimensionAndTheTypeAgree) {
  const std::vector<TensorSpec> specs = {{"a", DataType::kFp32, {-1, 2, -1}},
                                         {"b", DataType::kFp32, {-1}}};
  EXPECT_TRUE(CheckInputsFit(std::vector{Floats("a", {4, 2, 7}), Floats("b", {4})}, specs).ok());
  EXPECT_TRUE(CheckInputsFit(std::vector{Floats("b", {1}), Floats("a", {1, 2, 0})}, specs).ok());
  EXPECT_EQ(CheckInputsFit(std::vector{Floats("a", {4, 3, 7}), Floats("b", {4})}, specs).message(),
            "input 'a' has shape [4,3,7]; the model takes [-1,2,-1]");
  EXPECT_EQ(CheckInputsFit(std::vector{Floats("a", {4, 2}), Floats("b", {4})}, specs).message(),
            "input 'a' has shape [4,2]; the model takes [-1,2,-1]");
  EXPECT_EQ(CheckInputsFit(std::vector{Floats("a", {4, 2, 7})}, specs).message(),
            "input 'b' is missing");
  EXPECT_EQ(CheckInputsFit(std::vector{Floats("c", {1})}, specs).message(),
            "the model has no input 'c' (its inputs: a, b)");
  const Tensor ints =
      Tensor::FromValues<std::int32_t>("b", {1}, std::vector<std::int32_t>{1}).value();
  EXPECT_EQ(CheckInputsFit(std::vector{Floats("a", {1, 2, 1}), ints}, specs).message(),
            "input 'b' is INT32; the model takes FP32");
  // Nothing declared: anything goes.
  EXPECT_TRUE(CheckInputsFit(std::vector{Floats("z", {9})}, {}).ok());
}

}  // namespace
}  // namespace gshare
