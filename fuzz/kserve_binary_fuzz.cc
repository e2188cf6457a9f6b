// Fuzz target: the binary tensor data extension. The input's first two bytes (little-endian) say
// how many of the rest are the JSON; the others are the binary part. Whatever parses must write as
// JSON and parse back equal, and its tensors, written back as a binary answer, must take exactly
// the bytes the JSON of that answer declares.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gshare/protocol/kserve_json.h"
#include "small_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::size_t json_bytes =
      (data[0] | (static_cast<std::size_t>(data[1]) << 8)) % (rest.size() + 1);
  const gshare::ParseLimits limits = SmallParseLimits();
  const gshare::Result<gshare::InferRequest> request = gshare::ParseInferRequestWithBinary(
      rest.substr(0, json_bytes), rest.substr(json_bytes), limits);
  if (!request.ok()) {
    if (request.status().code() != gshare::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  const gshare::Result<std::string> written = gshare::SerializeInferRequest(*request);
  if (written.ok()) {  // a NaN or text that is not UTF-8 cannot be JSON: binary data can be both
    const gshare::Result<gshare::InferRequest> again = gshare::ParseInferRequest(*written);
    if (!again.ok() || !(*again == *request)) __builtin_trap();
  } else if (written.status().code() != gshare::StatusCode::kInvalidArgument) {
    __builtin_trap();
  }
  gshare::InferResponse response;
  response.model_name = "m";
  response.outputs = request->inputs;
  // Every other output by name binary: the JSON's binary_data_size values add up to the bytes
  // after it.
  const auto binary = [](const std::string& name) { return name.size() % 2 == 0; };
  const gshare::Result<gshare::BinaryBody> answer =
      gshare::SerializeInferResponseWithBinary(response, binary);
  if (!answer.ok()) return 0;  // text that is not UTF-8 in a JSON output
  if (answer->json_bytes > answer->body.size()) __builtin_trap();
  const nlohmann::json header = nlohmann::json::parse(answer->body.substr(0, answer->json_bytes),
                                                      nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) __builtin_trap();
  std::uint64_t declared = 0;
  for (const auto& output : header["outputs"]) {
    if (output.contains("parameters"))
      declared += output["parameters"]["binary_data_size"].get<std::uint64_t>();
  }
  if (declared != answer->body.size() - answer->json_bytes) __builtin_trap();
  return 0;
}
