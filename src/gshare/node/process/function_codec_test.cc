#include "gshare/node/process/function_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gshare/protocol/batching.h"
#include "gshare/protocol/kserve_json.h"

namespace gshare {
namespace {

InferRequest TwoRows() {
  InferRequest request;
  request.id = "client-id";
  request.parameters = nlohmann::json{{"temperature", 2}};
  request.requested_outputs = {"y"};
  request.inputs.push_back(
      *Tensor::FromValues<float>("x", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}));
  request.inputs.push_back(*Tensor::FromStrings("s", {2}, {"a", "\xff\x00z"}));
  return request;
}

// Encoded alone, a request is exactly what the host would send as a batch of it alone, in both
// forms, and the request is given back unchanged.
TEST(FunctionCodecTest, ARequestAloneEncodesAsItsBatchOfOne) {
  for (const bool binary : {true, false}) {
    SCOPED_TRACE(binary);
    InferRequest request = TwoRows();
    if (!binary) request.inputs.pop_back();  // JSON cannot carry the non-UTF-8 string
    const InferRequest before = request;
    auto alone = EncodeAlone(request, binary);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    EXPECT_EQ(request, before);
    EXPECT_EQ(alone->binary, binary);
    EXPECT_EQ(alone->batch_size, 2);

    auto stacked = StackBatch(std::vector<InferRequest>{request});
    ASSERT_TRUE(stacked.ok());
    auto batch = EncodeFunctionRequest(std::move(stacked->request), binary);
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(alone->body.body, batch->body);
    EXPECT_EQ(alone->body.json_bytes, batch->json_bytes);
    EXPECT_EQ(alone->body.json_bytes.has_value(), binary);
    // And a function reads it back as the request without its id.
    auto parsed = binary
                      ? ParseInferRequestWithBinary(
                            std::string_view(alone->body.body).substr(0, *alone->body.json_bytes),
                            std::string_view(alone->body.body).substr(*alone->body.json_bytes))
                      : ParseInferRequest(alone->body.body);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_FALSE(parsed->id.has_value());
    EXPECT_EQ(parsed->inputs, request.inputs);
    EXPECT_EQ(parsed->requested_outputs, request.requested_outputs);
    EXPECT_EQ(parsed->parameters->value("binary_data_output", false), binary);
  }
}

// What cannot be sent alone fails as the batch would, and the request keeps its tensors.
TEST(FunctionCodecTest, ARequestThatCannotBeEncodedIsGivenBackWhole) {
  InferRequest request = TwoRows();
  const InferRequest before = request;
  auto json = EncodeAlone(request, /*binary=*/false);  // a non-UTF-8 string in JSON
  EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request, before);

  InferRequest ragged = TwoRows();
  ragged.inputs[1] = *Tensor::FromStrings("s", {3}, {"a", "b", "c"});
  auto stacked = StackBatch(std::vector<InferRequest>{ragged});
  auto alone = EncodeAlone(ragged, /*binary=*/true);
  ASSERT_FALSE(stacked.ok());
  EXPECT_EQ(alone.status().ToString(), stacked.status().ToString());

  InferRequest empty;
  EXPECT_EQ(EncodeAlone(empty, true).status().code(), StatusCode::kInvalidArgument);
}

// An answer to a request alone decodes as SplitBatch would give its one part.
TEST(FunctionCodecTest, AnAnswerAloneDecodesAndIsCheckedAsItsBatch) {
  InferResponse response;
  response.model_name = "m";
  response.id = "7";
  response.outputs.push_back(
      *Tensor::FromValues<float>("y", {2, 2}, std::vector<float>{1, 2, 3, 4}));
  auto binary = SerializeInferResponseWithBinary(response, [](const std::string&) { return true; });
  ASSERT_TRUE(binary.ok());
  auto decoded = DecodeAnswerAlone({binary->body, std::to_string(binary->json_bytes), 2});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  auto split = SplitBatch(response, std::vector<std::int64_t>{2});
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(*decoded, split->front());

  auto json = SerializeInferResponse(response);
  ASSERT_TRUE(json.ok());
  auto from_json = DecodeAnswerAlone({*json, "", 2});
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(*from_json, split->front());

  // Rows that are not the request's: refused as SplitBatch refuses them.
  auto wrong_rows = DecodeAnswerAlone({*json, "", 3});
  EXPECT_EQ(wrong_rows.status().ToString(),
            SplitBatch(response, std::vector<std::int64_t>{3}).status().ToString());
  // A header length that is not a length within the body.
  for (const char* length : {"x", "-1", "999999", "12 "}) {
    SCOPED_TRACE(length);
    EXPECT_EQ(DecodeAnswerAlone({binary->body, length, 2}).status().code(),
              StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace gshare
