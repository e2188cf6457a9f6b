#include "gshare/protocol/grpc/grpc_codec.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gshare {
namespace {

using Input = inference::ModelInferRequest::InferInputTensor;

Input* AddInput(inference::ModelInferRequest& m, const char* name, const char* type,
                std::vector<std::int64_t> shape) {
  Input* input = m.add_inputs();
  input->set_name(name);
  input->set_datatype(type);
  for (auto d : shape) input->add_shape(d);
  return input;
}

std::string Message(const inference::ModelInferRequest& m) {
  auto parsed = FromGrpc(m);
  return parsed.ok() ? "ok" : parsed.status().message();
}

TEST(GrpcCodecTest, RawContentsOfEveryDatatype) {
  for (const DataType type : kAllDataTypes) {
    inference::ModelInferRequest m;
    m.set_id("r1");
    AddInput(m, "x", std::string(DataTypeName(type)).c_str(), {1, 2});
    std::string raw;
    if (type == DataType::kBytes) {
      for (const std::string s : {"ab", ""}) {
        const auto n = static_cast<std::uint32_t>(s.size());
        raw.append(reinterpret_cast<const char*>(&n), 4).append(s);
      }
    } else {
      raw.assign(2 * ElementSizeBytes(type), '\0');
      raw[0] = 1;
    }
    m.add_raw_input_contents(raw);
    auto request = FromGrpc(m);
    ASSERT_TRUE(request.ok()) << DataTypeName(type) << ": " << request.status().ToString();
    EXPECT_EQ(request->id, "r1");
    ASSERT_EQ(request->inputs.size(), 1u);
    const Tensor& x = request->inputs[0];
    EXPECT_EQ(x.datatype(), type);
    EXPECT_EQ(x.shape(), (std::vector<std::int64_t>{1, 2}));
    // Back out as raw contents: the same bytes.
    InferResponse response;
    response.model_name = "m";
    response.outputs = {x};
    inference::ModelInferResponse out;
    ToGrpc(response, out);
    ASSERT_EQ(out.raw_output_contents_size(), 1);
    EXPECT_EQ(out.raw_output_contents(0), raw) << DataTypeName(type);
    EXPECT_EQ(out.outputs(0).datatype(), DataTypeName(type));
  }
}

TEST(GrpcCodecTest, TypedContents) {
  inference::ModelInferRequest m;
  AddInput(m, "f", "FP32", {2})->mutable_contents()->add_fp32_contents(1.5f);
  m.mutable_inputs(0)->mutable_contents()->add_fp32_contents(-2.0f);
  AddInput(m, "i", "INT8", {1})->mutable_contents()->add_int_contents(-128);
  AddInput(m, "u", "UINT16", {1})->mutable_contents()->add_uint_contents(65535);
  AddInput(m, "b", "BOOL", {1})->mutable_contents()->add_bool_contents(true);
  AddInput(m, "s", "BYTES", {1})->mutable_contents()->add_bytes_contents("hi");
  (*m.mutable_parameters())["flag"].set_bool_param(true);
  (*m.mutable_parameters())["n"].set_int64_param(-3);
  m.add_outputs()->set_name("y");
  auto request = FromGrpc(m);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const auto floats = *request->inputs[0].Values<float>();
  EXPECT_EQ(std::vector<float>(floats.begin(), floats.end()), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ((*request->inputs[1].Values<std::int8_t>())[0], -128);
  EXPECT_EQ((*request->inputs[2].Values<std::uint16_t>())[0], 65535);
  EXPECT_EQ((*request->inputs[3].Values<bool>())[0], true);
  EXPECT_EQ(request->inputs[4].strings(), (std::vector<std::string>{"hi"}));
  EXPECT_EQ(*request->parameters, nlohmann::json({{"flag", true}, {"n", -3}}));
  EXPECT_EQ(request->requested_outputs, (std::vector<std::string>{"y"}));
  EXPECT_FALSE(request->id.has_value());
}

TEST(GrpcCodecTest, RefusesWhatDoesNotFit) {
  {
    inference::ModelInferRequest m;
    AddInput(m, "i", "INT8", {1})->mutable_contents()->add_int_contents(128);
    EXPECT_EQ(Message(m), "input 'i': element 0 (128) is out of its datatype's range");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "f", "FP32", {3})->mutable_contents()->add_fp32_contents(1);
    EXPECT_EQ(Message(m), "input 'f': 1 values for shape [3] (3 elements)");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "f", "FP32", {1})->mutable_contents()->add_int_contents(1);
    EXPECT_EQ(Message(m), "input 'f': its contents are in a field other than FP32's");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "h", "FP16", {1});
    EXPECT_EQ(Message(m), "input 'h': FP16 has no contents field; send it in raw_input_contents");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "f", "FP32", {2});
    m.add_raw_input_contents(std::string(7, '\0'));
    EXPECT_EQ(Message(m), "input 'f': 7 raw bytes for shape [2] of FP32 (8 bytes)");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "f", "FP32", {1});
    AddInput(m, "g", "FP32", {1});
    m.add_raw_input_contents(std::string(4, '\0'));
    EXPECT_EQ(Message(m), "1 raw_input_contents for 2 inputs");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "f", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
    m.add_raw_input_contents(std::string(4, '\0'));
    EXPECT_EQ(Message(m), "input 'f' has contents while the request gives raw_input_contents");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "s", "BYTES", {2});
    const std::uint32_t n = 100;
    m.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&n), 4) + "abc");
    EXPECT_EQ(Message(m), "input 's': element 0 is longer than the bytes left");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "b", "BOOL", {1});
    m.add_raw_input_contents(std::string(1, '\2'));
    EXPECT_EQ(Message(m), "input 'b': a BOOL byte is neither 0 nor 1");
  }
  {
    inference::ModelInferRequest m;
    AddInput(m, "x", "FP32", {-1});
    EXPECT_NE(Message(m).find("input 'x'"), std::string::npos);
    inference::ModelInferRequest twice;
    AddInput(twice, "x", "FP32", {0});
    AddInput(twice, "x", "FP32", {0});
    EXPECT_EQ(Message(twice), "input 'x' appears twice");
    inference::ModelInferRequest bogus;
    AddInput(bogus, "x", "FP99", {0});
    EXPECT_NE(Message(bogus).find("FP99"), std::string::npos);
  }
  {
    // Limits: elements and bytes are bounded before anything of their size is kept.
    inference::ModelInferRequest m;
    AddInput(m, "x", "FP32", {1LL << 40});
    EXPECT_EQ(Message(m), "the inputs hold more than 16777216 elements");
  }
}

}  // namespace
}  // namespace gshare
