// The function protocol's bodies (docs/protocol.md): a batch as the node sends it to a function
// process, and the process's answer as the node reads it.
//
// A batch goes in the binary tensor data extension, with binary_data_output, to a function that
// speaks it, and as JSON to one that does not; an answer is read in either form (the binary one
// when it gives Inference-Header-Content-Length).
//
// A request may be encoded ahead, alone (EncodeAlone), by whoever took it, on its own thread: the
// node then sends it as a batch of one without touching its tensors, and hands the answer back
// still encoded (FunctionAnswer) for the request's owner to decode (DecodeAnswerAlone), so that
// neither the encoding nor the decoding runs on the node's loop.
//
// Pure functions without shared state: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare {

// A request's body for a function.
struct FunctionBody {
  std::string body;
  std::optional<std::size_t> json_bytes;  // the binary form's Inference-Header-Content-Length
};

// `request` (a stacked batch: no id) as its function takes it: the binary form with
// binary_data_output where `binary`, else JSON (which fails for what JSON cannot carry).
Result<FunctionBody> EncodeFunctionRequest(InferRequest request, bool binary);

// A request encoded ahead as a batch of itself alone.
struct EncodedRequest {
  FunctionBody body;
  bool binary = false;          // the form it is in
  std::int64_t batch_size = 0;  // its first dimension, which every output must have
};

// `request` as StackBatch would stack it alone and EncodeFunctionRequest encode it (its id left
// out), or the error either gives. Its tensors are read in place, not copied: `request` is
// unchanged when it returns.
Result<EncodedRequest> EncodeAlone(InferRequest& request, bool binary);

// A function's answer as it came.
struct FunctionAnswer {
  std::string body;
  std::string json_length;      // its Inference-Header-Content-Length; empty: JSON
  std::int64_t batch_size = 0;  // of the one request it answers (DecodeAnswerAlone)
};

// The answer's message: JSON, or the binary form where json_length is given (InvalidArgument for a
// length that is not a number within the body).
Result<InferResponse> DecodeFunctionAnswer(std::string_view body, std::string_view json_length);

// The answer to a batch of one request, decoded and checked as SplitBatch checks the outputs of a
// batch (each of rank 1 or more, its first dimension the request's batch size), without an id.
Result<InferResponse> DecodeAnswerAlone(const FunctionAnswer& answer);

}  // namespace gshare
