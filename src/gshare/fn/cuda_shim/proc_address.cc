#include "gshare/fn/cuda_shim/proc_address.h"

#include <cstring>

namespace gshare::fn::cuda_shim {
namespace {

constexpr HookedAbi kHookedAbis[] = {
    {"cuMemAlloc_v2", "cuMemAlloc", 3020, StreamVariant::kNone},
    {"cuMemFree_v2", "cuMemFree", 3020, StreamVariant::kNone},
    {"cuMemAllocAsync", "cuMemAllocAsync", 11020, StreamVariant::kLegacy},
    {"cuMemAllocAsync_ptsz", "cuMemAllocAsync", 11020, StreamVariant::kPerThread},
    {"cuMemFreeAsync", "cuMemFreeAsync", 11020, StreamVariant::kLegacy},
    {"cuMemFreeAsync_ptsz", "cuMemFreeAsync", 11020, StreamVariant::kPerThread},
    {"cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, StreamVariant::kNone},
    {"cuMemGetInfo_v2", "cuMemGetInfo", 3020, StreamVariant::kNone},
    {"cuGetProcAddress", "cuGetProcAddress", 11030, StreamVariant::kNone},
    {"cuGetProcAddress_v2", "cuGetProcAddress", 12000, StreamVariant::kNone},
};

}  // namespace

std::span<const HookedAbi> HookedAbis() { return kHookedAbis; }

const char* HookedEntryPoint(const char* symbol, int cuda_version, std::uint64_t flags) {
  if (symbol == nullptr) return nullptr;
  const std::uint64_t stream_flags =
      flags & (kProcAddressLegacyStream | kProcAddressPerThreadStream);
  const bool both = stream_flags == (kProcAddressLegacyStream | kProcAddressPerThreadStream);
  const bool per_thread = stream_flags == kProcAddressPerThreadStream;
  const HookedAbi* newest = nullptr;
  for (const HookedAbi& abi : kHookedAbis) {
    if (std::strcmp(abi.base_name, symbol) != 0 || abi.since > cuda_version) continue;
    if (abi.stream != StreamVariant::kNone) {
      if (both) return nullptr;  // which variant the driver picks is its own business
      if ((abi.stream == StreamVariant::kPerThread) != per_thread) continue;
    }
    if (newest == nullptr || abi.since > newest->since) newest = &abi;
  }
  return newest != nullptr ? newest->exported : nullptr;
}

}  // namespace gshare::fn::cuda_shim
