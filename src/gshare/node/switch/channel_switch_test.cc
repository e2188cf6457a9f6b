// Switching real function processes (switch_test_function) between host memory and two emulated
// GPUs. The test owns the node side: an event loop thread, a copy pool, the restore engine and
// the snapshot store; it starts each function process itself and ends it by its pid.
#include "gshare/node/switch/channel_switch.h"
#include "gshare/model/compute_quantum.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "gshare/common/testing/line_child.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/node/switch/testing/switch_test_node.h"

namespace gshare {
namespace {

constexpr std::uint64_t kReserve = 1ULL << 30;
constexpr std::uint64_t kSlice = 16ULL << 20;
constexpr int kChildControlFd = 3;
constexpr uid_t kNobody = 65534;

using FunctionChild = ::gshare::testing::LineChild;

// Starts switch_test_function with `control` as its fd 3; as `uid` when it is not -1.
std::unique_ptr<FunctionChild> StartFunction(const UniqueFd& control, int uid,
                                             std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {SWITCH_TEST_FUNCTION};
  argv.insert(argv.end(), args.begin(), args.end());
  return FunctionChild::Start(
      {.argv = std::move(argv),
       .env = {std::string(fn::kControlFdEnv) + "=" + std::to_string(kChildControlFd),
               std::string(fn::kDeviceBaseEnv) + "=" + fmt::format("{:#x}", fn::kDefaultDeviceBase),
               std::string(fn::kDeviceReserveEnv) + "=" + std::to_string(kReserve)},
       .pass_fd = control.get(),
       .pass_as = kChildControlFd,
       .uid = uid});
}

class ChannelSwitchTest : public ::testing::Test {
 protected:
  void SetUp() override { node_.Start(); }

  void TearDown() override {
    node_.OnLoop([&] {
      for (auto& s : switches_) s->Close();
      switches_.clear();
      return 0;
    });
    first_slices_.clear();
    node_.Stop();
  }

  template <typename F>
  auto OnLoop(F f) {
    return node_.OnLoop(std::move(f));
  }
  template <typename Begin>
  Status Operate(Begin begin) {
    return node_.Operate(std::move(begin));
  }

  std::unique_ptr<DeviceBuffer> Slice(int gpu) {
    auto buffer = node_.device(gpu).Allocate(kSlice);
    EXPECT_TRUE(buffer.ok());
    return std::move(buffer).value();
  }

  // Starts a function process and attaches its first slice on `gpu`; returns it once ready.
  std::pair<std::shared_ptr<ChannelSwitch>, std::unique_ptr<FunctionChild>> Launch(
      int gpu, int uid = -1, std::string* ready = nullptr, std::vector<std::string> args = {}) {
    auto pair = fn::ControlChannel::CreatePair();
    EXPECT_TRUE(pair.ok());
    auto child = StartFunction(pair->second, uid, std::move(args));
    pair->second.Reset();  // the child's alone: its end closes when it dies
    const std::string id = "instance-" + std::to_string(next_id_++);
    auto created = OnLoop([&] {
      auto s = ChannelSwitch::Create(context(), id, std::move(pair->first));
      switches_.push_back(s);
      return s;
    });
    first_slices_.push_back(Slice(gpu));  // freed after the switches are closed
    DeviceBuffer& slice = *first_slices_.back();
    const Status attached = Operate([&](ChannelSwitch::Done done) {
      created->Attach(slice, kSlice, &arbiters_[gpu], std::move(done));
    });
    EXPECT_TRUE(attached.ok()) << attached.ToString();
    const std::string line = child->ReadLine();
    EXPECT_EQ(line.rfind("ready ", 0), 0u) << line;
    if (ready != nullptr) *ready = line;
    return {created, std::move(child)};
  }

  std::uint64_t Allocated(int gpu) { return node_.device(gpu).allocated_bytes(); }

  ::gshare::switch_testing::SwitchTestNode node_;  // declared first: destroyed after the switches
  ComputeArbiter arbiters_[2];
  std::vector<std::unique_ptr<DeviceBuffer>> first_slices_;
  std::vector<std::shared_ptr<ChannelSwitch>> switches_;
  int next_id_ = 0;

  SwitchContext context() { return node_.context(); }
};

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TEST_F(ChannelSwitchTest, RoundTripsOntoAnotherGpuKeepAddressesAndOutputs) {
  auto [instance, child] = Launch(0);
  const std::vector<std::string> before = Words(child->Ask("sum"));
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(before[0], "sum");

  Status out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_FALSE(instance->uses_buffer());
  EXPECT_EQ(instance->state(), SwitchState::kCheckpointed);
  EXPECT_FALSE(instance->last_checkpoint().skipped);
  EXPECT_EQ(instance->last_checkpoint().bytes, 4u << 20);  // the weights, page-rounded
  first_slices_.clear();
  EXPECT_EQ(Allocated(0), 0u);  // pages released

  auto on_gpu1 = Slice(1);
  Status in = Operate(
      [&](auto done) { instance->Restore(*on_gpu1, kSlice, &arbiters_[1], std::move(done)); });
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_EQ(instance->last_restore().bytes, 4u << 20);
  EXPECT_EQ(Allocated(1), kSlice);
  EXPECT_EQ(Words(child->Ask("sum")), before);  // same bytes, same address, on GPU 1

  // Nothing was written since the restore: the second checkpoint copies nothing (fast swap).
  out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_TRUE(instance->last_checkpoint().skipped);
  EXPECT_EQ(instance->last_checkpoint().bytes, 0u);
  on_gpu1.reset();
  EXPECT_EQ(Allocated(1), 0u);

  auto on_gpu0 = Slice(0);
  in = Operate(
      [&](auto done) { instance->Restore(*on_gpu0, kSlice, &arbiters_[0], std::move(done)); });
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_EQ(Words(child->Ask("sum")), before);

  // Asked to, a checkpoint copies although the snapshot holds the image.
  out = Operate([&](auto done) { instance->Checkpoint(true, std::move(done)); });
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_FALSE(instance->last_checkpoint().skipped);
  EXPECT_EQ(instance->last_checkpoint().bytes, 4u << 20);
}

// A function that cannot say what it wrote (as the CUDA allocator shim cannot) reports every
// image written; the restore engine then compares chunk digests on the device and copies only the
// chunks that changed.
TEST_F(ChannelSwitchTest, AFunctionThatNeverFreezesIsSwappedByItsChunkDigests) {
  auto [instance, child] = Launch(0, -1, nullptr, {"--weights", "4194304", "--no-freeze"});
  const std::vector<std::string> before = Words(child->Ask("sum"));
  ASSERT_EQ(before.size(), 3u);
  auto checkpoint = [&, instance = instance] {
    const Status out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
    EXPECT_TRUE(out.ok()) << out.ToString();
    return instance->last_checkpoint();
  };
  auto restore = [&, instance = instance](DeviceBuffer& slice, int gpu) {
    const Status in = Operate(
        [&](auto done) { instance->Restore(slice, kSlice, &arbiters_[gpu], std::move(done)); });
    EXPECT_TRUE(in.ok()) << in.ToString();
  };

  TransferReport first = checkpoint();  // no digests yet: everything, and they are recorded
  EXPECT_EQ(first.bytes, 4u << 20);
  EXPECT_EQ(first.compared_bytes, 0u);
  first_slices_.clear();

  auto on_gpu1 = Slice(1);
  restore(*on_gpu1, 1);
  EXPECT_EQ(Words(child->Ask("sum")), before);
  TransferReport unchanged = checkpoint();  // it only read: nothing moves
  EXPECT_FALSE(unchanged.skipped);
  EXPECT_EQ(unchanged.bytes, 0u);
  EXPECT_EQ(unchanged.compared_bytes, 4u << 20);
  EXPECT_EQ(unchanged.unchanged_bytes, 4u << 20);
  on_gpu1.reset();

  auto on_gpu0 = Slice(0);
  restore(*on_gpu0, 0);
  EXPECT_EQ(child->Ask("poke 2097152"), "poke ok");  // in the third 1 MiB chunk
  const std::vector<std::string> poked = Words(child->Ask("sum"));
  EXPECT_NE(poked, before);
  TransferReport one_chunk = checkpoint();
  EXPECT_EQ(one_chunk.bytes, 1u << 20);
  EXPECT_EQ(one_chunk.unchanged_bytes, 3u << 20);
  on_gpu0.reset();

  auto again = Slice(1);
  restore(*again, 1);
  EXPECT_EQ(Words(child->Ask("sum")), poked) << "the changed chunk was kept";
}

// The map goes out with the copy: a copy that fails has the instance unmap the buffer again
// before the restore reports the failure, and the instance stays checkpointed and whole.
TEST_F(ChannelSwitchTest, ARestoreWhoseCopyFailsUnmapsAndLeavesTheInstanceCheckpointed) {
  auto [instance, child] = Launch(0);
  const std::vector<std::string> before = Words(child->Ask("sum"));
  ASSERT_EQ(before.size(), 3u);
  ASSERT_TRUE(Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); }).ok());

  // A GPU the restore engine does not drive: the map succeeds, the copy is refused.
  auto stranger = EmulatedDevice::Create(
      7,
      {.name = "", .memory_bytes = 64ULL << 20, .link_bytes_per_second = 0, .prepared_bytes = 0});
  ASSERT_TRUE(stranger.ok());
  auto foreign = (*stranger)->Allocate(kSlice);
  ASSERT_TRUE(foreign.ok());
  const Status failed = Operate(
      [&](auto done) { instance->Restore(**foreign, kSlice, &arbiters_[1], std::move(done)); });
  EXPECT_EQ(failed.code(), StatusCode::kInvalidArgument) << failed.ToString();
  EXPECT_EQ(OnLoop([&] { return instance->state(); }), SwitchState::kCheckpointed);
  EXPECT_FALSE(OnLoop([&] { return instance->uses_buffer(); }));
  foreign->reset();

  // Mapped twice, the instance would refuse this map: it unmapped the foreign buffer.
  auto slice = Slice(1);
  const Status in = Operate(
      [&](auto done) { instance->Restore(*slice, kSlice, &arbiters_[1], std::move(done)); });
  ASSERT_TRUE(in.ok()) << in.ToString();
  EXPECT_EQ(Words(child->Ask("sum")), before);
  const RestoreSteps steps = OnLoop([&] { return instance->last_restore_steps(); });
  EXPECT_GT(steps.copy.count(), 0);
  EXPECT_GE(steps.total, steps.copy);
  EXPECT_GE(steps.total, steps.map);
  ASSERT_TRUE(Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); }).ok());
}

TEST_F(ChannelSwitchTest, RoundTripsUnderConcurrentRequests) {
  auto [instance, child] = Launch(0);
  const std::string expected = child->Ask("sum");
  // Requests keep coming while the node switches the instance back and forth: every answer is
  // the same, whichever GPU served it, and a switch waits for the kernel in flight.
  std::unique_ptr<DeviceBuffer> slice;
  for (int round = 0; round < 6; ++round) {
    child->Send("sum");
    const Status out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
    ASSERT_TRUE(out.ok()) << out.ToString();
    slice.reset();
    child->Send("sum");  // waits, unmapped, until the restore below
    slice = Slice(round % 2);
    const Status in = Operate([&](auto done) {
      instance->Restore(*slice, kSlice, &arbiters_[round % 2], std::move(done));
    });
    ASSERT_TRUE(in.ok()) << in.ToString();
    EXPECT_EQ(child->ReadLine(), expected);
    EXPECT_EQ(child->ReadLine(), expected);
  }
  const Status out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
  ASSERT_TRUE(out.ok()) << out.ToString();
}

TEST_F(ChannelSwitchTest, AQuotaOverrunFailsOnlyThatRequest) {
  auto [instance, child] = Launch(0);
  auto [other, other_child] = Launch(0);
  const std::string before = child->Ask("sum");
  const std::string reply = child->Ask("alloc " + std::to_string(64ULL << 20));
  EXPECT_EQ(reply.rfind("alloc error ResourceExhausted", 0), 0u) << reply;
  EXPECT_NE(reply.find("would exceed the slice's quota of 16.0 MiB"), std::string::npos) << reply;
  // The same instance goes on serving, and so does its neighbour on the GPU.
  EXPECT_EQ(child->Ask("sum"), before);
  EXPECT_EQ(Words(other_child->Ask("sum")).size(), 3u);
  EXPECT_EQ(child->Ask("alloc 4096"), "alloc ok");
  // The node heard of the overrun before it granted the next kernel (one ordered channel).
  EXPECT_EQ(OnLoop([&] { return instance->quota_exceeded_count(); }), 1u);
}

TEST_F(ChannelSwitchTest, InstancesOnOneGpuTakeTurnsAndNeverComputeAtOnce) {
  auto [a, a_child] = Launch(0);
  auto [b, b_child] = Launch(0);
  a_child->Send("spin 200 1000");
  b_child->Send("spin 200 1000");
  const std::vector<std::string> a_words = Words(a_child->ReadLine());
  const std::vector<std::string> b_words = Words(b_child->ReadLine());
  ASSERT_GE(a_words.size(), 4u);
  ASSERT_GE(b_words.size(), 4u);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> kernels;
  for (const auto* words : {&a_words, &b_words}) {
    // A grant ends at the first kernel boundary after its quantum, so its kernels take less than
    // the quantum plus one kernel: 200 ms of kernels need more than 200 / (20 + longest) grants.
    // The longest kernel is measured, not assumed: a child the machine descheduled in a kernel
    // has a longer one (and then needs fewer grants).
    std::uint64_t kernel_ns = 0, longest_ns = 0;
    for (std::size_t i = 2; i + 1 < words->size(); i += 2) {
      const std::uint64_t start = std::stoull((*words)[i]), end = std::stoull((*words)[i + 1]);
      ASSERT_LE(start, end);
      kernels.emplace_back(start, end);
      kernel_ns += end - start;
      longest_ns = std::max(longest_ns, end - start);
    }
    const auto quantum_ns =
        static_cast<std::uint64_t>(std::chrono::nanoseconds(kDefaultComputeQuantum).count());
    EXPECT_GE(kernel_ns, 200'000'000u);
    EXPECT_GT(std::stoull((*words)[1]) * (quantum_ns + longest_ns), kernel_ns)
        << "fewer grants than the quantum allows";
  }
  std::sort(kernels.begin(), kernels.end());
  for (std::size_t i = 1; i < kernels.size(); ++i) {
    ASSERT_LE(kernels[i - 1].second, kernels[i].first) << "two kernels ran at once on one GPU";
  }
  // On separate GPUs they would overlap; here they alternated. The last turn is handed back over
  // the control channel, which the node reads on its loop after the children have answered here:
  // the test waits for the loop to see it (a deadline only keeps a broken arbiter from hanging).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool released = false;
  while (!released && std::chrono::steady_clock::now() < give_up) {
    released = OnLoop([&] { return arbiters_[0].holder() == nullptr; });
  }
  EXPECT_TRUE(released) << "the GPU's compute was never handed back";
}

TEST_F(ChannelSwitchTest, AFunctionCannotReachAnothersSegments) {
  // Distinct uids where the test runs as root; otherwise both run as the test's own uid, the
  // same-uid fallback, where only non-dumpability protects them.
  const bool root = ::geteuid() == 0;
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);                // the node is not dumpable either
  std::vector<std::pair<int, int>> uids = {{-1, -1}};  // not root: the test's own uid for both
  if (root) uids = {{kNobody, kNobody}, {kNobody, kNobody - 1}};  // same uid, then distinct
  // A segment the node holds (as it holds every slice's memfd).
  auto probe = Slice(0);
  const int segment_fd = dynamic_cast<EmulatedBuffer&>(*probe).fd();
  for (const auto& [uid_a, uid_b] : uids) {
    SCOPED_TRACE(::testing::Message() << "uids " << uid_a << " and " << uid_b);
    auto [a, a_child] = Launch(0, uid_a);
    auto [b, b_child] = Launch(1, uid_b);
    // b's control channel is its fd 3, and b maps its own segment: neither is reachable.
    EXPECT_EQ(a_child->Ask("peek " + std::to_string(b_child->pid()) + " 3"),
              "peek EACCES EACCES EACCES");
    EXPECT_EQ(a_child->Ask("peek " + std::to_string(::getpid()) + " " + std::to_string(segment_fd)),
              "peek EACCES EACCES EACCES");
    // Each still works.
    EXPECT_EQ(Words(a_child->Ask("sum")).size(), 3u);
    EXPECT_EQ(Words(b_child->Ask("sum")).size(), 3u);
  }
}

TEST_F(ChannelSwitchTest, AFunctionKilledDuringACheckpointLetsItsMemoryGo) {
  auto [instance, child] = Launch(0);
  child->Send("hang");
  ASSERT_EQ(child->ReadLine(), "hanging");  // a kernel that never ends holds the GPU
  std::promise<Status> promise;
  boost::asio::post(node_.loop(), [&] {
    instance->Checkpoint(false, [&](Status status) { promise.set_value(status); });
  });
  // The lock waits for the kernel; the process dies instead.
  EXPECT_EQ(OnLoop([&] { return instance->state(); }), SwitchState::kLocking);
  child->Kill();
  const Status out = promise.get_future().get();
  EXPECT_EQ(out.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(OnLoop([&] { return instance->uses_buffer(); }));
  first_slices_.clear();
  EXPECT_EQ(Allocated(0), 0u);
  EXPECT_EQ(OnLoop([&] { return instance->state(); }), SwitchState::kFailed);
  // Later calls fail at once.
  auto slice = Slice(1);
  const Status again = Operate(
      [&](auto done) { instance->Restore(*slice, kSlice, &arbiters_[1], std::move(done)); });
  EXPECT_EQ(again.code(), StatusCode::kUnavailable);
}

TEST_F(ChannelSwitchTest, AFunctionKilledWhileCheckpointedFailsItsRestore) {
  auto [instance, child] = Launch(0);
  const Status out = Operate([&](auto done) { instance->Checkpoint(false, std::move(done)); });
  ASSERT_TRUE(out.ok());
  first_slices_.clear();
  child->Kill();
  auto slice = Slice(1);
  const Status in = Operate(
      [&](auto done) { instance->Restore(*slice, kSlice, &arbiters_[1], std::move(done)); });
  EXPECT_FALSE(in.ok());
  EXPECT_FALSE(OnLoop([&] { return instance->uses_buffer(); }));
  slice.reset();
  EXPECT_EQ(Allocated(1), 0u);
  EXPECT_EQ(OnLoop([&] { return instance->state(); }), SwitchState::kFailed);
}

}  // namespace
}  // namespace gshare
