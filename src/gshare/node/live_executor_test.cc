// The live executor passes the executor contract (sched/testing/executor_contract.h) on the live
// node: LiveNodeHarness composes a LiveNode of emulated GPUs on a ManualLoopClock, its instances
// hosted in this process (each links the function library exactly as a function process does,
// and runs its kernels for the profile's execution time on the node's clock). Time moves only as
// the node waits for it: no test here waits on wall time for a scheduling decision.
#include "gshare/node/live_executor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "gshare/node/switch/checkpoint_api_switch.h"
#include "gshare/node/switch/testing/fake_checkpoint_api.h"
#include "gshare/node/testing/live_node_harness.h"
#include "gshare/sched/policy_registry.h"
#include "gshare/sched/testing/executor_contract.h"
#include "gshare/sched/testing/null_scheduler.h"
#include "gshare/sched/testing/policy_param_name.h"

namespace gshare {
namespace {

using LiveHarness = testing::LiveNodeHarness;

TEST(LiveNodeContract, GpuStartup) {
  LiveHarness h;
  testing::CheckGpuStartup(h);
}
TEST(LiveNodeContract, RestoreThenRun) {
  LiveHarness h;
  testing::CheckRestoreThenRun(h);
}
TEST(LiveNodeContract, Evictions) {
  LiveHarness h;
  testing::CheckEvictions(h);
}
TEST(LiveNodeContract, FailRequestAndViolations) {
  LiveHarness h;
  testing::CheckFailRequestAndViolations(h);
}
TEST(LiveNodeContract, LatestStartAndCancellation) {
  LiveHarness h;
  testing::CheckLatestStartAndCancellation(h);
}

// A scheduler scripted by the test: each event it needs calls the hook set for it.
class ScriptedScheduler final : public testing::NullScheduler {
 public:
  std::function<void(const Request&)> on_request;
  std::function<void(GpuId, FunctionId, const Status&)> on_restore;
  std::function<void(GpuId, FunctionId)> on_run;
  std::function<void(GpuId, FunctionId, const Status&)> on_evict;
  std::vector<std::vector<RequestId>> runs_done;  // the batches of OnRunDone, in order
  std::map<RequestId, Status> cancelled;          // OnRequestCancelled

  void OnRequest(const Request& r) override {
    if (on_request) on_request(r);
  }
  void OnRestoreDone(GpuId g, FunctionId f, const Status& s) override {
    if (on_restore) on_restore(g, f, s);
  }
  void OnRunDone(GpuId g, FunctionId f, std::span<const RequestId> batch,
                 const RunResult& result) override {
    EXPECT_TRUE(result.status.ok()) << result.status.ToString();
    runs_done.emplace_back(batch.begin(), batch.end());
    if (on_run) on_run(g, f);
  }
  void OnEvictDone(GpuId g, FunctionId f, const Status& s) override {
    if (on_evict) on_evict(g, f, s);
  }
  void OnRequestCancelled(RequestId r, const Status& s) override { cancelled[r] = s; }
  std::function<void(GpuId, FunctionId, const Status&)> on_died;
  void OnInstanceDied(GpuId g, FunctionId f, std::span<const RequestId>, const Status& s) override {
    if (on_died) on_died(g, f, s);
  }
};

SliceInfo Slice(SliceId id, int gpu, std::uint64_t quota, std::uint64_t used, std::string holder) {
  return SliceInfo{id, gpu, quota, used, std::move(holder)};
}

GpuUsage Usage(int gpu, std::uint64_t reserved, std::uint64_t used, std::size_t slices) {
  return GpuUsage{gpu, 4 * kGiB, reserved, used, slices};
}

// Both requests are in: a GPU (the second acquired on device 0: GPU ids are never reused) gets
// function 0 with 300 MiB (not a multiple of the 128 MiB granularity: its quota is 384 MiB, its
// segment 300 MiB) and function 1 with 512 MiB.
void RestoreBoth(LiveExecutor& e, ScriptedScheduler& s, GpuId& gpu) {
  auto arrived = std::make_shared<int>(0);
  s.on_request = [&e, &gpu, arrived](const Request&) {
    if (++*arrived < 2) return;
    auto first = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    e.ReleaseGpu(*first);
    auto second = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(*second, *first + 1);
    gpu = *second;
    e.Restore(gpu, 0, 300 * kMiB);
    e.Restore(gpu, 1, 512 * kMiB);
  };
}

std::vector<Request> TwoRequests() {
  return {testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 1, 0.0)};
}

// The node's vGPU manager holds the executor's slices: one per restored function on the device
// of its GPU, its quota the reservation rounded up to the granularity, its use the segment, bound
// to the instance; an eviction gives it all back, and after shutdown nothing is left.
TEST(LiveExecutorVGpu, TheManagersSlicesAreTheExecutorsAndComeBackToZero) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), TwoRequests());
  LiveExecutor& e = h.live();
  VGpuManager& vgpus = h.vgpus();
  ScriptedScheduler s;
  GpuId gpu = 0;
  RestoreBoth(e, s, gpu);
  int restored = 0;
  std::vector<SliceInfo> both_resident;
  std::vector<SliceInfo> after_evict;
  GpuUsage usage_both, usage_after_evict;
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (++restored < 2) return;
    both_resident = vgpus.slices();
    usage_both = vgpus.gpu(0).value();
    const RequestId first[] = {0};
    const RequestId second[] = {1};
    e.Run(gpu, 0, first);
    e.Run(gpu, 1, second);
  };
  s.on_run = [&](GpuId, FunctionId function) {
    if (function == 0) e.Evict(gpu, 0, EvictHint::kCheckpoint);
  };
  s.on_evict = [&](GpuId, FunctionId function, const Status& status) {
    EXPECT_EQ(function, 0u);
    EXPECT_TRUE(status.ok()) << status.ToString();
    after_evict = vgpus.slices();
    usage_after_evict = vgpus.gpu(0).value();
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();

  EXPECT_EQ(both_resident,
            (std::vector<SliceInfo>{Slice(1, 0, 384 * kMiB, 300 * kMiB, "small#1"),
                                    Slice(2, 0, 512 * kMiB, 512 * kMiB, "large#2")}));
  EXPECT_EQ(usage_both, Usage(0, 896 * kMiB, 812 * kMiB, 2));
  EXPECT_EQ(after_evict, (std::vector<SliceInfo>{Slice(2, 0, 512 * kMiB, 512 * kMiB, "large#2")}));
  EXPECT_EQ(usage_after_evict, Usage(0, 512 * kMiB, 512 * kMiB, 1));
  // Function 1 stays resident to the end of the run; device 1 was never used.
  EXPECT_EQ(vgpus.slices(), after_evict);
  EXPECT_EQ(vgpus.gpu(1).value(), Usage(1, 0, 0, 0));

  h.Drain();
  EXPECT_TRUE(vgpus.slices().empty());
  EXPECT_EQ(vgpus.gpu(0).value(), Usage(0, 0, 0, 0));
  EXPECT_EQ(vgpus.gpu(1).value(), Usage(1, 0, 0, 0));
}

// Resize goes through the manager: a growth sets the slice's quota (its segment stays), and one
// that fits the scheduler's reservations in bytes but not the quotas rounded up to the granularity
// is refused as a violation naming Resize, and changes nothing.
TEST(LiveExecutorVGpu, AResizeThatDoesNotFitTheGpuIsRefusedAndLeaksNothing) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), TwoRequests());
  LiveExecutor& e = h.live();
  VGpuManager& vgpus = h.vgpus();
  ScriptedScheduler s;
  GpuId gpu = 0;
  RestoreBoth(e, s, gpu);
  int restored = 0;
  std::vector<SliceInfo> grown;
  std::vector<SliceInfo> refused;
  GpuUsage usage_grown, usage_refused;
  double reserved_grown = 0, reserved_refused = 0;
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (++restored < 2) return;
    EXPECT_TRUE(e.Resize(gpu, 1, 1000 * kMiB));  // quota 1 GiB
    EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
    grown = vgpus.slices();
    usage_grown = vgpus.gpu(0).value();
    // The meter's figures at one instant: any change after it would alter them.
    const TimePoint instant = e.Now();
    reserved_grown = h.meter().Totals(instant).reserved_byte_seconds;
    // 300 MiB + 3796 MiB is the GPU's 4 GiB; 384 MiB + 3840 MiB is more.
    EXPECT_FALSE(e.Resize(gpu, 1, 4 * kGiB - 300 * kMiB));
    refused = vgpus.slices();
    usage_refused = vgpus.gpu(0).value();
    reserved_refused = h.meter().Totals(instant).reserved_byte_seconds;
  };
  const Status ran = h.Run(s);
  EXPECT_EQ(ran.code(), StatusCode::kInternal) << ran.ToString();
  EXPECT_NE(ran.message().find("Resize: 'large'"), std::string::npos) << ran.ToString();
  EXPECT_NE(ran.message().find("cannot grow"), std::string::npos) << ran.ToString();

  EXPECT_EQ(grown, (std::vector<SliceInfo>{Slice(1, 0, 384 * kMiB, 300 * kMiB, "small#1"),
                                           Slice(2, 0, 1 * kGiB, 512 * kMiB, "large#2")}));
  EXPECT_EQ(usage_grown, Usage(0, 384 * kMiB + kGiB, 812 * kMiB, 2));
  EXPECT_EQ(refused, grown);
  EXPECT_EQ(usage_refused, usage_grown);
  EXPECT_EQ(reserved_refused, reserved_grown);  // the meter saw no change

  h.Drain();
  EXPECT_TRUE(vgpus.slices().empty());
  EXPECT_EQ(vgpus.gpu(0).value(), Usage(0, 0, 0, 0));
}

// The manager enforces the quota of an executor's slice: an allocation beyond what is left of it
// fails, names the instance, and changes nothing; one within it is charged and credited back.
TEST(LiveExecutorVGpu, AnAllocationBeyondASlicesQuotaFails) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), TwoRequests());
  LiveExecutor& e = h.live();
  VGpuManager& vgpus = h.vgpus();
  ScriptedScheduler s;
  GpuId gpu = 0;
  RestoreBoth(e, s, gpu);
  int restored = 0;
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (++restored < 2) return;
    auto slice = vgpus.FindByFunction("small#1");
    ASSERT_TRUE(slice.ok()) << slice.status().ToString();
    const std::vector<SliceInfo> before = vgpus.slices();
    auto beyond = vgpus.Allocate(*slice, 84 * kMiB + 1);  // 384 MiB quota, 300 MiB in use
    EXPECT_EQ(beyond.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(beyond.status().message().find("small#1"), std::string::npos);
    EXPECT_EQ(vgpus.slices(), before);
    {
      auto within = vgpus.Allocate(*slice, 84 * kMiB);
      ASSERT_TRUE(within.ok()) << within.status().ToString();
      EXPECT_EQ(vgpus.slice(*slice)->used_bytes, 384 * kMiB);
    }
    EXPECT_EQ(vgpus.slices(), before);
  };
  const Status ran = h.Run(s);
  // The requests were never run: the harness reports them unanswered, and nothing else.
  EXPECT_EQ(ran.code(), StatusCode::kInternal) << ran.ToString();
  EXPECT_NE(ran.message().find("2 requests unanswered"), std::string::npos) << ran.ToString();
  EXPECT_EQ(restored, 2);
  h.Drain();
  EXPECT_TRUE(vgpus.slices().empty());
}

// A request cancelled before it starts (its client left, or its latest start passed) is answered
// at once with the given status and never runs; the scheduler is told before Cancel returns, and
// a request running or answered cannot be cancelled. Each request is answered exactly once.
TEST(LiveExecutorCancel, ACancelledRequestIsAnsweredOnceNeverRunsAndTheSchedulerIsTold) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 0.0),
           testing::ContractRequest(2, 0, 0.0)});
  LiveExecutor& e = h.live();
  ScriptedScheduler s;
  GpuId gpu = 0;
  int arrived = 0;
  bool first_cancel = false;
  bool second_cancel = true;
  bool told_at_once = false;
  s.on_request = [&](const Request&) {
    if (++arrived < 3) return;
    // Not from inside a callback: the owner cancels on an event of its own.
    h.node().Post([&] {
      first_cancel = e.Cancel(0, DeadlineExceeded("late"));
      told_at_once = s.cancelled.contains(0);
      second_cancel = e.Cancel(0, DeadlineExceeded("late again"));
      EXPECT_TRUE(e.Cancel(2, Cancelled("gone")));
      auto acquired = e.AcquireGpu(0, Duration::zero());
      ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
      gpu = *acquired;
      e.Restore(gpu, 0, 300 * kMiB);
    });
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {1};
    e.Run(gpu, 0, batch);
  };
  std::optional<bool> cancel_after_run;
  s.on_run = [&](GpuId, FunctionId) {
    h.node().Post([&] { cancel_after_run = e.Cancel(1, Cancelled("answered already")); });
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  // The run may end the harness's run before the cancel posted after it is handled.
  ASSERT_TRUE(h.RunUntil([&] { return cancel_after_run.has_value(); }).ok());
  EXPECT_TRUE(first_cancel);
  EXPECT_TRUE(told_at_once);
  EXPECT_FALSE(second_cancel);
  EXPECT_FALSE(*cancel_after_run);
  EXPECT_EQ(s.runs_done, (std::vector<std::vector<RequestId>>{{1}}));
  ASSERT_EQ(s.cancelled.size(), 2u);
  EXPECT_EQ(s.cancelled.at(0).message(), "late");
  EXPECT_EQ(s.cancelled.at(2).code(), StatusCode::kCancelled);
  EXPECT_EQ(h.host().answered, (std::map<RequestId, int>{{1, 1}}));
  ASSERT_EQ(h.host().failed.size(), 2u);
  EXPECT_EQ(h.host().failed.at(0).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.host().failed.at(0).message(), "late");
  EXPECT_EQ(h.host().failed.at(2).code(), StatusCode::kCancelled);
  const MeterTotals totals = h.meter().Totals(e.Now());
  EXPECT_EQ(totals.requests, 3u);
  EXPECT_EQ(totals.failed, 2u);
  EXPECT_EQ(totals.never_ran, 2u);
  EXPECT_EQ(e.unanswered(), 0u);
}

// Prepare starts an instance in host memory ahead of need: it ends idle, and the first restore
// binds it (a copy) instead of starting another process.
TEST(LiveExecutorPrepare, APreparedInstanceIsIdleAndTheFirstRestoreBindsIt) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0)});
  LiveExecutor& e = h.live();
  std::optional<Status> prepared;
  e.Prepare(0, [&](Status status) { prepared = status; });
  EXPECT_FALSE(prepared.has_value());  // never inside the call
  ASSERT_TRUE(h.RunUntil([&] { return prepared.has_value(); }).ok());
  ASSERT_TRUE(prepared->ok()) << prepared->ToString();
  EXPECT_EQ(e.Instances(0).idle, 1);
  EXPECT_EQ(e.Instances(0).bound, 0);
  EXPECT_EQ(h.host().started, 1);

  ScriptedScheduler s;
  GpuId gpu = 0;
  s.on_request = [&](const Request&) {
    auto acquired = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
    gpu = *acquired;
    e.Restore(gpu, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {0};
    e.Run(gpu, 0, batch);
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(h.host().answered, (std::map<RequestId, int>{{0, 1}}));
  EXPECT_EQ(h.host().started, 1);
}

// Preparing a function whose instances die at start reports the failure through the callback.
TEST(LiveExecutorPrepare, AFailedStartIsReported) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), {});
  h.host().crash_at_start = true;
  std::optional<Status> prepared;
  h.live().Prepare(0, [&](Status status) { prepared = status; });
  ASSERT_TRUE(h.RunUntil([&] { return prepared.has_value(); }).ok());
  EXPECT_EQ(prepared->code(), StatusCode::kUnavailable) << prepared->ToString();
  EXPECT_EQ(h.live().Instances(0).idle, 0);
}

// A function kept cold keeps no idle instance: the one it has stops at once, as does the next one
// it prepares, and its records go with it when it is removed.
TEST(LiveExecutorKeptWarm, AColdFunctionsIdleInstancesStopAtOnce) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), {});
  LiveExecutor& e = h.live();
  std::optional<Status> prepared;
  e.Prepare(0, [&](Status status) { prepared = status; });
  ASSERT_TRUE(h.RunUntil([&] { return prepared.has_value(); }).ok());
  ASSERT_TRUE(prepared->ok()) << prepared->ToString();
  ASSERT_EQ(e.Instances(0).idle, 1);
  const std::size_t records = e.functions_held();

  e.SetKeptWarm(0, false);
  EXPECT_EQ(e.Instances(0).idle, 0);  // stopping
  EXPECT_EQ(e.functions_held(), records + 1);
  ASSERT_TRUE(h.RunUntil([&] {
                 return h.node().snapshots().Find("instance-1").status().code() ==
                        StatusCode::kNotFound;
               }).ok());
  prepared.reset();
  e.Prepare(0, [&](Status status) { prepared = status; });
  ASSERT_TRUE(h.RunUntil([&] { return prepared.has_value(); }).ok());
  ASSERT_TRUE(prepared->ok()) << prepared->ToString();
  EXPECT_EQ(e.Instances(0).idle, 0);  // it started, and stopped once idle
  EXPECT_EQ(h.host().started, 2);

  // Warm again: the next idle instance stays.
  e.SetKeptWarm(0, true);
  EXPECT_EQ(e.functions_held(), records);
  prepared.reset();
  e.Prepare(0, [&](Status status) { prepared = status; });
  ASSERT_TRUE(h.RunUntil([&] { return prepared.has_value(); }).ok());
  EXPECT_EQ(e.Instances(0).idle, 1);
}

// A new instance whose image finds the snapshot pool full while another instance is on its way
// out waits for that one's snapshot instead of failing; with nothing on its way out, it fails.
TEST(LiveExecutorKeptWarm, ANewInstanceWaitsForTheSnapshotOfOneStopping) {
  LiveHarness h;
  // Room for one image: the functions' 100 MB and 200 MB do not fit together.
  h.configure = [](LiveNodeOptions& options) { options.snapshot_pool_bytes = 256 * kMiB; };
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), {});
  LiveExecutor& e = h.live();
  std::optional<Status> first;
  e.Prepare(0, [&](Status status) { first = status; });
  ASSERT_TRUE(h.RunUntil([&] { return first.has_value(); }).ok());
  ASSERT_TRUE(first->ok()) << first->ToString();

  h.host().hold_stops = true;  // the cold function's instance is slow to end
  e.SetKeptWarm(0, false);
  std::optional<Status> second;
  e.Prepare(1, [&](Status status) { second = status; });
  ASSERT_TRUE(h.RunUntil([&] { return e.waiting_for_pool() == 1; }).ok());
  EXPECT_FALSE(second.has_value());
  h.host().ReleaseStops();
  ASSERT_TRUE(h.RunUntil([&] { return second.has_value(); }).ok());
  ASSERT_TRUE(second->ok()) << second->ToString();
  EXPECT_EQ(e.Instances(1).idle, 1);
  EXPECT_EQ(e.waiting_for_pool(), 0u);

  // Nothing on its way out: the pool is full, and the start fails with the reason.
  std::optional<Status> third;
  e.Prepare(0, [&](Status status) { third = status; });
  ASSERT_TRUE(h.RunUntil([&] { return third.has_value(); }).ok());
  EXPECT_EQ(third->code(), StatusCode::kResourceExhausted) << third->ToString();
}

// A function switched by the driver's process checkpoint API (a scripted one; the node's GPUs are
// emulated, which the test's switches take as CUDA GPUs): its instance starts on its first slice,
// with no control channel, and is resident once ready; nothing prepares it ahead; an eviction
// locks and checkpoints its pid, and a restore onto the other GPU brings it back there (the pair
// of GPUs named), with no second process.
class LiveExecutorCheckpoint : public ::testing::Test {
 protected:
  void Build(std::vector<Request> requests) {
    auto api = std::make_shared<testing::FakeCheckpointApi>();
    api_ = api.get();
    h_.configure_parts = [api](LiveNodeParts& parts) {
      parts.checkpoint_api = api;
      parts.switches = [](SwitchContext context,
                          SwitchTarget target) -> Result<std::shared_ptr<SwitchDriver>> {
        if (target.mechanism != SwitchMechanism::kCheckpoint) {
          return CreateSwitchDriver(context, std::move(target));
        }
        return std::shared_ptr<SwitchDriver>(CheckpointApiSwitch::Create(
            {context.loop, *context.driver_calls, *target.checkpoint_api, *target.clock},
            std::move(target.name), static_cast<int>(target.pid), {.accept_emulated_gpus = true}));
      };
    };
    h_.Build(testing::ContractGpu(), testing::ContractFunctions(), std::move(requests));
    h_.live().SetSwitchMechanism(0, SwitchMechanism::kCheckpoint);
  }
  static GpuUuidBytes UuidOf(const Device& device) {
    auto uuid = ParseGpuUuid(device.info().uuid);
    EXPECT_TRUE(uuid.ok()) << uuid.status().ToString();
    return uuid.ok() ? uuid->bytes : GpuUuidBytes{};
  }

  LiveHarness h_;
  testing::FakeCheckpointApi* api_ = nullptr;
};

TEST_F(LiveExecutorCheckpoint, AnInstanceStartsOnItsSliceAndTheDriverMovesItToAnotherGpu) {
  Build({testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 10.0)});
  LiveExecutor& e = h_.live();
  EXPECT_FALSE(e.PreparesAhead(0));
  EXPECT_TRUE(e.PreparesAhead(1));  // a shim function on emulated GPUs
  std::optional<Status> prepared;
  e.Prepare(0, [&](Status status) { prepared = status; });
  ASSERT_TRUE(h_.RunUntil([&] { return prepared.has_value(); }).ok());
  EXPECT_EQ(prepared->code(), StatusCode::kFailedPrecondition) << prepared->ToString();
  EXPECT_EQ(h_.host().started, 0);

  ScriptedScheduler s;
  std::vector<GpuId> gpus;
  RequestId pending = 0;
  s.on_request = [&](const Request& r) {
    pending = r.id;
    auto acquired = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
    gpus.push_back(*acquired);
    e.Restore(*acquired, 0, 300 * kMiB);
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> charged_and_allocated;
  s.on_restore = [&](GpuId gpu, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    // The slice is the node's accounting of what the process holds: charged in the manager,
    // with no memory of the device's behind it.
    const int device = static_cast<int>(gpus.size()) - 1;
    auto usage = h_.vgpus().gpu(device);
    ASSERT_TRUE(usage.ok()) << usage.status().ToString();
    charged_and_allocated.emplace_back(usage->used_bytes,
                                       h_.node().inventory().devices()[device]->allocated_bytes());
    const RequestId batch[] = {pending};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId gpu, FunctionId) {
    if (gpus.size() == 1) {
      EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    }
  };
  std::optional<Status> evicted;
  s.on_evict = [&](GpuId, FunctionId, const Status& status) { evicted = status; };
  const Status ran = h_.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_TRUE(evicted.has_value());
  EXPECT_TRUE(evicted->ok()) << evicted->ToString();
  EXPECT_EQ(h_.host().answered, (std::map<RequestId, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(h_.host().started, 1);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(api_->call_names(),
            (std::vector<std::string>{"Lock", "Checkpoint", "Restore", "Unlock"}));
  const int pid = static_cast<int>(testing::InProcessHost::kStandInPidBase + 1);
  for (const auto& call : api_->calls()) EXPECT_EQ(call.pid, pid) << call.name;
  const auto restore = api_->calls()[2];
  ASSERT_EQ(restore.pairs.size(), 1u);
  const auto devices = h_.node().inventory().devices();
  EXPECT_EQ(restore.pairs[0].from, UuidOf(*devices[0]));
  EXPECT_EQ(restore.pairs[0].to, UuidOf(*devices[1]));
  EXPECT_EQ(api_->state(pid), ProcessCheckpointState::kRunning);
  ASSERT_EQ(charged_and_allocated.size(), 2u);
  for (const auto& [charged, allocated] : charged_and_allocated) {
    EXPECT_GE(charged, 300 * kMiB);
    EXPECT_EQ(allocated, 0u);
  }
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
}

// A shim instance that starts on its first slice (as every instance on CUDA GPUs does) maps the
// slice itself, loads its model there and is resident once ready: its first restore takes no copy
// over the link, where one that starts in host staging takes at least the model's bytes over it.
// Evicted, either is copied into its snapshot, and its next restore copies it back; one process.
Duration FirstRestoreOf(bool start_on_first_slice) {
  LiveHarness h;
  h.configure = [start_on_first_slice](LiveNodeOptions& options) {
    options.executor.start_on_first_slice = start_on_first_slice;
  };
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 10.0)});
  LiveExecutor& e = h.live();
  EXPECT_EQ(e.PreparesAhead(0), !start_on_first_slice);
  ScriptedScheduler s;
  GpuId gpu = 0;
  RequestId pending = 0;
  TimePoint asked{};
  std::optional<Duration> first;
  s.on_request = [&](const Request& r) {
    pending = r.id;
    if (r.id == 0) {
      auto acquired = e.AcquireGpu(0, Duration::zero());
      ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
      gpu = *acquired;
    }
    asked = e.Now();
    e.Restore(gpu, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (!first) first = e.Now() - asked;
    const RequestId batch[] = {pending};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId, FunctionId) {
    if (pending == 0) {
      EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    }
  };
  const Status ran = h.Run(s);
  EXPECT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(h.host().answered, (std::map<RequestId, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(h.host().started, 1);
  const MeterTotals totals = h.meter().Totals(e.Now());
  EXPECT_EQ(totals.checkpoints, 1u);
  EXPECT_GE(totals.checkpoint_bytes, testing::ContractFunctions()[0].model_bytes);
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
  return first.value_or(Duration::max());
}

// An instance that keeps its GPU (as every CUDA instance does) is not restored onto another: a
// restore there starts a new process, and the idle one away is stopped.
TEST(LiveExecutorStartOnSlice, AnInstanceThatKeepsItsGpuIsReplacedOnAnother) {
  LiveHarness h;
  h.configure = [](LiveNodeOptions& options) {
    options.executor.start_on_first_slice = true;
    options.executor.keep_instances_on_their_gpu = true;
  };
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 10.0)});
  LiveExecutor& e = h.live();
  ScriptedScheduler s;
  std::vector<GpuId> gpus;
  RequestId pending = 0;
  s.on_request = [&](const Request& r) {
    pending = r.id;
    auto acquired = e.AcquireGpu(0, Duration::zero());  // the first stays held: another device
    ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
    gpus.push_back(*acquired);
    EXPECT_EQ(e.Instances(0).idle, r.id == 0 ? 0 : 1);
    e.Restore(*acquired, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId gpu, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {pending};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId gpu, FunctionId) {
    if (pending == 0) {
      EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    }
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(h.host().answered, (std::map<RequestId, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(h.host().started, 2);
  const InstanceView after = e.Instances(0);
  EXPECT_EQ(after.idle + after.bound, 1);  // the one away was stopped
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
}

// The same when the instance away is still detaching (an eviction that discards counts it idle at
// once): it is not bound, and it stops once its detach ends, so max_instances holds.
TEST(LiveExecutorStartOnSlice, AnInstanceStillDetachingAwayStopsOnceDetached) {
  LiveHarness h;
  h.configure = [](LiveNodeOptions& options) {
    options.executor.start_on_first_slice = true;
    options.executor.keep_instances_on_their_gpu = true;
  };
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0)});
  LiveExecutor& e = h.live();
  ScriptedScheduler s;
  std::vector<GpuId> gpus;
  int restored = 0;
  const auto restore_on_a_new_gpu = [&] {
    auto acquired = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
    gpus.push_back(*acquired);
    e.Restore(*acquired, 0, 300 * kMiB);
  };
  s.on_request = [&](const Request&) { restore_on_a_new_gpu(); };
  s.on_restore = [&](GpuId gpu, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (++restored == 1) {
      const RequestId batch[] = {0};
      e.Run(gpu, 0, batch);
    }
  };
  s.on_run = [&](GpuId gpu, FunctionId) {
    EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kDiscardIfClean), EvictOutcome::kDiscarded);
    EXPECT_EQ(e.Instances(0).idle, 1);  // detaching, counted idle at once
    restore_on_a_new_gpu();
    EXPECT_EQ(e.Instances(0).idle, 0);  // not bound, and no longer counted
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(restored, 2);
  EXPECT_EQ(h.host().started, 2);
  const InstanceView after = e.Instances(0);
  EXPECT_EQ(after.bound, 1);
  EXPECT_EQ(after.idle, 0);  // the one away stopped after its detach
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
}

TEST(LiveExecutorStartOnSlice, AShimInstanceLoadsOnItsSliceWithNoCopyAndSwitchesAfterwards) {
  const GpuType gpu = testing::ContractGpu();
  const auto copy = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(
      static_cast<double>(testing::ContractFunctions()[0].model_bytes) / gpu.h2d_bytes_per_second));
  ASSERT_GT(copy, Duration::zero());
  EXPECT_LT(FirstRestoreOf(true), copy);
  EXPECT_GE(FirstRestoreOf(false), copy);
}

// A process that dies while the driver checkpoints it: the eviction ends (its slice given back),
// the instance is lost, and the next restore starts another process that answers.
TEST_F(LiveExecutorCheckpoint, AProcessThatDiesDuringItsCheckpointIsReplacedByTheNextRestore) {
  Build({testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 10.0)});
  LiveExecutor& e = h_.live();
  ScriptedScheduler s;
  GpuId gpu = 0;
  RequestId pending = 0;
  std::optional<Status> evicted;
  s.on_request = [&](const Request& r) {
    pending = r.id;
    if (r.id == 0) {
      auto acquired = e.AcquireGpu(0, Duration::zero());
      ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
      gpu = *acquired;
    }
    e.Restore(gpu, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {pending};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId, FunctionId) {
    if (pending != 0) return;
    // The checkpoint's first driver call waits in the driver while the process goes.
    api_->HoldNext("Lock");
    EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    h_.host().Stop(1);
  };
  s.on_evict = [&](GpuId, FunctionId, const Status& status) { evicted = status; };
  // Releases the driver once the process has ended (its exit reaches the loop on its own).
  std::thread driver([this] {
    EXPECT_TRUE(api_->WaitUntilHeld(std::chrono::seconds(60)));
    EXPECT_TRUE(h_.host().WaitExited(std::chrono::seconds(60)));
    api_->Release();
  });
  const Status ran = h_.Run(s);
  driver.join();
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(h_.host().answered, (std::map<RequestId, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(h_.host().started, 2);
  EXPECT_EQ(e.Instances(0).idle + e.Instances(0).bound, 1);
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
}

// A restore the driver fails (out of memory, the process left checkpointed) loses the instance:
// its process is stopped, the scheduler hears that it died, and its next restore starts another.
TEST_F(LiveExecutorCheckpoint, AFailedRestoreStopsTheInstanceAndTheNextRestoreStartsAnother) {
  Build({testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 10.0)});
  LiveExecutor& e = h_.live();
  ScriptedScheduler s;
  GpuId gpu = 0;
  RequestId pending = 0;
  int died = 0;
  s.on_request = [&](const Request& r) {
    pending = r.id;
    if (r.id == 0) {
      auto acquired = e.AcquireGpu(0, Duration::zero());
      ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
      gpu = *acquired;
    } else {
      api_->FailNext("Restore",
                     ResourceExhausted("cuCheckpointProcessRestore: CUDA_ERROR_OUT_OF_MEMORY"),
                     ProcessCheckpointState::kCheckpointed);
    }
    e.Restore(gpu, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {pending};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId, FunctionId) {
    if (pending == 0) {
      EXPECT_EQ(e.Evict(gpu, 0, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    }
  };
  s.on_died = [&](GpuId, FunctionId, const Status& status) {
    ++died;
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_NE(status.message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
        << status.ToString();
    e.Restore(gpu, 0, 300 * kMiB);  // a new instance
  };
  const Status ran = h_.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(died, 1);
  EXPECT_EQ(h_.host().answered, (std::map<RequestId, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(h_.host().started, 2);
  EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
}

// Every policy, unchanged, schedules real (in-process) instances on the live executor: three
// functions in bursts every 100 ms for two seconds on a two-GPU node; every request is answered
// by a run, and no call breaks the contract.
class LivePolicyTest : public ::testing::TestWithParam<std::string_view> {};

TEST_P(LivePolicyTest, AnswersEveryRequestOnTheLiveNode) {
  GpuType gpu = testing::ContractGpu();
  gpu.h2d_bytes_per_second = 4e9;
  std::vector<ResolvedFunction> functions = testing::ContractFunctions();
  functions[0].model_bytes = 20'000'000;
  functions[1].model_bytes = 40'000'000;
  std::vector<Request> requests;
  for (int burst = 0; burst < 20; ++burst) {
    for (int k = 0; k < 1 + burst % 3; ++k) {
      requests.push_back(testing::ContractRequest(
          requests.size(), static_cast<FunctionId>((burst + k) % 2), 0.1 * burst));
    }
  }
  LiveHarness h;
  int observed = 0;
  h.configure = [&](LiveNodeOptions& options) {
    options.executor.on_run_observed = [&](FunctionId function, int batch, Duration elapsed, bool) {
      EXPECT_LT(function, 2u);
      EXPECT_GE(batch, 1);
      // Never shorter than the kernels the instance ran for it.
      EXPECT_GE(elapsed, testing::ContractFunctions()[function].ExecLatency(batch));
      ++observed;
    };
  };
  h.Build(gpu, functions, requests);
  // A second window, from 1 s on.
  const std::vector<GpuType> types = {h.node().gpu_type()};
  Meter window_meter(types, AtSeconds(1.0));
  h.live().AddMeter(window_meter);
  PolicyOptions options;
  options.keep_alive = std::chrono::milliseconds(500);
  options.pool_idle = std::chrono::milliseconds(500);
  options.instance_start = Duration::zero();  // the node's GPUs are there
  auto policy = MakePolicy(GetParam(), {&h.functions(), &h.executor()}, options);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const Status ran = h.Run(**policy);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_TRUE(h.host().failed.empty());
  for (const auto& [request, count] : h.host().answered) EXPECT_EQ(count, 1) << request;
  EXPECT_EQ(h.host().answered.size(), requests.size());
  const MeterTotals totals = h.meter().Totals(h.live().Now());
  EXPECT_EQ(totals.requests, requests.size());
  EXPECT_EQ(totals.failed, 0u);
  EXPECT_GT(totals.gpu_seconds, 0);
  EXPECT_GE(totals.restores, 2u);
  EXPECT_EQ((*policy)->RequestsHeld(), 0u);
  EXPECT_GT(observed, 0);
  // The second window counts the requests that arrived from 1 s on.
  const MeterTotals window = window_meter.Totals(h.live().Now());
  EXPECT_GT(window.requests, 0u);
  EXPECT_LT(window.requests, totals.requests);
  h.Drain();  // every slice of the node's vGPU manager is given back
  EXPECT_TRUE(h.vgpus().slices().empty());
}

// A run that hangs is stopped at its function's run timeout: its instance dies, the policy gets
// the request back and runs it again on a new instance; it is answered once.
TEST_P(LivePolicyTest, AHungRunIsStoppedAndItsRequestRetriedNeverLostNorAnsweredTwice) {
  GpuType gpu = testing::ContractGpu();
  gpu.h2d_bytes_per_second = 4e9;
  std::vector<ResolvedFunction> functions = testing::ContractFunctions();
  functions[0].model_bytes = 20'000'000;
  functions[0].slo = std::chrono::seconds(5);
  std::vector<Request> requests = {testing::ContractRequest(0, 0, 0.0)};
  requests[0].deadline = requests[0].arrival + std::chrono::seconds(5);
  LiveHarness h;
  h.Build(gpu, functions, requests);
  h.live().SetRunTimeout(0, std::chrono::milliseconds(300));
  h.host().hang_runs = 1;
  PolicyOptions options;
  options.keep_alive = std::chrono::milliseconds(500);
  options.pool_idle = std::chrono::milliseconds(500);
  options.instance_start = Duration::zero();
  auto policy = MakePolicy(GetParam(), {&h.functions(), &h.executor()}, options);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const Status ran = h.Run(**policy);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  // Answered exactly once: by the retried run, or with an error if the policy gave up.
  const int answered = h.host().answered.contains(0) ? h.host().answered.at(0) : 0;
  EXPECT_EQ(answered + static_cast<int>(h.host().failed.size()), 1);
  EXPECT_LE(answered, 1);
  EXPECT_EQ(h.live().unanswered(), 0u);
  EXPECT_EQ((*policy)->RequestsHeld(), 0u);
  h.Drain();
  EXPECT_TRUE(h.vgpus().slices().empty());
}

// A function whose program dies at start: the node stops starting it after a few tries in a row,
// its restores fail, and the policy answers its requests with an error: none waits forever.
TEST_P(LivePolicyTest, AFunctionThatDiesAtStartHasItsRequestsAnsweredWithAnError) {
  std::vector<Request> requests = {testing::ContractRequest(0, 0, 0.0),
                                   testing::ContractRequest(1, 0, 0.0)};
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(), requests);
  h.host().crash_at_start = true;
  PolicyOptions options;
  options.instance_start = Duration::zero();
  options.keep_alive = std::chrono::milliseconds(500);
  options.pool_idle = std::chrono::milliseconds(500);
  auto policy = MakePolicy(GetParam(), {&h.functions(), &h.executor()}, options);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const Status ran = h.Run(**policy);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(h.host().failed.size(), 2u);
  EXPECT_TRUE(h.host().answered.empty());
  EXPECT_EQ((*policy)->RequestsHeld(), 0u);
  h.Drain();
  EXPECT_TRUE(h.vgpus().slices().empty());
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, LivePolicyTest, ::testing::ValuesIn(PolicyNames()),
                         testing::PolicyParamName);

}  // namespace
}  // namespace gshare
