#include "gshare/tensor/tensor_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace gshare {
namespace {

bool IsPrintableAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::string SpecShapeToString(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

Status CheckTensorSpecs(std::span<const TensorSpec> specs, std::string_view what, bool batched) {
  if (specs.size() > kMaxTensorSpecs) {
    return InvalidArgument(
        fmt::format("{}: {} tensors; at most {}", what, specs.size(), kMaxTensorSpecs));
  }
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    if (spec.name.empty())
      return InvalidArgument(fmt::format("{}[{}]: the name is empty", what, i));
    if (spec.name.size() > kMaxTensorNameBytes || !IsPrintableAscii(spec.name)) {
      return InvalidArgument(
          fmt::format("{}[{}]: a tensor's name is printable ASCII of at most {} bytes", what, i,
                      kMaxTensorNameBytes));
    }
    if (!names.insert(spec.name).second) {
      return InvalidArgument(fmt::format("{}: '{}' appears twice", what, spec.name));
    }
    if (spec.shape.empty() || spec.shape.size() > kMaxTensorSpecRank) {
      return InvalidArgument(fmt::format(
          "{} '{}': the shape has {} dimensions; 1 to {}, the first the batch dimension", what,
          spec.name, spec.shape.size(), kMaxTensorSpecRank));
    }
    if (batched && spec.shape.front() != -1) {
      return InvalidArgument(fmt::format(
          "{} '{}': the first dimension is the batch dimension of a batching model and must be "
          "-1, not {}",
          what, spec.name, spec.shape.front()));
    }
    for (const std::int64_t dim : spec.shape) {
      if (dim < -1 || dim > kMaxTensorSpecDim) {
        return InvalidArgument(
            fmt::format("{} '{}': dimension {} is neither -1 (any size) nor from 0 to 2^40", what,
                        spec.name, dim));
      }
    }
  }
  return Status::Ok();
}

Status CheckTensorFits(const Tensor& tensor, const TensorSpec& spec) {
  if (tensor.datatype() != spec.datatype) {
    return InvalidArgument(fmt::format("input '{}' is {}; the model takes {}", tensor.name(),
                                       DataTypeName(tensor.datatype()),
                                       DataTypeName(spec.datatype)));
  }
  const auto& shape = tensor.shape();
  bool fits = shape.size() == spec.shape.size();
  for (std::size_t d = 0; fits && d < shape.size(); ++d) {
    fits = spec.shape[d] == -1 || spec.shape[d] == shape[d];
  }
  if (!fits) {
    return InvalidArgument(fmt::format("input '{}' has shape {}; the model takes {}", tensor.name(),
                                       ShapeToString(shape), SpecShapeToString(spec.shape)));
  }
  return Status::Ok();
}

Status CheckInputsFit(std::span<const Tensor> inputs, std::span<const TensorSpec> specs) {
  if (specs.empty()) return Status::Ok();
  for (const Tensor& input : inputs) {
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const TensorSpec& s) { return s.name == input.name(); });
    if (spec == specs.end()) {
      std::vector<std::string_view> known;
      for (const TensorSpec& s : specs) known.push_back(s.name);
      return InvalidArgument(fmt::format("the model has no input '{}' (its inputs: {})",
                                         input.name(), fmt::join(known, ", ")));
    }
    GSHARE_RETURN_IF_ERROR(CheckTensorFits(input, *spec));
  }
  for (const TensorSpec& spec : specs) {
    const bool given = std::any_of(inputs.begin(), inputs.end(),
                                   [&](const Tensor& t) { return t.name() == spec.name; });
    if (!given) return InvalidArgument(fmt::format("input '{}' is missing", spec.name));
  }
  return Status::Ok();
}

}  // namespace gshare
