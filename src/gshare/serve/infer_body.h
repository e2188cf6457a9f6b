// InferBody: an inference request's body as the HTTP front receives it and its answer as the
// front writes it, in JSON or in the binary tensor data extension of the protocol.
//
// The request: without Inference-Header-Content-Length the body is JSON. With it, the header's
// value N says how many of the body's first bytes are the JSON, and the rest is the data of the
// inputs that give binary_data_size (protocol/kserve_json.h). N = 0 is the raw form: the whole body
// is the data of the model's one input, whose name, datatype and shape come from the model's
// metadata (a leading -1, the batch, is 1 when another dimension is free; one -1 left is what the
// body's size makes it; a BYTES input is one element, the whole body), and every output is
// answered as binary data.
//
// The answer: outputs are binary when the request's 'binary_data_output' parameter says so, or
// when their own 'binary_data' parameter does (it overrides the first). With any binary output the
// body is the JSON and then their bytes, with `Content-Type: application/octet-stream` and
// Inference-Header-Content-Length giving the JSON's length; otherwise plain JSON.
//
// Requested outputs: a request that names outputs gets exactly those, in its order; a name the
// model's metadata does not list (where it lists any) is refused before the request runs, and one
// its answer lacks is a 400 after.
//
// Free functions without state: safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/net/http_message.h"
#include "gshare/net/http_server.h"
#include "gshare/protocol/infer.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/serve/front.h"

namespace gshare::serve {

inline constexpr std::string_view kHeaderLengthField = "Inference-Header-Content-Length";
inline constexpr std::string_view kBinaryContentType = "application/octet-stream";
// GET /v2 lists it among the server's extensions.
inline constexpr std::string_view kBinaryExtension = "binary_tensor_data";

// The header's value: nullopt without one; InvalidArgument when it is not a decimal byte count.
Result<std::optional<std::size_t>> JsonLengthOf(const net::ServerRequest& request);

// The request in `body`, by the rules above; InvalidArgument (a 400) naming what is wrong.
Result<InferRequest> ParseInferBody(std::string_view body, std::optional<std::size_t> json_bytes,
                                    const ModelInfo& model, const ParseLimits& limits);

// How the answer to a request is written, taken from it before it is handed on.
struct AnswerFormat {
  bool binary_by_default = false;                        // 'binary_data_output'
  std::vector<std::pair<std::string, bool>> per_output;  // their own 'binary_data'
  std::vector<std::string> requested;                    // empty: every output
  bool described_outputs = false;  // the model's metadata lists outputs: one missing is its fault
};
Result<AnswerFormat> AnswerFormatOf(const InferRequest& request);

// A function that speaks JSON only is handed tensors as JSON text, which cannot carry a string
// that is not UTF-8: InvalidArgument naming the input and element of such a BYTES element, so that
// the request is refused at the front, not in its batch (where it would fail the others).
Status CheckStringsCarryAsJson(const InferRequest& request);

// Whether `request` fits the model's metadata: its inputs as CheckInputsFit has them (when the
// model lists inputs), and every requested output among those it lists (when it lists outputs).
// InvalidArgument naming the tensor otherwise.
Status CheckAgainstModel(const InferRequest& request, const ModelInfo& model);

// The answer's HTTP response: 200 in JSON or in the binary form; a requested output missing from
// it is a 400 (500 where the model's metadata lists its outputs: the function broke its word);
// 500 when JSON cannot carry it.
net::HttpResponse WriteAnswerBody(InferResponse response, const AnswerFormat& format);

}  // namespace gshare::serve
