// OutputChecker: the inputs a replay sends to the example functions, and the check of every
// answer against an independent implementation (models/reference.h: plain loops, no BLAS).
//
// Each model has a pool of kInputVariants inputs drawn from a seed; a request's input is
// variant index % kInputVariants, so the reference for each variant is computed once (the
// reference costs more than the function's own forward pass) and every answer is still checked.
// An mlp or cnn answer is right when its "logits" are within models/compare.h's tolerance of the
// reference; an echo answer when it equals the input exactly.
//
// Not thread-safe (the replay's event loop uses it).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "examples/models/model_layout.h"
#include "gshare/common/status.h"
#include "gshare/tensor/tensor.h"

namespace gshare::examples {

class OutputChecker {
 public:
  static constexpr std::uint64_t kInputVariants = 16;

  // Loads the mlp and cnn weights from `weights_dir` (mlp.safetensors, cnn.safetensors).
  static Result<std::unique_ptr<OutputChecker>> Create(const std::string& weights_dir);
  // Loads the weights of `kinds` only: a checker of echo alone reads none. Check answers
  // FailedPrecondition for a model whose weights it did not load.
  static Result<std::unique_ptr<OutputChecker>> Create(const std::string& weights_dir,
                                                       std::span<const ModelKind> kinds);

  // The input of request number `index` to `model` ("mlp", "cnn", "echo"): one example.
  Result<Tensor> InputFor(const std::string& model, std::uint64_t index) const;
  // OK when `output` is the right answer to InputFor(model, index); InvalidArgument saying how
  // it is wrong otherwise.
  Status Check(const std::string& model, std::uint64_t index, const Tensor& output);

 private:
  OutputChecker() = default;

  std::map<std::string, std::vector<float>> weights_;  // by model
  std::map<std::pair<std::string, std::uint64_t>, std::vector<float>> references_;
};

}  // namespace gshare::examples
