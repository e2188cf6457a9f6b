// Batching by the Triton convention for max_batch: the inputs of several requests to one
// function are stacked along their first dimension into one request, and the outputs of its
// response are split back along the first dimension, in request order.
//
// Stacking needs every request to carry inputs of the same names, datatypes and trailing
// dimensions (in any order; the batch follows the first request's order), each input of rank at
// least 1, all inputs of one request with the same first dimension (its batch size), the same
// requested outputs (as a set) and equal parameters. Anything else is InvalidArgument naming the
// request and the input: such requests cannot share a batch. Pure functions: safe from any
// thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare {

struct StackedBatch {
  InferRequest request;             // no id; the requests' parameters and requested outputs
  std::vector<std::int64_t> sizes;  // each request's batch size, in request order
};

Result<StackedBatch> StackBatch(std::span<const InferRequest> requests);

// The batch size of one request (the common first dimension of its inputs), or the
// InvalidArgument StackBatch gives for it alone.
Result<std::int64_t> BatchSizeOf(const InferRequest& request);

// InvalidArgument, naming the output, unless every output of `response` has rank 1 or more and
// first dimension `total`: what SplitBatch checks before it splits.
Status CheckBatchOutputs(const InferResponse& response, std::int64_t total);

// One response per entry of `sizes`, each output's rows [sum of earlier sizes, + size), with the
// batch's model name, version and parameters and no id (the caller sets each request's id).
// InvalidArgument when an output has rank 0 or its first dimension is not the sum of `sizes`,
// or a size is negative.
Result<std::vector<InferResponse>> SplitBatch(const InferResponse& response,
                                              std::span<const std::int64_t> sizes);

}  // namespace gshare
