#include "gshare/tensor/first_dim.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace gshare {

Result<Tensor> ConcatenateFirstDim(std::string name, std::span<const Tensor* const> parts) {
  if (parts.empty()) return InvalidArgument("tensor '" + name + "': nothing to concatenate");
  const Tensor& first = *parts.front();
  if (first.shape().empty()) {
    return InvalidArgument("tensor '" + name + "': a scalar has no first dimension to stack on");
  }
  std::int64_t rows = 0;
  std::size_t total_bytes = 0;
  std::size_t total_strings = 0;
  for (const Tensor* part : parts) {
    if (part->datatype() != first.datatype()) {
      return InvalidArgument(fmt::format("tensor '{}': datatype {} differs from {}", name,
                                         DataTypeName(part->datatype()),
                                         DataTypeName(first.datatype())));
    }
    if (part->shape().size() != first.shape().size() ||
        !std::equal(part->shape().begin() + 1, part->shape().end(), first.shape().begin() + 1)) {
      return InvalidArgument(fmt::format("tensor '{}': shape {} does not stack with {}", name,
                                         ShapeToString(part->shape()),
                                         ShapeToString(first.shape())));
    }
    if (rows > std::numeric_limits<std::int64_t>::max() - part->shape()[0]) {
      return InvalidArgument("tensor '" + name + "': the stacked first dimension overflows");
    }
    rows += part->shape()[0];
    total_bytes += part->raw_bytes().size();  // each fits; their sum is checked below
    total_strings += part->strings().size();
  }
  std::vector<std::int64_t> shape = first.shape();
  shape[0] = rows;
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t count, ElementCount(shape));
  if (first.datatype() == DataType::kBytes) {
    if (static_cast<std::uint64_t>(count) != total_strings) {
      return Internal("tensor '" + name + "': string count does not match the stacked shape");
    }
    std::vector<std::string> elements;
    elements.reserve(total_strings);
    for (const Tensor* part : parts) {
      elements.insert(elements.end(), part->strings().begin(), part->strings().end());
    }
    return Tensor::FromStrings(std::move(name), std::move(shape), std::move(elements));
  }
  GSHARE_ASSIGN_OR_RETURN(const std::size_t expected, FixedByteSize(first.datatype(), count));
  if (expected != total_bytes) {
    return Internal("tensor '" + name + "': byte count does not match the stacked shape");
  }
  std::vector<std::byte> data;
  data.reserve(total_bytes);
  for (const Tensor* part : parts) {
    data.insert(data.end(), part->raw_bytes().begin(), part->raw_bytes().end());
  }
  return Tensor::FromBytes(std::move(name), first.datatype(), std::move(shape), std::move(data));
}

Result<Tensor> SliceFirstDim(const Tensor& tensor, std::int64_t begin, std::int64_t count) {
  if (tensor.shape().empty()) {
    return InvalidArgument("tensor '" + tensor.name() + "': a scalar has no first dimension");
  }
  const std::int64_t rows = tensor.shape()[0];
  if (begin < 0 || count < 0 || begin > rows || count > rows - begin) {
    return InvalidArgument(
        fmt::format("tensor '{}': rows [{}, {}+{}) are outside its first "
                    "dimension of {}",
                    tensor.name(), begin, begin, count, rows));
  }
  std::vector<std::int64_t> shape = tensor.shape();
  shape[0] = 1;
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t row_elements, ElementCount(shape));
  shape[0] = count;
  // Both products are at most the tensor's own element count, which fits.
  const auto first = static_cast<std::size_t>(begin * row_elements);
  const auto elements = static_cast<std::size_t>(count * row_elements);
  if (tensor.datatype() == DataType::kBytes) {
    const auto from = tensor.strings().begin() + static_cast<std::ptrdiff_t>(first);
    return Tensor::FromStrings(
        tensor.name(), std::move(shape),
        std::vector<std::string>(from, from + static_cast<std::ptrdiff_t>(elements)));
  }
  const std::size_t size = ElementSizeBytes(tensor.datatype());
  const auto bytes = tensor.raw_bytes().subspan(first * size, elements * size);
  return Tensor::FromBytes(tensor.name(), tensor.datatype(), std::move(shape),
                           std::vector<std::byte>(bytes.begin(), bytes.end()));
}

}  // namespace gshare
