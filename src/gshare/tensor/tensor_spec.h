// TensorSpec: one input or output of a model as the model declares it (KServe v2 tensor
// metadata): a name, an element type and a shape in which -1 stands for a dimension of any size.
// The first dimension is the batch dimension: requests batched together are stacked along it
// (protocol/batching.h), so it is -1 in the specs of a model that batches.
//
// Pure values and functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/tensor/data_type.h"
#include "gshare/tensor/tensor.h"

namespace gshare {

struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<std::int64_t> shape;  // -1: any size; shape[0] is the batch dimension

  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// Bounds on a declaration: the tensors of one list, a name's bytes, a rank, a fixed dimension.
inline constexpr std::size_t kMaxTensorSpecs = 64;
inline constexpr std::size_t kMaxTensorNameBytes = 256;
inline constexpr std::size_t kMaxTensorSpecRank = 16;
inline constexpr std::int64_t kMaxTensorSpecDim = std::int64_t{1} << 40;

// Checks one list (`what`: "inputs" or "outputs", for messages): at most kMaxTensorSpecs tensors
// with non-empty, unique names of printable ASCII of at most kMaxTensorNameBytes; each of rank
// 1..kMaxTensorSpecRank, each dimension -1 or 0..kMaxTensorSpecDim, and the first -1 where the
// model `batched` (its max_batch is above 1). InvalidArgument naming the tensor otherwise.
Status CheckTensorSpecs(std::span<const TensorSpec> specs, std::string_view what, bool batched);

// Whether `tensor` fits `spec`: the same datatype, the same rank, and each fixed dimension equal.
// InvalidArgument naming the tensor and both shapes otherwise.
Status CheckTensorFits(const Tensor& tensor, const TensorSpec& spec);

// Whether a request's `inputs` are exactly what `specs` declare: every input declared and fitting
// its spec, every declared input given. An empty `specs` declares nothing and accepts anything.
Status CheckInputsFit(std::span<const Tensor> inputs, std::span<const TensorSpec> specs);

// "[-1,3,224,224]", "-1" written as it is.
std::string SpecShapeToString(std::span<const std::int64_t> shape);

}  // namespace gshare
