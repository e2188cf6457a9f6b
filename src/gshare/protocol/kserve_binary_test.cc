// The binary tensor data extension: request bodies with tensors after their JSON, and answers
// written the same way.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gshare/protocol/allocation_counter_for_test.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/tensor/half.h"

namespace gshare {
namespace {

using nlohmann::json;

// The extension's bytes of `tensor`: raw for fixed-size types, length-prefixed BYTES elements.
std::string BinaryOf(const Tensor& tensor) {
  std::string out;
  if (tensor.datatype() != DataType::kBytes) {
    out.assign(reinterpret_cast<const char*>(tensor.raw_bytes().data()), tensor.raw_bytes().size());
    return out;
  }
  for (const std::string& element : tensor.strings()) {
    const auto length = static_cast<std::uint32_t>(element.size());
    for (int b = 0; b < 4; ++b) out += static_cast<char>((length >> (8 * b)) & 0xff);
    out += element;
  }
  return out;
}

json BinaryInput(const Tensor& tensor, std::size_t size) {
  return {{"name", tensor.name()},
          {"datatype", std::string(DataTypeName(tensor.datatype()))},
          {"shape", tensor.shape()},
          {"parameters", {{"binary_data_size", size}}}};
}

std::vector<Tensor> EveryDatatype() {
  std::vector<Tensor> tensors;
  const auto add = [&](Result<Tensor> tensor) {
    ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
    tensors.push_back(std::move(tensor).value());
  };
  const std::vector<std::uint8_t> bools = {1, 0, 1};
  std::vector<std::byte> bool_bytes(bools.size());
  std::memcpy(bool_bytes.data(), bools.data(), bools.size());
  add(Tensor::FromBytes("bool", DataType::kBool, {3}, bool_bytes));
  add(Tensor::FromValues<std::uint8_t>("u8", {2}, std::vector<std::uint8_t>{0, 255}));
  add(Tensor::FromValues<std::uint16_t>("u16", {2}, std::vector<std::uint16_t>{1, 65535}));
  add(Tensor::FromValues<std::uint32_t>("u32", {1}, std::vector<std::uint32_t>{4000000000u}));
  add(Tensor::FromValues<std::uint64_t>("u64", {1}, std::vector<std::uint64_t>{~0ULL}));
  add(Tensor::FromValues<std::int8_t>("i8", {2}, std::vector<std::int8_t>{-128, 127}));
  add(Tensor::FromValues<std::int16_t>("i16", {1}, std::vector<std::int16_t>{-300}));
  add(Tensor::FromValues<std::int32_t>("i32", {2, 2}, std::vector<std::int32_t>{1, -2, 3, -4}));
  add(Tensor::FromValues<std::int64_t>("i64", {1}, std::vector<std::int64_t>{-(1LL << 62)}));
  add(Tensor::FromValues<Half>("f16", {2},
                               std::vector<Half>{*DoubleToHalf(1.5), *DoubleToHalf(-2.0)}));
  add(Tensor::FromValues<float>("f32", {1, 3}, std::vector<float>{0.25f, -1e30f, 3.0f}));
  add(Tensor::FromValues<double>("f64", {1}, std::vector<double>{1e-300}));
  add(Tensor::FromStrings("bytes", {3}, {"", "hello", std::string("\0\xff", 2)}));
  add(Tensor::FromValues<float>("empty", {0, 4}, std::vector<float>{}));
  return tensors;
}

TEST(KserveBinaryTest, EveryDatatypeAfterTheJsonInItsOrder) {
  const std::vector<Tensor> tensors = EveryDatatype();
  json header = {{"id", "b"}, {"inputs", json::array()}};
  std::string binary;
  for (const Tensor& tensor : tensors) {
    const std::string bytes = BinaryOf(tensor);
    header["inputs"].push_back(BinaryInput(tensor, bytes.size()));
    binary += bytes;
  }
  // One input in JSON among them: binary data is per input.
  header["inputs"].push_back(
      {{"name", "text"}, {"datatype", "INT32"}, {"shape", {2}}, {"data", {5, 6}}});
  auto parsed = ParseInferRequestWithBinary(header.dump(), binary);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->inputs.size(), tensors.size() + 1);
  for (std::size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(parsed->inputs[i], tensors[i]) << i;
  EXPECT_EQ(parsed->inputs.back().Values<std::int32_t>().value()[1], 6);
  EXPECT_EQ(parsed->id, "b");
}

// How the node and a function speak the extension: a request written binary reads back equal, and
// so does an answer; bytes no tensor names are refused.
TEST(KserveBinaryTest, RequestsAndAnswersRoundTripInTheBinaryForm) {
  InferRequest request;
  request.id = "r";
  request.parameters = json{{"binary_data_output", true}};
  request.inputs = EveryDatatype();
  const auto all = [](const std::string&) { return true; };
  auto written = SerializeInferRequestWithBinary(request, all);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  const std::string_view body = written->body;
  auto again = ParseInferRequestWithBinary(body.substr(0, written->json_bytes),
                                           body.substr(written->json_bytes));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, request);

  InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.outputs = EveryDatatype();
  auto answer = SerializeInferResponseWithBinary(response, all);
  ASSERT_TRUE(answer.ok());
  const std::string_view text = answer->body;
  auto read = ParseInferResponseWithBinary(text.substr(0, answer->json_bytes),
                                           text.substr(answer->json_bytes));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, response);
  const std::string extra = answer->body + "x";
  auto trailing =
      ParseInferResponseWithBinary(std::string_view(extra).substr(0, answer->json_bytes),
                                   std::string_view(extra).substr(answer->json_bytes));
  ASSERT_FALSE(trailing.ok());
  EXPECT_EQ(trailing.status().message(),
            "the body has 1 bytes of binary data after those the outputs' binary_data_size name");
  // Without a binary part, an answer's binary_data_size is refused as a request's is.
  EXPECT_FALSE(ParseInferResponse(text.substr(0, answer->json_bytes)).ok());
}

TEST(KserveBinaryTest, WhatDoesNotAddUpIsRefusedNamingTheInput) {
  const auto error = [](const json& header, const std::string& binary) {
    auto parsed = ParseInferRequestWithBinary(header.dump(), binary);
    return parsed.ok() ? std::string("<parsed>") : parsed.status().message();
  };
  const auto one = [](const std::string& type, json shape, json size) {
    return json{{"inputs",
                 {{{"name", "x"},
                   {"datatype", type},
                   {"shape", std::move(shape)},
                   {"parameters", {{"binary_data_size", std::move(size)}}}}}}};
  };
  EXPECT_EQ(error(one("FP32", {2}, 4), std::string(4, '\0')),
            "input 'x': binary_data_size is 4 bytes; shape [2] of FP32 takes 8");
  EXPECT_EQ(error(one("FP32", {2}, 8), std::string(4, '\0')),
            "input 'x': binary_data_size is 8 bytes, but 4 bytes of binary data are left");
  EXPECT_EQ(error(one("FP32", {1}, 4), std::string(6, '\0')),
            "the body has 2 bytes of binary data after those the inputs' binary_data_size name");
  EXPECT_EQ(error(one("FP32", {1}, -4), std::string(4, '\0')),
            "input 'x': 'binary_data_size' is not a non-negative integer");
  EXPECT_EQ(error(one("FP32", {1}, "4"), std::string(4, '\0')),
            "input 'x': 'binary_data_size' is not a non-negative integer");
  EXPECT_NE(error(one("BOOL", {1}, 1), std::string(1, '\2')).find("neither 0 nor 1"),
            std::string::npos);
  // BYTES: a length beyond the data, data beyond the elements, data short of a length.
  EXPECT_EQ(error(one("BYTES", {1}, 6), std::string("\x09\0\0\0ab", 6)),
            "input 'x': element 0 is 9 bytes long, but 2 bytes of its binary data are left");
  EXPECT_EQ(error(one("BYTES", {1}, 7), std::string("\x02\0\0\0abc", 7)),
            "input 'x': binary_data_size is 7 bytes; its 1 elements take 6");
  EXPECT_EQ(error(one("BYTES", {2}, 6), std::string("\x02\0\0\0ab", 6)),
            "input 'x': its binary data ends before element 1's length");
  // Both forms for one input, and the extension's parameter without a binary part.
  json both = one("FP32", {1}, 4);
  both["inputs"][0]["data"] = {1.0};
  EXPECT_EQ(error(both, std::string(4, '\0')),
            "input 'x': both 'data' and 'binary_data_size' are given");
  EXPECT_EQ(ParseInferRequest(one("FP32", {1}, 4).dump()).status().message(),
            "input 'x': 'binary_data_size' is given, but the body has no binary data (its JSON's "
            "length goes in Inference-Header-Content-Length)");
}

TEST(KserveBinaryTest, TheBinaryPartCountsAgainstTheLimits) {
  ParseLimits limits;
  limits.max_tensor_bytes = 16;
  const json header = {{"inputs",
                        {{{"name", "x"},
                          {"datatype", "FP32"},
                          {"shape", {8}},
                          {"parameters", {{"binary_data_size", 32}}}}}}};
  EXPECT_EQ(
      ParseInferRequestWithBinary(header.dump(), std::string(32, '\0'), limits).status().message(),
      "input 'x': shape [8] exceeds the limit on tensor bytes");
  const json strings = {{"inputs",
                         {{{"name", "s"},
                           {"datatype", "BYTES"},
                           {"shape", {1}},
                           {"parameters", {{"binary_data_size", 24}}}}}}};
  EXPECT_EQ(ParseInferRequestWithBinary(strings.dump(),
                                        std::string("\x14\0\0\0", 4) + std::string(20, 'a'), limits)
                .status()
                .message(),
            "input 's': its strings exceed the limit on tensor bytes");
}

TEST(KserveBinaryTest, RequestedOutputsKeepTheirBinaryDataFlag) {
  const std::string text =
      R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1]}],)"
      R"("outputs":[{"name":"a","parameters":{"binary_data":true}},{"name":"b"},)"
      R"({"name":"c","parameters":{"binary_data":false}}]})";
  auto parsed = ParseInferRequest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->requested_outputs, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(parsed->output_binary_data,
            (std::vector<std::pair<std::string, bool>>{{"a", true}, {"c", false}}));
  // Written for a function and read back, the same.
  auto again = ParseInferRequest(SerializeInferRequest(*parsed).value());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *parsed);
  EXPECT_EQ(ParseInferRequest(R"({"inputs":[],"outputs":[{"name":"a","parameters":)"
                              R"({"binary_data":1}}]})")
                .status()
                .message(),
            "requested output 0: 'binary_data' is not a boolean");
}

TEST(KserveBinaryTest, AnAnswerWithBinaryOutputsAfterItsJson) {
  InferResponse response;
  response.model_name = "m";
  response.id = "7";
  const std::vector<Tensor> tensors = EveryDatatype();
  response.outputs = tensors;
  // Every other output binary.
  const auto binary = [](const std::string& name) {
    return name == "u8" || name == "f32" || name == "bytes" || name == "empty" || name == "f16";
  };
  auto written = SerializeInferResponseWithBinary(response, binary);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  const json header = json::parse(written->body.substr(0, written->json_bytes));
  std::string expected_tail;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const json& output = header["outputs"][i];
    EXPECT_EQ(output["name"], tensors[i].name());
    EXPECT_EQ(output["shape"], tensors[i].shape());
    if (binary(tensors[i].name())) {
      EXPECT_FALSE(output.contains("data")) << i;
      const std::string bytes = BinaryOf(tensors[i]);
      EXPECT_EQ(output["parameters"]["binary_data_size"], bytes.size()) << i;
      expected_tail += bytes;
    } else {
      EXPECT_TRUE(output.contains("data")) << i;
      EXPECT_FALSE(output.contains("parameters")) << i;
    }
  }
  EXPECT_EQ(written->body.substr(written->json_bytes), expected_tail);
  EXPECT_EQ(header["id"], "7");
}

TEST(KserveBinaryTest, ParsingAndWritingTakeAboutTheTensorsBytes) {
  // 16 MiB of FP32 as binary data: the parse copies it once into the tensor, and writing it back
  // makes one body of the JSON and the bytes.
  constexpr std::size_t kElements = 4 << 20;
  const std::string binary(kElements * sizeof(float), '\0');
  const json header = {{"inputs",
                        {{{"name", "x"},
                          {"datatype", "FP32"},
                          {"shape", {kElements}},
                          {"parameters", {{"binary_data_size", binary.size()}}}}}}};
  const std::string text = header.dump();
  const std::size_t before = testing::AllocatedBytes();
  testing::ResetPeakAllocatedBytes();
  auto parsed = ParseInferRequestWithBinary(text, binary);
  const double parse_ratio = static_cast<double>(testing::PeakAllocatedBytes() - before) /
                             static_cast<double>(binary.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  InferResponse response;
  response.model_name = "m";
  response.outputs = std::move(parsed->inputs);
  const std::size_t before_write = testing::AllocatedBytes();
  testing::ResetPeakAllocatedBytes();
  auto written =
      SerializeInferResponseWithBinary(response, [](const std::string&) { return true; });
  const double write_ratio = static_cast<double>(testing::PeakAllocatedBytes() - before_write) /
                             static_cast<double>(binary.size());
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->body.size() - written->json_bytes, binary.size());
  EXPECT_LE(parse_ratio, 1.1);
  EXPECT_LE(write_ratio, 1.1);
  std::printf("binary parse of %zu bytes: %.2fx allocated; binary answer: %.2fx\n", binary.size(),
              parse_ratio, write_ratio);
}

}  // namespace
}  // namespace gshare
