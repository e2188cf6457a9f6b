// InferAnswer: an inference's answer as a backend hands it to the front: decoded, or still in the
// form its function wrote it, with what decodes it. The backend answers on its own thread (the
// node's loop, which every tenant's requests share); an answer left encoded is decoded where the
// front writes it (the client's io thread, or the parse pool), so that the loop does no codec
// work for it.
//
// A value that moves; Take runs the decoding (at most once) on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare::serve {

class InferAnswer {
 public:
  using Decoder = std::function<Result<InferResponse>()>;

  // A decoded answer.
  InferAnswer(InferResponse response)  // NOLINT: implicit, an answer is its response
      : response_(std::move(response)) {}
  // An answer of `encoded_bytes` that `decode` decodes.
  InferAnswer(std::uint64_t encoded_bytes, Decoder decode)
      : decode_(std::move(decode)), encoded_bytes_(encoded_bytes) {}

  // Whether Take has work to do.
  bool encoded() const { return !response_.has_value(); }
  // The size of the work of writing it: its encoding's bytes, or its decoded tensors' bytes.
  std::uint64_t bytes() const;
  // The response, decoded first where it was not, with `then` applied to it (Then).
  Result<InferResponse> Take() &&;
  // Adds a step that Take applies to the decoded response (the front names the answer so).
  void Then(std::function<void(InferResponse&)> step);

 private:
  std::optional<InferResponse> response_;
  Decoder decode_;
  std::uint64_t encoded_bytes_ = 0;
  std::function<void(InferResponse&)> then_;
};

// `result` as a backend's answer.
inline Result<InferAnswer> AnswerOf(Result<InferResponse> result) {
  if (!result.ok()) return result.status();
  return InferAnswer(std::move(result).value());
}

}  // namespace gshare::serve
