#include "gshare/common/heap_reuse.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

// A sanitizer's allocator replaces glibc's: its mallopt refuses, or glibc takes the settings
// without allocating anything.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer) || __has_feature(leak_sanitizer)
#define GSHARE_SANITIZED_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GSHARE_SANITIZED_ALLOCATOR 1
#endif

namespace gshare {
namespace {

#if defined(__GLIBC__) && !defined(GSHARE_SANITIZED_ALLOCATOR)
long MinorFaults() {
  struct rusage usage {};
  ::getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// A request's bodies, allocated, written and freed together, three times: the third time they
// take the pages the second one freed (under glibc's defaults the heap gives them back at each
// free and the third round faults in about 600 pages again).
TEST(HeapReuseTest, ARequestsBodiesReuseTheLastRequestsPages) {
  ASSERT_TRUE(KeepFreedMemoryForReuse());
  constexpr std::size_t kBody = 600 * 1024;  // a 1x3x224x224 FP32 tensor, about
  constexpr int kBodies = 4;                 // in flight at once: the input, its encoding, ...
  long faults = 0;
  for (int round = 0; round < 3; ++round) {
    const long before = MinorFaults();
    void* bodies[kBodies];
    for (void*& body : bodies) {
      body = std::malloc(kBody);
      ASSERT_NE(body, nullptr);
      std::memset(body, 1, kBody);
    }
    for (void* body : bodies) std::free(body);
    faults = MinorFaults() - before;
  }
  // 2.4 MB of bodies is 600 pages; a few faults may come from elsewhere (the test's own heap).
  EXPECT_LT(faults, 30);
}
#endif

}  // namespace
}  // namespace gshare
