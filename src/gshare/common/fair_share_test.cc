#include "gshare/common/fair_share.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

TEST(FairShareTest, ALoneTenantMayTakeTheWholeCapacity) {
  FairShare share(10);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(share.TryAcquire("a", 1)) << i;
  EXPECT_FALSE(share.TryAcquire("a", 1));
  EXPECT_EQ(share.held(), 10u);
  share.Release("a", 10);
  EXPECT_EQ(share.held(), 0u);
  EXPECT_TRUE(share.TryAcquire("a", 10));
  EXPECT_FALSE(share.TryAcquire("a", 1));
}

// A tenant that took everything cannot keep a newcomer from its share; it gets nothing more
// until it is back within its own share (what it borrowed is reclaimed as it gives it back).
TEST(FairShareTest, ANewcomerGetsItsShareWhileAnotherHoldsEverything) {
  FairShare share(10);
  ASSERT_TRUE(share.TryAcquire("hog", 10));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(share.TryAcquire("new", 1)) << i;
  EXPECT_FALSE(share.TryAcquire("new", 1));  // its share of 5 is used, nothing is free
  EXPECT_EQ(share.held(), 15u);
  // The hog gives back 3: its share is 5 and the newcomer uses its own, so nothing is free.
  share.Release("hog", 3);
  EXPECT_FALSE(share.TryAcquire("hog", 1));
  share.Release("hog", 2);  // 5 + 5: the capacity
  EXPECT_FALSE(share.TryAcquire("hog", 1));
  EXPECT_FALSE(share.TryAcquire("new", 1));
  share.Release("new", 5);  // the newcomer is gone: the hog may borrow again
  EXPECT_TRUE(share.TryAcquire("hog", 5));
  EXPECT_EQ(share.held_by("hog"), 10u);
}

// Borrowing leaves the unused shares of the other active tenants alone.
TEST(FairShareTest, BorrowingLeavesOtherActiveTenantsSharesFree) {
  FairShare share(12);
  ASSERT_TRUE(share.TryAcquire("a", 1));
  ASSERT_TRUE(share.TryAcquire("b", 1));
  // Three active with c: shares of 4; a and b each still have 3 unused.
  EXPECT_TRUE(share.TryAcquire("c", 4));
  EXPECT_FALSE(share.TryAcquire("c", 1));  // 6 held + 6 reserved for a and b
  EXPECT_TRUE(share.TryAcquire("a", 3));
  EXPECT_TRUE(share.TryAcquire("b", 3));
  EXPECT_EQ(share.held(), 12u);
  EXPECT_FALSE(share.TryAcquire("a", 1));
}

TEST(FairShareTest, WhatIsHeldNeverPassesTwiceTheCapacity) {
  FairShare share(12);
  ASSERT_TRUE(share.TryAcquire("hog", 12));
  std::uint64_t granted = 0;
  for (int t = 0; t < 20; ++t) {
    while (share.TryAcquire("t" + std::to_string(t), 1)) ++granted;
  }
  EXPECT_EQ(share.held(), 12 + granted);
  EXPECT_LE(share.held(), 24u);
  EXPECT_GT(granted, 6u);
}

TEST(FairShareTest, AHoldGivesBackWhatItTook) {
  FairShare share(4);
  {
    std::optional<FairShare::Hold> hold = share.Take("a", 3);
    ASSERT_TRUE(hold);
    EXPECT_EQ(share.held_by("a"), 3u);
    FairShare::Hold moved = std::move(*hold);
    hold.reset();
    EXPECT_EQ(share.held_by("a"), 3u);
    EXPECT_FALSE(share.Take("a", 2));
  }
  EXPECT_EQ(share.held(), 0u);
}

}  // namespace
}  // namespace gshare
