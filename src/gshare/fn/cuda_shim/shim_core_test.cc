// ShimCore against the node's side of the switching protocol, on emulated GPUs through the memfd
// backend: the real ChannelSwitch, restore engine and snapshot store (end to end), and a node
// written out message by message (the protocol's fine points). No test sleeps: each waits for a
// message, an operation's completion, or the core saying that an allocation waits.
#include "gshare/fn/cuda_shim/shim_core.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "gshare/device/emulated/emulated_device.h"
#include "gshare/fn/cuda_shim/testing/memfd_backend.h"
#include "gshare/fn/testing/fake_node.h"
#include "gshare/node/switch/channel_switch.h"
#include "gshare/node/switch/testing/switch_test_node.h"

namespace gshare::fn::cuda_shim {
namespace {

using ::gshare::fn::testing::FakeNode;
using testing::MemfdBackend;

constexpr std::uint64_t kReserve = FakeNode::kReserve;
constexpr std::uint64_t kSlice = 16ULL << 20;

std::vector<std::byte> RandomBytes(std::size_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::byte> bytes(count);
  for (auto& byte : bytes) byte = static_cast<std::byte>(random());
  return bytes;
}

void* At(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// What a test's core says and does, seen from the test.
class CoreWatcher {
 public:
  ShimOptions Options() {
    return {.exit_when_node_gone = false,
            .log =
                [this](std::string_view line) {
                  MutexLock lock(mutex_);
                  lines_.emplace_back(line);
                },
            .on_allocation_waits =
                [this] {
                  MutexLock lock(mutex_);
                  ++waits_;
                  changed_.NotifyAll();
                }};
  }
  // Returns once `count` allocations have started to wait, in all.
  void AwaitWaits(int count) {
    MutexLock lock(mutex_);
    changed_.Wait(mutex_, [&]() REQUIRES(mutex_) { return waits_ >= count; });
  }
  std::vector<std::string> lines() {
    MutexLock lock(mutex_);
    return lines_;
  }

 private:
  Mutex mutex_;
  CondVar changed_;
  std::vector<std::string> lines_ GUARDED_BY(mutex_);
  int waits_ GUARDED_BY(mutex_) = 0;
};

std::future<Result<std::unique_ptr<ShimCore>>> ConnectInBackground(
    UniqueFd control, std::unique_ptr<MemfdBackend> backend, ShimOptions options) {
  return std::async(std::launch::async, [control = std::move(control), backend = std::move(backend),
                                         options = std::move(options)]() mutable {
    return ShimCore::Connect(std::move(control), FakeNode::FreeBase(), kReserve, std::move(backend),
                             std::move(options));
  });
}

// ---------------------------------------------------------------------------------------------
// End to end: ChannelSwitch drives the core.

class ShimCoreSwitchTest : public ::testing::Test {
 protected:
  template <typename F>
  auto OnLoop(F f) {
    return node_.OnLoop(std::move(f));
  }
  template <typename Begin>
  Status Operate(Begin begin) {
    return node_.Operate(std::move(begin));
  }

  void SetUp() override { node_.Start(); }

  void TearDown() override {
    OnLoop([&] {
      if (switch_) switch_->Close();
      return 0;
    });
    core_.reset();
    switch_.reset();
    slices_.clear();
    node_.Stop();
  }

  DeviceBuffer& NewSlice(int gpu) {
    auto buffer = node_.device(gpu).Allocate(kSlice);
    EXPECT_TRUE(buffer.ok());
    slices_.push_back(std::move(buffer).value());
    return *slices_.back();
  }

  // Connects a core to a new switch and attaches its first slice, on `gpu`, with `quota`.
  void Launch(int gpu, std::uint64_t quota) {
    auto pair = fn::ControlChannel::CreatePair();
    ASSERT_TRUE(pair.ok());
    switch_ = OnLoop(
        [&] { return ChannelSwitch::Create(node_.context(), "shimmed", std::move(pair->first)); });
    auto backend = std::make_unique<MemfdBackend>();
    backend_ = backend.get();
    auto connecting =
        ConnectInBackground(std::move(pair->second), std::move(backend), watcher_.Options());
    DeviceBuffer& slice = NewSlice(gpu);
    const Status attached =
        Operate([&](auto done) { switch_->Attach(slice, quota, nullptr, std::move(done)); });
    ASSERT_TRUE(attached.ok()) << attached.ToString();
    auto core = connecting.get();
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    core_ = std::move(core).value();
  }

  Status Checkpoint(bool force_copy = false) {
    return Operate([&](auto done) { switch_->Checkpoint(force_copy, std::move(done)); });
  }
  Status Restore(int gpu, std::uint64_t quota) {
    DeviceBuffer& slice = NewSlice(gpu);
    return Operate([&](auto done) { switch_->Restore(slice, quota, nullptr, std::move(done)); });
  }

  ::gshare::switch_testing::SwitchTestNode node_;      // declared first: destroyed after the switch
  std::vector<std::unique_ptr<DeviceBuffer>> slices_;  // freed after the switch is closed
  std::shared_ptr<ChannelSwitch> switch_;
  CoreWatcher watcher_;
  MemfdBackend* backend_ = nullptr;  // owned by core_
  std::unique_ptr<ShimCore> core_;
};

TEST(ShimCoreLayoutTest, PitchedRowsAreAlignedAndOverflowIsRefused) {
  const auto layout = LayOutPitched(1000, 3);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->row_bytes, 1024u);
  EXPECT_EQ(layout->total_bytes, 3072u);
  EXPECT_EQ(LayOutPitched(512, 2)->row_bytes, 512u);
  EXPECT_EQ(LayOutPitched(0, 7)->total_bytes, 0u);
  EXPECT_FALSE(LayOutPitched(SIZE_MAX, 1).has_value());
  EXPECT_FALSE(LayOutPitched(SIZE_MAX / 2, 4).has_value());
}

TEST(ShimCoreLayoutTest, FreeMemoryIsTheQuotaLeft) {
  EXPECT_EQ((SliceUsage{.quota_bytes = 1000, .in_use_bytes = 300}).free_bytes(), 700u);
  EXPECT_EQ((SliceUsage{.quota_bytes = 100, .in_use_bytes = 300}).free_bytes(), 0u);
}

TEST_F(ShimCoreSwitchTest, RestoreOntoAnotherGpuKeepsTheBytesAtTheSameAddresses) {
  Launch(0, kSlice);
  auto weights = core_->Allocate(1 << 20);
  auto scratch = core_->Allocate(100);
  auto cache = core_->Allocate(3 << 20);
  ASSERT_TRUE(weights.ok() && scratch.ok() && cache.ok());
  EXPECT_EQ(*weights, core_->base());
  EXPECT_EQ(*weights % ShimCore::kAlignment, 0u);
  EXPECT_EQ(*scratch % ShimCore::kAlignment, 0u);
  const auto weight_bytes = RandomBytes(1 << 20, 1);
  const auto cache_bytes = RandomBytes(3 << 20, 2);
  std::memcpy(At(*weights), weight_bytes.data(), weight_bytes.size());
  std::memcpy(At(*cache), cache_bytes.data(), cache_bytes.size());
  ASSERT_EQ(core_->Free(*scratch), ShimCore::FreeOutcome::kFreed);  // a hole below the cache

  Status out = Checkpoint();
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_EQ(switch_->state(), SwitchState::kCheckpointed);
  EXPECT_EQ(backend_->synchronize_count(), 1);  // the device finished before the image was taken
  // The image is everything up to the end of the highest allocation, the hole included.
  EXPECT_EQ(switch_->last_checkpoint().bytes, *cache + (3 << 20) - core_->base());
  slices_.clear();
  EXPECT_EQ(node_.device(0).allocated_bytes(), 0u);

  Status in = Restore(1, kSlice);
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_EQ(core_->maps(), 2u);
  EXPECT_EQ(std::memcmp(At(*weights), weight_bytes.data(), weight_bytes.size()), 0);
  EXPECT_EQ(std::memcmp(At(*cache), cache_bytes.data(), cache_bytes.size()), 0);
  // Allocation goes on after the restore, first fit: into the hole.
  auto again = core_->Allocate(100);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *scratch);

  // And back onto the first GPU, with the bytes written since.
  std::memset(At(*again), 0x5a, 100);
  out = Checkpoint();
  ASSERT_TRUE(out.ok()) << out.ToString();
  in = Restore(0, kSlice);
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_EQ(std::memcmp(At(*cache), cache_bytes.data(), cache_bytes.size()), 0);
  EXPECT_EQ(static_cast<unsigned char*>(At(*again))[99], 0x5a);
  EXPECT_TRUE(watcher_.lines().empty());
}

TEST_F(ShimCoreSwitchTest, AnAllocationPastTheQuotaFailsIsLoggedAndReachesTheNode) {
  Launch(0, 1 << 20);
  auto model = core_->Allocate(768 << 10);
  ASSERT_TRUE(model.ok());
  auto refused = core_->Allocate(512 << 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(watcher_.lines(),
            std::vector<std::string>{"allocation of 524288 bytes refused: the slice's quota is "
                                     "1048576 bytes, 786432 in use"});
  EXPECT_EQ(core_->usage().quota_bytes, 1u << 20);
  EXPECT_EQ(core_->usage().in_use_bytes, 768u << 10);
  // A smaller one still fits, and the refusal changed nothing.
  EXPECT_TRUE(core_->Allocate(256 << 10).ok());

  // The node raises the quota. Its kQuotaExceeded and the kSetQuota are both ahead of the
  // checkpoint's lock on the one ordered channel, so once the checkpoint is done both were seen.
  OnLoop([&] {
    switch_->SetQuota(2 << 20);
    return 0;
  });
  const Status out = Checkpoint();
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_EQ(OnLoop([&] { return switch_->quota_exceeded_count(); }), 1u);
  EXPECT_EQ(core_->usage().quota_bytes, 2u << 20);
  const Status in = Restore(1, 2 << 20);
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_TRUE(core_->Allocate(512 << 10).ok());
}

TEST_F(ShimCoreSwitchTest, AnAllocationWhileCheckpointedWaitsForTheRestore) {
  Launch(0, kSlice);
  ASSERT_TRUE(core_->Allocate(4096).ok());
  const Status out = Checkpoint();
  ASSERT_TRUE(out.ok()) << out.ToString();

  auto pending = std::async(std::launch::async, [&] { return core_->Allocate(8192); });
  watcher_.AwaitWaits(1);
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout);

  const Status in = Restore(1, kSlice);
  ASSERT_TRUE(in.ok()) << in.ToString();
  const auto allocated = pending.get();
  ASSERT_TRUE(allocated.ok()) << allocated.status().ToString();
  EXPECT_EQ(*allocated, core_->base() + 4096);
  std::memset(At(*allocated), 1, 8192);  // mapped: on the restored slice
}

// ---------------------------------------------------------------------------------------------
// The protocol message by message, from a node written out in the test.

class ShimCoreProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pair = fn::ControlChannel::CreatePair();
    ASSERT_TRUE(pair.ok());
    node_ = std::move(pair->first);
    auto backend = std::make_unique<MemfdBackend>();
    backend_ = backend.get();
    connecting_ =
        ConnectInBackground(std::move(pair->second), std::move(backend), watcher_.Options());
    const ControlMessage hello = Expect(ControlType::kHello);
    EXPECT_EQ(hello.a, static_cast<std::uint64_t>(::getpid()));
    base_ = hello.b;
    EXPECT_EQ(hello.c, kReserve);
  }

  void TearDown() override {
    if (connecting_.valid()) {  // a test that ended before the core connected
      ::shutdown(node_.fd(), SHUT_RDWR);
      (void)connecting_.get();
    }
    core_.reset();
  }

  ControlMessage Expect(ControlType type) {
    auto received = node_.Receive();
    EXPECT_TRUE(received.ok()) << received.status().ToString();
    if (!received.ok()) return {};
    EXPECT_EQ(received->message.type, type) << ControlTypeName(received->message.type);
    return received->message;
  }

  // A segment of an emulated GPU, as the node would send it.
  static UniqueFd Segment(std::uint64_t bytes) {
    UniqueFd fd(::memfd_create("slice", MFD_CLOEXEC));
    EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
    return fd;
  }

  // Sends a kMap and returns the kMapped's `a` (0: mapped), checking the generation's echo.
  std::uint64_t Map(const UniqueFd& segment, std::uint64_t bytes, std::uint64_t quota,
                    std::uint64_t generation, MapHandleKind kind = MapHandleKind::kMemfd) {
    EXPECT_TRUE(node_
                    .Send({.type = ControlType::kMap,
                           .reserved = static_cast<std::uint32_t>(kind),
                           .a = bytes,
                           .b = quota,
                           .c = generation},
                          segment.get())
                    .ok());
    const ControlMessage mapped = Expect(ControlType::kMapped);
    EXPECT_EQ(mapped.c, generation);
    return mapped.a;
  }

  // Maps the first slice and takes the connected core.
  void Attach(const UniqueFd& segment, std::uint64_t bytes) {
    ASSERT_EQ(Map(segment, bytes, bytes, 1), 0u);
    ASSERT_TRUE(node_.Send({.type = ControlType::kUnlock}).ok());
    auto core = connecting_.get();
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    core_ = std::move(core).value();
    EXPECT_EQ(core_->base(), base_);
  }

  // Locks the instance and returns the image it reports.
  std::uint64_t Lock() {
    EXPECT_TRUE(node_.Send({.type = ControlType::kLock}).ok());
    const ControlMessage locked = Expect(ControlType::kLocked);
    EXPECT_EQ(locked.b, 1u);
    return locked.a;
  }

  ControlChannel node_;
  CoreWatcher watcher_;
  MemfdBackend* backend_ = nullptr;  // owned by the core
  std::future<Result<std::unique_ptr<ShimCore>>> connecting_;
  std::unique_ptr<ShimCore> core_;
  std::uint64_t base_ = 0;
};

TEST_F(ShimCoreProtocolTest, RefusesAMapItCannotTakeAndTakesTheNext) {
  const UniqueFd segment = Segment(4 << 20);
  // A CUDA allocation's descriptor where only shared memory can be mapped: refused, and the
  // process goes on waiting for a map it can take.
  EXPECT_EQ(Map(segment, 4 << 20, 4 << 20, 1, MapHandleKind::kCudaPosixFd), 1u);
  EXPECT_EQ(Map(segment, 4 << 20, 8 << 20, 2), 1u);  // a quota beyond the mapped bytes
  EXPECT_EQ(Map(segment, 4 << 20, 4 << 20, 3), 0u);
  ASSERT_TRUE(node_.Send({.type = ControlType::kUnlock}).ok());
  auto core = connecting_.get();
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  core_ = std::move(core).value();
  EXPECT_EQ(core_->maps(), 1u);
  EXPECT_EQ(Map(segment, 4 << 20, 4 << 20, 4), 1u);  // mapped already
  EXPECT_EQ(watcher_.lines().size(), 3u);
}

TEST_F(ShimCoreProtocolTest, AllocationsWaitFromTheLockUntilTheUnlockAfterTheNextMap) {
  const UniqueFd first = Segment(4 << 20);
  Attach(first, 4 << 20);
  auto weights = core_->Allocate(1000);
  auto activations = core_->Allocate(600);
  ASSERT_TRUE(weights.ok() && activations.ok());
  EXPECT_EQ(*activations, base_ + 1024);
  const auto bytes = RandomBytes(1000, 3);
  std::memcpy(At(*weights), bytes.data(), bytes.size());

  // The image is [0, the end of the highest allocation).
  EXPECT_EQ(Lock(), 2048u);
  EXPECT_EQ(backend_->synchronize_count(), 1);
  auto pending = std::async(std::launch::async, [&] { return core_->Allocate(512); });
  watcher_.AwaitWaits(1);

  ASSERT_TRUE(node_.Send({.type = ControlType::kUnmap}).ok());
  Expect(ControlType::kUnmapped);
  // The node's copy of the image, onto another segment.
  const UniqueFd second = Segment(4 << 20);
  std::vector<std::byte> image(2048);
  ASSERT_EQ(::pread(first.get(), image.data(), image.size(), 0), 2048);
  ASSERT_EQ(::pwrite(second.get(), image.data(), image.size(), 0), 2048);

  EXPECT_EQ(Map(second, 4 << 20, 1024, 2), 1u);  // allocations up to 2048 do not fit 1024
  EXPECT_EQ(Map(second, 4 << 20, 4 << 20, 3), 0u);
  // Mapped but still locked: the allocation waits for the unlock.
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  ASSERT_TRUE(node_.Send({.type = ControlType::kUnlock}).ok());
  const auto allocated = pending.get();
  ASSERT_TRUE(allocated.ok()) << allocated.status().ToString();
  EXPECT_EQ(*allocated, base_ + 2048);
  EXPECT_EQ(std::memcmp(At(*weights), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(core_->maps(), 2u);
}

TEST_F(ShimCoreProtocolTest, QuotaChangesOnlyWithinTheAllocationsAndTheMapping) {
  const UniqueFd segment = Segment(4 << 20);
  Attach(segment, 4 << 20);
  ASSERT_TRUE(core_->Allocate(3000).ok());  // ends at 3072
  for (const std::uint64_t quota : {2048ULL, 8ULL << 20, 3072ULL}) {
    ASSERT_TRUE(node_.Send({.type = ControlType::kSetQuota, .a = quota}).ok());
  }
  Lock();  // behind the three on the channel
  EXPECT_EQ(core_->usage().quota_bytes, 3072u);
  EXPECT_EQ(watcher_.lines().size(), 2u);  // the two refused
  // A compute grant was never asked for: it goes straight back.
  ASSERT_TRUE(node_.Send({.type = ControlType::kComputeGrant, .a = 1000}).ok());
  Expect(ControlType::kComputeRelease);
}

TEST_F(ShimCoreProtocolTest, AFreeOfMemoryNotInTheRangeIsNotOurs) {
  const UniqueFd segment = Segment(4 << 20);
  Attach(segment, 4 << 20);
  auto allocated = core_->Allocate(4096);
  ASSERT_TRUE(allocated.ok());
  int host_variable = 0;
  EXPECT_EQ(core_->Free(reinterpret_cast<std::uintptr_t>(&host_variable)),
            ShimCore::FreeOutcome::kNotOurs);
  EXPECT_EQ(core_->Free(base_ + kReserve), ShimCore::FreeOutcome::kNotOurs);
  EXPECT_EQ(core_->Free(*allocated + 512), ShimCore::FreeOutcome::kNoSuchAllocation);
  EXPECT_EQ(core_->usage().in_use_bytes, 4096u);
  EXPECT_EQ(core_->Free(*allocated), ShimCore::FreeOutcome::kFreed);
  EXPECT_EQ(core_->Free(*allocated), ShimCore::FreeOutcome::kNoSuchAllocation);
  EXPECT_EQ(core_->usage().in_use_bytes, 0u);
}

TEST_F(ShimCoreProtocolTest, ANodeThatGoesAwayFailsTheWaitingAllocations) {
  const UniqueFd segment = Segment(4 << 20);
  Attach(segment, 4 << 20);
  Lock();
  auto pending = std::async(std::launch::async, [&] { return core_->Allocate(512); });
  watcher_.AwaitWaits(1);
  ::shutdown(node_.fd(), SHUT_RDWR);
  const auto allocated = pending.get();
  ASSERT_FALSE(allocated.ok());
  EXPECT_EQ(allocated.status().code(), StatusCode::kUnavailable);
}

TEST_F(ShimCoreProtocolTest, ANodeThatGoesAwayBeforeMappingFailsTheConnection) {
  ::shutdown(node_.fd(), SHUT_RDWR);
  auto core = connecting_.get();
  ASSERT_FALSE(core.ok());
  EXPECT_EQ(core.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gshare::fn::cuda_shim
