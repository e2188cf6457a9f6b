#include "gshare/fn/device_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace gshare::fn {
namespace {

constexpr std::uint64_t kReserve = 64ULL << 20;

// A free, page-aligned address range of kReserve bytes.
std::uintptr_t FreeRange() {
  void* probe = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(probe, MAP_FAILED);
  ::munmap(probe, kReserve);
  return reinterpret_cast<std::uintptr_t>(probe);
}

UniqueFd Segment(std::uint64_t bytes) {
  UniqueFd fd(::memfd_create("segment", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
  return fd;
}

TEST(DeviceMemoryTest, AllocationsStayWithinTheQuotaAndFailClearlyBeyondIt) {
  auto memory = DeviceMemory::Reserve(FreeRange(), kReserve);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  DeviceMemory& device = **memory;
  // Before the first map the quota is zero.
  EXPECT_EQ(device.Allocate(1, "early").status().code(), StatusCode::kResourceExhausted);

  ASSERT_TRUE(device.Map(Segment(1 << 20), 1 << 20, 1 << 20).ok());
  auto weights = device.Allocate(600 << 10, "weights");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(weights->data(), device.base());
  auto too_much = device.Allocate(600 << 10, "workspace");
  ASSERT_FALSE(too_much.ok());
  EXPECT_EQ(too_much.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_much.status().message().find("would exceed the slice's quota of 1.0 MiB"),
            std::string::npos)
      << too_much.status().message();
  EXPECT_EQ(device.in_use_bytes(), 600u << 10);

  *weights = DeviceAllocation();  // freed: the room is back
  auto again = device.Allocate(1 << 20, "all of it");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->size_bytes(), 1u << 20);
}

TEST(DeviceMemoryTest, ContentsFollowTheSegmentAcrossAnUnmapAndAMapAtTheSameAddress) {
  auto memory = DeviceMemory::Reserve(FreeRange(), kReserve);
  ASSERT_TRUE(memory.ok());
  DeviceMemory& device = **memory;
  UniqueFd first = Segment(1 << 20);
  const int first_fd = ::dup(first.get());
  ASSERT_TRUE(device.Map(std::move(first), 1 << 20, 1 << 20).ok());
  auto buffer = device.Allocate(4096, "buffer");
  ASSERT_TRUE(buffer.ok());
  std::memcpy(buffer->data(), "resident", 8);
  std::byte* const address = buffer->data();
  ASSERT_TRUE(device.Unmap().ok());
  EXPECT_FALSE(device.mapped());

  // The node copies the segment elsewhere (another GPU) and maps the copy.
  UniqueFd second = Segment(2 << 20);
  char copy[4096];
  ASSERT_EQ(::pread(first_fd, copy, sizeof(copy), 0), static_cast<ssize_t>(sizeof(copy)));
  ASSERT_EQ(::pwrite(second.get(), copy, sizeof(copy), 0), static_cast<ssize_t>(sizeof(copy)));
  ::close(first_fd);
  ASSERT_TRUE(device.Map(std::move(second), 2 << 20, 2 << 20).ok());
  EXPECT_EQ(buffer->data(), address);
  EXPECT_EQ(std::memcmp(buffer->data(), "resident", 8), 0);
}

TEST(DeviceMemoryTest, AFrozenImageIsCleanUntilSomethingLivesAboveIt) {
  auto memory = DeviceMemory::Reserve(FreeRange(), kReserve);
  ASSERT_TRUE(memory.ok());
  DeviceMemory& device = **memory;
  ASSERT_TRUE(device.Map(Segment(4 << 20), 4 << 20, 4 << 20).ok());
  auto weights = device.Allocate(10000, "weights");
  ASSERT_TRUE(weights.ok());
  EXPECT_TRUE(device.Image().written);  // never frozen: assumed written
  ASSERT_TRUE(device.Freeze().ok());
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t frozen_end = (10240 + page - 1) / page * page;
  EXPECT_EQ(device.Image().used_bytes, frozen_end);
  EXPECT_FALSE(device.Image().written);
  {
    auto scratch = device.Allocate(256, "scratch");
    ASSERT_TRUE(scratch.ok());
    EXPECT_EQ(scratch->offset_bytes(), frozen_end);  // above the frozen memory
    EXPECT_TRUE(device.Image().written);
    EXPECT_EQ(device.Image().used_bytes, frozen_end + 256);
  }
  EXPECT_FALSE(device.Image().written);
  EXPECT_EQ(device.Image().used_bytes, frozen_end);
}

TEST(DeviceMemoryDeathTest, AWriteToFrozenMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto memory = DeviceMemory::Reserve(FreeRange(), kReserve);
        (void)(*memory)->Map(Segment(1 << 20), 1 << 20, 1 << 20);
        auto weights = (*memory)->Allocate(4096, "weights");
        (void)(*memory)->Freeze();
        *static_cast<volatile char*>(static_cast<void*>(weights->data())) = 1;
      },
      "");
}

TEST(DeviceMemoryTest, RefusesBadMapsAndQuotas) {
  const std::uintptr_t base = FreeRange();
  EXPECT_EQ(DeviceMemory::Reserve(base + 1, kReserve).status().code(),
            StatusCode::kInvalidArgument);
  auto memory = DeviceMemory::Reserve(base, kReserve);
  ASSERT_TRUE(memory.ok());
  // Taken: a second reservation of the same range fails.
  EXPECT_FALSE(DeviceMemory::Reserve(base, kReserve).ok());
  DeviceMemory& device = **memory;
  EXPECT_EQ(device.Map(Segment(4096), 1 << 20, 1 << 20).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(device.Map(Segment(1 << 20), 1 << 20, 2 << 20).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(device.Map(Segment(kReserve * 2), kReserve * 2, 1).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(device.Map(Segment(1 << 20), 1 << 20, 1 << 20).ok());
  EXPECT_EQ(device.Map(Segment(1 << 20), 1 << 20, 1 << 20).code(), StatusCode::kFailedPrecondition);
  auto used = device.Allocate(8192, "used");
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(device.SetQuota(4096).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(device.SetQuota(8192).ok());
  EXPECT_EQ(device.Allocate(1, "more").status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gshare::fn
