// Exportable device memory of one CUDA GPU, from the driver's virtual memory management API,
// with a pool of freed allocations kept for reuse.
//
// Each allocation is a physical allocation (cuMemCreate: pinned, on the GPU, exportable as a
// POSIX file descriptor) of the requested size rounded up to the GPU's recommended granularity,
// mapped read-write for the GPU at an address range of its own in this process
// (cuMemAddressReserve, cuMemMap, cuMemSetAccess), so runtime copies (cudaMemcpyAsync) reach it
// like cudaMalloc memory. Export() hands out a file descriptor another process imports
// (cuMemImportFromShareableHandle) and maps at addresses of its own.
//
// Pool: a released allocation stays created and mapped on a free list, and the next allocation of
// the same rounded size takes it without a driver call. Since memory once exported is discarded,
// never cached (below), the free list serves only the node's own buffers (benchmarks, scratch):
// a slice handed to a function is a new allocation. An allocation the driver refuses for lack of
// memory trims the pool (every cached allocation released to the driver) and is tried once more.
// Reused memory keeps its previous bytes (the CUDA device clears every buffer it hands out). An
// allocation another process may still hold (it was exported) goes back with Discard, never
// Release: the driver keeps it for that process alone.
//
// Ownership: the pool owns cached allocations; an allocation handed out is the caller's until it
// gives it back with Release. Every allocation must be released before the pool is destroyed,
// which trims it. Thread safety: every method may be called from any thread.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/device/cuda/cuda_driver_api.h"

namespace gshare {

// One physical allocation and where this process maps it. Value type; the pool or the caller
// holding it owns the driver's objects.
struct VmmAllocation {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr address = 0;
  std::uint64_t bytes = 0;  // the physical size: a multiple of the granularity
};

class VmmPool {
 public:
  // A pool for GPU `device`; `name` ("GPU 0 (NVIDIA H100)") prefixes error messages. Errors of
  // the granularity query.
  static Result<std::unique_ptr<VmmPool>> Create(const CudaDriverApi& api, CUdevice device,
                                                 std::string name);
  ~VmmPool();
  VmmPool(const VmmPool&) = delete;
  VmmPool& operator=(const VmmPool&) = delete;

  // The recommended allocation granularity; every allocation's size is a multiple of it.
  std::uint64_t granularity_bytes() const { return granularity_bytes_; }

  // A mapped allocation of at least `size_bytes` (> 0): a cached one of the same rounded size,
  // or a new one. ResourceExhausted when the GPU lacks the memory even after a trim.
  Result<VmmAllocation> Allocate(std::uint64_t size_bytes) EXCLUDES(mutex_);
  // Takes `allocation` back onto the free list, still mapped.
  void Release(const VmmAllocation& allocation) EXCLUDES(mutex_);
  // Gives `allocation` back to the driver at once (unmapped, its range freed, its handle
  // released), never to the free list: for memory another process may still hold.
  void Discard(const VmmAllocation& allocation) const;
  // Releases every cached allocation to the driver. Returns the first driver error, if any,
  // after trying them all.
  Status Trim() EXCLUDES(mutex_);
  // Bytes held on the free list.
  std::uint64_t cached_bytes() const EXCLUDES(mutex_);

  // A new POSIX file descriptor (close-on-exec) for `allocation`'s physical memory.
  Result<UniqueFd> Export(const VmmAllocation& allocation) const;

 private:
  VmmPool(const CudaDriverApi& api, CUdevice device, std::string name,
          std::uint64_t granularity_bytes);
  Result<VmmAllocation> Create(std::uint64_t bytes) const;
  // Unmaps, frees the address range and releases the physical memory: the reverse of Create.
  Status Destroy(const VmmAllocation& allocation) const;

  const CudaDriverApi& api_;
  const CUdevice device_;
  const std::string name_;
  const std::uint64_t granularity_bytes_;
  mutable Mutex mutex_;
  // Free allocations by size.
  std::map<std::uint64_t, std::vector<VmmAllocation>> free_ GUARDED_BY(mutex_);
  std::uint64_t cached_bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gshare
