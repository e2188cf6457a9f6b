// ScalarValue and ElementSink: one JSON scalar as the streaming reader saw it, and the typed
// storage of one tensor that checks each element for the tensor's datatype as it is appended.
//
// Internal to the protocol library (kserve_json_reader.cc). Not synchronized: one sink per tensor
// being read, on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/tensor/data_type.h"

namespace gshare::kserve {

// One JSON scalar. `text` is set for kString only and lives as long as the caller says.
struct ScalarValue {
  enum class Kind : std::uint8_t { kBool, kInteger, kUnsigned, kFloat, kString, kOther };
  Kind kind = Kind::kOther;  // kOther: null, or an object where an element was expected
  bool boolean = false;
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double floating = 0;
  const std::string* text = nullptr;

  bool IsNumber() const {
    return kind == Kind::kInteger || kind == Kind::kUnsigned || kind == Kind::kFloat;
  }
  double AsDouble() const;
};

// What the tensors of one message may still use of the limits.
struct Budget {
  std::uint64_t bytes_left;
  std::uint64_t elements_left;
};

class ElementSink {
 public:
  // `where` names the tensor in messages ("input 'x'"); `reserve_elements` is its element count.
  ElementSink(std::string where, DataType type, std::size_t reserve_elements);

  // Appends one element, InvalidArgument when it is not valid for the datatype or (BYTES) its
  // string would pass the budget's bytes.
  Status Append(const ScalarValue& value, Budget& budget);

  std::size_t count() const { return index_; }
  std::vector<std::byte> TakeBytes() { return std::move(bytes_); }
  std::vector<std::string> TakeStrings() { return std::move(strings_); }

 private:
  template <typename T>
  Status AppendInteger(const ScalarValue& value);
  template <typename T>
  void Put(T value);
  Status Error(std::string_view expected) const;

  std::string where_;
  DataType type_;
  std::size_t index_ = 0;
  std::vector<std::byte> bytes_;
  std::vector<std::string> strings_;
};

}  // namespace gshare::kserve
