#include "gshare/device/emulated/segment_pool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "gshare/common/units.h"

namespace gshare {
namespace {

TEST(SegmentPoolTest, SegmentsAreSealedAgainstResizing) {
  auto segment = MakeSegment("test", kMiB, /*populate=*/true);
  ASSERT_TRUE(segment.ok()) << segment.status().ToString();
  EXPECT_EQ(segment->bytes.size(), kMiB);
  EXPECT_NE(::ftruncate(segment->fd, 4096), 0);
  EXPECT_NE(::ftruncate(segment->fd, 2 * kMiB), 0);
  segment->bytes[kMiB - 1] = std::byte{7};  // writable to its end
  FreeSegment(*segment);
}

TEST(SegmentPoolTest, PreparesTheSizesAskedForWithinItsBudgetAndNeverTheSameTwice) {
  SegmentPreparer preparer("test", 4 * kMiB);
  EXPECT_FALSE(preparer.Take(kMiB).has_value());  // nothing asked for yet: nothing ready
  ASSERT_TRUE(preparer.WaitReady(kMiB, std::chrono::seconds(60)));
  auto first = preparer.Take(kMiB);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->bytes.size(), kMiB);
  EXPECT_EQ(first->bytes[0], std::byte{0});  // fresh: zero
  ASSERT_TRUE(preparer.WaitReady(kMiB, std::chrono::seconds(60)));
  auto second = preparer.Take(kMiB);
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->fd, first->fd);
  EXPECT_NE(second->bytes.data(), first->bytes.data());
  EXPECT_LE(preparer.ready_bytes(), 4 * kMiB);
  // A size beyond the budget is never prepared.
  EXPECT_FALSE(preparer.Take(8 * kMiB).has_value());
  EXPECT_FALSE(preparer.WaitReady(8 * kMiB, std::chrono::milliseconds(0)));
  FreeSegment(*first);
  FreeSegment(*second);
}

TEST(SegmentPoolTest, NoBudgetPreparesNothing) {
  SegmentPreparer preparer("test", 0);
  EXPECT_FALSE(preparer.Take(kMiB).has_value());
  EXPECT_EQ(preparer.ready_bytes(), 0u);
}

}  // namespace
}  // namespace gshare
