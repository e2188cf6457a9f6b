#include "examples/models/model_layout.h"

#include <gtest/gtest.h>

namespace gshare::examples {
namespace {

TEST(ModelLayoutTest, MlpSizesAreAsDocumented) {
  const ModelLayout& layout = MlpLayout();
  EXPECT_EQ(layout.name, "mlp");
  EXPECT_EQ(layout.input_elements(), 784);
  EXPECT_EQ(layout.classes, 10);
  EXPECT_EQ(layout.parameter_count(), 5'824'522);
  EXPECT_EQ(layout.weight_bytes(), 23'298'088);
  ASSERT_EQ(layout.parameters.size(), 6U);
  EXPECT_EQ(layout.parameters[0].name, "fc1.weight");
  EXPECT_EQ(layout.parameters[0].shape, (std::vector<std::int64_t>{2048, 784}));
  EXPECT_EQ(layout.parameters[5].name, "fc3.bias");
  EXPECT_EQ(layout.parameters[5].shape, (std::vector<std::int64_t>{10}));
}

TEST(ModelLayoutTest, CnnSizesAreAsDocumented) {
  const ModelLayout& layout = CnnLayout();
  EXPECT_EQ(layout.name, "cnn");
  EXPECT_EQ(layout.input_shape, (std::vector<std::int64_t>{3, 32, 32}));
  EXPECT_EQ(layout.classes, 10);
  EXPECT_EQ(layout.parameter_count(), 1'147'466);
  EXPECT_EQ(layout.weight_bytes(), 4'589'864);
  std::vector<std::string> names;
  for (const ParameterSpec& p : layout.parameters) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight",
                                             "conv2.bias", "conv3.weight", "conv3.bias",
                                             "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(layout.parameters[2].shape, (std::vector<std::int64_t>{64, 32, 3, 3}));
  EXPECT_EQ(layout.parameters[2].fan_in, 288);
  EXPECT_EQ(layout.parameters[6].shape, (std::vector<std::int64_t>{512, 2048}));
}

TEST(ModelLayoutTest, OffsetsFollowTheOrder) {
  const ModelLayout& layout = CnnLayout();
  auto index = layout.IndexOf("conv2.weight");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(*index, 2U);
  EXPECT_EQ(layout.OffsetOf(0), 0);
  EXPECT_EQ(layout.OffsetOf(2), 32 * 27 + 32);
  EXPECT_EQ(layout.OffsetOf(layout.parameters.size()), layout.parameter_count());
  EXPECT_EQ(layout.IndexOf("conv9.weight").status().code(), StatusCode::kNotFound);
}

TEST(ModelLayoutTest, KindsParseByName) {
  for (ModelKind kind : {ModelKind::kMlp, ModelKind::kCnn}) {
    auto parsed = ParseModelKind(ModelKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
    EXPECT_EQ(LayoutOf(kind).name, ModelKindName(kind));
  }
  EXPECT_EQ(ParseModelKind("resnet").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare::examples
