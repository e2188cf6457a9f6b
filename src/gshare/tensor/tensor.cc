#include "gshare/tensor/tensor.h"

#include <limits>

#include <fmt/format.h>

namespace gshare {

Result<std::int64_t> ElementCount(std::span<const std::int64_t> shape) {
  if (shape.size() > Tensor::kMaxRank) {
    return InvalidArgument(
        fmt::format("shape has {} dimensions (at most {})", shape.size(), Tensor::kMaxRank));
  }
  std::int64_t count = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0)
      return InvalidArgument("shape " + ShapeToString(shape) + " has a negative dimension");
  }
  for (std::int64_t dim : shape) {
    if (dim == 0) return std::int64_t{0};
  }
  for (std::int64_t dim : shape) {
    if (count > std::numeric_limits<std::int64_t>::max() / dim) {
      return InvalidArgument("shape " + ShapeToString(shape) + " has too many elements");
    }
    count *= dim;
  }
  return count;
}

Result<std::size_t> FixedByteSize(DataType type, std::int64_t element_count) {
  if (!IsFixedSize(type)) return InvalidArgument("BYTES has no fixed byte size");
  if (element_count < 0) return InvalidArgument("negative element count");
  const std::size_t size = ElementSizeBytes(type);
  const auto count = static_cast<std::uint64_t>(element_count);
  if (count > std::numeric_limits<std::size_t>::max() / size) {
    return InvalidArgument(
        fmt::format("{} elements of {} do not fit in memory", element_count, DataTypeName(type)));
  }
  return static_cast<std::size_t>(count) * size;
}

std::string ShapeToString(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

Result<std::int64_t> Tensor::CheckShape(const std::string& name,
                                        std::span<const std::int64_t> shape) {
  auto count = ElementCount(shape);
  if (!count.ok()) return count.status().WithContext("tensor '" + name + "'");
  return count;
}

Result<Tensor> Tensor::FromBytes(std::string name, DataType type, std::vector<std::int64_t> shape,
                                 std::vector<std::byte> data) {
  if (!IsFixedSize(type)) {
    return InvalidArgument("tensor '" + name + "': BYTES data must be given as strings");
  }
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t count, CheckShape(name, shape));
  auto expected = FixedByteSize(type, count);
  if (!expected.ok()) return expected.status().WithContext("tensor '" + name + "'");
  if (*expected != data.size()) {
    return InvalidArgument(fmt::format("tensor '{}': {} of shape {} needs {} bytes, got {}", name,
                                       DataTypeName(type), ShapeToString(shape), *expected,
                                       data.size()));
  }
  if (type == DataType::kBool) {
    for (std::byte b : data) {
      if (b != std::byte{0} && b != std::byte{1}) {
        return InvalidArgument("tensor '" + name + "': a BOOL element is neither 0 nor 1");
      }
    }
  }
  Tensor tensor;
  tensor.name_ = std::move(name);
  tensor.datatype_ = type;
  tensor.shape_ = std::move(shape);
  tensor.element_count_ = count;
  tensor.bytes_ = std::move(data);
  return tensor;
}

Result<Tensor> Tensor::FromStrings(std::string name, std::vector<std::int64_t> shape,
                                   std::vector<std::string> elements) {
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t count, CheckShape(name, shape));
  if (static_cast<std::uint64_t>(count) != elements.size()) {
    return InvalidArgument(fmt::format("tensor '{}': shape {} has {} elements, got {} strings",
                                       name, ShapeToString(shape), count, elements.size()));
  }
  Tensor tensor;
  tensor.name_ = std::move(name);
  tensor.datatype_ = DataType::kBytes;
  tensor.shape_ = std::move(shape);
  tensor.element_count_ = count;
  tensor.strings_ = std::move(elements);
  return tensor;
}

std::size_t Tensor::data_bytes() const {
  if (IsFixedSize(datatype_)) return bytes_.size();
  std::size_t total = 0;
  for (const std::string& s : strings_) total += s.size();
  return total;
}

Tensor Tensor::Renamed(std::string name) && {
  name_ = std::move(name);
  return std::move(*this);
}

Status Tensor::WrongTypeError(DataType requested) const {
  return InvalidArgument(fmt::format("tensor '{}' is {}, not {}", name_, DataTypeName(datatype_),
                                     DataTypeName(requested)));
}

}  // namespace gshare
