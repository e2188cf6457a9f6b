// MemfdBackend: the CUDA allocator shim's memory backend over emulated GPUs' shared memory, so
// that tests drive ShimCore against the real node side (ChannelSwitch, the restore engine) on a
// machine without a GPU.
//
// Reserve takes an inaccessible range (at the hint when free); Map maps a memfd (kind kMemfd,
// what ChannelSwitch sends) over its start with mmap; Unmap puts the inaccessible reservation
// back. Synchronize has no device to wait for: it counts its calls.
//
// Threading: as MemoryBackend; synchronize_count may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "gshare/fn/cuda_shim/memory_backend.h"

namespace gshare::fn::cuda_shim::testing {

class MemfdBackend final : public MemoryBackend {
 public:
  MemfdBackend() = default;
  ~MemfdBackend() override;
  MemfdBackend(const MemfdBackend&) = delete;
  MemfdBackend& operator=(const MemfdBackend&) = delete;

  Result<Range> Reserve(std::uintptr_t base_hint, std::uint64_t bytes) override;
  Status Map(UniqueFd handle, MapHandleKind kind, std::uint64_t bytes) override;
  Status Unmap() override;
  Status Synchronize() override;

  // Shared with the test that handed the backend to a ShimCore.
  const std::atomic<int>& synchronize_count() const { return synchronize_count_; }

 private:
  void* base_ = nullptr;
  std::uint64_t reserve_bytes_ = 0;
  std::uint64_t mapped_bytes_ = 0;
  UniqueFd segment_;
  std::atomic<int> synchronize_count_{0};
};

}  // namespace gshare::fn::cuda_shim::testing
