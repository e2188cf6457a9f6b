#include "gshare/device/device.h"

namespace gshare {

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
