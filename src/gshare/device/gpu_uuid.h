// GPU identities as text and as the driver's 16 raw bytes.
//
// The text form is nvidia-smi's: a prefix and the 16 bytes as lowercase hex in 8-4-4-4-12 groups,
// "GPU-5f0c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b". A whole GPU is "GPU-", a MIG instance "MIG-" (the
// form drivers since R470 print, whose bytes are what cuDeviceGetUuid_v2 returns for the
// instance), and an emulated GPU "EMU-". The raw bytes are what the checkpoint API's GPU
// remapping takes (CUuuid). Pure functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

using GpuUuidBytes = std::array<std::uint8_t, 16>;

enum class GpuUuidKind { kGpu, kMig, kEmulated };

struct GpuUuid {
  GpuUuidKind kind = GpuUuidKind::kGpu;
  GpuUuidBytes bytes{};

  friend bool operator==(const GpuUuid&, const GpuUuid&) = default;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "MIG-..." or "EMU-...", lowercase.
std::string FormatGpuUuid(const GpuUuid& uuid);

// Parses the text form; hex digits in either case. InvalidArgument, naming what is wrong (the
// prefix, the length, a group, a character), for anything else, including the older MIG form
// "MIG-GPU-<uuid>/<gpu instance>/<compute instance>", which names no single device.
Result<GpuUuid> ParseGpuUuid(std::string_view text);

// Whether a CUDA device of this name is a MIG instance ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"): the
// runtime names MIG instances so and has no attribute that says it.
bool IsMigDeviceName(std::string_view name);

}  // namespace gshare
