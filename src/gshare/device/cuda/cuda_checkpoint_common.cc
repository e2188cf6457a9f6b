// The parts of cuda_checkpoint.h that need no driver, and the opener where CUDA was not built.
// Part of gshare_device, which alone knows whether the CUDA backend was built (GSHARE_HAVE_CUDA).
#include <fmt/format.h>

#include "gshare/device/cuda/cuda_checkpoint.h"

#if defined(GSHARE_HAVE_CUDA)
#include "gshare/device/cuda/cuda_checkpoint_driver.h"
#endif

namespace gshare {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view ProcessCheckpointStateName(ProcessCheckpointState state) {
  switch (state) {
    case ProcessCheckpointState::kRunning:
      return "running";
    case ProcessCheckpointState::kLocked:
      return "locked";
    case ProcessCheckpointState::kCheckpointed:
      return "checkpointed";
    case ProcessCheckpointState::kFailed:
      return "failed";
  }
  return "unknown";
}

Result<GpuUuidBytes> ParseGpuUuid(std::string_view text) {
  const Status bad = InvalidArgument(
      fmt::format("'{}' is not a CUDA GPU's UUID (GPU- and 32 hexadecimal digits)", text));
  constexpr std::string_view kPrefix = "GPU-";
  if (!text.starts_with(kPrefix)) return bad;
  text.remove_prefix(kPrefix.size());
  GpuUuidBytes bytes{};
  std::size_t digits = 0;
  for (const char c : text) {
    if (c == '-') continue;
    const int value = HexValue(c);
    if (value < 0 || digits == 2 * bytes.size()) return bad;
    bytes[digits / 2] = static_cast<std::uint8_t>((bytes[digits / 2] << 4) | value);
    ++digits;
  }
  if (digits != 2 * bytes.size()) return bad;
  return bytes;
}

Result<std::unique_ptr<ProcessCheckpointApi>> OpenProcessCheckpointApi() {
#if defined(GSHARE_HAVE_CUDA)
  return OpenDriverProcessCheckpointApi();
#else
  return Unavailable("the process checkpoint API is not available: gshare was built without CUDA");
#endif
}

std::string ProbeProcessCheckpointApi() {
#if defined(GSHARE_HAVE_CUDA)
  return ProbeDriverProcessCheckpointApi();
#else
  return "unsupported: gshare was built without CUDA";
#endif
}

}  // namespace gshare
