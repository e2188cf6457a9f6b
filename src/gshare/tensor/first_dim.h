// Joining and cutting tensors along their first dimension: the operations behind batching
// (several requests' inputs stacked into one batch, a batch's outputs split back per request).
// Pure functions over values: safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gshare/common/status.h"
#include "gshare/tensor/tensor.h"

namespace gshare {

// One tensor named `name` holding `parts` one after another along the first dimension. Every
// part must have rank >= 1 and the datatype and trailing dimensions of the first part;
// InvalidArgument naming the part otherwise, or when `parts` is empty. The parts are read, not
// kept.
Result<Tensor> ConcatenateFirstDim(std::string name, std::span<const Tensor* const> parts);

// Rows [begin, begin + count) of `tensor` along its first dimension, under the same name.
// InvalidArgument for a rank-0 tensor or a range outside [0, shape[0]].
Result<Tensor> SliceFirstDim(const Tensor& tensor, std::int64_t begin, std::int64_t count);

}  // namespace gshare
