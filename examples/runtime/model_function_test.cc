#include "examples/runtime/model_function.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "examples/models/compare.h"
#include "examples/models/reference.h"
#include "examples/models/weights.h"
#include "examples/runtime/example_weights.h"
#include "gshare/fn/testing/fake_node.h"

namespace gshare::examples {
namespace {

class ModelFunctionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("model-function-" + std::to_string(::getpid()) + ".safetensors"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(ModelFunctionTest, AnswersEachModelAsTheReferenceDoes) {
  for (const ModelKind kind : {ModelKind::kMlp, ModelKind::kCnn}) {
    const ModelLayout& layout = LayoutOf(kind);
    ASSERT_TRUE(WriteExampleWeights(kind, kDefaultWeightSeed, path_).ok());
    fn::testing::FakeNode node(64 << 20);
    auto runtime = fn::FunctionRuntime::Connect(
        node.TakeFunctionEnd(), fn::testing::FakeNode::FreeBase(), fn::testing::FakeNode::kReserve,
        {.exit_when_node_gone = false});
    ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
    auto function = ModelFunction::Create(**runtime, std::string(layout.name), path_);
    ASSERT_TRUE(function.ok()) << function.status().ToString();
    EXPECT_FALSE((*runtime)->memory().Image().written);  // frozen weights: a clean image

    const std::int64_t batch = 3;
    const std::vector<float> inputs = GenerateInputs(layout, batch, 99);
    std::vector<std::int64_t> shape = {batch};
    shape.insert(shape.end(), layout.input_shape.begin(), layout.input_shape.end());
    auto input = Tensor::FromValues<float>("input", shape, inputs);
    ASSERT_TRUE(input.ok());
    auto output = (*function)->Infer(*input);
    ASSERT_TRUE(output.ok()) << output.status().ToString();
    EXPECT_EQ(output->name(), "logits");
    EXPECT_EQ(output->shape(), (std::vector<std::int64_t>{batch, layout.classes}));

    auto weights = LoadExampleWeights(kind, path_);
    auto reference = ReferenceForward(kind, *weights, inputs, batch);
    ASSERT_TRUE(reference.ok());
    auto comparison = CompareOutputs(*output->Values<float>(), *reference, layout.classes);
    ASSERT_TRUE(comparison.ok());
    EXPECT_TRUE(comparison->within_tolerance) << comparison->ToString();
    // Nothing of the batch stays in device memory.
    EXPECT_FALSE((*runtime)->memory().Image().written);
  }
}

TEST_F(ModelFunctionTest, ABatchBeyondTheQuotaFailsAloneAndTheNextOneWorks) {
  ASSERT_TRUE(WriteExampleWeights(ModelKind::kMlp, kDefaultWeightSeed, path_).ok());
  const ModelLayout& layout = LayoutOf(ModelKind::kMlp);
  // Room for the weights and a small batch only.
  const std::uint64_t quota = static_cast<std::uint64_t>(layout.weight_bytes()) + (1 << 20);
  fn::testing::FakeNode node(64 << 20, (quota + 4095) / 4096 * 4096);
  auto runtime =
      fn::FunctionRuntime::Connect(node.TakeFunctionEnd(), fn::testing::FakeNode::FreeBase(),
                                   fn::testing::FakeNode::kReserve, {.exit_when_node_gone = false});
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  auto function = ModelFunction::Create(**runtime, "mlp", path_);
  ASSERT_TRUE(function.ok()) << function.status().ToString();
  auto big = Tensor::FromValues<float>("input", {512, 784}, GenerateInputs(layout, 512, 1));
  auto small = Tensor::FromValues<float>("input", {1, 784}, GenerateInputs(layout, 1, 1));
  auto failed = (*function)->Infer(*big);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(failed.status().message().find("quota"), std::string::npos);
  EXPECT_TRUE((*function)->Infer(*small).ok());
}

TEST_F(ModelFunctionTest, RefusesWrongInputsAndUnknownModels) {
  ASSERT_TRUE(WriteExampleWeights(ModelKind::kCnn, kDefaultWeightSeed, path_).ok());
  fn::testing::FakeNode node(64 << 20);
  auto runtime =
      fn::FunctionRuntime::Connect(node.TakeFunctionEnd(), fn::testing::FakeNode::FreeBase(),
                                   fn::testing::FakeNode::kReserve, {.exit_when_node_gone = false});
  ASSERT_TRUE(runtime.ok());
  EXPECT_FALSE(ModelFunction::Create(**runtime, "resnet", path_).ok());
  auto function = ModelFunction::Create(**runtime, "cnn", path_);
  ASSERT_TRUE(function.ok()) << function.status().ToString();
  const std::vector<float> values(784, 0.5F);
  auto wrong = Tensor::FromValues<float>("input", {1, 784}, values);
  auto answer = (*function)->Infer(*wrong);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(answer.status().message().find("takes shape [batch, 3, 32, 32], not [1,784]"),
            std::string::npos)
      << answer.status().message();
}

TEST_F(ModelFunctionTest, EchoAnswersItsInput) {
  fn::testing::FakeNode node(4 << 20);
  auto runtime =
      fn::FunctionRuntime::Connect(node.TakeFunctionEnd(), fn::testing::FakeNode::FreeBase(),
                                   fn::testing::FakeNode::kReserve, {.exit_when_node_gone = false});
  ASSERT_TRUE(runtime.ok());
  auto function = ModelFunction::Create(**runtime, "echo", "");
  ASSERT_TRUE(function.ok()) << function.status().ToString();
  const std::vector<std::int32_t> values = {1, 2, 3, 4};
  auto input = Tensor::FromValues<std::int32_t>("input", {2, 2}, values);
  auto output = (*function)->Infer(*input);
  ASSERT_TRUE(output.ok());
  EXPECT_EQ(output->name(), "output");
  EXPECT_EQ(output->raw_bytes().size(), 16u);
  EXPECT_EQ(*output, std::move(*input).Renamed("output"));
}

}  // namespace
}  // namespace gshare::examples
