// The KServe v2 gRPC messages (inference.proto) to and from InferRequest and InferResponse.
//
// FromGrpc takes a message from anyone and either returns a request whose every tensor satisfies
// the Tensor invariants, or InvalidArgument with a message fit for the client. It checks what the
// JSON codec checks (kserve_json.h): names non-empty and unique, datatype names, shapes, the
// ParseLimits on tensors, elements, bytes and parameter values; and for the data: either every
// input in raw_input_contents (one entry per input, its little-endian bytes exactly the shape's
// size; BYTES as 4-byte little-endian lengths and bytes, exactly the shape's element count) or
// every input in the contents field of its datatype (exactly the shape's element count, each
// value within its datatype's range; FP16 has no such field: raw only), never both. Parameters
// become the JSON object InferRequest keeps: bool, int64, uint64, double and string values.
//
// ToGrpc writes every output's data as raw_output_contents. Free functions: safe from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include "gshare/common/status.h"
#include "gshare/protocol/grpc/inference.pb.h"
#include "gshare/protocol/infer.h"
#include "gshare/protocol/kserve_json.h"

namespace gshare {

Result<InferRequest> FromGrpc(const inference::ModelInferRequest& message,
                              const ParseLimits& limits = {});

void ToGrpc(const InferResponse& response, inference::ModelInferResponse& message);

// The bytes a message of this request takes on the wire (what the front's shares count).
std::uint64_t WireBytes(const inference::ModelInferRequest& message);

}  // namespace gshare
