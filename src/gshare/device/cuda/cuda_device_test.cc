// Tests of the CUDA backend. They need an NVIDIA GPU and driver (ctest label `gpu`) and skip,
// saying why, where there is none.
#include "gshare/device/cuda/cuda_device.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <utility>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/device/chunk_digest.h"
#include "gshare/device/cuda/cuda_driver_api.h"
#include "gshare/device/gpu_uuid.h"

namespace gshare {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = DiscoverCudaDevices();
    // Only "no driver or no GPU" skips; a driver that fails is a failure (no silent pass).
    if (!devices.ok() && devices.status().code() == StatusCode::kUnavailable) {
      GTEST_SKIP() << "no CUDA GPU here: " << devices.status().ToString();
    }
    ASSERT_TRUE(devices.ok()) << devices.status().ToString();
    devices_ = std::move(devices).value();
    host_ = NewCudaHostMemory();
  }

  std::unique_ptr<HostMemory> host_;
  std::vector<std::unique_ptr<Device>> devices_;
};

TEST_F(CudaDeviceTest, DescribesEveryGpu) {
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const DeviceInfo& info = devices_[i]->info();
    EXPECT_EQ(info.kind, DeviceKind::kCuda);
    EXPECT_EQ(info.index, static_cast<int>(i));
    EXPECT_FALSE(info.name.empty());
    auto uuid = ParseGpuUuid(info.uuid);
    ASSERT_TRUE(uuid.ok()) << uuid.status().ToString();
    EXPECT_EQ(uuid->kind, IsMigDeviceName(info.name) ? GpuUuidKind::kMig : GpuUuidKind::kGpu);
    EXPECT_EQ(uuid->bytes, info.uuid_bytes);
    EXPECT_GT(info.memory_bytes, 0u);
    EXPECT_GE(info.total_memory_bytes, info.memory_bytes);
    EXPECT_GT(info.cuda_driver_version, 0);
    EXPECT_GT(info.cuda_runtime_version, 0);
    EXPECT_EQ(info.memory_exportable, info.memory_export_note.empty()) << info.memory_export_note;
  }
}

TEST_F(CudaDeviceTest, QueryMemoryIsTheDriversFigure) {
  for (auto& device : devices_) {
    ASSERT_TRUE(device->Trim().ok());  // so that the buffer below is new memory
    auto before = device->QueryMemory();
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    EXPECT_EQ(before->total_bytes, device->info().total_memory_bytes);
    EXPECT_LE(before->free_bytes, before->total_bytes);
    const std::uint64_t size = 256 * kMiB;
    auto buffer = device->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    auto during = device->QueryMemory();
    ASSERT_TRUE(during.ok());
    // Other processes may allocate meanwhile; this one took at least its buffer.
    EXPECT_LE(during->free_bytes + size, before->free_bytes + 64 * kMiB);
  }
}

TEST_F(CudaDeviceTest, TrimReturnsFreedMemoryToTheDriver) {
  Device& device = *devices_[0];
  if (!device.info().memory_exportable) {
    GTEST_SKIP() << "GPU 0 does not use the pool of exportable memory: "
                 << device.info().memory_export_note;
  }
  ASSERT_TRUE(device.Trim().ok());
  const std::uint64_t size = 512 * kMiB;
  auto buffer = device.Allocate(size);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto held = device.QueryMemory();
  ASSERT_TRUE(held.ok());
  buffer->reset();
  EXPECT_EQ(device.allocated_bytes(), 0u);
  // The freed allocation stays cached: the driver still counts it as used.
  auto cached = device.QueryMemory();
  ASSERT_TRUE(cached.ok());
  EXPECT_LT(cached->free_bytes, held->free_bytes + size / 2);
  // Reuse: the same size again comes from the cache.
  auto again = device.Allocate(size);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  again->reset();
  ASSERT_TRUE(device.Trim().ok());
  auto trimmed = device.QueryMemory();
  ASSERT_TRUE(trimmed.ok());
  EXPECT_GE(trimmed->free_bytes + 64 * kMiB, held->free_bytes + size);
}

// Memory once handed out (Export) goes back to the driver when its buffer is freed, never to the
// pool: a process that kept its import must not see the next buffer's bytes.
TEST_F(CudaDeviceTest, ExportedMemoryIsNeverReused) {
  Device& device = *devices_[0];
  if (!device.info().memory_exportable) {
    GTEST_SKIP() << "unsupported here: GPU 0 has no exportable memory: "
                 << device.info().memory_export_note;
  }
  ASSERT_TRUE(device.Trim().ok());
  const std::uint64_t size = 512 * kMiB;
  auto before = device.QueryMemory();
  ASSERT_TRUE(before.ok());
  auto buffer = device.Allocate(size);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto exported = (*buffer)->Export();
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  exported->fd.Reset();
  buffer->reset();
  // Not cached: the driver has it back without a trim.
  auto after = device.QueryMemory();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->free_bytes + 64 * kMiB, before->free_bytes);
}

// Imports an exported buffer as a function process would, in this process: its bytes, written by
// a copy stream, read back through the imported mapping.
TEST_F(CudaDeviceTest, ExportedMemoryImportsWithTheSameBytes) {
  Device& device = *devices_[0];
  const std::uint64_t size = 8 * kMiB + 5;
  auto buffer = device.Allocate(size);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto exported = (*buffer)->Export();
  if (!device.info().memory_exportable) {
    EXPECT_EQ(exported.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(exported.status().message().find("CU_DEVICE_ATTRIBUTE_"), std::string::npos)
        << exported.status().message();
    GTEST_SKIP() << "GPU 0 cannot export memory: " << device.info().memory_export_note;
  }
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->kind, MemoryHandleKind::kCudaPosixFd);
  EXPECT_GE(exported->bytes, size);
  ASSERT_TRUE(exported->fd.valid());

  auto source = host_->Allocate(size);
  ASSERT_TRUE(source.ok());
  Random random(9);
  for (auto& b : (*source)->bytes()) b = static_cast<std::byte>(random.NextU64());
  auto stream = device.CreateStream();
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->CopyToDevice(**buffer, 0, (*source)->bytes()).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());

  auto driver = CudaDriver();
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  const CudaDriverApi& api = **driver;
  CUdevice cu_device = 0;
  ASSERT_EQ(api.device_get(&cu_device, device.info().index), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(api.mem_import_from_shareable_handle(
                &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(exported->fd.get())),
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  CUdeviceptr address = 0;
  ASSERT_EQ(api.mem_address_reserve(&address, exported->bytes, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api.mem_map(address, exported->bytes, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cu_device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(api.mem_set_access(address, exported->bytes, &access, 1), CUDA_SUCCESS);

  std::vector<std::byte> back(size);
  ASSERT_EQ(
      cudaMemcpy(back.data(), reinterpret_cast<const void*>(address), size, cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_EQ(std::memcmp(back.data(), (*source)->bytes().data(), size), 0);

  EXPECT_EQ(api.mem_unmap(address, exported->bytes), CUDA_SUCCESS);
  EXPECT_EQ(api.mem_address_free(address, exported->bytes), CUDA_SUCCESS);
  EXPECT_EQ(api.mem_release(handle), CUDA_SUCCESS);
}

TEST_F(CudaDeviceTest, CopiesRoundTripOnEveryGpu) {
  const std::uint64_t size = 64 * kMiB + 3;
  auto source = host_->Allocate(size);
  auto back = host_->Allocate(size);
  ASSERT_TRUE(source.ok() && back.ok());
  Random random(5);
  for (auto& b : (*source)->bytes()) b = static_cast<std::byte>(random.NextU64());
  for (auto& device : devices_) {
    std::fill((*back)->bytes().begin(), (*back)->bytes().end(), std::byte{0});
    auto buffer = device->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    EXPECT_EQ(device->allocated_bytes(), size);
    auto stream = device->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    ASSERT_TRUE((*stream)->CopyToDevice(**buffer, 0, (*source)->bytes()).ok());
    ASSERT_TRUE((*stream)->CopyToHost((*back)->bytes(), **buffer, 0).ok());
    auto completion = (*stream)->Record();
    ASSERT_TRUE(completion.ok());
    ASSERT_TRUE(completion->Wait().ok());
    EXPECT_TRUE(completion->Done());
    EXPECT_TRUE(
        std::equal((*source)->bytes().begin(), (*source)->bytes().end(), (*back)->bytes().begin()));
    auto raw = device->TimedRawCopyToDevice(**buffer, (*source)->bytes());
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    EXPECT_GT(raw->count(), 0);
    buffer->reset();
    EXPECT_EQ(device->allocated_bytes(), 0u);
  }
}

// The digest kernel computes chunk_digest.h's definition, for every tail length and for chunks of
// the restore engine's size, with partial sums from many blocks.
TEST_F(CudaDeviceTest, TheDigestKernelMatchesTheDefinition) {
  const std::uint64_t size = 24 * kMiB + 13;
  auto source = host_->Allocate(size);
  ASSERT_TRUE(source.ok());
  Random random(6);
  for (auto& b : (*source)->bytes()) b = static_cast<std::byte>(random.NextU64());
  for (auto& device : devices_) {
    auto buffer = device->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    auto stream = device->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    ASSERT_TRUE((*stream)->CopyToDevice(**buffer, 0, (*source)->bytes()).ok());
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges = {
        {0, 0},    {0, 1},
        {8, 7},    {16, 9},
        {0, 4096}, {8 * kMiB, 8 * kMiB},
        {0, size}, {16 * kMiB, size - 16 * kMiB}};
    std::vector<std::uint64_t> digests(ranges.size(), 0);
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      ASSERT_TRUE((*stream)->Digest(**buffer, ranges[i].first, ranges[i].second, &digests[i]).ok());
    }
    std::promise<Status> ran;
    (*stream)->Then([&](Status status) { ran.set_value(status); });
    ASSERT_TRUE(ran.get_future().get().ok());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_EQ(digests[i],
                ChunkDigest((*source)->bytes().subspan(ranges[i].first, ranges[i].second)))
          << "offset " << ranges[i].first << ", " << ranges[i].second << " bytes";
    }
    EXPECT_EQ((*stream)->Digest(**buffer, 4, 8, &digests[0]).code(), StatusCode::kInvalidArgument);
  }
}

TEST_F(CudaDeviceTest, RejectsOutOfRangeAndForeignBuffers) {
  auto buffer = devices_[0]->Allocate(kMiB);
  auto stream = devices_[0]->CreateStream();
  ASSERT_TRUE(buffer.ok() && stream.ok());
  auto host = host_->Allocate(2 * kMiB);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ((*stream)->CopyToDevice(**buffer, 0, (*host)->bytes()).code(), StatusCode::kOutOfRange);
  if (devices_.size() > 1) {
    auto other = devices_[1]->CreateStream();
    ASSERT_TRUE(other.ok());
    EXPECT_EQ((*other)->CopyToDevice(**buffer, 0, (*host)->bytes().subspan(0, 16)).code(),
              StatusCode::kInvalidArgument);
  }
}

TEST_F(CudaDeviceTest, OverAllocationIsResourceExhausted) {
  const std::uint64_t too_much = devices_[0]->info().memory_bytes * 2;
  auto buffer = devices_[0]->Allocate(too_much);
  EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted) << buffer.status().ToString();
}

}  // namespace
}  // namespace gshare
