#include "examples/runtime/example_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace gshare::examples {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

TEST(ExampleWeightsTest, AFileHoldsTheSeedsWeightsInLayoutOrder) {
  for (const ModelKind kind : {ModelKind::kMlp, ModelKind::kCnn}) {
    const std::string path = TempPath(std::string(ModelKindName(kind)));
    ASSERT_TRUE(WriteExampleWeights(kind, 7, path).ok());
    auto loaded = LoadExampleWeights(kind, path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    auto expected = PackWeights(LayoutOf(kind), GenerateWeights(LayoutOf(kind), 7));
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(*loaded, *expected);
    std::filesystem::remove(path);
  }
}

TEST(ExampleWeightsTest, AFileOfAnotherModelIsRefusedNamingTheFile) {
  const std::string path = TempPath("mlp-as-cnn");
  ASSERT_TRUE(WriteExampleWeights(ModelKind::kMlp, 1, path).ok());
  auto loaded = LoadExampleWeights(ModelKind::kCnn, path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_FALSE(LoadExampleWeights(ModelKind::kMlp, path).ok());  // missing
}

}  // namespace
}  // namespace gshare::examples
