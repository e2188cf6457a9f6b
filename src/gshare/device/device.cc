#include "gshare/device/device.h"

#include <fmt/format.h>

namespace gshare {

std::uint64_t DeviceBuffer::NextId() {
  // Starts at 1, so that 0 never names a buffer.
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Result<ExportedMemory> DeviceBuffer::Export() const {
  return FailedPrecondition(fmt::format(
      "{}: this device's memory cannot be shared with a function process", device().info().name));
}

Result<DeviceMemoryInfo> Device::QueryMemory() const {
  const std::uint64_t total = info().memory_bytes;
  const std::uint64_t allocated = allocated_bytes();
  return DeviceMemoryInfo{.free_bytes = allocated < total ? total - allocated : 0,
                          .total_bytes = total};
}

std::string FormatCudaVersion(int version) {
  if (version <= 0) return "none";
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::string_view MemoryHandleKindName(MemoryHandleKind kind) {
  switch (kind) {
    case MemoryHandleKind::kMemfd:
      return "memfd";
    case MemoryHandleKind::kCudaPosixFd:
      return "cuda-posix-fd";
  }
  return "unknown";
}

std::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kEmulated:
      return "emulated";
    case DeviceKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

}  // namespace gshare
