// The CUDA backend of the device boundary (device.h, host_memory.h).
//
// This folder is the only place in gshare that includes CUDA headers. It links the static CUDA
// runtime, which loads the driver (libcuda) at run time: a gshare binary built with CUDA starts
// on a machine with no NVIDIA driver, and discovery then returns Unavailable.
//
// Device memory comes from the device's stream-ordered memory pool (cudaMallocAsync), kept
// reserved between allocations so that a restore does not pay for the driver's allocation; on
// GPUs without memory pools it falls back to cudaMalloc. Copy streams are non-blocking CUDA
// streams; completions are CUDA events. Host memory comes from cudaHostAlloc, portable to every
// GPU of the process, so a snapshot taken on one GPU may be restored onto another.
#pragma once

#include <memory>
#include <vector>

#include "gshare/device/device.h"
#include "gshare/device/host_memory.h"

namespace gshare {

// The CUDA GPUs of this machine, in ordinal order. Unavailable, with the driver's reason, when
// there is no driver or no GPU.
Result<std::vector<std::unique_ptr<Device>>> DiscoverCudaDevices();

// Pinned host memory that every CUDA GPU of the process can copy from and to.
std::unique_ptr<HostMemory> NewCudaHostMemory();

}  // namespace gshare
