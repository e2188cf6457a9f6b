#include "gshare/protocol/element_sink.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "gshare/tensor/half.h"

namespace gshare::kserve {
namespace {

template <typename T>
std::optional<T> ToInteger(const ScalarValue& value) {
  if (value.kind == ScalarValue::Kind::kUnsigned) {
    const std::uint64_t v = value.unsigned_integer;
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (value.kind == ScalarValue::Kind::kInteger) {
    const std::int64_t v = value.integer;
    if constexpr (std::is_signed_v<T>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        return std::nullopt;
      }
      return static_cast<T>(v);
    } else {
      if (v < 0 || static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) {
        return std::nullopt;
      }
      return static_cast<T>(v);
    }
  }
  return std::nullopt;
}

}  // namespace

double ScalarValue::AsDouble() const {
  switch (kind) {
    case Kind::kInteger:
      return static_cast<double>(integer);
    case Kind::kUnsigned:
      return static_cast<double>(unsigned_integer);
    default:
      return floating;
  }
}

ElementSink::ElementSink(std::string where, DataType type, std::size_t reserve_elements)
    : where_(std::move(where)), type_(type) {
  if (IsFixedSize(type)) {
    bytes_.reserve(reserve_elements * ElementSizeBytes(type));
  } else {
    strings_.reserve(reserve_elements);
  }
}

Status ElementSink::Append(const ScalarValue& value, Budget& budget) {
  using Kind = ScalarValue::Kind;
  switch (type_) {
    case DataType::kBool:
      if (value.kind != Kind::kBool) return Error("true or false");
      Put(static_cast<std::uint8_t>(value.boolean ? 1 : 0));
      break;
    case DataType::kUint8:
      return AppendInteger<std::uint8_t>(value);
    case DataType::kUint16:
      return AppendInteger<std::uint16_t>(value);
    case DataType::kUint32:
      return AppendInteger<std::uint32_t>(value);
    case DataType::kUint64:
      return AppendInteger<std::uint64_t>(value);
    case DataType::kInt8:
      return AppendInteger<std::int8_t>(value);
    case DataType::kInt16:
      return AppendInteger<std::int16_t>(value);
    case DataType::kInt32:
      return AppendInteger<std::int32_t>(value);
    case DataType::kInt64:
      return AppendInteger<std::int64_t>(value);
    case DataType::kFp16: {
      if (!value.IsNumber()) return Error("a number");
      const auto half = DoubleToHalf(value.AsDouble());
      if (!half) return Error("a number within FP16's range (|x| < 65520)");
      Put(half->bits);
      break;
    }
    case DataType::kFp32: {
      if (!value.IsNumber()) return Error("a number");
      const double v = value.AsDouble();
      if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(FLT_MAX)) {
        return Error("a number within FP32's range");
      }
      Put(static_cast<float>(v));
      break;
    }
    case DataType::kFp64: {
      if (!value.IsNumber()) return Error("a number");
      const double v = value.AsDouble();
      if (!std::isfinite(v)) return Error("a finite number");
      Put(v);
      break;
    }
    case DataType::kBytes: {
      if (value.kind != Kind::kString) return Error("a string");
      const std::string& s = *value.text;
      if (s.size() > budget.bytes_left) {
        return InvalidArgument(where_ + ": data exceeds the limit on tensor bytes");
      }
      budget.bytes_left -= s.size();
      strings_.push_back(s);
      break;
    }
  }
  ++index_;
  return Status::Ok();
}

template <typename T>
Status ElementSink::AppendInteger(const ScalarValue& value) {
  const auto v = ToInteger<T>(value);
  if (!v) {
    return Error(fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(),
                             std::numeric_limits<T>::max()));
  }
  Put(*v);
  ++index_;
  return Status::Ok();
}

template <typename T>
void ElementSink::Put(T value) {
  std::byte raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // the host is little-endian (tensor.h)
  bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
}

Status ElementSink::Error(std::string_view expected) const {
  return InvalidArgument(fmt::format("{}: data element {} is not valid for {} (expected {})",
                                     where_, index_, DataTypeName(type_), expected));
}

}  // namespace gshare::kserve
