#include "gshare/fn/sub_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace gshare::fn {
namespace {

constexpr std::uint64_t kAlign = 512;
constexpr std::uint64_t kCapacity = 64 * kAlign;

TEST(SubAllocatorTest, AllocatesFirstFitAlignedAndBelowTheLimit) {
  SubAllocator allocator(kCapacity, kAlign);
  EXPECT_EQ(allocator.Allocate(1, kCapacity), 0u);
  EXPECT_EQ(allocator.Allocate(kAlign + 1, kCapacity), kAlign);  // takes two units
  EXPECT_EQ(allocator.Allocate(kAlign, kCapacity), 3 * kAlign);
  EXPECT_EQ(allocator.in_use_bytes(), 4 * kAlign);
  EXPECT_EQ(allocator.high_water_bytes(), 4 * kAlign);

  // A hole of two units at kAlign: the first allocation that fits it goes there, not above.
  ASSERT_EQ(allocator.Free(kAlign), 2 * kAlign);
  EXPECT_EQ(allocator.Allocate(3 * kAlign, kCapacity), 4 * kAlign);  // too big for the hole
  EXPECT_EQ(allocator.Allocate(kAlign, kCapacity), kAlign);          // first fit: the hole
  EXPECT_EQ(allocator.Allocate(kAlign, kCapacity), 2 * kAlign);

  // The limit bounds each allocation's end, whatever the capacity.
  EXPECT_FALSE(allocator.Allocate(kAlign, 7 * kAlign).has_value());
  EXPECT_EQ(allocator.Allocate(kAlign, 8 * kAlign), 7 * kAlign);
  EXPECT_FALSE(allocator.Allocate(kCapacity + 1, ~0ULL).has_value());
  EXPECT_FALSE(allocator.Allocate(0, kCapacity).has_value());
}

TEST(SubAllocatorTest, FreeMergesNeighboursAndLowersTheHighWaterMark) {
  SubAllocator allocator(kCapacity, kAlign);
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < 5; ++i) offsets.push_back(*allocator.Allocate(kAlign, kCapacity));
  ASSERT_EQ(allocator.free_ranges().size(), 1u);

  ASSERT_TRUE(allocator.Free(offsets[1]).has_value());
  ASSERT_TRUE(allocator.Free(offsets[3]).has_value());
  EXPECT_EQ(allocator.free_ranges(),
            (std::map<std::uint64_t, std::uint64_t>{
                {kAlign, kAlign}, {3 * kAlign, kAlign}, {5 * kAlign, kCapacity - 5 * kAlign}}));
  // Freeing the middle one merges both neighbours into one range.
  ASSERT_TRUE(allocator.Free(offsets[2]).has_value());
  EXPECT_EQ(allocator.free_ranges(),
            (std::map<std::uint64_t, std::uint64_t>{{kAlign, 3 * kAlign},
                                                    {5 * kAlign, kCapacity - 5 * kAlign}}));
  EXPECT_EQ(allocator.high_water_bytes(), 5 * kAlign);
  // Freeing the top one merges with the range below it and the tail above it.
  ASSERT_TRUE(allocator.Free(offsets[4]).has_value());
  EXPECT_EQ(allocator.free_ranges(),
            (std::map<std::uint64_t, std::uint64_t>{{kAlign, kCapacity - kAlign}}));
  EXPECT_EQ(allocator.high_water_bytes(), kAlign);
  ASSERT_TRUE(allocator.Free(offsets[0]).has_value());
  EXPECT_EQ(allocator.free_ranges(), (std::map<std::uint64_t, std::uint64_t>{{0, kCapacity}}));
  EXPECT_EQ(allocator.high_water_bytes(), 0u);
  EXPECT_EQ(allocator.in_use_bytes(), 0u);
}

TEST(SubAllocatorTest, FreeOfNoAllocationChangesNothing) {
  SubAllocator allocator(kCapacity, kAlign);
  const std::uint64_t offset = *allocator.Allocate(2 * kAlign, kCapacity);
  EXPECT_FALSE(allocator.Free(offset + kAlign).has_value());  // inside, not at the start
  EXPECT_FALSE(allocator.Free(10 * kAlign).has_value());      // free memory
  EXPECT_EQ(allocator.in_use_bytes(), 2 * kAlign);
  EXPECT_EQ(allocator.Free(offset), 2 * kAlign);
  EXPECT_FALSE(allocator.Free(offset).has_value());  // twice
}

TEST(SubAllocatorTest, RetiredMemoryIsNeverHandedOutAgain) {
  SubAllocator allocator(kCapacity, kAlign);
  const auto weights = allocator.Allocate(3 * kAlign, kCapacity);
  const auto scratch = allocator.Allocate(kAlign, kCapacity);
  ASSERT_EQ(weights, 0u);
  ASSERT_EQ(scratch, 3 * kAlign);
  ASSERT_EQ(allocator.Free(*scratch), kAlign);
  allocator.Retire(2 * kAlign);  // inside the weights: the free range above them stays
  EXPECT_EQ(allocator.high_water_bytes(), 3 * kAlign);
  allocator.Retire(5 * kAlign);  // past them: the free range below the end goes
  EXPECT_EQ(allocator.retired_bytes(), 5 * kAlign);
  EXPECT_EQ(allocator.high_water_bytes(), 5 * kAlign);
  EXPECT_EQ(allocator.free_ranges(),
            (std::map<std::uint64_t, std::uint64_t>{{5 * kAlign, kCapacity - 5 * kAlign}}));
  // Freed below the end: counted, not reused.
  EXPECT_EQ(allocator.Free(*weights), 3 * kAlign);
  EXPECT_EQ(allocator.in_use_bytes(), 0u);
  EXPECT_EQ(allocator.Allocate(1, kCapacity), 5 * kAlign);
  EXPECT_EQ(allocator.free_ranges().begin()->first, 6 * kAlign);
  // A lower end changes nothing; one past the capacity stops at it.
  allocator.Retire(kAlign);
  EXPECT_EQ(allocator.retired_bytes(), 5 * kAlign);
  allocator.Retire(2 * kCapacity);
  EXPECT_EQ(allocator.retired_bytes(), kCapacity);
  EXPECT_TRUE(allocator.free_ranges().empty());
  EXPECT_EQ(allocator.Allocate(1, kCapacity), std::nullopt);
}

TEST(SubAllocatorTest, AnAllocationAcrossTheRetiredEndGivesBackWhatLiesAboveIt) {
  SubAllocator allocator(kCapacity, kAlign);
  ASSERT_EQ(allocator.Allocate(4 * kAlign, kCapacity), 0u);
  allocator.Retire(2 * kAlign);
  EXPECT_EQ(allocator.high_water_bytes(), 4 * kAlign);
  EXPECT_EQ(allocator.Free(0), 4 * kAlign);
  EXPECT_EQ(allocator.high_water_bytes(), 2 * kAlign);
  EXPECT_EQ(allocator.free_ranges(),
            (std::map<std::uint64_t, std::uint64_t>{{2 * kAlign, kCapacity - 2 * kAlign}}));
  EXPECT_EQ(allocator.Allocate(1, kCapacity), 2 * kAlign);
}

// Random allocations and frees against a plain model: no overlap, every free byte accounted for,
// first fit, and the high-water mark the end of the highest live allocation.
TEST(SubAllocatorTest, RandomStepsKeepTheInvariants) {
  SubAllocator allocator(kCapacity, kAlign);
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> size
  std::mt19937_64 random(7);
  for (int step = 0; step < 3000; ++step) {
    const bool allocate = live.empty() || random() % 2 == 0;
    if (allocate) {
      const std::uint64_t bytes = 1 + random() % (6 * kAlign);
      const std::uint64_t limit = kAlign * (1 + random() % (kCapacity / kAlign));
      const std::uint64_t size = (bytes + kAlign - 1) / kAlign * kAlign;
      // The model's first fit: the lowest aligned offset where `size` bytes are free.
      std::optional<std::uint64_t> expected;
      std::uint64_t cursor = 0;
      for (auto it = live.begin();; ++it) {
        const std::uint64_t gap_end = it == live.end() ? kCapacity : it->first;
        if (gap_end >= cursor + size) {
          if (cursor + size <= limit) expected = cursor;
          break;
        }
        if (it == live.end()) break;
        cursor = it->first + it->second;
      }
      const auto got = allocator.Allocate(bytes, limit);
      ASSERT_EQ(got, expected) << "step " << step;
      if (got) live[*got] = size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(random() % live.size()));
      ASSERT_EQ(allocator.Free(it->first), it->second) << "step " << step;
      live.erase(it);
    }
    std::uint64_t in_use = 0;
    for (const auto& [offset, size] : live) in_use += size;
    ASSERT_EQ(allocator.in_use_bytes(), in_use);
    ASSERT_EQ(allocator.high_water_bytes(),
              live.empty() ? 0 : live.rbegin()->first + live.rbegin()->second);
    std::uint64_t free_bytes = 0;
    std::uint64_t previous_end = 0;
    bool first = true;
    for (const auto& [offset, size] : allocator.free_ranges()) {
      ASSERT_TRUE(first || offset > previous_end) << "adjacent free ranges at step " << step;
      first = false;
      previous_end = offset + size;
      free_bytes += size;
    }
    ASSERT_EQ(free_bytes + in_use, kCapacity);
  }
}

}  // namespace
}  // namespace gshare::fn
