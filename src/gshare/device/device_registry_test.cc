#include "gshare/device/device_registry.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(DeviceRegistryTest, ParsesBackends) {
  EXPECT_EQ(*ParseDeviceBackend("auto"), DeviceBackend::kAuto);
  EXPECT_EQ(*ParseDeviceBackend("cuda"), DeviceBackend::kCuda);
  EXPECT_EQ(*ParseDeviceBackend("emulated"), DeviceBackend::kEmulated);
  EXPECT_EQ(ParseDeviceBackend("tpu").status().code(), StatusCode::kInvalidArgument);
}

TEST(DeviceRegistryTest, ParsesEmulatedGpuLists) {
  auto two = ParseEmulatedGpus("2x16Gi", 12e9);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].memory_bytes, 16 * kGiB);
  EXPECT_EQ((*two)[1].link_bytes_per_second, 12e9);

  auto mixed = ParseEmulatedGpus("1x80Gi, 8Gi,2x512Mi", 0);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_EQ(mixed->size(), 4u);
  EXPECT_EQ((*mixed)[0].memory_bytes, 80 * kGiB);
  EXPECT_EQ((*mixed)[1].memory_bytes, 8 * kGiB);
  EXPECT_EQ((*mixed)[3].memory_bytes, 512 * kMiB);

  for (const char* bad : {"", "0x16Gi", "2x", "2x0", "ax16Gi", "16Gi,", "100x1Gi", "2x16Qi"}) {
    EXPECT_EQ(ParseEmulatedGpus(bad, 0).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DeviceRegistryTest, ParsesBandwidths) {
  EXPECT_EQ(*ParseBandwidth("12G"), 12e9);
  EXPECT_EQ(*ParseBandwidth("12GB/s"), 12e9);
  EXPECT_EQ(*ParseBandwidth("1Gi/s"), static_cast<double>(kGiB));
  EXPECT_EQ(*ParseBandwidth("0"), 0.0);
  EXPECT_FALSE(ParseBandwidth("fast").ok());
}

TEST(DeviceRegistryTest, MakesOptionsFromFlags) {
  auto options = MakeDeviceOptions("emulated", "3x2Gi", "10GB/s");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->backend, DeviceBackend::kEmulated);
  ASSERT_EQ(options->emulated.size(), 3u);
  EXPECT_EQ(options->emulated[2].link_bytes_per_second, 10e9);
  EXPECT_FALSE(MakeDeviceOptions("gpu", "1x1Gi", "0").ok());
  EXPECT_FALSE(MakeDeviceOptions("auto", "1x1Gi", "fast").ok());
  EXPECT_FALSE(MakeDeviceOptions("auto", "x", "0").ok());
}

TEST(DeviceRegistryTest, OpensEmulatedGpus) {
  DeviceOptions options;
  options.backend = DeviceBackend::kEmulated;
  options.emulated = *ParseEmulatedGpus("3x1Gi", 0);
  auto set = OpenDevices(options);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->kind, DeviceKind::kEmulated);
  ASSERT_EQ(set->devices.size(), 3u);
  EXPECT_EQ(set->devices[2]->info().index, 2);
  EXPECT_EQ(set->devices[2]->info().memory_bytes, kGiB);
  EXPECT_NE(set->host_memory, nullptr);
  EXPECT_TRUE(set->note.empty());
}

// The reason OpenDevices gives when there is no CUDA GPU to open: the driver, the GPU, or the
// build.
void ExpectNamesWhyThereIsNoCuda(const std::string& message) {
  if (CudaBackendBuilt()) {
    EXPECT_TRUE(message.find("no NVIDIA driver") != std::string::npos ||
                message.find("no CUDA GPU") != std::string::npos)
        << message;
  } else {
    EXPECT_NE(message.find("built without CUDA"), std::string::npos) << message;
  }
}

TEST(DeviceRegistryTest, AutoFallsBackToEmulatedGpusAndSaysWhy) {
  DeviceOptions options;
  auto set = OpenDevices(options);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_FALSE(set->devices.empty());
  if (set->kind == DeviceKind::kCuda) GTEST_SKIP() << "CUDA GPUs here: nothing to fall back from";
  EXPECT_NE(set->note.find("; using emulated GPUs"), std::string::npos) << set->note;
  ExpectNamesWhyThereIsNoCuda(set->note);
  EXPECT_EQ(set->devices.size(), 2u);
}

TEST(DeviceRegistryTest, CudaWithoutADriverOrGpuIsUnavailableAndSaysWhy) {
  DeviceOptions options;
  options.backend = DeviceBackend::kCuda;
  auto set = OpenDevices(options);
  if (set.ok()) {
    EXPECT_EQ(set->kind, DeviceKind::kCuda);
    EXPECT_FALSE(set->devices.empty());
    GTEST_SKIP() << "CUDA GPUs here";
  }
  EXPECT_EQ(set.status().code(), StatusCode::kUnavailable) << set.status().ToString();
  EXPECT_EQ(set.status().message().rfind("--device cuda: ", 0), 0u) << set.status().message();
  ExpectNamesWhyThereIsNoCuda(set.status().message());
}

}  // namespace
}  // namespace gshare
