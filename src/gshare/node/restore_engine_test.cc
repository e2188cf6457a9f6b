#include "gshare/node/restore_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/emulated_device.h"

namespace gshare {
namespace {

std::vector<std::byte> RandomBytes(std::size_t n, std::uint64_t seed) {
  Random random(seed);
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(random.NextU64());
  return bytes;
}

std::span<std::byte> DeviceBytes(DeviceBuffer& buffer) {
  return static_cast<EmulatedBuffer&>(buffer).bytes();
}

class RestoreEngineTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(0); }

  // Two emulated GPUs of 256 MiB with links of `link_bytes_per_second` (0: unpaced).
  void Open(double link_bytes_per_second) {
    engine_.reset();
    store_.reset();
    DeviceOptions options;
    options.backend = DeviceBackend::kEmulated;
    options.emulated = *ParseEmulatedGpus("2x256Mi", link_bytes_per_second);
    auto set = OpenDevices(options);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    devices_.clear();
    set_ = std::move(set).value();
    for (auto& device : set_.devices) devices_.push_back(device.get());
    auto store =
        SnapshotStore::Create(*set_.host_memory, SnapshotStoreOptions{64 * kMiB, 256 * kKiB});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto engine = RestoreEngine::Create(devices_, RestoreEngineOptions{3, 2}, clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  std::unique_ptr<DeviceBuffer> Allocate(int gpu, std::uint64_t size) {
    auto buffer = devices_[static_cast<std::size_t>(gpu)]->Allocate(size);
    EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
    return std::move(buffer).value();
  }

  SnapshotRef MakeSnapshot(const std::string& name, const std::vector<std::byte>& bytes) {
    auto snapshot = store_->Create(name, bytes.size());
    EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    EXPECT_TRUE((*snapshot)->Write(0, bytes).ok());
    return std::move(snapshot).value();
  }

  SteadyClock clock_;
  DeviceSet set_;
  std::vector<Device*> devices_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<RestoreEngine> engine_;
};

TEST_F(RestoreEngineTest, RestoresRandomBytesExactly) {
  const auto bytes = RandomBytes(5 * kMiB + 123, 1);
  SnapshotRef snapshot = MakeSnapshot("resnet", bytes);
  auto buffer = Allocate(0, 6 * kMiB);
  auto report = engine_->Restore(*snapshot, *buffer);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->bytes, bytes.size());
  EXPECT_EQ(report->chunks, snapshot->chunk_count());
  EXPECT_FALSE(report->skipped);
  EXPECT_TRUE(snapshot->valid());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), DeviceBytes(*buffer).begin()));
}

TEST_F(RestoreEngineTest, MovesStateOntoAnotherGpu) {
  // A function's state on GPU 0, checkpointed, then restored onto GPU 1.
  const auto bytes = RandomBytes(3 * kMiB + 7, 2);
  auto on_gpu0 = Allocate(0, bytes.size());
  std::copy(bytes.begin(), bytes.end(), DeviceBytes(*on_gpu0).begin());
  auto snapshot = store_->Create("bert", bytes.size());
  ASSERT_TRUE(snapshot.ok());
  auto checkpoint = engine_->Checkpoint(*on_gpu0, **snapshot);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_EQ(checkpoint->bytes, bytes.size());
  EXPECT_TRUE((*snapshot)->valid());
  on_gpu0.reset();

  auto on_gpu1 = Allocate(1, bytes.size());
  auto restore = engine_->Restore(**snapshot, *on_gpu1);
  ASSERT_TRUE(restore.ok()) << restore.status().ToString();
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), DeviceBytes(*on_gpu1).begin()));
}

TEST_F(RestoreEngineTest, CheckpointSkipsValidSnapshotsAndCopiesStaleOnes) {
  const auto bytes = RandomBytes(kMiB, 3);
  SnapshotRef snapshot = MakeSnapshot("f", bytes);
  auto buffer = Allocate(1, kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *buffer).ok());

  auto fast = engine_->Checkpoint(*buffer, *snapshot);
  ASSERT_TRUE(fast.ok());
  EXPECT_TRUE(fast->skipped);
  EXPECT_EQ(fast->bytes, 0u);

  // The function writes its device memory: the snapshot is stale and must be copied.
  snapshot->set_valid(false);
  const auto changed = RandomBytes(kMiB, 4);
  std::copy(changed.begin(), changed.end(), DeviceBytes(*buffer).begin());
  auto slow = engine_->Checkpoint(*buffer, *snapshot);
  ASSERT_TRUE(slow.ok());
  EXPECT_FALSE(slow->skipped);
  EXPECT_EQ(slow->bytes, kMiB);
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(snapshot->Read(0, back).ok());
  EXPECT_EQ(back, changed);
}

TEST_F(RestoreEngineTest, RejectsSmallBuffersAndForeignDevices) {
  SnapshotRef snapshot = MakeSnapshot("f", RandomBytes(kMiB, 5));
  auto small = Allocate(0, kMiB - 1);
  EXPECT_EQ(engine_->Restore(*snapshot, *small).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(engine_->Checkpoint(*small, *snapshot).status().code(), StatusCode::kOutOfRange);
  snapshot->set_valid(true);
  EXPECT_EQ(engine_->Checkpoint(*small, *snapshot).status().code(), StatusCode::kOutOfRange)
      << "a skipped checkpoint still checks its arguments";

  auto stranger = EmulatedDevice::Create(7, EmulatedGpuConfig{});
  ASSERT_TRUE(stranger.ok());
  auto foreign = (*stranger)->Allocate(kMiB);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(engine_->Restore(*snapshot, **foreign).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RestoreEngineTest, RejectsBadOptions) {
  EXPECT_EQ(RestoreEngine::Create(devices_, RestoreEngineOptions{0, 2}, clock_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RestoreEngine::Create(devices_, RestoreEngineOptions{2, 0}, clock_).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RestoreEngineTest, CancelledBeforeStartCopiesNothing) {
  SnapshotRef snapshot = MakeSnapshot("f", RandomBytes(kMiB, 6));
  auto buffer = Allocate(0, kMiB);
  CancellationFlag cancel;
  cancel.Cancel();
  auto report = engine_->Restore(*snapshot, *buffer, &cancel);
  EXPECT_EQ(report.status().code(), StatusCode::kCancelled);
  EXPECT_NE(report.status().message().find("after 0 of"), std::string::npos)
      << report.status().message();
  EXPECT_FALSE(snapshot->valid()) << "a cancelled restore leaves validity as it was";
  EXPECT_TRUE(std::all_of(DeviceBytes(*buffer).begin(), DeviceBytes(*buffer).end(),
                          [](std::byte b) { return b == std::byte{0}; }));
}

TEST_F(RestoreEngineTest, CancelsARestoreInProgress) {
  // A 1 MB/s link: 4 MiB take at least four seconds (pacing only ever waits), and the engine
  // queues the last chunk only after 10 of 16 have landed (2.6 s), so a cancel sent after 50 ms
  // arrives mid-way even on a loaded machine.
  Open(1e6);
  std::vector<std::byte> bytes(4 * kMiB, std::byte{0x7f});
  SnapshotRef snapshot = MakeSnapshot("slow", bytes);
  auto buffer = Allocate(0, bytes.size());
  CancellationFlag cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.Cancel();
  });
  auto report = engine_->Restore(*snapshot, *buffer, &cancel);
  canceller.join();
  EXPECT_EQ(report.status().code(), StatusCode::kCancelled) << report.status().ToString();
  EXPECT_NE(report.status().message().find("cancelled after"), std::string::npos);
  EXPECT_NE(DeviceBytes(*buffer)[bytes.size() - 1], std::byte{0x7f})
      << "the last chunk must not have been copied";
}

TEST_F(RestoreEngineTest, ConcurrentRestoresOntoOneGpuStayApart) {
  const auto a = RandomBytes(4 * kMiB + 1, 7);
  const auto b = RandomBytes(3 * kMiB + 2, 8);
  SnapshotRef snapshot_a = MakeSnapshot("a", a);
  SnapshotRef snapshot_b = MakeSnapshot("b", b);
  auto buffer_a = Allocate(0, a.size());
  auto buffer_b = Allocate(0, b.size());
  Status status_a, status_b;
  std::thread thread_a([&] { status_a = engine_->Restore(*snapshot_a, *buffer_a).status(); });
  std::thread thread_b([&] { status_b = engine_->Restore(*snapshot_b, *buffer_b).status(); });
  thread_a.join();
  thread_b.join();
  ASSERT_TRUE(status_a.ok()) << status_a.ToString();
  ASSERT_TRUE(status_b.ok()) << status_b.ToString();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), DeviceBytes(*buffer_a).begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), DeviceBytes(*buffer_b).begin()));
}

}  // namespace
}  // namespace gshare
