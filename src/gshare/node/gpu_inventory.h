// GpuInventory: the GPUs of this node, what they are, and how fast their links move bytes.
//
// Opens the devices (CUDA GPUs, or emulated ones; see device/device_registry.h) and measures each
// GPU's host-to-device link with the device's raw copy (a pinned cudaMemcpy, or a memcpy for an
// emulated GPU), so that the figure shown is the link as this machine sees it, not a data sheet.
//
// The inventory owns the devices and the host memory: everything made from them (snapshot
// stores, restore engines, vGPU managers, buffers) must be destroyed before it. Its accessors
// are thread-safe; the devices are as thread-safe as device.h says.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gshare/device/device_registry.h"

namespace gshare {

struct GpuRecord {
  DeviceInfo info;
  // Median of the probe copies, bytes per second; 0 when not measured.
  double measured_link_bytes_per_second = 0;
};

struct GpuInventoryOptions {
  DeviceOptions devices;
  bool measure_links = true;
  std::uint64_t probe_bytes = 64 * kMiB;
  int probe_repetitions = 5;
};

class GpuInventory {
 public:
  // Opens the devices and, when asked, measures their links. Errors of OpenDevices, or of a
  // device during the measurement.
  static Result<std::unique_ptr<GpuInventory>> Open(const GpuInventoryOptions& options);

  DeviceKind kind() const { return set_.kind; }
  // Why emulated GPUs were chosen under DeviceBackend::kAuto; empty otherwise.
  const std::string& note() const { return set_.note; }
  std::span<Device* const> devices() const { return device_views_; }
  HostMemory& host_memory() const { return *set_.host_memory; }
  const std::vector<GpuRecord>& gpus() const { return records_; }

 private:
  explicit GpuInventory(DeviceSet set);

  DeviceSet set_;
  std::vector<Device*> device_views_;  // not owning: views of set_.devices
  std::vector<GpuRecord> records_;
};

// The median bandwidth, in bytes per second, of `repetitions` raw copies of `probe_bytes`
// (capped at the device's memory) from pinned host memory to `device`, after one untimed copy
// that touches every page.
Result<double> MeasureLinkBandwidth(Device& device, HostMemory& host_memory,
                                    std::uint64_t probe_bytes, int repetitions);

}  // namespace gshare
