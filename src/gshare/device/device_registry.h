// Opening the GPUs of this machine: CUDA GPUs where a driver and GPUs exist, emulated ones
// otherwise (or when asked for).
//
// This is the one place that knows which backends were built. A binary built without CUDA, or
// run on a machine without a driver or without a GPU, opens emulated GPUs under
// DeviceBackend::kAuto and says why in DeviceSet::note. Nothing else falls back: a driver that is
// installed but fails is an error, so a GPU machine never runs on emulated GPUs unnoticed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/device/device.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/device/host_memory.h"

namespace gshare {

enum class DeviceBackend { kAuto, kCuda, kEmulated };

// "auto", "cuda" or "emulated".
Result<DeviceBackend> ParseDeviceBackend(std::string_view text);

// Emulated GPUs from "2x16Gi" (two GPUs of 16 GiB), "16Gi,8Gi" (two GPUs) or "1x80Gi,2x16Gi".
// Every GPU gets `link_bytes_per_second` (0: unpaced).
Result<std::vector<EmulatedGpuConfig>> ParseEmulatedGpus(std::string_view spec,
                                                         double link_bytes_per_second);

// A bandwidth in bytes per second: "12G", "12GB/s", "25Gi/s", "0" (unpaced).
Result<double> ParseBandwidth(std::string_view text);

struct DeviceOptions {
  DeviceBackend backend = DeviceBackend::kAuto;
  // The emulated GPUs to open when emulated GPUs are used.
  std::vector<EmulatedGpuConfig> emulated = {EmulatedGpuConfig{}, EmulatedGpuConfig{}};
};

// The GPUs of a node and the host memory to copy through. Every buffer made from host_memory and
// every buffer and stream of a device must be destroyed before the DeviceSet.
struct DeviceSet {
  DeviceKind kind = DeviceKind::kEmulated;
  std::unique_ptr<HostMemory> host_memory;
  std::vector<std::unique_ptr<Device>> devices;
  // Why emulated GPUs were chosen under kAuto ("no NVIDIA driver: libcuda.so.1 could not be
  // loaded (...); using emulated GPUs"); empty otherwise.
  std::string note;
};

// DeviceOptions from command-line text: a backend ("auto", "cuda", "emulated"), emulated GPUs
// ("2x16Gi", see ParseEmulatedGpus) and their link bandwidth ("12GB/s", "0" for unpaced).
Result<DeviceOptions> MakeDeviceOptions(std::string_view backend, std::string_view emulated_gpus,
                                        std::string_view link_bandwidth);

// Opens the GPUs. kCuda: the CUDA GPUs, or Unavailable when the binary lacks CUDA or the machine
// has no driver or GPU, the message starting "--device cuda: " and naming the cause.
// kEmulated: options.emulated. kAuto: CUDA GPUs if any; emulated ones when the binary lacks CUDA
// or the machine has no driver or GPU (DiscoverCudaDevices' Unavailable); any other CUDA error is
// returned (FailedPrecondition or Internal), naming the cause.
Result<DeviceSet> OpenDevices(const DeviceOptions& options);

// Whether this binary was built with the CUDA backend.
bool CudaBackendBuilt();

// The CUDA driver's and runtime's versions as CUDA numbers them (13000 is 13.0): the driver's is 0
// where there is none, both are 0 in a binary built without CUDA (FormatCudaVersion: "none").
struct CudaVersions {
  int driver = 0;
  int runtime = 0;
};
CudaVersions CudaVersionsHere();

}  // namespace gshare
