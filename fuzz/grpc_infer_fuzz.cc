// Fuzz target: a gRPC ModelInferRequest as it arrives (protobuf wire bytes), through the codec the
// service uses. Whatever parses as the message either becomes a request whose tensors written back
// as raw output contents take exactly their data's bytes, or is refused with InvalidArgument.
#include <cstddef>
#include <cstdint>

#include "gshare/protocol/grpc/grpc_codec.h"
#include "small_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  const gshare::Result<gshare::InferRequest> request =
      gshare::FromGrpc(message, SmallParseLimits());
  if (!request.ok()) {
    if (request.status().code() != gshare::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  gshare::InferResponse response;
  response.model_name = "m";
  response.outputs = request->inputs;
  inference::ModelInferResponse out;
  gshare::ToGrpc(response, out);
  if (out.raw_output_contents_size() != static_cast<int>(request->inputs.size())) {
    __builtin_trap();
  }
  for (std::size_t i = 0; i < request->inputs.size(); ++i) {
    const gshare::Tensor& tensor = request->inputs[i];
    std::size_t expected = tensor.data_bytes();
    if (tensor.datatype() == gshare::DataType::kBytes) expected += 4 * tensor.strings().size();
    if (out.raw_output_contents(static_cast<int>(i)).size() != expected) __builtin_trap();
  }
  return 0;
}
