// safetensors: the file format of model weights (huggingface/safetensors), read and written.
//
// A file is: an 8-byte little-endian header length N; N bytes of a JSON object that maps each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets into the data
// buffer), plus an optional "__metadata__" object of string values; then the data buffer.
//
// Reading is strict, for files from anyone: the header is at most kMaxSafetensorsHeaderBytes and
// lies within the file; it is one JSON object with no duplicate names; every dtype is one this
// reader maps (BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, F32, F64; BF16 and the 8-bit
// floats are refused by name); every shape's byte size equals end - begin; the tensors' ranges
// do not overlap and together cover the data buffer exactly. Any breach is InvalidArgument
// naming the tensor. The tensors are copied out of the file, so the result owns its data.
//
// Writing lays tensors out in name order, pads the header with spaces to a multiple of 8 bytes
// (so the data buffer starts 8-byte aligned), and refuses BYTES tensors, duplicate or empty names
// and the reserved name "__metadata__". Its output is what the reader, and the reference Python
// library, accept. All functions are free of shared state: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/tensor/tensor.h"

namespace gshare {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsFile {
  std::vector<Tensor> tensors;                  // sorted by name
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent

  // The tensor named `name`, or null (a view into `tensors`).
  const Tensor* Find(std::string_view name) const;

  friend bool operator==(const SafetensorsFile&, const SafetensorsFile&) = default;
};

// Parses a whole file's bytes.
Result<SafetensorsFile> ParseSafetensors(std::span<const std::byte> file);
// Maps `path` and parses it; NotFound or IoError for the file, InvalidArgument (with the path)
// for its content.
Result<SafetensorsFile> ReadSafetensorsFile(const std::string& path);

// The bytes of a file holding `tensors` and `metadata`.
Result<std::vector<std::byte>> SerializeSafetensors(
    std::span<const Tensor> tensors, const std::map<std::string, std::string>& metadata = {});
// Writes those bytes to `path` through a temporary file renamed over it, so a reader never sees
// half a file.
Status WriteSafetensorsFile(const std::string& path, std::span<const Tensor> tensors,
                            const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of a datatype ("F32" for FP32); InvalidArgument for BYTES.
Result<std::string_view> SafetensorsDtypeName(DataType type);

}  // namespace gshare
