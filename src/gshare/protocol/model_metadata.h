// The tensors of a model's metadata (KServe v2 `GET /v2/models/{name}`): what the front answers,
// what the bundled runtimes answer the node, and what the node reads from a `command` function at
// its readiness.
//
// Parsing takes text from a function process: it either returns tensors that pass
// CheckTensorSpecs, or InvalidArgument saying what is wrong. Free functions: safe from any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gshare/common/status.h"
#include "gshare/tensor/tensor_spec.h"

namespace gshare {

struct ModelTensors {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;

  bool empty() const { return inputs.empty() && outputs.empty(); }
  friend bool operator==(const ModelTensors&, const ModelTensors&) = default;
};

// The largest metadata answer read from a function.
inline constexpr std::size_t kMaxModelMetadataBytes = 1 << 20;

// [{"name": ..., "datatype": ..., "shape": [...]}, ...]
nlohmann::json TensorSpecsJson(std::span<const TensorSpec> specs);

// The "inputs" and "outputs" of a metadata object (absent: none; other fields ignored), checked
// with CheckTensorSpecs for a model that `batched` or not.
Result<ModelTensors> ParseModelMetadataTensors(std::string_view json, bool batched);

}  // namespace gshare
