// The KServe v2 (Open Inference Protocol) JSON codec for inference requests and responses.
//
// Parsing takes text from anyone (a client, a function process) and either returns a message
// whose every tensor satisfies the Tensor invariants, or InvalidArgument with a message fit to
// return to a client as {"error": "..."}. It checks: required fields and their JSON types;
// known fields given at most once; tensor names non-empty and unique; datatype names; shape
// dimensions non-negative integers; data given flat (row-major) or nested exactly as the shape;
// each element valid for its datatype (BOOL: true/false; integer types: an integer within the
// type's range; FP16, FP32, FP64: a number within the type's finite range, FP16 rounded to nearest
// even; BYTES: a string). The text is read in one pass of events (kserve_json_reader.cc), with no
// JSON tree of the message: the ParseLimits bound the text, the nesting, the number of tensors,
// the total elements and data bytes, and the values of all 'parameters' objects while it is
// read, and nothing of a tensor's size is allocated before its shape passed them. A parsed
// message holds its tensors' bytes; data that arrives before its tensor's 'datatype' or 'shape'
// is held at nine bytes per element until the tensor's object ends, and those count against
// max_tensor_bytes meanwhile. Tensor "parameters" are
// read (bounded) and dropped, except "binary_data_size" (the binary data extension, below, in
// requests and answers alike; refused in a message without a binary part), and a requested output's
// "binary_data" (a boolean), kept in InferRequest::output_binary_data. Unknown fields are skipped
// without being kept.
//
// The binary data extension (HTTP): a body whose first bytes (Inference-Header-Content-Length of
// them) are the JSON and whose rest is the data of the inputs that give "binary_data_size" instead
// of "data", in their order: fixed-size types as their little-endian bytes (exactly the shape's
// size), BYTES as each element's 4-byte little-endian length and its bytes (exactly the shape's
// element count). Every byte after the JSON belongs to one input; the same limits apply. An
// answer is written the same way for the outputs a predicate picks.
//
// Serializing writes data flat. It fails (InvalidArgument) only for what JSON cannot carry: a
// non-finite floating-point element, or a string that is not valid UTF-8. For every datatype,
// Parse(Serialize(m)) == m. Free functions without shared state: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare {

struct ParseLimits {
  std::size_t max_text_bytes = 64 * 1024 * 1024;      // the JSON text itself
  std::uint64_t max_tensor_bytes = 64 * 1024 * 1024;  // data of all tensors (BYTES: string bytes)
  std::uint64_t max_elements = 16 * 1024 * 1024;      // elements of all tensors
  std::size_t max_tensors = 256;                      // inputs (or outputs) and requested outputs
  std::size_t max_depth = 32;                         // nesting of arrays and objects
  std::size_t max_parameter_values = 4096;            // in all 'parameters' objects together
};

Result<InferRequest> ParseInferRequest(std::string_view json, const ParseLimits& limits = {});
Result<InferResponse> ParseInferResponse(std::string_view json, const ParseLimits& limits = {});

// `json`: the body's first Inference-Header-Content-Length bytes; `binary`: the rest.
Result<InferRequest> ParseInferRequestWithBinary(std::string_view json, std::string_view binary,
                                                 const ParseLimits& limits = {});
// The same for an answer in the binary form (outputs that give binary_data_size).
Result<InferResponse> ParseInferResponseWithBinary(std::string_view json, std::string_view binary,
                                                   const ParseLimits& limits = {});

Result<std::string> SerializeInferRequest(const InferRequest& request);
Result<std::string> SerializeInferResponse(const InferResponse& response);

// The answer in the binary data extension's form: the outputs for which `binary(name)` holds
// carry {"binary_data_size": N} in their parameters instead of "data", and their bytes follow the
// JSON (its first json_bytes) in the order of the outputs.
struct BinaryBody {
  std::string body;
  std::size_t json_bytes = 0;
};
Result<BinaryBody> SerializeInferResponseWithBinary(
    const InferResponse& response, const std::function<bool(const std::string&)>& binary);
// The request in the same form: the inputs `binary` picks carry binary_data_size, their bytes
// after the JSON (how the node sends a batch to a function that speaks the extension).
Result<BinaryBody> SerializeInferRequestWithBinary(
    const InferRequest& request, const std::function<bool(const std::string&)>& binary);

// {"error": message}: the protocol's error body. Bytes that are not valid UTF-8 are replaced.
std::string ErrorJson(std::string_view message);

}  // namespace gshare
