// CheckpointApiSwitch driven through a scripted fake of the driver's process checkpoint API. The
// test thread runs the event loop, one handler at a time, until the callback it waits for has
// run; the driver calls run on a one-thread worker pool. Nothing sleeps or times anything.
#include "gshare/node/switch/checkpoint_api_switch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gshare/node/switch/testing/fake_checkpoint_api.h"

namespace gshare {
namespace {

using State = ProcessCheckpointState;

constexpr int kPid = 4242;
constexpr char kUuidA[] = "GPU-00112233-4455-6677-8899-aabbccddeeff";
constexpr char kUuidB[] = "GPU-f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f";
constexpr GpuUuidBytes kBytesA = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                  0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
constexpr GpuUuidBytes kBytesB = {0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87,
                                  0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
constexpr std::uint64_t kSlice = 64ULL << 20;

using testing::FakeCheckpointApi;

// A CUDA GPU as far as the switch looks: its UUID. Its buffers are accounting only.
class TestGpu final : public Device {
 public:
  explicit TestGpu(std::string uuid) {
    info_.kind = DeviceKind::kCuda;
    info_.name = "test-gpu";
    info_.uuid = std::move(uuid);
    info_.memory_bytes = 1ULL << 30;
  }
  const DeviceInfo& info() const override { return info_; }
  Result<std::unique_ptr<DeviceBuffer>> Allocate(std::uint64_t size_bytes) override {
    return std::unique_ptr<DeviceBuffer>(new Buffer(*this, size_bytes));
  }
  std::uint64_t allocated_bytes() const override { return 0; }
  Result<std::unique_ptr<CopyStream>> CreateStream() override {
    return Unavailable("a test GPU copies nothing");
  }
  Result<Duration> TimedRawCopyToDevice(DeviceBuffer&, std::span<const std::byte>) override {
    return Unavailable("a test GPU copies nothing");
  }

 private:
  class Buffer final : public DeviceBuffer {
   public:
    Buffer(const Device& device, std::uint64_t size_bytes) : DeviceBuffer(device, size_bytes) {}
  };
  DeviceInfo info_;
};

std::unique_ptr<DeviceBuffer> Slice(Device& gpu) { return std::move(gpu.Allocate(kSlice)).value(); }

class CheckpointApiSwitchTest : public ::testing::Test {
 protected:
  std::shared_ptr<CheckpointApiSwitch> Make() {
    return CheckpointApiSwitch::Create({loop_, workers_, api_, clock_}, "instance-7", kPid);
  }

  // Starts an operation through `start` and runs the loop until its callback has run; checks
  // that it did not run inside the call.
  template <typename Start>
  Status Await(Start start) {
    std::optional<Status> result;
    start([&](Status status) { result = std::move(status); });
    EXPECT_FALSE(result.has_value()) << "completed inside the call";
    while (!result) loop_.run_one();
    return *result;
  }

  Status Attach(CheckpointApiSwitch& driver, DeviceBuffer& slice) {
    return Await([&](SwitchDriver::Done done) {
      driver.Attach(slice, slice.size_bytes(), nullptr, std::move(done));
    });
  }
  Status Checkpoint(CheckpointApiSwitch& driver, bool force_copy = false) {
    return Await([&](SwitchDriver::Done done) { driver.Checkpoint(force_copy, std::move(done)); });
  }
  Status Restore(CheckpointApiSwitch& driver, DeviceBuffer& slice) {
    return Await([&](SwitchDriver::Done done) {
      driver.Restore(slice, slice.size_bytes(), nullptr, std::move(done));
    });
  }

  FakeCheckpointApi api_;
  SteadyClock clock_;
  TestGpu gpu_a_{kUuidA};
  TestGpu gpu_b_{kUuidB};
  std::unique_ptr<DeviceBuffer> slice_a_ = Slice(gpu_a_);
  boost::asio::io_context loop_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(loop_);
  boost::asio::thread_pool workers_{1};
};

using Names = std::vector<std::string>;

TEST_F(CheckpointApiSwitchTest, AttachesCheckpointsAndRestoresOntoTheSameGpuWithNoPairs) {
  auto driver = Make();
  EXPECT_EQ(driver->state(), SwitchState::kStarting);
  EXPECT_EQ(driver->pid(), kPid);
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  EXPECT_EQ(driver->state(), SwitchState::kResident);
  EXPECT_TRUE(driver->uses_buffer());
  EXPECT_TRUE(api_.calls().empty()) << "the process made its own context: nothing to call";

  ASSERT_TRUE(Checkpoint(*driver).ok());
  EXPECT_EQ(driver->state(), SwitchState::kCheckpointed);
  EXPECT_FALSE(driver->uses_buffer()) << "the slice may be freed after a checkpoint";
  EXPECT_EQ(api_.state(kPid), State::kCheckpointed);
  auto calls = api_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "Lock");
  EXPECT_EQ(calls[0].pid, kPid);
  EXPECT_EQ(calls[0].timeout, CheckpointApiSwitchOptions{}.lock_timeout);
  EXPECT_EQ(calls[1].name, "Checkpoint");
  EXPECT_EQ(driver->last_checkpoint().bytes, 0u) << "the driver holds the bytes";
  EXPECT_FALSE(driver->last_checkpoint().skipped);
  // Its time is the driver's calls', not the operation's with its waits for a worker.
  EXPECT_EQ(driver->last_checkpoint().elapsed,
            driver->last_timings().lock + driver->last_timings().checkpoint);
  EXPECT_EQ(driver->quota_exceeded_count(), 0u);

  slice_a_.reset();  // the caller frees the slice
  auto again = Slice(gpu_a_);
  api_.ClearCalls();
  ASSERT_TRUE(Restore(*driver, *again).ok());
  EXPECT_EQ(driver->state(), SwitchState::kResident);
  EXPECT_TRUE(driver->uses_buffer());
  EXPECT_EQ(api_.state(kPid), State::kRunning);
  calls = api_.calls();
  ASSERT_EQ(api_.call_names(), (Names{"Restore", "Unlock"}));
  EXPECT_TRUE(calls[0].pairs.empty()) << "the same GPU: no remapping";
  EXPECT_EQ(driver->last_restore().elapsed,
            driver->last_timings().restore + driver->last_timings().unlock);

  // force_copy changes nothing: every checkpoint is a full one.
  api_.ClearCalls();
  ASSERT_TRUE(Checkpoint(*driver, true).ok());
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Checkpoint"}));
}

TEST_F(CheckpointApiSwitchTest, RestoreOntoAnotherGpuPairsTheRawUuidBytesFromOldToNew) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  ASSERT_TRUE(Checkpoint(*driver).ok());
  auto on_b = Slice(gpu_b_);
  api_.ClearCalls();
  ASSERT_TRUE(Restore(*driver, *on_b).ok());
  auto calls = api_.calls();
  ASSERT_EQ(api_.call_names(), (Names{"Restore", "Unlock"}));
  ASSERT_EQ(calls[0].pairs.size(), 1u);
  EXPECT_EQ(calls[0].pairs[0].from, kBytesA);
  EXPECT_EQ(calls[0].pairs[0].to, kBytesB);

  // Now on B: back onto B needs no pair, onto A the pair B -> A.
  ASSERT_TRUE(Checkpoint(*driver).ok());
  auto still_b = Slice(gpu_b_);
  api_.ClearCalls();
  ASSERT_TRUE(Restore(*driver, *still_b).ok());
  EXPECT_TRUE(api_.calls()[0].pairs.empty());
  ASSERT_TRUE(Checkpoint(*driver).ok());
  auto back_on_a = Slice(gpu_a_);
  api_.ClearCalls();
  ASSERT_TRUE(Restore(*driver, *back_on_a).ok());
  calls = api_.calls();
  ASSERT_EQ(calls[0].pairs.size(), 1u);
  EXPECT_EQ(calls[0].pairs[0].from, kBytesB);
  EXPECT_EQ(calls[0].pairs[0].to, kBytesA);
}

TEST_F(CheckpointApiSwitchTest, ALockThatTimesOutTriesToUnlockAndLeavesItResident) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  api_.FailNext("Lock", DeadlineExceeded("cuCheckpointProcessLock (pid 4242): "
                                         "CUDA_ERROR_NOT_READY (device not ready)"));
  const Status status = Checkpoint(*driver);
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.ToString();
  EXPECT_NE(status.message().find("CUDA_ERROR_NOT_READY"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("stays resident"), std::string::npos) << status.message();
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Unlock"}));
  EXPECT_EQ(driver->state(), SwitchState::kResident);
  EXPECT_TRUE(driver->uses_buffer());
  EXPECT_EQ(api_.state(kPid), State::kRunning);

  api_.ClearCalls();
  EXPECT_TRUE(Checkpoint(*driver).ok()) << "a later checkpoint goes through";
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Checkpoint"}));
}

TEST_F(CheckpointApiSwitchTest, ARestoreOutOfMemoryFailsTheSwitchNamingTheStateItWasLeftIn) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  ASSERT_TRUE(Checkpoint(*driver).ok());
  auto slice = Slice(gpu_a_);
  api_.ClearCalls();
  api_.FailNext("Restore", ResourceExhausted("cuCheckpointProcessRestore (pid 4242): "
                                             "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"));
  const Status status = Restore(*driver, *slice);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  for (const char* part : {"instance-7", "cuCheckpointProcessRestore", "CUDA_ERROR_OUT_OF_MEMORY",
                           "out of memory", "left checkpointed", "killed"}) {
    EXPECT_NE(status.message().find(part), std::string::npos) << part << ": " << status.message();
  }
  EXPECT_EQ(api_.call_names(), (Names{"Restore", "GetState"}));
  EXPECT_EQ(driver->state(), SwitchState::kFailed);
  EXPECT_FALSE(driver->uses_buffer());

  // Every later call fails at once, on the loop.
  const Status later = Checkpoint(*driver);
  EXPECT_EQ(later.code(), StatusCode::kUnavailable);
  EXPECT_EQ(later.message(), status.message());
}

TEST_F(CheckpointApiSwitchTest, AFailedRestoreWhoseStateCannotBeReadSaysSo) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  ASSERT_TRUE(Checkpoint(*driver).ok());
  auto slice = Slice(gpu_b_);
  api_.FailNext("Restore",
                Internal("cuCheckpointProcessRestore (pid 4242): "
                         "CUDA_ERROR_OPERATING_SYSTEM (OS call failed)"),
                State::kFailed);
  api_.FailNext("GetState", InvalidArgument("cuCheckpointProcessGetState (pid 4242): "
                                            "CUDA_ERROR_INVALID_VALUE (invalid argument)"));
  const Status status = Restore(*driver, *slice);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("its state could not be read"), std::string::npos)
      << status.message();
  EXPECT_EQ(driver->state(), SwitchState::kFailed);
}

TEST_F(CheckpointApiSwitchTest, AnUnsupportedApiRefusesTheCheckpointAndLeavesItResident) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  api_.FailNext("Lock", Unavailable("cuCheckpointProcessLock (pid 4242): CUDA_ERROR_NOT_SUPPORTED "
                                    "(operation not supported)"));
  const Status status = Checkpoint(*driver);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
  EXPECT_NE(status.message().find("not supported here"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos);
  EXPECT_EQ(api_.call_names(), (Names{"Lock"}));
  EXPECT_EQ(driver->state(), SwitchState::kResident);
  EXPECT_TRUE(driver->uses_buffer());
}

TEST_F(CheckpointApiSwitchTest, AFailedCheckpointUnlocksAndStaysResident) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  api_.FailNext("Checkpoint", Internal("cuCheckpointProcessCheckpoint (pid 4242): "
                                       "CUDA_ERROR_UNKNOWN (unknown error)"));
  const Status status = Checkpoint(*driver);
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.ToString();
  EXPECT_NE(status.message().find("stays resident"), std::string::npos) << status.message();
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Checkpoint", "Unlock"}));
  EXPECT_EQ(driver->state(), SwitchState::kResident);
  EXPECT_EQ(api_.state(kPid), State::kRunning);
  EXPECT_TRUE(driver->uses_buffer());
}

TEST_F(CheckpointApiSwitchTest, AFailedCheckpointThatCannotUnlockFailsTheSwitch) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  api_.FailNext("Checkpoint",
                Internal("cuCheckpointProcessCheckpoint (pid 4242): "
                         "CUDA_ERROR_UNKNOWN (unknown error)"),
                State::kFailed);
  const Status status = Checkpoint(*driver);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("left failed"), std::string::npos) << status.message();
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Checkpoint", "Unlock", "GetState"}));
  EXPECT_EQ(driver->state(), SwitchState::kFailed);
  EXPECT_FALSE(driver->uses_buffer());
}

TEST_F(CheckpointApiSwitchTest, CloseDuringACheckpointCompletesItOnceTheDriverCallReturns) {
  auto driver = Make();
  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  api_.HoldNext("Checkpoint");
  std::optional<Status> result;
  driver->Checkpoint(false, [&](Status status) { result = std::move(status); });
  loop_.run_one();  // the lock's completion, which starts the checkpoint
  api_.WaitUntilHeld();
  EXPECT_EQ(driver->state(), SwitchState::kCheckpointing);

  driver->Close();
  EXPECT_EQ(driver->state(), SwitchState::kFailed);
  EXPECT_FALSE(result.has_value()) << "the driver call is still in flight";
  EXPECT_TRUE(driver->uses_buffer()) << "until the call in flight returns";

  api_.Release();
  while (!result) loop_.run_one();
  EXPECT_EQ(result->code(), StatusCode::kUnavailable) << result->ToString();
  EXPECT_NE(result->message().find("closed"), std::string::npos) << result->message();
  EXPECT_FALSE(driver->uses_buffer());
  EXPECT_EQ(api_.call_names(), (Names{"Lock", "Checkpoint"})) << "nothing after the close";
}

TEST_F(CheckpointApiSwitchTest, CloseBeforeAnAttachCompletesFailsIt) {
  auto driver = Make();
  std::optional<Status> result;
  driver->Attach(*slice_a_, kSlice, nullptr, [&](Status status) { result = std::move(status); });
  driver->Close();
  EXPECT_FALSE(result.has_value());
  while (!result) loop_.run_one();
  EXPECT_EQ(result->code(), StatusCode::kUnavailable);
  EXPECT_FALSE(driver->uses_buffer());
  EXPECT_EQ(driver->state(), SwitchState::kFailed);
}

TEST_F(CheckpointApiSwitchTest, RefusesCallsOutOfOrderAndSlicesItCannotUse) {
  auto driver = Make();
  EXPECT_EQ(Checkpoint(*driver).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Restore(*driver, *slice_a_).code(), StatusCode::kFailedPrecondition);
  TestGpu emulated("EMU-00000000-0000-0000-0000-000000000000");
  auto foreign = Slice(emulated);
  const Status refused = Attach(*driver, *foreign);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("CUDA GPU"), std::string::npos) << refused.message();
  EXPECT_EQ(Await([&](SwitchDriver::Done done) {
              driver->Attach(*slice_a_, kSlice + 1, nullptr, std::move(done));
            }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(driver->state(), SwitchState::kStarting);

  ASSERT_TRUE(Attach(*driver, *slice_a_).ok());
  EXPECT_EQ(Attach(*driver, *slice_a_).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Restore(*driver, *slice_a_).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(api_.calls().empty());

  // One operation at a time.
  std::optional<Status> first;
  driver->Checkpoint(false, [&](Status status) { first = std::move(status); });
  EXPECT_EQ(Checkpoint(*driver).code(), StatusCode::kFailedPrecondition);
  while (!first) loop_.run_one();
  EXPECT_TRUE(first->ok());
}

TEST_F(CheckpointApiSwitchTest, RecordsTheQuotaCappedAtTheSlice) {
  auto driver = Make();
  ASSERT_TRUE(Await([&](SwitchDriver::Done done) {
                driver->Attach(*slice_a_, kSlice / 2, nullptr, std::move(done));
              }).ok());
  EXPECT_EQ(driver->quota_bytes(), kSlice / 2);
  driver->SetQuota(kSlice / 4);
  EXPECT_EQ(driver->quota_bytes(), kSlice / 4);
  driver->SetQuota(2 * kSlice);
  EXPECT_EQ(driver->quota_bytes(), kSlice);
}

}  // namespace
}  // namespace gshare
