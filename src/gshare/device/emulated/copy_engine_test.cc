#include "gshare/device/emulated/copy_engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gshare/common/random.h"

namespace gshare {
namespace {

TEST(CopyEngineTest, CopiesEveryByteAtAnyAlignmentAndSize) {
  const std::size_t capacity = (3 << 20) + 8192;
  std::vector<unsigned char> source(capacity);
  Random random(17);
  for (auto& b : source) b = static_cast<unsigned char>(random.NextU64());
  std::vector<unsigned char> destination(capacity);
  const std::size_t sizes[] = {
      0,      1, 63, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 12345, (2 << 20) + 16384 * 3 + 77,
      3 << 20};
  const std::size_t offsets[] = {0, 1, 13, 64, 4095};
  for (std::size_t size : sizes) {
    for (std::size_t source_offset : offsets) {
      for (std::size_t destination_offset : offsets) {
        if (size + std::max(source_offset, destination_offset) > capacity) continue;
        std::memset(destination.data(), 0, capacity);
        CopyEngineCopy(destination.data() + destination_offset, source.data() + source_offset,
                       size);
        ASSERT_EQ(std::memcmp(destination.data() + destination_offset,
                              source.data() + source_offset, size),
                  0)
            << "size " << size << ", offsets " << source_offset << "/" << destination_offset;
        // Nothing around the destination range is touched.
        for (std::size_t i = 0; i < destination_offset; ++i) ASSERT_EQ(destination[i], 0);
        for (std::size_t i = destination_offset + size;
             i < std::min(capacity, destination_offset + size + 4096); ++i) {
          ASSERT_EQ(destination[i], 0);
        }
      }
    }
  }
  const std::string kind = CopyEngineKind();
  EXPECT_TRUE(kind == "avx512" || kind == "avx2" || kind == "memcpy") << kind;
}

}  // namespace
}  // namespace gshare
