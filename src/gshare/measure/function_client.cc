#include "gshare/measure/function_client.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <charconv>
#include <future>
#include <nlohmann/json.hpp>
#include <utility>

#include "gshare/net/unix_http.h"
#include "gshare/node/process/function_codec.h"
#include "gshare/protocol/kserve_json.h"

namespace gshare::measure {

Result<FunctionClient::Answer> FunctionClient::Send(std::string method, std::string target,
                                                    std::string body,
                                                    std::chrono::milliseconds timeout,
                                                    std::optional<std::size_t> json_bytes) {
  // Shared: the loop may still be inside set_value when this thread wakes and returns.
  auto answered = std::make_shared<std::promise<Result<net::HttpResponse>>>();
  std::future<Result<net::HttpResponse>> result = answered->get_future();
  net::HttpRequest request{
      .method = std::move(method),
      .target = std::move(target),
      .body = std::move(body),
      .content_type = json_bytes ? "application/octet-stream" : "application/json"};
  if (json_bytes) {
    request.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*json_bytes));
  }
  boost::asio::post(loop_, [this, answered, timeout, request = std::move(request)]() mutable {
    net::SendUnixHttpRequest(loop_, socket_path_, std::move(request), timeout, net::HttpLimits{},
                             [answered](Result<net::HttpResponse> response) {
                               answered->set_value(std::move(response));
                             });
  });
  auto response = result.get();
  if (!response.ok()) return response.status();
  return Answer{response->status, std::move(response->body),
                std::string(net::FindHeader(response->headers, "Inference-Header-Content-Length"))};
}

Result<bool> FunctionClient::Ready(std::chrono::milliseconds timeout) {
  GSHARE_ASSIGN_OR_RETURN(Answer answer, Send("GET", "/v2/health/ready", "", timeout));
  return answer.status == 200;
}

Result<Tensor> FunctionClient::MakeInput(const std::vector<std::int64_t>& shape_flag,
                                         std::chrono::milliseconds timeout) {
  std::string name = "input";
  std::vector<std::int64_t> shape = shape_flag;
  if (shape.empty()) {
    GSHARE_ASSIGN_OR_RETURN(Answer answer,
                            Send("GET", fmt::format("/v2/models/{}", model_), "", timeout));
    if (answer.status != 200) {
      return FailedPrecondition(
          fmt::format("GET /v2/models/{} answered {}: give the input's shape with --input-shape",
                      model_, answer.status));
    }
    const nlohmann::json metadata = nlohmann::json::parse(answer.body, nullptr, false);
    if (metadata.is_discarded() || !metadata.contains("inputs") || !metadata["inputs"].is_array() ||
        metadata["inputs"].empty() || !metadata["inputs"][0].is_object()) {
      return InvalidArgument(
          fmt::format("the metadata of model '{}' names no input: {}", model_, answer.body));
    }
    const nlohmann::json& input = metadata["inputs"][0];
    if (input.value("datatype", "") != "FP32") {
      return InvalidArgument(fmt::format("model '{}': its first input is {}, not FP32", model_,
                                         input.value("datatype", "?")));
    }
    if (input.contains("name") && input["name"].is_string()) name = input["name"];
    if (!input.contains("shape") || !input["shape"].is_array() || input["shape"].empty() ||
        input["shape"].size() > 8) {
      return InvalidArgument(
          fmt::format("model '{}': its first input has no usable shape", model_));
    }
    for (const nlohmann::json& dimension : input["shape"]) {
      if (!dimension.is_number_integer()) {
        return InvalidArgument(
            fmt::format("model '{}': a shape dimension is not a whole number", model_));
      }
      const std::int64_t value = dimension.get<std::int64_t>();
      if (value != -1 && (value < 1 || value > (1 << 20))) {
        return InvalidArgument(
            fmt::format("model '{}': shape dimension {} is out of range", model_, value));
      }
      shape.push_back(value == -1 ? 1 : value);
    }
  }
  std::uint64_t elements = 1;
  for (const std::int64_t dimension : shape) {
    elements *= static_cast<std::uint64_t>(dimension);
    if (elements > (std::uint64_t{1} << 26)) {
      return InvalidArgument(
          fmt::format("model '{}': an input of more than 2^26 elements", model_));
    }
  }
  std::vector<float> values(elements);
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;  // a fixed draw: the same input on every call
  for (float& value : values) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    value =
        static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1 << 24)) * 2.0f -
        1.0f;
  }
  return Tensor::FromValues<float>(name, shape, values);
}

Result<std::vector<Tensor>> FunctionClient::Infer(const Tensor& input,
                                                  std::chrono::milliseconds timeout) {
  // As the node sends a batch: the binary tensor form, the answer asked in it too.
  InferRequest request;
  request.inputs.push_back(input);
  GSHARE_ASSIGN_OR_RETURN(FunctionBody body, EncodeFunctionRequest(std::move(request), true));
  GSHARE_ASSIGN_OR_RETURN(Answer answer, Send("POST", fmt::format("/v2/models/{}/infer", model_),
                                              std::move(body.body), timeout, body.json_bytes));
  if (answer.status != 200) {
    return Internal(fmt::format("model '{}' answered {}: {}", model_, answer.status,
                                answer.body.substr(0, 400)));
  }
  GSHARE_ASSIGN_OR_RETURN(InferResponse response,
                          DecodeFunctionAnswer(answer.body, answer.json_length));
  return std::move(response.outputs);
}

Result<std::vector<std::int64_t>> ParseShape(std::string_view text) {
  const std::string_view whole = text;
  std::vector<std::int64_t> shape;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (error != std::errc() || end != part.data() + part.size() || value < 1 ||
        value > (1 << 20)) {
      return InvalidArgument(
          fmt::format("shape '{}': each dimension is a whole number in [1, 1048576]", whole));
    }
    shape.push_back(value);
    if (shape.size() > 8) return InvalidArgument("a shape has at most 8 dimensions");
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return InvalidArgument("a shape does not end with a comma");
  }
  if (shape.empty()) return InvalidArgument("an empty shape");
  return shape;
}

}  // namespace gshare::measure
