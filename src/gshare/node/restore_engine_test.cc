#include "gshare/node/restore_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gshare/common/testing/random_bytes.h"
#include "gshare/device/device_registry.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/device/emulated/emulated_host_memory.h"
#include "gshare/node/fake_device_for_test.h"

namespace gshare {
namespace {

using ::gshare::testing::RandomBytes;

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
  EXPECT_TRUE(snapshot->Holds(*buffer));
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
  EXPECT_TRUE((*snapshot)->Holds(*on_gpu0));
  on_gpu0.reset();

  auto on_gpu1 = Allocate(1, bytes.size());
  auto restore = engine_->Restore(**snapshot, *on_gpu1);
  ASSERT_TRUE(restore.ok()) << restore.status().ToString();
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), DeviceBytes(*on_gpu1).begin()));
}

TEST_F(RestoreEngineTest, CheckpointSkipsOnlyABufferNotWrittenSinceItsRestore) {
  const auto bytes = RandomBytes(kMiB, 3);
  SnapshotRef snapshot = MakeSnapshot("f", bytes);
  auto buffer = Allocate(1, kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *buffer).ok());

  auto fast = engine_->Checkpoint(*buffer, *snapshot);
  ASSERT_TRUE(fast.ok());
  EXPECT_TRUE(fast->skipped);
  EXPECT_EQ(fast->bytes, 0u);

  // The function is let write its device memory: the snapshot is stale and must be copied.
  buffer->MarkWritten();
  const auto changed = RandomBytes(kMiB, 4);
  std::copy(changed.begin(), changed.end(), DeviceBytes(*buffer).begin());
  auto slow = engine_->Checkpoint(*buffer, *snapshot);
  ASSERT_TRUE(slow.ok());
  EXPECT_FALSE(slow->skipped);
  EXPECT_EQ(slow->bytes, kMiB);
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(snapshot->Read(0, back).ok());
  EXPECT_EQ(back, changed);
  EXPECT_TRUE(engine_->Checkpoint(*buffer, *snapshot)->skipped) << "checkpointed: held again";
}

TEST_F(RestoreEngineTest, CheckpointOfAnotherBufferCopies) {
  // The snapshot holds buffer A; a checkpoint from buffer B (same size, other bytes) must copy B.
  const auto bytes = RandomBytes(kMiB, 9);
  SnapshotRef snapshot = MakeSnapshot("f", bytes);
  auto a = Allocate(0, kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *a).ok());
  auto b = Allocate(1, kMiB);
  const auto other = RandomBytes(kMiB, 10);
  std::copy(other.begin(), other.end(), DeviceBytes(*b).begin());
  auto report = engine_->Checkpoint(*b, *snapshot);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->skipped);
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(snapshot->Read(0, back).ok());
  EXPECT_EQ(back, other);
  EXPECT_TRUE(snapshot->Holds(*b));
  EXPECT_FALSE(snapshot->Holds(*a));
}

TEST_F(RestoreEngineTest, RestoringAnotherSnapshotIntoTheBufferMakesTheFirstStale) {
  const auto first_bytes = RandomBytes(kMiB, 11);
  const auto second_bytes = RandomBytes(kMiB, 12);
  SnapshotRef first = MakeSnapshot("first", first_bytes);
  SnapshotRef second = MakeSnapshot("second", second_bytes);
  auto buffer = Allocate(0, kMiB);
  ASSERT_TRUE(engine_->Restore(*first, *buffer).ok());
  ASSERT_TRUE(engine_->Restore(*second, *buffer).ok());
  EXPECT_FALSE(first->Holds(*buffer));
  auto report = engine_->Checkpoint(*buffer, *first);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->skipped) << "the buffer holds the second snapshot now";
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(first->Read(0, back).ok());
  EXPECT_EQ(back, second_bytes);
}

TEST_F(RestoreEngineTest, CheckpointRejectsABufferThatGrewOrShrank) {
  const auto bytes = RandomBytes(kMiB, 13);
  SnapshotRef snapshot = MakeSnapshot("f", bytes);
  // Restored into a larger slice, which the function then writes to its end.
  auto grown = Allocate(0, 2 * kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *grown).ok());
  grown->MarkWritten();
  std::fill(DeviceBytes(*grown).begin(), DeviceBytes(*grown).end(), std::byte{0x5a});
  auto report = engine_->Checkpoint(*grown, *snapshot);
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition) << report.status().ToString();
  EXPECT_NE(report.status().message().find("larger than its snapshot"), std::string::npos);
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(snapshot->Read(0, back).ok());
  EXPECT_EQ(back, bytes) << "a rejected checkpoint copies nothing";

  // Rejected too while the snapshot holds the larger buffer (no skip hides the mismatch).
  auto again = Allocate(1, 2 * kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *again).ok());
  EXPECT_EQ(engine_->Checkpoint(*again, *snapshot).status().code(),
            StatusCode::kFailedPrecondition);

  auto shrunk = Allocate(0, kMiB - 1);
  EXPECT_EQ(engine_->Checkpoint(*shrunk, *snapshot).status().code(), StatusCode::kOutOfRange);
}

TEST_F(RestoreEngineTest, CheckpointImageCopiesTheImageAtTheStartOfALargerSlice) {
  const auto bytes = RandomBytes(kMiB, 17);
  SnapshotRef snapshot = MakeSnapshot("f", bytes);
  auto slice = Allocate(0, 4 * kMiB);
  ASSERT_TRUE(engine_->Restore(*snapshot, *slice).ok());
  // Not written since: the image is held, nothing to copy (fast swap).
  auto skipped = engine_->CheckpointImage(*slice, kMiB, *snapshot);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_TRUE(skipped->skipped);
  // Written: the image's bytes, and only those, are copied.
  slice->MarkWritten();
  std::fill(DeviceBytes(*slice).begin(), DeviceBytes(*slice).end(), std::byte{0x33});
  auto copied = engine_->CheckpointImage(*slice, kMiB, *snapshot);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->bytes, kMiB);
  std::vector<std::byte> back(kMiB);
  ASSERT_TRUE(snapshot->Read(0, back).ok());
  EXPECT_EQ(back, std::vector<std::byte>(kMiB, std::byte{0x33}));
  // An image of another size than the snapshot's, or past the buffer, is refused.
  EXPECT_EQ(engine_->CheckpointImage(*slice, 2 * kMiB, *snapshot).status().code(),
            StatusCode::kOutOfRange);
  auto small = Allocate(1, kMiB / 2);
  EXPECT_EQ(engine_->CheckpointImage(*small, kMiB, *snapshot).status().code(),
            StatusCode::kOutOfRange);
}

TEST_F(RestoreEngineTest, RejectsSmallBuffersAndForeignDevices) {
  SnapshotRef snapshot = MakeSnapshot("f", RandomBytes(kMiB, 5));
  auto small = Allocate(0, kMiB - 1);
  EXPECT_EQ(engine_->Restore(*snapshot, *small).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(engine_->Checkpoint(*small, *snapshot).status().code(), StatusCode::kOutOfRange);

  auto stranger = EmulatedDevice::Create(7, EmulatedGpuConfig{});
  ASSERT_TRUE(stranger.ok());
  auto foreign = (*stranger)->Allocate(kMiB);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(engine_->Restore(*snapshot, **foreign).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Checkpoint(**foreign, *snapshot).status().code(),
            StatusCode::kInvalidArgument);
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
  EXPECT_FALSE(snapshot->Holds(*buffer)) << "a cancelled restore binds nothing";
  EXPECT_TRUE(std::all_of(DeviceBytes(*buffer).begin(), DeviceBytes(*buffer).end(),
                          [](std::byte b) { return b == std::byte{0}; }));
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

// The engine on a FakeDevice (fake_device_for_test.h): copies and callbacks run in one order on
// one thread, so the tests below see exactly what a transfer leaves in flight, and can hold a
// transfer mid-way.
class RestoreEngineFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SnapshotStore::Create(host_, SnapshotStoreOptions{4 * kMiB, 256 * kKiB});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  void MakeEngine(int streams, int in_flight) {
    Device* devices[] = {&device_};
    auto engine = RestoreEngine::Create(devices, RestoreEngineOptions{streams, in_flight}, clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
  }

  // Waits until `done()`; the bound only turns a hang into a failure.
  template <typename Predicate>
  static bool Await(Predicate done) {
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done()) {
      if (std::chrono::steady_clock::now() > guard) return false;
      std::this_thread::yield();
    }
    return true;
  }

  // A snapshot of `bytes` in `store` (none given: the fixture's) and a device buffer that holds
  // them; `ok` false when either could not be made.
  struct Image {
    bool ok = false;
    SnapshotRef snapshot;
    std::unique_ptr<DeviceBuffer> buffer;
    std::span<std::byte> device_bytes;
  };
  Image MakeImage(const std::vector<std::byte>& bytes, SnapshotStore* store = nullptr) {
    Image image;
    auto snapshot = (store != nullptr ? *store : *store_).Create("f", bytes.size());
    auto buffer = device_.Allocate(bytes.size());
    if (!snapshot.ok() || !buffer.ok()) return image;
    image.snapshot = std::move(snapshot).value();
    image.buffer = std::move(buffer).value();
    image.device_bytes = testing::FakeDevice::Bytes(*image.buffer);
    std::copy(bytes.begin(), bytes.end(), image.device_bytes.begin());
    image.ok = true;
    return image;
  }

  SteadyClock clock_;
  EmulatedHostMemory host_;
  testing::FakeDevice device_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<RestoreEngine> engine_;
};

TEST_F(RestoreEngineFaultTest, AFailedCopyEndsTheTransferOnlyAfterEveryCopyInFlight) {
  MakeEngine(2, 2);
  const auto bytes = RandomBytes(2 * kMiB, 20);  // eight pieces of 256 KiB
  auto snapshot = store_->Create("f", bytes.size());
  ASSERT_TRUE(snapshot.ok());
  ASSERT_TRUE((*snapshot)->Write(0, bytes).ok());
  auto buffer = device_.Allocate(2 * kMiB);
  ASSERT_TRUE(buffer.ok());
  // Pieces 0-3 start; the callbacks of 0 and 1 enqueue pieces 4 and 5; piece 2's reports a
  // failure, after which nothing more is enqueued, and the transfer ends after piece 5's.
  device_.FailCallbacksFrom(3);
  auto report = engine_->Restore(**snapshot, **buffer);
  EXPECT_EQ(report.status().code(), StatusCode::kInternal) << report.status().ToString();
  EXPECT_EQ(device_.copies_pending(), 0) << "ended while a copy still touches the buffers";
  auto device_bytes = testing::FakeDevice::Bytes(**buffer);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.begin() + 6 * 256 * kKiB, device_bytes.begin()));
  EXPECT_EQ(device_bytes[6 * 256 * kKiB], std::byte{0}) << "piece 6 must not have been copied";
  EXPECT_FALSE((*snapshot)->Holds(**buffer)) << "a failed restore binds nothing";
}

TEST_F(RestoreEngineFaultTest, CheckpointWaitsForARestoreOfTheSameSnapshot) {
  MakeEngine(1, 1);
  const auto bytes = RandomBytes(kMiB, 21);
  auto snapshot = store_->Create("f", bytes.size());
  ASSERT_TRUE(snapshot.ok());
  ASSERT_TRUE((*snapshot)->Write(0, bytes).ok());
  auto buffer = device_.Allocate(kMiB);
  ASSERT_TRUE(buffer.ok());

  // The restore is held at its first callback, after one piece of four was copied.
  device_.HoldNextCallback();
  Status restored;
  std::thread restore([&] { restored = engine_->Restore(**snapshot, **buffer).status(); });
  ASSERT_TRUE(Await([&] { return device_.callback_held(); }));

  // A checkpoint of the half-restored buffer into the same snapshot must wait for the restore
  // (and then skip: the snapshot holds the buffer), not copy the half-restored bytes.
  std::atomic<bool> checkpoint_done{false};
  Result<TransferReport> checkpointed = Internal("not run");
  std::thread checkpoint([&] {
    checkpointed = engine_->Checkpoint(**buffer, **snapshot);
    checkpoint_done.store(true);
  });
  const bool decided =
      Await([&] { return checkpoint_done.load() || (*snapshot)->transfers_waiting() > 0; });
  const bool overlapped = checkpoint_done.load();
  device_.ReleaseHeldCallback();
  restore.join();
  checkpoint.join();
  ASSERT_TRUE(decided);
  EXPECT_FALSE(overlapped) << "the checkpoint ran while the restore was in progress";
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status().ToString();
  EXPECT_TRUE(checkpointed->skipped);
  std::vector<std::byte> back(bytes.size());
  ASSERT_TRUE((*snapshot)->Read(0, back).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_TRUE((*snapshot)->Holds(**buffer));
}

TEST_F(RestoreEngineFaultTest, CancelsARestoreInProgress) {
  MakeEngine(1, 1);
  const std::vector<std::byte> bytes(kMiB, std::byte{0x7f});  // four chunks
  auto snapshot = store_->Create("f", bytes.size());
  ASSERT_TRUE(snapshot.ok());
  ASSERT_TRUE((*snapshot)->Write(0, bytes).ok());
  auto buffer = device_.Allocate(kMiB);
  ASSERT_TRUE(buffer.ok());
  const std::uint64_t generation = (*buffer)->write_generation();

  // Cancelled while piece 0's callback is held, with piece 1 not yet enqueued: the callback sees
  // the cancellation and enqueues nothing more.
  device_.HoldNextCallback();
  CancellationFlag cancel;
  Result<TransferReport> report = Internal("not run");
  std::thread restore([&] { report = engine_->Restore(**snapshot, **buffer, &cancel); });
  ASSERT_TRUE(Await([&] { return device_.callback_held(); }));
  cancel.Cancel();
  device_.ReleaseHeldCallback();
  restore.join();
  EXPECT_EQ(report.status().code(), StatusCode::kCancelled) << report.status().ToString();
  EXPECT_NE(report.status().message().find("cancelled after 262144 of 1048576 bytes"),
            std::string::npos)
      << report.status().message();
  EXPECT_EQ(device_.copies_pending(), 0);
  auto device_bytes = testing::FakeDevice::Bytes(**buffer);
  EXPECT_EQ(device_bytes[256 * kKiB - 1], std::byte{0x7f});
  EXPECT_EQ(device_bytes[256 * kKiB], std::byte{0}) << "piece 1 must not have been copied";
  EXPECT_GT((*buffer)->write_generation(), generation) << "a restore marks its buffer written";
  EXPECT_FALSE((*snapshot)->Holds(**buffer));
}

// Digests: a checkpoint copies only the chunks whose digest changed (the fast swap of a function
// that cannot say what it wrote).
class RestoreEngineDigestTest : public RestoreEngineTest {
 protected:
  // A function's image of `chunks` chunks of 256 KiB and a tail, resident on GPU 0 and
  // checkpointed once (a full copy, which records the digests); the buffer then marked written,
  // as a function that ran is.
  void Resident(std::size_t chunks) {
    bytes_ = RandomBytes(chunks * 256 * kKiB + 100, 40);
    buffer_ = Allocate(0, bytes_.size());
    std::copy(bytes_.begin(), bytes_.end(), DeviceBytes(*buffer_).begin());
    auto snapshot = store_->Create("shim-function", bytes_.size());
    ASSERT_TRUE(snapshot.ok());
    snapshot_ = std::move(snapshot).value();
    auto first = engine_->Checkpoint(*buffer_, *snapshot_);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first->bytes, bytes_.size());
    EXPECT_EQ(first->compared_bytes, 0u) << "no digests known yet";
    buffer_->MarkWritten();
  }

  std::vector<std::byte> SnapshotBytes() {
    std::vector<std::byte> held(snapshot_->size_bytes());
    EXPECT_TRUE(snapshot_->Read(0, held).ok());
    return held;
  }

  std::vector<std::byte> bytes_;
  std::unique_ptr<DeviceBuffer> buffer_;
  SnapshotRef snapshot_;
};

TEST_F(RestoreEngineDigestTest, AnUnchangedImageCopiesNothing) {
  Resident(6);
  auto report = engine_->Checkpoint(*buffer_, *snapshot_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->bytes, 0u);
  EXPECT_EQ(report->chunks, 0u);
  EXPECT_FALSE(report->skipped) << "the device compared digests: not a skip";
  EXPECT_EQ(report->compared_bytes, bytes_.size());
  EXPECT_EQ(report->unchanged_bytes, bytes_.size());
  EXPECT_TRUE(snapshot_->Holds(*buffer_));
  EXPECT_EQ(SnapshotBytes(), bytes_);
}

TEST_F(RestoreEngineDigestTest, OnlyTheChunksThatChangedAreCopied) {
  Resident(6);
  // One byte in chunk 2, one in the tail (chunk 6): two chunks change.
  DeviceBytes(*buffer_)[2 * 256 * kKiB + 17] ^= std::byte{1};
  DeviceBytes(*buffer_)[6 * 256 * kKiB + 99] ^= std::byte{0x80};
  auto report = engine_->Checkpoint(*buffer_, *snapshot_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->bytes, 256 * kKiB + 100);
  EXPECT_EQ(report->unchanged_bytes, 5 * 256 * kKiB);
  const auto device = DeviceBytes(*buffer_).first(bytes_.size());
  EXPECT_EQ(SnapshotBytes(), std::vector<std::byte>(device.begin(), device.end()));

  // The snapshot now restores the changed image onto the other GPU, and knows its digests: a
  // checkpoint from there copies nothing.
  auto on_gpu1 = Allocate(1, bytes_.size());
  ASSERT_TRUE(engine_->Restore(*snapshot_, *on_gpu1).ok());
  EXPECT_TRUE(std::equal(device.begin(), device.end(), DeviceBytes(*on_gpu1).begin()));
  on_gpu1->MarkWritten();
  auto again = engine_->Checkpoint(*on_gpu1, *snapshot_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->bytes, 0u);
}

TEST_F(RestoreEngineDigestTest, CopyAllCopiesEverythingAndNoDigestsForgetsThem) {
  Resident(4);
  auto all = engine_->Checkpoint(*buffer_, *snapshot_, nullptr, {.copy_all = true});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->bytes, bytes_.size());
  buffer_->MarkWritten();
  auto compared = engine_->Checkpoint(*buffer_, *snapshot_);
  ASSERT_TRUE(compared.ok());
  EXPECT_EQ(compared->bytes, 0u) << "the forced copy recorded digests";
  buffer_->MarkWritten();
  auto forgot =
      engine_->Checkpoint(*buffer_, *snapshot_, nullptr, {.copy_all = true, .digests = false});
  ASSERT_TRUE(forgot.ok());
  buffer_->MarkWritten();
  auto full = engine_->Checkpoint(*buffer_, *snapshot_);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->bytes, bytes_.size()) << "a copy without digests leaves none to compare";
  EXPECT_EQ(full->compared_bytes, 0u);
}

TEST_F(RestoreEngineDigestTest, AWriteToTheSnapshotForgetsItsDigests) {
  Resident(3);
  ASSERT_TRUE(snapshot_->Write(0, std::vector<std::byte>(8, std::byte{7})).ok());
  auto report = engine_->Checkpoint(*buffer_, *snapshot_);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->bytes, bytes_.size()) << "the snapshot's chunk 0 no longer has its digest";
  EXPECT_EQ(SnapshotBytes(), bytes_);
}

TEST_F(RestoreEngineFaultTest, AFailedCheckpointForgetsTheDigests) {
  MakeEngine(2, 1);
  const auto bytes = RandomBytes(2 * kMiB, 21);  // eight chunks of 256 KiB
  Image image = MakeImage(bytes);
  ASSERT_TRUE(image.ok);
  Snapshot& snapshot = *image.snapshot;
  DeviceBuffer& buffer = *image.buffer;
  auto device_bytes = image.device_bytes;
  ASSERT_TRUE(engine_->Checkpoint(buffer, snapshot).ok());  // records the digests
  // A failure while comparing (the first digest's callback) changes no snapshot byte: the
  // digests stay, and the next checkpoint of the unchanged image copies nothing.
  buffer.MarkWritten();
  device_.FailCallbacksFrom(device_.callbacks_run() + 1);
  EXPECT_FALSE(engine_->Checkpoint(buffer, snapshot).ok());
  device_.FailCallbacksFrom(1 << 30);
  buffer.MarkWritten();
  auto kept = engine_->Checkpoint(buffer, snapshot);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->bytes, 0u);
  // A changed chunk, and a checkpoint whose copy of it fails (the callback after the eight
  // digests'): the snapshot's chunk may be half written, so nothing it recorded may be trusted.
  device_bytes[3 * 256 * kKiB] ^= std::byte{1};
  buffer.MarkWritten();
  device_.FailCallbacksFrom(device_.callbacks_run() + 9);
  EXPECT_FALSE(engine_->Checkpoint(buffer, snapshot).ok());
  device_.FailCallbacksFrom(1 << 30);
  auto report = engine_->Checkpoint(buffer, snapshot);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->bytes, bytes.size());
  EXPECT_EQ(report->compared_bytes, 0u);
}

// The buffer written while its checkpoint runs: the copy may hold the old bytes of a chunk, so its
// digests are not recorded, and the next checkpoint compares nothing and copies everything.
TEST_F(RestoreEngineFaultTest, ACheckpointOfABufferWrittenMeanwhileRecordsNoDigests) {
  MakeEngine(1, 1);
  const auto bytes = RandomBytes(kMiB, 22);  // four chunks of 256 KiB
  Image image = MakeImage(bytes);
  ASSERT_TRUE(image.ok);
  Snapshot& snapshot = *image.snapshot;
  DeviceBuffer& buffer = *image.buffer;
  auto device_bytes = image.device_bytes;

  // Held at its first callback: the first chunk is copied, its digest not yet computed.
  device_.HoldNextCallback();
  Result<TransferReport> first = Internal("not run");
  std::thread checkpoint([&] { first = engine_->Checkpoint(buffer, snapshot); });
  ASSERT_TRUE(Await([&] { return device_.callback_held(); }));
  buffer.MarkWritten();             // the function runs meanwhile...
  device_bytes[0] ^= std::byte{1};  // ...and changes the chunk already copied
  device_.ReleaseHeldCallback();
  checkpoint.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(snapshot.Holds(buffer));

  buffer.MarkWritten();
  auto second = engine_->Checkpoint(buffer, snapshot);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->compared_bytes, 0u) << "digests recorded from a buffer written meanwhile";
  EXPECT_EQ(second->bytes, bytes.size());
  std::vector<std::byte> back(bytes.size());
  ASSERT_TRUE(snapshot.Read(0, back).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), device_bytes.begin()));
}

// A store whose chunks are not a multiple of 8 bytes gets no digests (a digest starts at a
// multiple of 8): every checkpoint of a written buffer copies, and copies it right.
TEST_F(RestoreEngineFaultTest, ChunksOfAnOddSizeAreNeverDigested) {
  auto odd = SnapshotStore::Create(host_, SnapshotStoreOptions{kMiB, 1004});
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  MakeEngine(2, 1);
  const auto bytes = RandomBytes(10 * 1004, 23);  // ten chunks of 1004 bytes
  Image image = MakeImage(bytes, odd->get());
  ASSERT_TRUE(image.ok);
  Snapshot& snapshot = *image.snapshot;
  DeviceBuffer& buffer = *image.buffer;
  auto device_bytes = image.device_bytes;
  for (int round = 0; round < 2; ++round) {
    buffer.MarkWritten();
    auto report = engine_->Checkpoint(buffer, snapshot);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->compared_bytes, 0u);
    EXPECT_EQ(report->bytes, bytes.size());
  }
  std::vector<std::byte> back(bytes.size());
  ASSERT_TRUE(snapshot.Read(0, back).ok());
  EXPECT_EQ(back, bytes);
}

}  // namespace
}  // namespace gshare
