#include "gshare/serve/infer_answer.h"

namespace gshare::serve {

std::uint64_t InferAnswer::bytes() const {
  if (!response_) return encoded_bytes_;
  std::uint64_t bytes = 0;
  for (const Tensor& output : response_->outputs) bytes += output.data_bytes();
  return bytes;
}

Result<InferResponse> InferAnswer::Take() && {
  if (!response_) {
    if (!decode_) return Internal("the answer was taken already");
    Decoder decode = std::move(decode_);
    decode_ = nullptr;
    GSHARE_ASSIGN_OR_RETURN(InferResponse decoded, decode());
    response_ = std::move(decoded);
  }
  InferResponse response = std::move(*response_);
  response_.reset();
  if (then_) then_(response);
  return response;
}

void InferAnswer::Then(std::function<void(InferResponse&)> step) {
  if (!then_) {
    then_ = std::move(step);
    return;
  }
  then_ = [first = std::move(then_), second = std::move(step)](InferResponse& response) {
    first(response);
    second(response);
  };
}

}  // namespace gshare::serve
