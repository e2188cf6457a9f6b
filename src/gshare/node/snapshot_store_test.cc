#include "gshare/node/snapshot_store.h"

#include <gtest/gtest.h>

#include <vector>

#include "gshare/common/testing/random_bytes.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/device/emulated/emulated_host_memory.h"

namespace gshare {
namespace {

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SnapshotStore::Create(host_, SnapshotStoreOptions{kMiB, 64 * kKiB});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  EmulatedHostMemory host_;
  std::unique_ptr<SnapshotStore> store_;
};

using ::gshare::testing::RandomBytes;

TEST_F(SnapshotStoreTest, CutsSnapshotsIntoChunks) {
  EXPECT_EQ(store_->capacity_bytes(), kMiB);
  EXPECT_EQ(store_->chunk_bytes(), 64 * kKiB);
  auto snapshot = store_->Create("resnet", 200 * kKiB);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  ASSERT_EQ((*snapshot)->chunk_count(), 4u);
  EXPECT_EQ((*snapshot)->chunk(0).size(), 64 * kKiB);
  EXPECT_EQ((*snapshot)->chunk(3).size(), 8 * kKiB);
  EXPECT_EQ((*snapshot)->chunk_offset_bytes(3), 192 * kKiB);
  EXPECT_EQ((*snapshot)->size_bytes(), 200 * kKiB);
  EXPECT_FALSE((*snapshot)->binding().has_value()) << "a new snapshot equals no device buffer";
  EXPECT_EQ(store_->used_bytes(), 256 * kKiB);
  EXPECT_EQ(store_->free_bytes(), 768 * kKiB);
  EXPECT_EQ(store_->snapshot_count(), 1u);
}

TEST_F(SnapshotStoreTest, WritesAndReadsAcrossChunks) {
  auto snapshot = store_->Create("bert", 300 * kKiB + 5);
  ASSERT_TRUE(snapshot.ok());
  const auto bytes = RandomBytes(300 * kKiB + 5, 1);
  auto device = EmulatedDevice::Create(0, EmulatedGpuConfig{});
  ASSERT_TRUE(device.ok());
  auto buffer = (*device)->Allocate(bytes.size());
  ASSERT_TRUE(buffer.ok());
  {
    Snapshot::TransferLock transfer(**snapshot);
    transfer.Bind(**buffer, (*buffer)->write_generation());
  }
  EXPECT_TRUE((*snapshot)->Holds(**buffer));
  ASSERT_TRUE((*snapshot)->Write(0, bytes).ok());
  EXPECT_FALSE((*snapshot)->Holds(**buffer)) << "a write makes the snapshot differ from the GPU";
  EXPECT_FALSE((*snapshot)->binding().has_value());
  std::vector<std::byte> back(bytes.size());
  ASSERT_TRUE((*snapshot)->Read(0, back).ok());
  EXPECT_EQ(back, bytes);
  // A window that straddles a chunk boundary.
  std::vector<std::byte> window(1000);
  ASSERT_TRUE((*snapshot)->Read(64 * kKiB - 500, window).ok());
  EXPECT_TRUE(std::equal(window.begin(), window.end(), bytes.begin() + (64 * kKiB - 500)));
  EXPECT_EQ((*snapshot)->Write(300 * kKiB, std::vector<std::byte>(6)).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ((*snapshot)->Read(300 * kKiB + 6, std::span<std::byte>()).code(),
            StatusCode::kOutOfRange);
}

TEST_F(SnapshotStoreTest, HoldsABufferOnlyUntilItIsMarkedWritten) {
  auto device = EmulatedDevice::Create(0, EmulatedGpuConfig{});
  ASSERT_TRUE(device.ok());
  auto first = (*device)->Allocate(kMiB);
  auto second = (*device)->Allocate(kMiB);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->id(), (*second)->id());
  auto snapshot = store_->Create("f", kMiB);
  ASSERT_TRUE(snapshot.ok());
  {
    Snapshot::TransferLock transfer(**snapshot);
    transfer.Bind(**first, (*first)->write_generation());
  }
  EXPECT_TRUE((*snapshot)->Holds(**first));
  EXPECT_FALSE((*snapshot)->Holds(**second)) << "another buffer of the same size";
  const std::uint64_t generation = (*first)->MarkWritten();
  EXPECT_EQ((*first)->write_generation(), generation);
  EXPECT_FALSE((*snapshot)->Holds(**first)) << "marked written: the snapshot is stale";
  ASSERT_TRUE((*snapshot)->binding().has_value());
  EXPECT_EQ((*snapshot)->binding()->buffer_id, (*first)->id());
}

TEST_F(SnapshotStoreTest, CountsHandlesAndFreesOnTheLastOne) {
  auto created = store_->Create("f", 128 * kKiB);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(store_->handle_count("f"), 1);
  {
    auto found = store_->Find("f");
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(store_->handle_count("f"), 2);
    SnapshotRef copy = *found;
    EXPECT_EQ(store_->handle_count("f"), 3);
    SnapshotRef moved = std::move(copy);
    EXPECT_EQ(store_->handle_count("f"), 3);
    EXPECT_FALSE(copy);  // NOLINT: moved-from is empty by contract
  }
  EXPECT_EQ(store_->handle_count("f"), 1);

  // Removed from the index at once; its chunks stay until the last handle goes.
  ASSERT_TRUE(store_->Remove("f").ok());
  EXPECT_EQ(store_->Find("f").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->snapshot_count(), 0u);
  EXPECT_EQ(store_->used_bytes(), 128 * kKiB);
  auto again = store_->Create("f", 64 * kKiB);  // the name is free again
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(store_->used_bytes(), 192 * kKiB);
  created = SnapshotRef();
  EXPECT_EQ(store_->used_bytes(), 64 * kKiB);
  EXPECT_EQ(store_->Remove("nobody").code(), StatusCode::kNotFound);
}

TEST_F(SnapshotStoreTest, RefusesDuplicatesAndOverflow) {
  auto a = store_->Create("a", 512 * kKiB);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(store_->Create("a", kKiB).status().code(), StatusCode::kAlreadyExists);
  auto b = store_->Create("b", 512 * kKiB + 1);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("'b'"), std::string::npos);
  EXPECT_EQ(store_->used_bytes(), 512 * kKiB) << "a refused snapshot takes nothing";
  EXPECT_TRUE(store_->Create("b", 512 * kKiB).ok());
  EXPECT_EQ(store_->free_bytes(), 0u);
  EXPECT_EQ(store_->Create("c", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SnapshotStoreTest, ReusesFreedChunksWithoutMixingBytes) {
  Random random(9);
  std::vector<std::pair<SnapshotRef, std::vector<std::byte>>> live;
  for (int round = 0; round < 200; ++round) {
    if (!live.empty() && (random.Bernoulli(0.4) || store_->free_bytes() < 200 * kKiB)) {
      const std::size_t victim = random.Below(live.size());
      ASSERT_TRUE(store_->Remove(live[victim].first->function_id()).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      continue;
    }
    const std::uint64_t size = 1 + random.Below(200 * kKiB);
    auto snapshot = store_->Create("f" + std::to_string(round), size);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    auto bytes = RandomBytes(size, static_cast<std::uint64_t>(round));
    ASSERT_TRUE((*snapshot)->Write(0, bytes).ok());
    live.emplace_back(std::move(snapshot).value(), std::move(bytes));
  }
  std::uint64_t used = 0;
  for (const auto& [snapshot, bytes] : live) {
    std::vector<std::byte> back(bytes.size());
    ASSERT_TRUE(snapshot->Read(0, back).ok());
    EXPECT_EQ(back, bytes) << snapshot->function_id();
    used += snapshot->chunk_count() * store_->chunk_bytes();
  }
  EXPECT_EQ(store_->used_bytes(), used);
}

TEST(SnapshotStoreCreateTest, RejectsBadPools) {
  EmulatedHostMemory host;
  EXPECT_EQ(SnapshotStore::Create(host, SnapshotStoreOptions{kMiB, 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SnapshotStore::Create(host, SnapshotStoreOptions{kKiB, kMiB}).status().code(),
            StatusCode::kInvalidArgument);
  auto rounded = SnapshotStore::Create(host, SnapshotStoreOptions{kMiB + 100, 256 * kKiB});
  ASSERT_TRUE(rounded.ok());
  EXPECT_EQ((*rounded)->capacity_bytes(), kMiB);
}

}  // namespace
}  // namespace gshare
