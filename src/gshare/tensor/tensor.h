// Tensor: a named, typed, shaped array of elements, as it crosses process boundaries (KServe v2
// JSON between the node and its functions, safetensors files of model weights).
//
// A Tensor is a value: it owns its data, copies deeply, and compares by value. Its invariants
// hold from construction on, since the factories check them and return InvalidArgument naming
// the tensor otherwise:
//   - rank at most kMaxRank, every dimension >= 0, the element count (the product of the
//     dimensions, 1 for a scalar of shape []) fits in int64 and its byte size in size_t;
//   - fixed-size types hold exactly element_count * ElementSizeBytes little-endian bytes
//     (BOOL bytes are 0 or 1); BYTES holds exactly element_count byte strings.
// Typed views alias the tensor's storage and live as long as it does unchanged. This host must
// be little-endian (checked at compile time). Not synchronized: share const Tensors freely,
// mutate from one thread.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/tensor/data_type.h"

namespace gshare {

static_assert(std::endian::native == std::endian::little,
              "tensor data is little-endian and viewed in place");

// The number of elements of `shape`: InvalidArgument for a negative dimension, a rank above
// Tensor::kMaxRank, or a product beyond int64.
Result<std::int64_t> ElementCount(std::span<const std::int64_t> shape);

// element_count * ElementSizeBytes(type) for a fixed-size type; InvalidArgument on overflow of
// size_t or for BYTES (whose size is the sum of its strings).
Result<std::size_t> FixedByteSize(DataType type, std::int64_t element_count);

// "[2,3]": for messages.
std::string ShapeToString(std::span<const std::int64_t> shape);

class Tensor {
 public:
  static constexpr std::size_t kMaxRank = 64;

  // An empty FP32 tensor of shape [0] with no name; assign a built tensor over it.
  Tensor() = default;

  // A fixed-size tensor from its raw little-endian bytes (moved in).
  static Result<Tensor> FromBytes(std::string name, DataType type, std::vector<std::int64_t> shape,
                                  std::vector<std::byte> data);
  // A BYTES tensor from its elements in row-major order.
  static Result<Tensor> FromStrings(std::string name, std::vector<std::int64_t> shape,
                                    std::vector<std::string> elements);
  // A fixed-size tensor of the type that T stands for (float -> FP32, Half -> FP16, ...).
  template <typename T>
  static Result<Tensor> FromValues(std::string name, std::vector<std::int64_t> shape,
                                   std::span<const T> values) {
    std::vector<std::byte> data(values.size_bytes());
    if (!values.empty()) std::memcpy(data.data(), values.data(), values.size_bytes());
    return FromBytes(std::move(name), DataTypeOf<T>::value, std::move(shape), std::move(data));
  }

  const std::string& name() const { return name_; }
  DataType datatype() const { return datatype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t element_count() const { return element_count_; }
  // The bytes of the data: the raw size for fixed-size types, the sum of string lengths for BYTES.
  std::size_t data_bytes() const;

  // The raw little-endian bytes of a fixed-size tensor; empty for BYTES.
  std::span<const std::byte> raw_bytes() const { return bytes_; }
  // The elements of a BYTES tensor; empty for fixed-size types.
  const std::vector<std::string>& strings() const { return strings_; }

  // A view of the elements as T; InvalidArgument when T is not this tensor's element type.
  template <typename T>
  Result<std::span<const T>> Values() const {
    if (DataTypeOf<T>::value != datatype_) return WrongTypeError(DataTypeOf<T>::value);
    // The storage comes from operator new, aligned for every element type.
    return std::span<const T>(reinterpret_cast<const T*>(bytes_.data()),
                              static_cast<std::size_t>(element_count_));
  }

  // This tensor under another name (moves the data).
  Tensor Renamed(std::string name) &&;

  friend bool operator==(const Tensor&, const Tensor&) = default;

 private:
  Status WrongTypeError(DataType requested) const;
  static Result<std::int64_t> CheckShape(const std::string& name,
                                         std::span<const std::int64_t> shape);

  std::string name_;
  DataType datatype_ = DataType::kFp32;
  std::vector<std::int64_t> shape_ = {0};
  std::int64_t element_count_ = 0;
  std::vector<std::byte> bytes_;
  std::vector<std::string> strings_;
};

}  // namespace gshare
