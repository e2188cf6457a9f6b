#include "examples/runtime/output_checker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/model_function.h"
#include "gshare/fn/testing/fake_node.h"

namespace gshare::examples {
namespace {

TEST(OutputCheckerTest, AcceptsTheFunctionsAnswersAndRefusesWrongOnes) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("checker-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteExampleWeights(ModelKind::kMlp, 1, (dir / "mlp.safetensors").string()).ok());
  ASSERT_TRUE(WriteExampleWeights(ModelKind::kCnn, 1, (dir / "cnn.safetensors").string()).ok());
  auto checker = OutputChecker::Create(dir.string());
  ASSERT_TRUE(checker.ok()) << checker.status().ToString();

  for (const std::string model : {"mlp", "cnn", "echo"}) {
    fn::testing::FakeNode node(64 << 20);
    auto runtime = fn::FunctionRuntime::Connect(
        node.TakeFunctionEnd(), fn::testing::FakeNode::FreeBase(), fn::testing::FakeNode::kReserve,
        {.exit_when_node_gone = false});
    ASSERT_TRUE(runtime.ok());
    auto function = ModelFunction::Create(
        **runtime, model, model == "echo" ? "" : (dir / (model + ".safetensors")).string());
    ASSERT_TRUE(function.ok()) << function.status().ToString();
    for (std::uint64_t index : {0u, 5u, 16u}) {  // 16 reuses variant 0 and its cached reference
      auto input = (*checker)->InputFor(model, index);
      ASSERT_TRUE(input.ok());
      auto output = (*function)->Infer(*input);
      ASSERT_TRUE(output.ok()) << output.status().ToString();
      EXPECT_TRUE((*checker)->Check(model, index, *output).ok()) << model << " " << index;
      // The answer to another input is wrong.
      EXPECT_FALSE((*checker)->Check(model, index + 1, *output).ok()) << model << " " << index;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(OutputCheckerTest, ChecksEchoWithoutAnyWeights) {
  auto checker = OutputChecker::Create("/nonexistent", std::span<const ModelKind>());
  ASSERT_TRUE(checker.ok()) << checker.status().ToString();
  auto input = (*checker)->InputFor("echo", 3);
  ASSERT_TRUE(input.ok());
  EXPECT_TRUE((*checker)->Check("echo", 3, *input).ok());
  EXPECT_FALSE((*checker)->Check("echo", 4, *input).ok());
  // The mlp's inputs need no weights; its answers do.
  auto mlp_input = (*checker)->InputFor("mlp", 0);
  ASSERT_TRUE(mlp_input.ok());
  EXPECT_EQ((*checker)->Check("mlp", 0, *mlp_input).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gshare::examples
