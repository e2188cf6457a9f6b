#include "gshare/node/gpu_inventory.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

GpuInventoryOptions EmulatedOptions(const char* spec, double link_bytes_per_second) {
  GpuInventoryOptions options;
  options.devices.backend = DeviceBackend::kEmulated;
  options.devices.emulated = *ParseEmulatedGpus(spec, link_bytes_per_second);
  options.probe_bytes = 4 * kMiB;
  options.probe_repetitions = 3;
  return options;
}

TEST(GpuInventoryTest, ListsEmulatedGpusAndMeasuresTheirLinks) {
  auto inventory = GpuInventory::Open(EmulatedOptions("2x1Gi", 0));
  ASSERT_TRUE(inventory.ok()) << inventory.status().ToString();
  EXPECT_EQ((*inventory)->kind(), DeviceKind::kEmulated);
  ASSERT_EQ((*inventory)->gpus().size(), 2u);
  ASSERT_EQ((*inventory)->devices().size(), 2u);
  for (const GpuRecord& gpu : (*inventory)->gpus()) {
    EXPECT_EQ(gpu.info.memory_bytes, kGiB);
    EXPECT_GT(gpu.measured_link_bytes_per_second, 0);
  }
  EXPECT_NE((*inventory)->gpus()[0].info.uuid, (*inventory)->gpus()[1].info.uuid);
  // The probe's memory is given back.
  EXPECT_EQ((*inventory)->devices()[0]->allocated_bytes(), 0u);
}

TEST(GpuInventoryTest, SkipsTheMeasurementWhenAsked) {
  auto options = EmulatedOptions("1x512Mi", 5e9);
  options.measure_links = false;
  auto inventory = GpuInventory::Open(options);
  ASSERT_TRUE(inventory.ok());
  EXPECT_EQ((*inventory)->gpus()[0].measured_link_bytes_per_second, 0);
  EXPECT_EQ((*inventory)->gpus()[0].info.link_bytes_per_second, 5e9);
}

TEST(GpuInventoryTest, ProbesNoMoreThanTheDeviceHolds) {
  auto options = EmulatedOptions("1x1Mi", 0);
  options.probe_bytes = 64 * kMiB;
  auto inventory = GpuInventory::Open(options);
  ASSERT_TRUE(inventory.ok()) << inventory.status().ToString();
  EXPECT_GT((*inventory)->gpus()[0].measured_link_bytes_per_second, 0);
}

}  // namespace
}  // namespace gshare
