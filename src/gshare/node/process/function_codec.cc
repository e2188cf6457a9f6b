#include "gshare/node/process/function_codec.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

#include "gshare/protocol/batching.h"
#include "gshare/protocol/kserve_json.h"

namespace gshare {
namespace {

// `request` in its function's form; `binary` adds binary_data_output to its parameters.
Result<FunctionBody> Encode(InferRequest& request, bool binary) {
  if (!binary) {
    GSHARE_ASSIGN_OR_RETURN(std::string json, SerializeInferRequest(request));
    return FunctionBody{std::move(json), std::nullopt};
  }
  if (!request.parameters) request.parameters = nlohmann::json::object();
  (*request.parameters)["binary_data_output"] = true;
  GSHARE_ASSIGN_OR_RETURN(
      BinaryBody encoded,
      SerializeInferRequestWithBinary(request, [](const std::string&) { return true; }));
  return FunctionBody{std::move(encoded.body), encoded.json_bytes};
}

}  // namespace

Result<FunctionBody> EncodeFunctionRequest(InferRequest request, bool binary) {
  return Encode(request, binary);
}

Result<EncodedRequest> EncodeAlone(InferRequest& request, bool binary) {
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t size, BatchSizeOf(request));
  // Stacked alone, a request is its inputs, its parameters and its requested outputs: the inputs
  // are lent to the message and given back however the encoding ends.
  InferRequest alone;
  alone.parameters = request.parameters;
  alone.requested_outputs = request.requested_outputs;
  struct Lend {
    std::vector<Tensor>& owner;
    std::vector<Tensor>& borrower;
    ~Lend() { owner = std::move(borrower); }
  } lend{request.inputs, alone.inputs};
  alone.inputs = std::move(request.inputs);
  GSHARE_ASSIGN_OR_RETURN(FunctionBody body, Encode(alone, binary));
  return EncodedRequest{std::move(body), binary, size};
}

Result<InferResponse> DecodeFunctionAnswer(std::string_view body, std::string_view json_length) {
  if (json_length.empty()) return ParseInferResponse(body);
  std::size_t length = 0;
  const auto [end, error] =
      std::from_chars(json_length.data(), json_length.data() + json_length.size(), length);
  if (error != std::errc() || end != json_length.data() + json_length.size() ||
      length > body.size()) {
    return InvalidArgument(fmt::format(
        "the function's Inference-Header-Content-Length '{}' is not a length within its {} bytes",
        json_length.substr(0, 32), body.size()));
  }
  return ParseInferResponseWithBinary(body.substr(0, length), body.substr(length));
}

Result<InferResponse> DecodeAnswerAlone(const FunctionAnswer& answer) {
  GSHARE_ASSIGN_OR_RETURN(InferResponse response,
                          DecodeFunctionAnswer(answer.body, answer.json_length));
  GSHARE_RETURN_IF_ERROR(CheckBatchOutputs(response, answer.batch_size));
  response.id.reset();
  return response;
}

}  // namespace gshare
