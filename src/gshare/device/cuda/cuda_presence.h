// Whether this machine has CUDA GPUs, and what it means when it has none: the decision behind
// `--device auto`'s fallback to emulated GPUs.
//
// The fallback is for machines without a driver or without a GPU. A machine whose driver is
// installed but fails (too old for the runtime, not initialized, GPUs busy in exclusive mode, a
// device whose properties cannot be read) is broken, and gshare says so instead of quietly
// running on emulated GPUs. The decision is a pure function of what the runtime and the loader
// said, so it is tested over every case without a GPU.
#pragma once

#include <driver_types.h>

#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

enum class CudaPresence {
  kGpus,      // GPUs to open
  kNoDriver,  // no NVIDIA driver: libcuda cannot be loaded (or is the toolkit's stub): fall back
  kNoGpu,     // a driver that shows this process no GPU: fall back
  kBroken,    // a driver that fails: an error, no fallback
};

// `count_error` and `count`: what cudaGetDeviceCount returned; `driver_loadable`: whether
// libcuda.so.1 can be loaded (CudaDriverLoadable).
CudaPresence ClassifyCudaPresence(cudaError_t count_error, int count, bool driver_loadable);

// The error DiscoverCudaDevices returns for a presence other than kGpus: Unavailable for kNoDriver
// and kNoGpu (what falls back), FailedPrecondition for kBroken (what does not). The message names
// the cause: the loader's error, the runtime's error name and text, the driver version.
Status CudaPresenceStatus(CudaPresence presence, cudaError_t count_error,
                          std::string_view loader_error, int driver_version);

// Whether the dynamic loader finds the driver library (libcuda.so.1). When not, `loader_error`
// gets the loader's message.
bool CudaDriverLoadable(std::string& loader_error);

}  // namespace gshare
