#include "gshare/device/gpu_uuid.h"

#include <fmt/format.h>

namespace gshare {
namespace {

constexpr std::string_view kPrefixes[] = {"GPU-", "MIG-", "EMU-"};
// Hex digits in each dash-separated group of the 16 bytes.
constexpr std::size_t kGroupDigits[] = {8, 4, 4, 4, 12};
constexpr std::size_t kTextSize = 4 + 32 + 4;  // prefix, hex digits, dashes

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string FormatGpuUuid(const GpuUuid& uuid) {
  const auto& b = uuid.bytes;
  return fmt::format(
      "{}{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      kPrefixes[static_cast<int>(uuid.kind)], b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
      b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

Result<GpuUuid> ParseGpuUuid(std::string_view text) {
  const auto bad = [text](std::string_view why) {
    return InvalidArgument(
        fmt::format("'{}' is not a GPU UUID ({}; expected GPU-, MIG- or EMU- and 32 hex digits as "
                    "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                    text, why));
  };
  GpuUuid uuid;
  const std::string_view prefix = text.substr(0, 4);
  if (prefix == "GPU-") {
    uuid.kind = GpuUuidKind::kGpu;
  } else if (prefix == "MIG-") {
    uuid.kind = GpuUuidKind::kMig;
    if (text.substr(4, 4) == "GPU-" || text.find('/') != std::string_view::npos) {
      return bad(
          "the old MIG-GPU-<uuid>/<gi>/<ci> form names no single device; use the MIG- "
          "UUID that nvidia-smi -L prints");
    }
  } else if (prefix == "EMU-") {
    uuid.kind = GpuUuidKind::kEmulated;
  } else {
    return bad("unknown prefix");
  }
  if (text.size() != kTextSize) {
    return bad(fmt::format("{} characters, not {}", text.size(), kTextSize));
  }
  std::size_t position = 4;
  std::size_t byte = 0;
  for (std::size_t group = 0; group < std::size(kGroupDigits); ++group) {
    if (group > 0) {
      if (text[position] != '-') {
        return bad(fmt::format("'{}' where a dash belongs, at {}", text[position], position));
      }
      ++position;
    }
    for (std::size_t digit = 0; digit < kGroupDigits[group]; digit += 2) {
      const int high = HexValue(text[position]);
      const int low = HexValue(text[position + 1]);
      if (high < 0 || low < 0) {
        const std::size_t at = high < 0 ? position : position + 1;
        return bad(fmt::format("'{}' is not a hex digit, at {}", text[at], at));
      }
      uuid.bytes[byte++] = static_cast<std::uint8_t>(high * 16 + low);
      position += 2;
    }
  }
  return uuid;
}

bool IsMigDeviceName(std::string_view name) {
  // " MIG " inside the name, or a name that ends in " MIG"/starts with "MIG ".
  for (std::size_t at = name.find("MIG"); at != std::string_view::npos;
       at = name.find("MIG", at + 1)) {
    const bool starts = at == 0 || name[at - 1] == ' ';
    const bool ends = at + 3 == name.size() || name[at + 3] == ' ';
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace gshare
