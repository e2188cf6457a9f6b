#include "gshare/device/device.h"

namespace gshare {

std::uint64_t DeviceBuffer::NextId() {
  // Starts at 1, so that 0 never names a buffer.
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
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
