// CudaBackend: the CUDA allocator shim's memory backend in a function process: the node's GPU
// memory, mapped with the driver's virtual memory management calls.
//
// The node allocates each slice itself (cuMemCreate, exportable as a POSIX descriptor) and sends
// it with kMap (kind kCudaPosixFd). Reserve takes a virtual address range once
// (cuMemAddressReserve, at the hint when the driver grants it); Map imports the descriptor
// (cuMemImportFromShareableHandle), maps it at the start of the range (cuMemMap) and lets the
// device read and write it (cuMemSetAccess); Unmap waits for the device, unmaps and releases the
// imported handle and closes the descriptor (the node's own handle keeps the memory, which it
// copies or frees). Synchronize waits for the primary context (cuCtxSynchronize).
//
// Every call runs with the device's primary context current (pushed and popped around it), so
// it may come from any thread. One GPU per process: the node's choice, made visible as device 0.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "gshare/fn/cuda_shim/cuda_driver.h"
#include "gshare/fn/cuda_shim/memory_backend.h"

namespace gshare::fn::cuda_shim {

class CudaBackend final : public MemoryBackend {
 public:
  // `driver` must outlive the backend; `context` is `device`'s primary context, retained by the
  // caller for at least as long.
  static Result<std::unique_ptr<CudaBackend>> Create(const CudaDriver& driver, CUcontext context,
                                                     CUdevice device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Result<Range> Reserve(std::uintptr_t base_hint, std::uint64_t bytes) override;
  Status Map(UniqueFd handle, MapHandleKind kind, std::uint64_t bytes) override;
  Status Unmap() override;
  Status Synchronize() override;

  std::uint64_t granularity_bytes() const { return granularity_bytes_; }

 private:
  CudaBackend(const CudaDriver& driver, CUcontext context, CUdevice device,
              std::uint64_t granularity_bytes)
      : driver_(driver),
        context_(context),
        device_(device),
        granularity_bytes_(granularity_bytes) {}

  const CudaDriver& driver_;
  const CUcontext context_;
  const CUdevice device_;
  const std::uint64_t granularity_bytes_;
  CUdeviceptr base_ = 0;
  std::uint64_t reserve_bytes_ = 0;
  std::uint64_t mapped_bytes_ = 0;
  CUmemGenericAllocationHandle imported_ = 0;
  UniqueFd descriptor_;
};

}  // namespace gshare::fn::cuda_shim
