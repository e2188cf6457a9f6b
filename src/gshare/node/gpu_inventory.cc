#include "gshare/node/gpu_inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace gshare {

Result<double> MeasureLinkBandwidth(Device& device, HostMemory& host_memory,
                                    std::uint64_t probe_bytes, int repetitions) {
  if (repetitions < 1) return InvalidArgument("link measurement needs at least one repetition");
  const std::uint64_t size = std::min(probe_bytes, device.info().memory_bytes);
  if (size == 0) return InvalidArgument("link measurement needs a positive probe size");
  GSHARE_ASSIGN_OR_RETURN(auto source, host_memory.Allocate(size));
  GSHARE_ASSIGN_OR_RETURN(auto destination, device.Allocate(size));
  std::memset(source->bytes().data(), 0x5a, size);
  GSHARE_RETURN_IF_ERROR(device.TimedRawCopyToDevice(*destination, source->bytes()).status());
  std::vector<double> rates;
  for (int i = 0; i < repetitions; ++i) {
    GSHARE_ASSIGN_OR_RETURN(Duration elapsed,
                            device.TimedRawCopyToDevice(*destination, source->bytes()));
    if (elapsed <= Duration::zero()) {
      // Only a clock that does not move by itself gives this: an unpaced emulated link on a
      // manual clock has no bandwidth to measure.
      return InvalidArgument(fmt::format(
          "{}: a copy of {} took no time on the device's clock; give the link a bandwidth",
          device.info().name, FormatBytes(size)));
    }
    const double seconds = ToSeconds(elapsed);
    rates.push_back(static_cast<double>(size) / seconds);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

Result<std::unique_ptr<GpuInventory>> GpuInventory::Open(const GpuInventoryOptions& options) {
  GSHARE_ASSIGN_OR_RETURN(DeviceSet set, OpenDevices(options.devices));
  auto inventory = std::unique_ptr<GpuInventory>(new GpuInventory(std::move(set)));
  if (options.measure_links) {
    for (std::size_t i = 0; i < inventory->device_views_.size(); ++i) {
      Device& device = *inventory->device_views_[i];
      auto rate = MeasureLinkBandwidth(device, inventory->host_memory(), options.probe_bytes,
                                       options.probe_repetitions);
      if (!rate.ok()) {
        return rate.status().WithContext(
            fmt::format("measuring the link of {}", device.info().name));
      }
      inventory->records_[i].measured_link_bytes_per_second = *rate;
    }
  }
  return inventory;
}

GpuInventory::GpuInventory(DeviceSet set) : set_(std::move(set)) {
  for (const auto& device : set_.devices) {
    device_views_.push_back(device.get());
    records_.push_back(GpuRecord{device->info(), 0});
  }
}

}  // namespace gshare
