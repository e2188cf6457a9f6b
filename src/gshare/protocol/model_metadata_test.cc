#include "gshare/protocol/model_metadata.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(ModelMetadataTest, ReadsWhatItWrites) {
  const ModelTensors tensors{
      .inputs = {{"input", DataType::kFp32, {-1, 1, 28, 28}}, {"text", DataType::kBytes, {-1, -1}}},
      .outputs = {{"logits", DataType::kFp16, {-1, 10}}}};
  const nlohmann::json metadata = {{"name", "m"},
                                   {"versions", {"1"}},
                                   {"inputs", TensorSpecsJson(tensors.inputs)},
                                   {"outputs", TensorSpecsJson(tensors.outputs)}};
  auto parsed = ParseModelMetadataTensors(metadata.dump(), true);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, tensors);
  EXPECT_EQ(metadata["inputs"][0],
            nlohmann::json({{"name", "input"}, {"datatype", "FP32"}, {"shape", {-1, 1, 28, 28}}}));
  // No tensors: none, whatever else it says.
  auto bare = ParseModelMetadataTensors(R"({"name":"m","platform":"x"})", true);
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->empty());
}

TEST(ModelMetadataTest, RefusesWhatIsNotTensors) {
  const auto message = [](std::string_view json) {
    auto parsed = ParseModelMetadataTensors(json, true);
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  EXPECT_EQ(message("[1]"), "the metadata is not a JSON object");
  EXPECT_EQ(message("{"), "the metadata is not a JSON object");
  EXPECT_EQ(message(R"({"inputs": {}})"), "'inputs' is not an array");
  EXPECT_EQ(message(R"({"inputs": [{"name": "x", "shape": [-1]}]})"),
            "inputs[0] is not an object with a string 'name', a string 'datatype' and a 'shape' "
            "array");
  EXPECT_NE(message(R"({"inputs": [{"name": "x", "datatype": "F", "shape": [-1]}]})").find("'F'"),
            std::string::npos);
  EXPECT_EQ(message(R"({"outputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 1.5]}]})"),
            "outputs[0]: a dimension is not an integer");
  EXPECT_EQ(
      message(
          R"({"outputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 18446744073709551615]}]})"),
      "outputs[0]: a dimension is above 2^40");
  EXPECT_EQ(message(R"({"outputs": [{"name": "x", "datatype": "FP32", "shape": [2]}]})"),
            "outputs 'x': the first dimension is the batch dimension of a batching model and must "
            "be -1, not 2");
  EXPECT_EQ(message(R"({"inputs": [[[[[[[[[[1]]]]]]]]]]})").substr(0, 10), "JSON nests");
  EXPECT_EQ(message(std::string(kMaxModelMetadataBytes + 1, ' ')),
            "the metadata is 1048577 bytes; at most 1048576");
}

}  // namespace
}  // namespace gshare
