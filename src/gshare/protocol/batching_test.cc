#include "gshare/protocol/batching.h"

#include <array>
#include <vector>

#include <gtest/gtest.h>

namespace gshare {
namespace {

InferRequest Request(std::int64_t rows, float start) {
  std::vector<float> values;
  for (std::int64_t i = 0; i < rows * 2; ++i) values.push_back(start + static_cast<float>(i));
  std::vector<std::string> words(static_cast<std::size_t>(rows), "w" + std::to_string(rows));
  InferRequest request;
  request.inputs.push_back(*Tensor::FromValues<float>("x", {rows, 2}, values));
  request.inputs.push_back(*Tensor::FromStrings("s", {rows}, words));
  request.requested_outputs = {"y"};
  return request;
}

TEST(BatchingTest, StacksAndSplitsBack) {
  std::vector<InferRequest> requests = {Request(1, 0), Request(3, 10), Request(0, 0)};
  requests[1].id = "second";
  // Input order may differ between requests; the batch follows the first.
  std::swap(requests[2].inputs[0], requests[2].inputs[1]);
  auto batch = StackBatch(requests);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->sizes, (std::vector<std::int64_t>{1, 3, 0}));
  EXPECT_FALSE(batch->request.id.has_value());
  EXPECT_EQ(batch->request.requested_outputs, (std::vector<std::string>{"y"}));
  ASSERT_EQ(batch->request.inputs.size(), 2u);
  const Tensor& x = batch->request.inputs[0];
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(x.shape(), (std::vector<std::int64_t>{4, 2}));
  const auto values = *x.Values<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.end()),
            (std::vector<float>{0, 1, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(batch->request.inputs[1].strings(), (std::vector<std::string>{"w1", "w3", "w3", "w3"}));

  // A function that echoes its inputs as outputs: the split gives each request its own rows.
  InferResponse response;
  response.model_name = "f";
  response.model_version = "1";
  response.outputs = batch->request.inputs;
  auto parts = SplitBatch(response, batch->sizes);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*parts)[i].model_name, "f");
    EXPECT_EQ((*parts)[i].model_version, "1");
    EXPECT_FALSE((*parts)[i].id.has_value());
    ASSERT_EQ((*parts)[i].outputs.size(), 2u);
    EXPECT_EQ((*parts)[i].outputs[0],
              *std::find_if(requests[i].inputs.begin(), requests[i].inputs.end(),
                            [](const Tensor& t) { return t.name() == "x"; }));
  }
  EXPECT_EQ((*parts)[1].outputs[1], requests[1].inputs[1]);
}

std::string StackError(const std::vector<InferRequest>& requests) {
  const auto batch = StackBatch(requests);
  if (batch.ok()) return "OK";
  EXPECT_EQ(batch.status().code(), StatusCode::kInvalidArgument);
  return batch.status().message();
}

TEST(BatchingTest, StackMismatches) {
  EXPECT_EQ(StackError({}), "no requests to batch");
  EXPECT_EQ(StackError({InferRequest{}}), "request 0 has no inputs to batch");

  auto other_name = Request(1, 0);
  other_name.inputs[1] = std::move(other_name.inputs[1]).Renamed("t");
  EXPECT_EQ(StackError({Request(1, 0), other_name}), "request 1 lacks input 's' of request 0");

  auto fewer = Request(1, 0);
  fewer.inputs.pop_back();
  EXPECT_EQ(StackError({Request(1, 0), fewer}), "request 1 has 1 inputs but request 0 has 2");

  auto other_type = Request(1, 0);
  other_type.inputs[0] = *Tensor::FromValues<double>("x", {1, 2}, std::vector<double>{1, 2});
  EXPECT_EQ(StackError({Request(1, 0), other_type}),
            "request 1: input 'x' is FP64 but FP32 in request 0");

  auto other_trailing = Request(1, 0);
  other_trailing.inputs[0] = *Tensor::FromValues<float>("x", {1, 3}, std::vector<float>{1, 2, 3});
  EXPECT_EQ(StackError({Request(1, 0), other_trailing}),
            "request 1: input 'x' has shape [1,3], whose trailing dimensions differ from [1,2] in "
            "request 0");

  auto ragged = Request(1, 0);
  ragged.inputs[1] = *Tensor::FromStrings("s", {2}, {"a", "b"});
  EXPECT_EQ(StackError({ragged}), "request 0: input 's' has batch size 2 but another input has 1");

  auto twice = Request(1, 0);
  twice.inputs[1] = twice.inputs[0];
  EXPECT_EQ(StackError({Request(1, 0), twice}), "request 1 has two inputs named 'x'");

  auto scalar = Request(1, 0);
  scalar.inputs[1] = *Tensor::FromStrings("s", {}, {"a"});
  EXPECT_EQ(StackError({scalar}), "request 0: input 's' is a scalar and has no batch dimension");

  auto other_outputs = Request(1, 0);
  other_outputs.requested_outputs = {"z"};
  EXPECT_EQ(StackError({Request(1, 0), other_outputs}),
            "request 1 requests other outputs than request 0");

  auto other_parameters = Request(1, 0);
  other_parameters.parameters = nlohmann::json{{"k", 1}};
  EXPECT_EQ(StackError({Request(1, 0), other_parameters}),
            "request 1 has other parameters than request 0");
}

TEST(BatchingTest, SplitMismatches) {
  InferResponse response;
  response.model_name = "f";
  response.outputs.push_back(*Tensor::FromValues<float>("y", {3}, std::vector<float>{1, 2, 3}));
  const std::array<std::int64_t, 2> short_sizes = {1, 1};
  EXPECT_EQ(SplitBatch(response, short_sizes).status().message(),
            "output 'y' has first dimension 3 but the batch's requests sum to 2");
  const std::array<std::int64_t, 2> negative = {4, -1};
  EXPECT_EQ(SplitBatch(response, negative).status().message(), "a batch size is negative");
  const std::array<std::int64_t, 2> overflow = {std::numeric_limits<std::int64_t>::max(), 1};
  EXPECT_EQ(SplitBatch(response, overflow).status().message(), "the batch sizes overflow");
  response.outputs.push_back(*Tensor::FromValues<float>("z", {}, std::vector<float>{1}));
  const std::array<std::int64_t, 2> sizes = {1, 2};
  EXPECT_EQ(SplitBatch(response, sizes).status().message(),
            "output 'z' is a scalar and cannot be split per request");
  response.outputs.pop_back();
  auto parts = SplitBatch(response, sizes);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[1].outputs[0].shape(), (std::vector<std::int64_t>{2}));
}

}  // namespace
}  // namespace gshare
