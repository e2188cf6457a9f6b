#include "gshare/device/emulated/emulated_device.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/mman.h>
#include <cerrno>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/device/emulated/emulated_host_memory.h"

namespace gshare {
namespace {

std::unique_ptr<EmulatedDevice> MakeDevice(int index, std::uint64_t memory_bytes) {
  auto device = EmulatedDevice::Create(index, EmulatedGpuConfig{"", memory_bytes, 0});
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return std::move(device).value();
}

void FillRandom(std::span<std::byte> bytes, std::uint64_t seed) {
  Random random(seed);
  for (auto& b : bytes) b = static_cast<std::byte>(random.NextU64());
}

TEST(EmulatedDeviceTest, DescribesItself) {
  auto device = MakeDevice(3, 2 * kGiB);
  EXPECT_EQ(device->info().kind, DeviceKind::kEmulated);
  EXPECT_EQ(device->info().index, 3);
  EXPECT_EQ(device->info().name, "emulated-gpu-3");
  EXPECT_EQ(device->info().memory_bytes, 2 * kGiB);
  EXPECT_EQ(device->info().total_memory_bytes, 2 * kGiB);
  EXPECT_EQ(device->info().uuid, "EMU-00000003-0000-0000-0000-000000000000");
  EXPECT_EQ(device->info().uuid_bytes[3], 3);
  EXPECT_NE(device->info().uuid, MakeDevice(4, kGiB)->info().uuid);
  EXPECT_TRUE(device->info().memory_exportable);
  EXPECT_EQ(device->info().cuda_driver_version, 0);
}

TEST(EmulatedDeviceTest, QueryMemoryIsCapacityMinusAllocated) {
  auto device = MakeDevice(0, 100 * kMiB);
  auto buffer = device->Allocate(30 * kMiB);
  ASSERT_TRUE(buffer.ok());
  auto memory = device->QueryMemory();
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ(memory->total_bytes, 100 * kMiB);
  EXPECT_EQ(memory->free_bytes, 70 * kMiB);
  EXPECT_TRUE(device->Trim().ok());
  EXPECT_EQ(device->allocated_bytes(), 30 * kMiB);
}

TEST(EmulatedDeviceTest, ExportsADuplicateOfTheSegment) {
  auto device = MakeDevice(0, kGiB);
  const std::uint64_t size = kMiB + 5;
  auto buffer = device->Allocate(size);
  ASSERT_TRUE(buffer.ok());
  auto* emulated = static_cast<EmulatedBuffer*>(buffer->get());
  FillRandom(emulated->bytes(), 11);
  auto exported = (*buffer)->Export();
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->kind, MemoryHandleKind::kMemfd);
  EXPECT_EQ(exported->bytes, size);
  EXPECT_NE(exported->fd.get(), emulated->fd());
  void* view = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, exported->fd.get(), 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(view, emulated->bytes().data(), size), 0);
  ::munmap(view, size);
}

TEST(EmulatedDeviceTest, RejectsBadConfiguration) {
  EXPECT_EQ(EmulatedDevice::Create(0, EmulatedGpuConfig{"", 0, 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EmulatedDevice::Create(0, EmulatedGpuConfig{"", kGiB, -1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(EmulatedDeviceTest, AccountsCapacityExactly) {
  auto device = MakeDevice(0, 100 * kMiB);
  auto a = device->Allocate(60 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(device->allocated_bytes(), 60 * kMiB);
  auto b = device->Allocate(40 * kMiB + 1);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("emulated-gpu-0"), std::string::npos);
  EXPECT_EQ(device->allocated_bytes(), 60 * kMiB);
  auto c = device->Allocate(40 * kMiB);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(device->allocated_bytes(), 100 * kMiB);
  a.value().reset();
  EXPECT_EQ(device->allocated_bytes(), 40 * kMiB);
  c.value().reset();
  EXPECT_EQ(device->allocated_bytes(), 0u);
  EXPECT_EQ(device->Allocate(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(EmulatedDeviceTest, CopiesRoundTripThroughAStream) {
  auto device = MakeDevice(0, kGiB);
  EmulatedHostMemory host;
  const std::uint64_t size = 3 * kMiB + 17;
  auto source = host.Allocate(size);
  auto back = host.Allocate(size);
  ASSERT_TRUE(source.ok() && back.ok());
  FillRandom((*source)->bytes(), 7);
  auto buffer = device->Allocate(size);
  ASSERT_TRUE(buffer.ok());
  auto stream = device->CreateStream();
  ASSERT_TRUE(stream.ok());

  // Two halves in order, then back in one copy.
  auto src = (*source)->bytes();
  const std::uint64_t half = size / 2;
  ASSERT_TRUE((*stream)->CopyToDevice(**buffer, 0, src.subspan(0, half)).ok());
  ASSERT_TRUE((*stream)->CopyToDevice(**buffer, half, src.subspan(half)).ok());
  ASSERT_TRUE((*stream)->CopyToHost((*back)->bytes(), **buffer, 0).ok());
  auto completion = (*stream)->Record();
  ASSERT_TRUE(completion.ok());
  ASSERT_TRUE(completion->Wait().ok());
  EXPECT_TRUE(completion->Done());
  EXPECT_TRUE(std::equal(src.begin(), src.end(), (*back)->bytes().begin()));

  // The device memory is a shared segment: a second mapping of its fd sees the same bytes.
  auto* emulated = static_cast<EmulatedBuffer*>(buffer->get());
  void* view = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, emulated->fd(), 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(view, src.data(), size), 0);
  ::munmap(view, size);
}

TEST(EmulatedDeviceTest, RejectsCopiesOutsideTheBuffer) {
  auto device = MakeDevice(0, kGiB);
  auto buffer = device->Allocate(kMiB);
  auto stream = device->CreateStream();
  ASSERT_TRUE(buffer.ok() && stream.ok());
  std::vector<std::byte> host(kMiB);
  EXPECT_EQ((*stream)->CopyToDevice(**buffer, 1, host).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*stream)->CopyToHost(host, **buffer, kMiB).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*stream)->CopyToDevice(**buffer, 2 * kMiB, std::span<const std::byte>()).code(),
            StatusCode::kOutOfRange);
  EXPECT_TRUE((*stream)->CopyToDevice(**buffer, kMiB, std::span<const std::byte>()).ok());
  EXPECT_TRUE((*stream)->Synchronize().ok());
}

TEST(EmulatedDeviceTest, RejectsBuffersOfAnotherDevice) {
  auto first = MakeDevice(0, kGiB);
  auto second = MakeDevice(1, kGiB);
  auto buffer = first->Allocate(kMiB);
  auto stream = second->CreateStream();
  ASSERT_TRUE(buffer.ok() && stream.ok());
  std::vector<std::byte> host(16);
  EXPECT_EQ((*stream)->CopyToDevice(**buffer, 0, host).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(second->TimedRawCopyToDevice(**buffer, host).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(EmulatedDeviceTest, RawCopyWritesTheBuffer) {
  auto device = MakeDevice(0, kGiB);
  auto buffer = device->Allocate(kMiB);
  ASSERT_TRUE(buffer.ok());
  std::vector<std::byte> host(kMiB);
  FillRandom(host, 3);
  auto elapsed = device->TimedRawCopyToDevice(**buffer, host);
  ASSERT_TRUE(elapsed.ok());
  EXPECT_GE(elapsed->count(), 0);
  auto* emulated = static_cast<EmulatedBuffer*>(buffer->get());
  EXPECT_TRUE(std::equal(host.begin(), host.end(), emulated->bytes().begin()));
  std::vector<std::byte> too_big(kMiB + 1);
  EXPECT_EQ(device->TimedRawCopyToDevice(**buffer, too_big).status().code(),
            StatusCode::kOutOfRange);
}

TEST(EmulatedDeviceTest, PacedCopiesStillDeliverEveryByte) {
  // 1 GB/s: 256 KiB take about a quarter of a millisecond.
  auto device = EmulatedDevice::Create(0, EmulatedGpuConfig{"paced", kGiB, 1e9});
  ASSERT_TRUE(device.ok());
  EXPECT_EQ((*device)->info().link_bytes_per_second, 1e9);
  auto buffer = (*device)->Allocate(256 * kKiB);
  auto first = (*device)->CreateStream();
  auto second = (*device)->CreateStream();
  ASSERT_TRUE(buffer.ok() && first.ok() && second.ok());
  std::vector<std::byte> host(256 * kKiB);
  FillRandom(host, 11);
  const std::span<const std::byte> all(host);
  ASSERT_TRUE((*first)->CopyToDevice(**buffer, 0, all.subspan(0, 128 * kKiB)).ok());
  ASSERT_TRUE((*second)->CopyToDevice(**buffer, 128 * kKiB, all.subspan(128 * kKiB)).ok());
  ASSERT_TRUE((*first)->Synchronize().ok());
  ASSERT_TRUE((*second)->Synchronize().ok());
  auto* emulated = static_cast<EmulatedBuffer*>(buffer->get());
  EXPECT_TRUE(std::equal(host.begin(), host.end(), emulated->bytes().begin()));
}

TEST(EmulatedHostMemoryTest, AllocatesWritableMemory) {
  EmulatedHostMemory host;
  auto buffer = host.Allocate(kMiB);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ((*buffer)->size_bytes(), kMiB);
  std::memset((*buffer)->bytes().data(), 0xab, kMiB);
  EXPECT_EQ((*buffer)->bytes()[kMiB - 1], std::byte{0xab});
  EXPECT_EQ(host.Allocate(0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

TEST(EmulatedDeviceTest, ASegmentHandedToAFunctionCannotBeResized) {
  auto device = EmulatedDevice::Create(0, {});
  ASSERT_TRUE(device.ok());
  auto buffer = (*device)->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  const int fd = dynamic_cast<EmulatedBuffer&>(**buffer).fd();
  EXPECT_NE(::ftruncate(fd, 4096), 0);     // shrinking would fault the node's own mapping
  EXPECT_NE(::ftruncate(fd, 2 << 20), 0);  // growing would pass the GPU's capacity
  EXPECT_EQ(errno, EPERM);
}

}  // namespace
}  // namespace gshare
