// MemoryBackend: what lies behind the CUDA allocator shim's address range.
//
// In a function process it is the CUDA driver (cuda_backend.h): the node's exported GPU memory,
// imported and mapped with the driver's virtual memory calls. In tests it is shared memory of an
// emulated GPU (testing/memfd_backend.h), so that the protocol runs against the real node side
// on a machine without a GPU.
//
// Contract: ShimCore calls Reserve once, first; then Map, Unmap and Synchronize, one call at a
// time, Map only while nothing is mapped. The reservation lasts until the backend is destroyed,
// and a mapping always lies at its start, so that addresses stay valid across an unmap and a
// later map of other memory of the same size.
#pragma once

#include <cstdint>

#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/fn/control_channel.h"

namespace gshare::fn::cuda_shim {

class MemoryBackend {
 public:
  struct Range {
    std::uintptr_t base = 0;
    std::uint64_t bytes = 0;
  };

  virtual ~MemoryBackend() = default;

  // Reserves address space for `bytes` (rounded up to what the backend maps in), at `base_hint`
  // when that range is free and elsewhere otherwise; returns the range reserved.
  virtual Result<Range> Reserve(std::uintptr_t base_hint, std::uint64_t bytes) = 0;
  // Maps the first `bytes` of the memory `handle` stands for, a descriptor of `kind`, at the start
  // of the reservation, readable and writable. Takes the descriptor. InvalidArgument for a kind
  // this backend cannot map or a size it cannot map in.
  virtual Status Map(UniqueFd handle, MapHandleKind kind, std::uint64_t bytes) = 0;
  // Drops the mapping and lets the memory go (the node keeps its own handle on it); the range
  // stays reserved.
  virtual Status Unmap() = 0;
  // Returns once the device has finished every piece of work the process queued on it.
  virtual Status Synchronize() = 0;
};

}  // namespace gshare::fn::cuda_shim
