// Fuzz target: the safetensors reader. For a file it accepts, writing the result and reading it
// back must give the same tensors and metadata.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gshare/tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto file = gshare::ParseSafetensors(bytes);
  if (!file.ok()) {
    if (file.status().code() != gshare::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  auto written = gshare::SerializeSafetensors(file->tensors, file->metadata);
  if (!written.ok()) __builtin_trap();
  auto again = gshare::ParseSafetensors(*written);
  if (!again.ok() || !(*again == *file)) __builtin_trap();
  return 0;
}
