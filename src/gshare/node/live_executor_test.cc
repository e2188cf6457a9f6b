// The live executor passes the executor contract (sched/testing/executor_contract.h) on emulated
// GPUs, with its instances hosted in this process: each instance is a thread that links the
// function library exactly as a function process does, and runs its kernels for the profile's
// execution time.
#include "gshare/node/live_executor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "gshare/device/emulated/emulated_device.h"
#include "gshare/device/emulated/emulated_host_memory.h"
#include "gshare/fn/runtime.h"
#include "gshare/sched/policy_registry.h"
#include "gshare/sched/testing/executor_contract.h"
#include "gshare/sched/testing/null_scheduler.h"
#include "gshare/sched/testing/policy_param_name.h"

namespace gshare {
namespace {

// Instances as threads of this process, speaking the control channel like a function process.
class InProcessHost final : public InstanceHost {
 public:
  InProcessHost(boost::asio::io_context& loop, const FunctionRegistry& functions)
      : loop_(loop), functions_(functions) {}
  ~InProcessHost() override {
    for (auto& [id, hosted] : hosted_) Halt(*hosted);
    for (auto& [id, hosted] : hosted_) hosted->thread.join();
  }

  Status Start(InstanceLaunch launch) override {
    ++started;
    if (crash_at_start) {  // the process dies before it says hello
      Post([exit = launch.on_exit] { exit(Unavailable("exited with status 1")); });
      return Status::Ok();
    }
    auto hosted = std::make_unique<Hosted>();
    Hosted& h = *hosted;
    h.spec = &functions_[launch.function];
    h.thread = std::thread([this, &h, launch = std::move(launch)]() mutable { Serve(h, launch); });
    hosted_[launch.instance] = std::move(hosted);
    return Status::Ok();
  }
  void Infer(InstanceId instance, std::span<const RequestId> batch,
             std::function<void(Status)> done) override {
    Hosted& h = *hosted_.at(instance);
    std::vector<RequestId> requests(batch.begin(), batch.end());
    const bool hang = hang_runs > 0;
    if (hang) --hang_runs;
    // Answers are delivered when the run ends OK; each request must be answered once.
    auto deliver = [this, requests, done = std::move(done)](Status status) {
      if (status.ok()) {
        for (const RequestId request : requests) ++answered[request];
      }
      done(status);
    };
    std::lock_guard lock(h.mutex);
    h.jobs.push_back({static_cast<int>(batch.size()), hang, std::move(deliver)});
    h.changed.notify_all();
  }
  void Fail(RequestId request, const Status& status) override { failed[request] = status; }
  void Stop(InstanceId instance) override {
    auto it = hosted_.find(instance);
    if (it != hosted_.end()) Halt(*it->second);
  }

  std::map<RequestId, Status> failed;
  std::map<RequestId, int> answered;
  int started = 0;    // instances started
  int hang_runs = 0;  // the next runs that never end on their own (the instance must be stopped)
  bool crash_at_start = false;  // every instance dies at once

 private:
  struct Job {
    int batch = 0;
    bool hang = false;
    std::function<void(Status)> done;
  };
  struct Hosted {
    const ResolvedFunction* spec = nullptr;
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Job> jobs;
    bool stop = false;
    std::thread thread;
  };

  static void Halt(Hosted& h) {
    std::lock_guard lock(h.mutex);
    h.stop = true;
    h.changed.notify_all();
  }

  void Post(std::function<void()> f) { boost::asio::post(loop_, std::move(f)); }

  void Serve(Hosted& h, InstanceLaunch& launch) {
    auto runtime =
        fn::FunctionRuntime::Connect(std::move(launch.control), launch.device_base,
                                     launch.device_reserve_bytes, {.exit_when_node_gone = false});
    if (!runtime.ok()) {
      Post([exit = launch.on_exit, status = runtime.status()] { exit(status); });
      return;
    }
    auto weights = (*runtime)->Allocate(h.spec->model_bytes, "weights");
    if (weights.ok()) {
      (void)(*runtime)->Launch([&] { std::memset(weights->data(), 0x5a, weights->size_bytes()); });
      (*runtime)->EndWork();
      (void)(*runtime)->memory().Freeze();
      Post(launch.on_ready);
    }
    for (;;) {
      Job job;
      {
        std::unique_lock lock(h.mutex);
        h.changed.wait(lock, [&] { return h.stop || !h.jobs.empty(); });
        if (h.stop) break;
        job = std::move(h.jobs.front());
        h.jobs.pop_front();
      }
      if (job.hang) {  // stuck until the node stops the instance: no answer
        std::unique_lock lock(h.mutex);
        h.changed.wait(lock, [&] { return h.stop; });
        break;
      }
      // A kernel as long as the profile says; the GPU's compute engine is taken in turns.
      const Duration exec = h.spec->ExecLatency(job.batch);
      const auto start = std::chrono::steady_clock::now();
      Status ran = Status::Ok();
      while (ran.ok() && std::chrono::steady_clock::now() - start < exec) {
        ran = (*runtime)->Launch([] {
          const auto kernel = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - kernel < std::chrono::milliseconds(1)) {
          }
        });
      }
      (*runtime)->EndWork();
      Post([done = std::move(job.done), ran] { done(ran); });
    }
    weights = Status(Cancelled("stopping"));
    runtime = Status(Cancelled("stopping"));  // closes the channel
    Post([exit = launch.on_exit] { exit(Status::Ok()); });
  }

  boost::asio::io_context& loop_;
  const FunctionRegistry& functions_;
  std::map<InstanceId, std::unique_ptr<Hosted>> hosted_;
};

class LiveHarness final : public testing::ExecutorHarness {
 public:
  ~LiveHarness() override { Teardown(); }

  void Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
             std::vector<Request> requests) override {
    Teardown();
    drained_ = false;
    world_ = std::make_unique<World>();
    World& w = *world_;
    for (int i = 0; i < 2; ++i) {
      w.devices.push_back(
          std::move(EmulatedDevice::Create(i, {.name = "",
                                               .memory_bytes = gpu.memory_bytes,
                                               .link_bytes_per_second = gpu.h2d_bytes_per_second,
                                               .prepared_bytes = 256 * kMiB})
                        .value()));
      w.device_pointers.push_back(w.devices.back().get());
    }
    w.staging = std::move(EmulatedDevice::Create(2, {.name = "staging",
                                                     .memory_bytes = 16 * kGiB,
                                                     .link_bytes_per_second = 0,
                                                     .prepared_bytes = 0})
                              .value());
    w.vgpus = std::make_unique<VGpuManager>(w.device_pointers, granularity);
    std::vector<Device*> all = w.device_pointers;
    all.push_back(w.staging.get());
    w.store = std::move(
        SnapshotStore::Create(w.host_memory, {.pool_bytes = kGiB, .chunk_bytes = 8 * kMiB})
            .value());
    w.engine = std::move(RestoreEngine::Create(all, {}, w.clock).value());
    w.functions = FunctionRegistry(std::move(functions));
    w.requests = std::move(requests);
    w.host = std::make_unique<InProcessHost>(w.loop, w.functions);
    LiveExecutorOptions options;
    options.gpu_type = gpu;
    options.distinct_device_ranges = true;
    if (configure) configure(options);
    w.executor =
        std::make_unique<LiveExecutor>(NodeResources{w.loop, w.copies, w.device_pointers, *w.vgpus,
                                                     *w.staging, *w.engine, *w.store},
                                       w.functions, *w.host, options);
  }

  Executor& executor() override { return *world_->executor; }
  LiveExecutor& live() { return *world_->executor; }
  std::function<void(LiveExecutorOptions&)> configure;  // applied by the next Build
  SliceGranularity granularity;                         // of the next Build's vGPU manager
  VGpuManager& vgpus() { return *world_->vgpus; }
  const FunctionRegistry& functions() const { return world_->functions; }
  InProcessHost& host() { return *world_->host; }
  boost::asio::io_context& loop() { return world_->loop; }

  Status Run(Scheduler& scheduler) override {
    World& w = *world_;
    w.executor->set_scheduler(&scheduler);
    std::size_t submitted = 0;
    std::vector<std::unique_ptr<boost::asio::steady_timer>> arrivals;
    for (const Request& request : w.requests) {
      const Duration wait = std::max(Duration::zero(), request.arrival - w.executor->Now());
      arrivals.push_back(std::make_unique<boost::asio::steady_timer>(w.loop, wait));
      arrivals.back()->async_wait([&w, &submitted, request](const boost::system::error_code&) {
        Request live = request;
        live.arrival = w.executor->Now();
        live.deadline = live.arrival + (request.deadline - request.arrival);
        ++submitted;
        w.executor->Submit(live);
      });
    }
    // Runs the loop until every request is in and nothing is in flight; the bound only keeps a
    // broken executor from hanging the test.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (submitted < w.requests.size() || w.executor->Busy()) {
      w.loop.run_one_for(std::chrono::milliseconds(100));
      if (std::chrono::steady_clock::now() > give_up) {
        return DeadlineExceeded("the live executor did not settle in 120 s");
      }
    }
    if (!w.executor->violation().ok()) return w.executor->violation();
    if (w.executor->unanswered() > 0) {
      return Internal(fmt::format("{} requests unanswered", w.executor->unanswered()));
    }
    return Status::Ok();
  }

 private:
  struct World {
    boost::asio::io_context loop;
    boost::asio::thread_pool copies{1};
    SteadyClock clock;
    EmulatedHostMemory host_memory;
    std::vector<std::unique_ptr<EmulatedDevice>> devices;
    std::vector<Device*> device_pointers;
    std::unique_ptr<VGpuManager> vgpus;
    std::unique_ptr<EmulatedDevice> staging;
    std::unique_ptr<SnapshotStore> store;
    std::unique_ptr<RestoreEngine> engine;
    FunctionRegistry functions;
    std::vector<Request> requests;
    std::unique_ptr<InProcessHost> host;
    std::unique_ptr<LiveExecutor> executor;
  };

  void Teardown() {
    if (!world_) return;
    Drain();
    world_->executor.reset();
    world_.reset();
  }

  std::unique_ptr<World> world_;
  bool drained_ = false;

 public:
  // Shuts the executor down and lets everything in flight end; the world stays for inspection.
  void Drain() {
    if (drained_) return;
    drained_ = true;
    World& w = *world_;
    w.executor->Shutdown();
    w.loop.run_for(std::chrono::milliseconds(10));
    w.host.reset();  // joins the instance threads
    w.copies.join();
    w.loop.restart();
    w.loop.poll();
  }
};

TEST(LiveExecutorContract, GpuStartup) {
  LiveHarness h;
  testing::CheckGpuStartup(h);
}
TEST(LiveExecutorContract, RestoreThenRun) {
  LiveHarness h;
  testing::CheckRestoreThenRun(h);
}
TEST(LiveExecutorContract, Evictions) {
  LiveHarness h;
  testing::CheckEvictions(h);
}
TEST(LiveExecutorContract, FailRequestAndViolations) {
  LiveHarness h;
  testing::CheckFailRequestAndViolations(h);
}

// A scheduler scripted by the test: each event it needs calls the hook set for it.
class ScriptedScheduler final : public testing::NullScheduler {
 public:
  std::function<void(const Request&)> on_request;
  std::function<void(GpuId, FunctionId, const Status&)> on_restore;
  std::function<void(GpuId, FunctionId)> on_run;
  std::function<void(GpuId, FunctionId, const Status&)> on_evict;
  std::vector<std::vector<RequestId>> runs_done;  // the batches of OnRunDone, in order

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
    e.Resize(gpu, 1, 1000 * kMiB);  // quota 1 GiB
    EXPECT_TRUE(e.violation().ok()) << e.violation().ToString();
    grown = vgpus.slices();
    usage_grown = vgpus.gpu(0).value();
    // The meter's figures at one instant: any change after it would alter them.
    const TimePoint instant = e.Now();
    reserved_grown = e.meter().Totals(instant).reserved_byte_seconds;
    // 300 MiB + 3796 MiB is the GPU's 4 GiB; 384 MiB + 3840 MiB is more.
    e.Resize(gpu, 1, 4 * kGiB - 300 * kMiB);
    refused = vgpus.slices();
    usage_refused = vgpus.gpu(0).value();
    reserved_refused = e.meter().Totals(instant).reserved_byte_seconds;
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

// A request withdrawn before it starts (its deadline passed, its client left) is answered at once
// with the given status and never runs: a batch holding it runs the others, and a batch of nothing
// else ends at once; the scheduler hears of every request of its batches, and each request is
// answered exactly once.
TEST(LiveExecutorWithdraw, AWithdrawnRequestIsAnsweredOnceAndNeverRuns) {
  LiveHarness h;
  h.Build(testing::ContractGpu(), testing::ContractFunctions(),
          {testing::ContractRequest(0, 0, 0.0), testing::ContractRequest(1, 0, 0.0),
           testing::ContractRequest(2, 0, 0.0)});
  LiveExecutor& e = h.live();
  ScriptedScheduler s;
  GpuId gpu = 0;
  int arrived = 0;
  bool first_withdrawal = false;
  bool second_withdrawal = true;
  s.on_request = [&](const Request&) {
    if (++arrived < 3) return;
    first_withdrawal = e.Withdraw(0, DeadlineExceeded("late"));
    second_withdrawal = e.Withdraw(0, DeadlineExceeded("late again"));
    EXPECT_TRUE(e.Withdraw(2, Cancelled("gone")));
    auto acquired = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
    gpu = *acquired;
    e.Restore(gpu, 0, 300 * kMiB);
  };
  s.on_restore = [&](GpuId, FunctionId, const Status& status) {
    ASSERT_TRUE(status.ok()) << status.ToString();
    const RequestId batch[] = {0, 1};
    e.Run(gpu, 0, batch);
  };
  s.on_run = [&](GpuId, FunctionId) {
    if (s.runs_done.size() != 1) return;
    EXPECT_FALSE(e.Withdraw(1, Cancelled("answered already")));
    const RequestId only_withdrawn[] = {2};
    e.Run(gpu, 0, only_withdrawn);
  };
  const Status ran = h.Run(s);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_TRUE(first_withdrawal);
  EXPECT_FALSE(second_withdrawal);
  EXPECT_EQ(s.runs_done, (std::vector<std::vector<RequestId>>{{0, 1}, {2}}));
  EXPECT_EQ(h.host().answered, (std::map<RequestId, int>{{1, 1}}));
  ASSERT_EQ(h.host().failed.size(), 2u);
  EXPECT_EQ(h.host().failed.at(0).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.host().failed.at(0).message(), "late");
  EXPECT_EQ(h.host().failed.at(2).code(), StatusCode::kCancelled);
  const MeterTotals totals = e.meter().Totals(e.Now());
  EXPECT_EQ(totals.requests, 3u);
  EXPECT_EQ(totals.failed, 2u);
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
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!prepared && std::chrono::steady_clock::now() < give_up) {
    h.loop().run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(prepared.has_value());
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
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!prepared && std::chrono::steady_clock::now() < give_up) {
    h.loop().run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(prepared.has_value());
  EXPECT_EQ(prepared->code(), StatusCode::kUnavailable) << prepared->ToString();
  EXPECT_EQ(h.live().Instances(0).idle, 0);
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
  h.configure = [&](LiveExecutorOptions& options) {
    options.window_start = AtSeconds(1.0);
    options.on_run_observed = [&](FunctionId function, int batch, Duration elapsed, bool) {
      EXPECT_LT(function, 2u);
      EXPECT_GE(batch, 1);
      // Never shorter than the kernels the instance ran for it.
      EXPECT_GE(elapsed, testing::ContractFunctions()[function].ExecLatency(batch));
      ++observed;
    };
  };
  h.Build(gpu, functions, requests);
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
  const MeterTotals totals = h.live().meter().Totals(h.live().Now());
  EXPECT_EQ(totals.requests, requests.size());
  EXPECT_EQ(totals.failed, 0u);
  EXPECT_GT(totals.gpu_seconds, 0);
  EXPECT_GE(totals.restores, 2u);
  EXPECT_EQ((*policy)->RequestsHeld(), 0u);
  EXPECT_GT(observed, 0);
  // The second window counts the requests that arrived from 1 s on.
  const MeterTotals window = h.live().window_meter()->Totals(h.live().Now());
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
  h.configure = [](LiveExecutorOptions& options) {
    options.run_timeouts = {std::chrono::milliseconds(300)};
  };
  h.Build(gpu, functions, requests);
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
