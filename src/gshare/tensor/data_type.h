// DataType: the tensor element types of the Open Inference Protocol (KServe v2).
//
// Every fixed-size type is stored little-endian; BYTES is a sequence of byte strings of any
// length. Names are the protocol's ("FP32", "BYTES"); parsing is case-sensitive, as the
// protocol is. Pure functions, no state: safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

enum class DataType : std::uint8_t {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,
};

inline constexpr std::array<DataType, 13> kAllDataTypes = {
    DataType::kBool, DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64,
    DataType::kInt8, DataType::kInt16, DataType::kInt32,  DataType::kInt64,  DataType::kFp16,
    DataType::kFp32, DataType::kFp64,  DataType::kBytes,
};

// "BOOL", "UINT8", ..., "FP16", "FP32", "FP64", "BYTES".
std::string_view DataTypeName(DataType type);

// The inverse of DataTypeName; InvalidArgument naming the text and the accepted names otherwise.
Result<DataType> ParseDataType(std::string_view name);

// Bytes per element: 1 for BOOL (0 or 1), 2 for FP16, ...; 0 for BYTES (variable length).
std::size_t ElementSizeBytes(DataType type);

inline bool IsFixedSize(DataType type) { return type != DataType::kBytes; }

// A half-precision (IEEE 754 binary16) value as its bits: the element type of FP16 views.
struct Half {
  std::uint16_t bits = 0;
  friend bool operator==(Half, Half) = default;
};

// The C++ element type of a fixed-size DataType, for typed views and factories.
template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<bool> {
  static constexpr DataType value = DataType::kBool;
};
template <>
struct DataTypeOf<std::uint8_t> {
  static constexpr DataType value = DataType::kUint8;
};
template <>
struct DataTypeOf<std::uint16_t> {
  static constexpr DataType value = DataType::kUint16;
};
template <>
struct DataTypeOf<std::uint32_t> {
  static constexpr DataType value = DataType::kUint32;
};
template <>
struct DataTypeOf<std::uint64_t> {
  static constexpr DataType value = DataType::kUint64;
};
template <>
struct DataTypeOf<std::int8_t> {
  static constexpr DataType value = DataType::kInt8;
};
template <>
struct DataTypeOf<std::int16_t> {
  static constexpr DataType value = DataType::kInt16;
};
template <>
struct DataTypeOf<std::int32_t> {
  static constexpr DataType value = DataType::kInt32;
};
template <>
struct DataTypeOf<std::int64_t> {
  static constexpr DataType value = DataType::kInt64;
};
template <>
struct DataTypeOf<Half> {
  static constexpr DataType value = DataType::kFp16;
};
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFp32;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kFp64;
};

}  // namespace gshare
