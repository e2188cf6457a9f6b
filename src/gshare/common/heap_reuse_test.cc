#include "gshare/common/heap_reuse.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace gshare {
namespace {

#if defined(__GLIBC__)
// The heap's top after a large allocation is freed: it shrinks at once under glibc's defaults,
// and keeps the freed bytes under KeepFreedMemoryForReuse.
TEST(HeapReuseTest, AFreedRequestBodyStaysWithTheProcess) {
  ASSERT_TRUE(KeepFreedMemoryForReuse());
  constexpr std::size_t kBody = 600 * 1024;  // a 1x3x224x224 FP32 tensor, about
  constexpr int kBodies = 4;                 // a request's copies in flight (input, body, ...)
  // Two rounds: under glibc's defaults the first maps each body on its own and the second, its
  // threshold raised, takes them from the heap and then gives back all but 2 x 600 KB.
  for (int round = 0; round < 2; ++round) {
    void* bodies[kBodies];
    for (void*& body : bodies) {
      body = std::malloc(kBody);
      ASSERT_NE(body, nullptr);
      std::memset(body, 1, kBody);
    }
    for (void* body : bodies) std::free(body);
  }
  const struct mallinfo2 after = ::mallinfo2();
  // Nothing of this size is mapped on its own (hblkhd counts mapped chunks)...
  EXPECT_LT(after.hblkhd, kBody);
  // ...and the freed bodies are still at the heap's top, kept for the next request.
  EXPECT_GE(after.keepcost, kBodies * kBody);
}
#endif

}  // namespace
}  // namespace gshare
