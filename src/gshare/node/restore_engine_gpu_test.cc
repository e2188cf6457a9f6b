// The restore engine on real GPUs (ctest label `gpu`): skipped, saying why, where there is none.
#include <gtest/gtest.h>

#include <algorithm>

#include "gshare/common/random.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/restore_engine.h"

namespace gshare {
namespace {

class RestoreEngineGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GpuInventoryOptions options;
    options.devices.backend = DeviceBackend::kCuda;
    options.measure_links = false;
    auto inventory = GpuInventory::Open(options);
    if (!inventory.ok()) GTEST_SKIP() << "no CUDA GPU here: " << inventory.status().ToString();
    inventory_ = std::move(inventory).value();
    auto store = SnapshotStore::Create(inventory_->host_memory(),
                                       SnapshotStoreOptions{512 * kMiB, 8 * kMiB});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto engine = RestoreEngine::Create(inventory_->devices(), RestoreEngineOptions{}, clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  SteadyClock clock_;
  std::unique_ptr<GpuInventory> inventory_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<RestoreEngine> engine_;
};

TEST_F(RestoreEngineGpuTest, RoundTripsRandomBytesAcrossEveryGpu) {
  const std::uint64_t size = 100 * kMiB + 11;
  auto original = store_->Create("model", size);
  auto returned = store_->Create("returned", size);
  ASSERT_TRUE(original.ok() && returned.ok());
  Random random(42);
  std::vector<std::byte> bytes(size);
  for (auto& b : bytes) b = static_cast<std::byte>(random.NextU64());
  ASSERT_TRUE((*original)->Write(0, bytes).ok());

  // Restore onto every GPU in turn, checkpointing from each into the next one's source: a
  // snapshot taken on GPU g is restored onto GPU g+1.
  Snapshot* source = original->get();
  Snapshot* target = returned->get();
  for (Device* device : inventory_->devices()) {
    auto buffer = device->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    auto restore = engine_->Restore(*source, **buffer);
    ASSERT_TRUE(restore.ok()) << restore.status().ToString();
    EXPECT_EQ(restore->bytes, size);
    auto checkpoint = engine_->Checkpoint(**buffer, *target);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
    std::vector<std::byte> back(size);
    ASSERT_TRUE(target->Read(0, back).ok());
    EXPECT_TRUE(back == bytes) << "on " << device->info().name;
    std::swap(source, target);
  }
}

TEST_F(RestoreEngineGpuTest, CancelledRestoreReturnsCancelled) {
  auto snapshot = store_->Create("f", 64 * kMiB);
  ASSERT_TRUE(snapshot.ok());
  auto buffer = inventory_->devices()[0]->Allocate(64 * kMiB);
  ASSERT_TRUE(buffer.ok());
  CancellationFlag cancel;
  cancel.Cancel();
  EXPECT_EQ(engine_->Restore(**snapshot, **buffer, &cancel).status().code(),
            StatusCode::kCancelled);
}

}  // namespace
}  // namespace gshare
