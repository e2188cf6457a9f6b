// Tests of the CUDA backend. They need an NVIDIA GPU and driver (ctest label `gpu`) and skip,
// saying why, where there is none.
#include "gshare/device/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gshare/common/random.h"

namespace gshare {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = DiscoverCudaDevices();
    if (!devices.ok()) GTEST_SKIP() << "no CUDA GPU here: " << devices.status().ToString();
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
    EXPECT_EQ(info.uuid.rfind("GPU-", 0), 0u) << info.uuid;
    EXPECT_GT(info.memory_bytes, 0u);
  }
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
