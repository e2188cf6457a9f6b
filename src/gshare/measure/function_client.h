// FunctionClient: a blocking client of one function process's protocol (docs/live-node.md,
// "Function processes and the function protocol"), for tools that drive a function themselves
// (gshare bench function).
//
// Each call sends one request on a fresh connection through SendUnixHttpRequest on `loop`, which
// another thread must be running, and waits for its answer. Threading: call from any thread but
// the loop's own (the call would wait on itself).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare::measure {

class FunctionClient {
 public:
  FunctionClient(boost::asio::io_context& loop, std::string socket_path, std::string model)
      : loop_(loop), socket_path_(std::move(socket_path)), model_(std::move(model)) {}

  // Whether GET /v2/health/ready answers 200. Unavailable while nothing listens yet.
  Result<bool> Ready(std::chrono::milliseconds timeout);

  // One FP32 input for the model: its name and shape from `shape` when given (a dimension of -1
  // there is an error), otherwise from GET /v2/models/{model} (the first input; -1 read as 1).
  // The values are a fixed pseudo-random draw in [-1, 1): the same on every call.
  Result<Tensor> MakeInput(const std::vector<std::int64_t>& shape,
                           std::chrono::milliseconds timeout);

  // POST /v2/models/{model}/infer with `input`, in the binary tensor form as the node sends a
  // batch (the function must speak it: gshare-function and the Python runtimes do); the answer's
  // outputs. A status other than 200 is an error carrying the function's {"error": ...} text.
  Result<std::vector<Tensor>> Infer(const Tensor& input, std::chrono::milliseconds timeout);

 private:
  struct Answer {
    int status = 0;
    std::string body;
    std::string json_length;  // Inference-Header-Content-Length, where the answer gave one
  };
  // `json_bytes`: the body is in the binary form, its JSON this long.
  Result<Answer> Send(std::string method, std::string target, std::string body,
                      std::chrono::milliseconds timeout,
                      std::optional<std::size_t> json_bytes = std::nullopt);

  boost::asio::io_context& loop_;
  const std::string socket_path_;
  const std::string model_;
};

// "1,3,224,224" -> {1, 3, 224, 224}: whole numbers in [1, 2^20], at most 8 of them.
Result<std::vector<std::int64_t>> ParseShape(std::string_view text);

}  // namespace gshare::measure
