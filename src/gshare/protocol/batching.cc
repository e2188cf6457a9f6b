#include "gshare/protocol/batching.h"

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "gshare/tensor/first_dim.h"

namespace gshare {
namespace {

const Tensor* FindTensor(const std::vector<Tensor>& tensors, const std::string& name) {
  for (const Tensor& t : tensors) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// The batch size of one request: the common first dimension of its inputs.
Result<std::int64_t> BatchSize(const InferRequest& request, std::size_t index) {
  if (request.inputs.empty()) {
    return InvalidArgument(fmt::format("request {} has no inputs to batch", index));
  }
  std::int64_t size = -1;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    const Tensor& input = request.inputs[i];
    for (std::size_t j = 0; j < i; ++j) {
      if (request.inputs[j].name() == input.name()) {
        return InvalidArgument(
            fmt::format("request {} has two inputs named '{}'", index, input.name()));
      }
    }
    if (input.shape().empty()) {
      return InvalidArgument(fmt::format(
          "request {}: input '{}' is a scalar and has no batch dimension", index, input.name()));
    }
    if (size >= 0 && input.shape()[0] != size) {
      return InvalidArgument(
          fmt::format("request {}: input '{}' has batch size {} but another input has {}", index,
                      input.name(), input.shape()[0], size));
    }
    size = input.shape()[0];
  }
  return size;
}

std::vector<std::string> Sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<StackedBatch> StackBatch(std::span<const InferRequest> requests) {
  if (requests.empty()) return InvalidArgument("no requests to batch");
  const InferRequest& first = requests.front();
  const auto first_outputs = Sorted(first.requested_outputs);
  StackedBatch batch;
  std::int64_t total = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const InferRequest& request = requests[r];
    GSHARE_ASSIGN_OR_RETURN(const std::int64_t size, BatchSize(request, r));
    if (total > std::numeric_limits<std::int64_t>::max() - size) {
      return InvalidArgument("the batch's total size overflows");
    }
    total += size;
    batch.sizes.push_back(size);
    if (request.inputs.size() != first.inputs.size()) {
      return InvalidArgument(fmt::format("request {} has {} inputs but request 0 has {}", r,
                                         request.inputs.size(), first.inputs.size()));
    }
    for (const Tensor& input : first.inputs) {
      const Tensor* mine = FindTensor(request.inputs, input.name());
      if (mine == nullptr) {
        return InvalidArgument(
            fmt::format("request {} lacks input '{}' of request 0", r, input.name()));
      }
      if (mine->datatype() != input.datatype()) {
        return InvalidArgument(fmt::format("request {}: input '{}' is {} but {} in request 0", r,
                                           input.name(), DataTypeName(mine->datatype()),
                                           DataTypeName(input.datatype())));
      }
      if (mine->shape().size() != input.shape().size() ||
          !std::equal(mine->shape().begin() + 1, mine->shape().end(), input.shape().begin() + 1)) {
        return InvalidArgument(fmt::format(
            "request {}: input '{}' has shape {}, whose trailing dimensions differ from {} in "
            "request 0",
            r, input.name(), ShapeToString(mine->shape()), ShapeToString(input.shape())));
      }
    }
    if (Sorted(request.requested_outputs) != first_outputs) {
      return InvalidArgument(fmt::format("request {} requests other outputs than request 0", r));
    }
    if (request.parameters != first.parameters) {
      return InvalidArgument(fmt::format("request {} has other parameters than request 0", r));
    }
  }
  for (const Tensor& input : first.inputs) {
    std::vector<const Tensor*> parts;
    parts.reserve(requests.size());
    for (const InferRequest& request : requests) {
      parts.push_back(FindTensor(request.inputs, input.name()));
    }
    GSHARE_ASSIGN_OR_RETURN(Tensor stacked, ConcatenateFirstDim(input.name(), parts));
    batch.request.inputs.push_back(std::move(stacked));
  }
  batch.request.parameters = first.parameters;
  batch.request.requested_outputs = first.requested_outputs;
  return batch;
}

Result<std::int64_t> BatchSizeOf(const InferRequest& request) { return BatchSize(request, 0); }

Status CheckBatchOutputs(const InferResponse& response, std::int64_t total) {
  for (const Tensor& output : response.outputs) {
    if (output.shape().empty()) {
      return InvalidArgument("output '" + output.name() +
                             "' is a scalar and cannot be split per request");
    }
    if (output.shape()[0] != total) {
      return InvalidArgument(
          fmt::format("output '{}' has first dimension {} but the batch's requests sum to {}",
                      output.name(), output.shape()[0], total));
    }
  }
  return Status::Ok();
}

Result<std::vector<InferResponse>> SplitBatch(const InferResponse& response,
                                              std::span<const std::int64_t> sizes) {
  std::int64_t total = 0;
  for (std::int64_t size : sizes) {
    if (size < 0) return InvalidArgument("a batch size is negative");
    if (total > std::numeric_limits<std::int64_t>::max() - size) {
      return InvalidArgument("the batch sizes overflow");
    }
    total += size;
  }
  GSHARE_RETURN_IF_ERROR(CheckBatchOutputs(response, total));
  std::vector<InferResponse> parts;
  parts.reserve(sizes.size());
  std::int64_t begin = 0;
  for (std::int64_t size : sizes) {
    InferResponse part;
    part.model_name = response.model_name;
    part.model_version = response.model_version;
    part.parameters = response.parameters;
    for (const Tensor& output : response.outputs) {
      GSHARE_ASSIGN_OR_RETURN(Tensor slice, SliceFirstDim(output, begin, size));
      part.outputs.push_back(std::move(slice));
    }
    parts.push_back(std::move(part));
    begin += size;
  }
  return parts;
}

}  // namespace gshare
