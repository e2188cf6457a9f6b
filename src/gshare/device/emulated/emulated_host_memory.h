// EmulatedHostMemory: host buffers for emulated GPUs (see host_memory.h).
//
// Anonymous private mappings, locked with mlock where RLIMIT_MEMLOCK allows it; otherwise the
// buffer is ordinary memory and page_locked() is false. Emulated copies are memcpy, for which
// locking changes nothing but the risk of swapping. Thread-safe.
#pragma once

#include "gshare/device/host_memory.h"

namespace gshare {

class EmulatedHostMemory final : public HostMemory {
 public:
  Result<std::unique_ptr<PinnedHostBuffer>> Allocate(std::uint64_t size_bytes) override;
};

}  // namespace gshare
