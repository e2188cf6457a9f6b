// Which hook the shim hands out for a cuGetProcAddress query (proc_address.h): by name, version and
// flags, whatever version a runtime asks with.
#include "gshare/fn/cuda_shim/proc_address.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gshare::fn::cuda_shim {
namespace {

constexpr std::uint64_t kDefault = 0;
constexpr std::uint64_t kLegacy = kProcAddressLegacyStream;
constexpr std::uint64_t kPerThread = kProcAddressPerThreadStream;

std::string Hook(const char* symbol, int version, std::uint64_t flags) {
  const char* hook = HookedEntryPoint(symbol, version, flags);
  return hook != nullptr ? hook : "none";
}

TEST(CudaShimLibraryProcAddressTest, TheV2AbisFrom3020AtEveryLaterVersionAndFlag) {
  for (const char* name : {"cuMemAlloc", "cuMemFree", "cuMemAllocPitch", "cuMemGetInfo"}) {
    const std::string v2 = std::string(name) + "_v2";
    for (int version : {3020, 11020, 12000, 12080, 13000, 13020}) {
      for (std::uint64_t flags : {kDefault, kLegacy, kPerThread}) {
        EXPECT_EQ(Hook(name, version, flags), v2) << name << " " << version << " " << flags;
      }
    }
    // The ABI before 3.2 (32-bit sizes) is not hooked.
    EXPECT_EQ(Hook(name, 3010, kDefault), "none") << name;
    EXPECT_EQ(Hook(name, 2000, kPerThread), "none") << name;
  }
}

TEST(CudaShimLibraryProcAddressTest, StreamOrderedCallsByTheirStreamFlag) {
  for (const char* name : {"cuMemAllocAsync", "cuMemFreeAsync"}) {
    const std::string legacy = name;
    const std::string per_thread = legacy + "_ptsz";
    for (int version : {11020, 12000, 13000}) {
      EXPECT_EQ(Hook(name, version, kDefault), legacy) << name << " " << version;
      EXPECT_EQ(Hook(name, version, kLegacy), legacy) << name << " " << version;
      EXPECT_EQ(Hook(name, version, kPerThread), per_thread) << name << " " << version;
      // Flags the driver does not know about change nothing.
      EXPECT_EQ(Hook(name, version, kPerThread | 1ULL << 8), per_thread) << name << " " << version;
    }
    EXPECT_EQ(Hook(name, 11010, kDefault), "none") << name;  // before stream-ordered allocation
    // Both stream flags: the driver's choice, recognized by address if at all.
    EXPECT_EQ(Hook(name, 13000, kLegacy | kPerThread), "none") << name;
  }
}

TEST(CudaShimLibraryProcAddressTest, GetProcAddressItselfByVersion) {
  EXPECT_EQ(Hook("cuGetProcAddress", 11020, kDefault), "none");
  EXPECT_EQ(Hook("cuGetProcAddress", 11030, kDefault), "cuGetProcAddress");
  EXPECT_EQ(Hook("cuGetProcAddress", 11080, kPerThread), "cuGetProcAddress");
  EXPECT_EQ(Hook("cuGetProcAddress", 12000, kDefault), "cuGetProcAddress_v2");
  EXPECT_EQ(Hook("cuGetProcAddress", 13000, kLegacy), "cuGetProcAddress_v2");
  EXPECT_EQ(Hook("cuGetProcAddress", 13000, kLegacy | kPerThread), "cuGetProcAddress_v2");
}

TEST(CudaShimLibraryProcAddressTest, OtherNamesAreNotDecided) {
  for (const char* name : {"cuInit", "cuMemAllocManaged", "cuMemAllocFromPoolAsync",
                           "cuMemAlloc_v2",  // an exported name, not a base name
                           "cuMemAllocAsync_ptsz", "cumemalloc", "cuMemAllo", "cuMemAllocX", ""}) {
    EXPECT_EQ(Hook(name, 13000, kDefault), "none") << name;
    EXPECT_EQ(Hook(name, 13000, kPerThread), "none") << name;
  }
  EXPECT_EQ(HookedEntryPoint(nullptr, 13000, kDefault), nullptr);
}

TEST(CudaShimLibraryProcAddressTest, EveryHookedAbiIsReachable) {
  std::set<std::string> reached;
  for (const HookedAbi& abi : HookedAbis()) {
    const std::uint64_t flags = abi.stream == StreamVariant::kPerThread ? kPerThread : kLegacy;
    reached.insert(Hook(abi.base_name, abi.since, flags));
    EXPECT_EQ(Hook(abi.base_name, abi.since, flags), abi.exported);
  }
  EXPECT_EQ(reached.size(), HookedAbis().size());
}

}  // namespace
}  // namespace gshare::fn::cuda_shim
