// The CUDA backend of the device boundary (device.h, host_memory.h).
//
// This folder is the only place in gshare that includes CUDA headers. It links the static CUDA
// runtime, which loads the driver (libcuda) at run time, and reaches the driver's own API only
// through the runtime (cuda_driver_api.h): a gshare binary built with CUDA starts on a machine
// with no NVIDIA driver, and discovery then returns Unavailable.
//
// Device memory: where the GPU supports the virtual memory management API and POSIX file
// descriptor handles, each buffer is a physical allocation exportable to a function process
// (DeviceBuffer::Export, kCudaPosixFd), mapped into the node's address space, from a pool that
// keeps freed allocations for reuse (vmm_pool.h); Device::Trim releases them. Elsewhere memory
// comes from the device's stream-ordered memory pool (cudaMallocAsync), kept reserved between
// allocations so that a restore does not pay for the driver's allocation (cudaMalloc on GPUs
// without pools), and Export fails naming the attribute the GPU lacks. Copy streams are
// non-blocking CUDA streams; completions are CUDA events. Host memory comes from cudaHostAlloc,
// portable to every GPU of the process, so a snapshot taken on one GPU may be restored onto
// another.
//
// DeviceInfo: memory_bytes is what the driver reports free once this process's context on the
// GPU exists, total_memory_bytes the GPU's total; the UUID is the driver's (cuDeviceGetUuid_v2),
// "MIG-" for a MIG instance (gpu_uuid.h).
#pragma once

#include <memory>
#include <vector>

#include "gshare/device/device.h"
#include "gshare/device/host_memory.h"

namespace gshare {

// The CUDA GPUs of this machine, in ordinal order. Unavailable means exactly that there is no
// driver or no GPU (cuda_presence.h), and the message says which; any other failure (a driver that
// fails, a GPU that cannot be opened) has another code, FailedPrecondition where the driver's
// state is the cause, and names the GPU and the driver's error.
Result<std::vector<std::unique_ptr<Device>>> DiscoverCudaDevices();

// The driver's version (0 where there is no driver) and the runtime's, as cudaDriverGetVersion
// and cudaRuntimeGetVersion give them.
void ReadCudaVersions(int& driver, int& runtime);

// Pinned host memory that every CUDA GPU of the process can copy from and to.
std::unique_ptr<HostMemory> NewCudaHostMemory();

}  // namespace gshare
