#include "gshare/tensor/data_type.h"

#include <string>

namespace gshare {

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "BOOL";
    case DataType::kUint8:
      return "UINT8";
    case DataType::kUint16:
      return "UINT16";
    case DataType::kUint32:
      return "UINT32";
    case DataType::kUint64:
      return "UINT64";
    case DataType::kInt8:
      return "INT8";
    case DataType::kInt16:
      return "INT16";
    case DataType::kInt32:
      return "INT32";
    case DataType::kInt64:
      return "INT64";
    case DataType::kFp16:
      return "FP16";
    case DataType::kFp32:
      return "FP32";
    case DataType::kFp64:
      return "FP64";
    case DataType::kBytes:
      return "BYTES";
  }
  return "UNKNOWN";
}

Result<DataType> ParseDataType(std::string_view name) {
  for (DataType type : kAllDataTypes) {
    if (DataTypeName(type) == name) return type;
  }
  return InvalidArgument("unknown datatype '" + std::string(name.substr(0, 64)) +
                         "' (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, "
                         "INT32, INT64, FP16, FP32, FP64, BYTES)");
}

std::size_t ElementSizeBytes(DataType type) {
  switch (type) {
    case DataType::kBool:
    case DataType::kUint8:
    case DataType::kInt8:
      return 1;
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kFp16:
      return 2;
    case DataType::kUint32:
    case DataType::kInt32:
    case DataType::kFp32:
      return 4;
    case DataType::kUint64:
    case DataType::kInt64:
    case DataType::kFp64:
      return 8;
    case DataType::kBytes:
      return 0;
  }
  return 0;
}

}  // namespace gshare
