#include "gshare/common/heap_reuse.h"

#include <malloc.h>

namespace gshare {

bool KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  // Setting either threshold also stops glibc from moving them on its own.
  const bool mapped = ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapMapThresholdBytes)) == 1;
  const bool trimmed = ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapTrimThresholdBytes)) == 1;
  return mapped && trimmed;
#else
  return false;
#endif
}

}  // namespace gshare
