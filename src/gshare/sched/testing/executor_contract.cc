#include "gshare/sched/testing/executor_contract.h"

#include <gtest/gtest.h>

#include <functional>

#include "gshare/sched/testing/null_scheduler.h"

namespace gshare::testing {
namespace {

using std::chrono::milliseconds;

// A scheduler driven by lambdas, which notes whether an event came from inside an action.
class Script : public NullScheduler {
 public:
  explicit Script(Executor& executor) : executor_(executor) {}
  std::string_view name() const override { return "contract"; }

  void OnRequest(const Request& r) override {
    Call([&] {
      if (on_request) on_request(r);
    });
  }
  void OnGpuReady(GpuId g) override {
    ready_at.push_back(executor_.Now());
    Call([&] {
      if (on_ready) on_ready(g);
    });
  }
  void OnRestoreDone(GpuId g, FunctionId f, const Status& s) override {
    restored_at.push_back(executor_.Now());
    restore_status.push_back(s);
    Call([&] {
      if (on_restore) on_restore(g, f);
    });
  }
  void OnRunDone(GpuId g, FunctionId f, std::span<const RequestId> batch,
                 const RunResult& result) override {
    ran.insert(ran.end(), batch.begin(), batch.end());
    run_results.push_back(result);
    Call([&] {
      if (on_run) on_run(g, f);
    });
  }
  void OnEvictDone(GpuId g, FunctionId f, const Status& s) override {
    evicted_at.push_back(executor_.Now());
    Call([&] {
      if (on_evict) on_evict(g, f, s);
    });
  }
  void OnTimer(std::uint64_t token) override {
    Call([&] {
      if (on_timer) on_timer(token);
    });
  }
  void OnRequestCancelled(RequestId r, const Status& s) override {
    cancelled.push_back({r, s, executor_.Now()});
    Call([&] {
      if (on_cancel) on_cancel(r);
    });
  }

  std::function<void(const Request&)> on_request;
  std::function<void(GpuId)> on_ready;
  std::function<void(GpuId, FunctionId)> on_restore;
  std::function<void(GpuId, FunctionId)> on_run;
  std::function<void(GpuId, FunctionId, const Status&)> on_evict;
  std::function<void(std::uint64_t)> on_timer;
  std::function<void(RequestId)> on_cancel;
  struct Cancellation {
    RequestId request;
    Status status;
    TimePoint at;
  };
  std::vector<Cancellation> cancelled;

  std::vector<TimePoint> ready_at;
  std::vector<TimePoint> restored_at;
  std::vector<Status> restore_status;
  std::vector<RequestId> ran;
  std::vector<RunResult> run_results;
  std::vector<TimePoint> evicted_at;
  bool reentered = false;  // an event arrived while a callback was still running

 private:
  template <typename F>
  void Call(F&& f) {
    if (inside_) reentered = true;
    inside_ = true;
    f();
    inside_ = false;
  }
  Executor& executor_;
  bool inside_ = false;
};

}  // namespace

GpuType ContractGpu() {
  GpuType gpu;
  gpu.name = "contract";
  gpu.memory_bytes = 4 * kGiB;
  gpu.h2d_bytes_per_second = 1e9;
  gpu.restore_overhead = milliseconds(1);
  gpu.price_per_hour_usd = 3.6;
  return gpu;
}

std::vector<ResolvedFunction> ContractFunctions() {
  std::vector<ResolvedFunction> functions(2);
  const std::uint64_t models[] = {100'000'000, 200'000'000};
  const std::uint64_t memory[] = {256 * kMiB, 512 * kMiB};
  for (std::size_t i = 0; i < 2; ++i) {
    ResolvedFunction& f = functions[i];
    f.name = i == 0 ? "small" : "large";
    f.tenant = "t";
    f.model_bytes = models[i];
    f.gpu_memory_bytes = memory[i];
    const auto one = milliseconds(10 * static_cast<int>(i + 1));
    f.exec_by_batch = {one, one * 3 / 2};
    f.max_batch = 2;
    f.slo = milliseconds(500);
  }
  return functions;
}

Request ContractRequest(RequestId id, FunctionId function, double seconds) {
  Request r;
  r.id = id;
  r.function = function;
  r.arrival = AtSeconds(seconds);
  r.deadline = r.arrival + milliseconds(500);
  return r;
}

void CheckGpuStartup(ExecutorHarness& harness) {
  harness.Build(ContractGpu(), ContractFunctions(), {ContractRequest(0, 0, 1.0)});
  Executor& e = harness.executor();
  Script s(e);
  GpuId slow = 0;
  s.on_request = [&](const Request&) {
    auto fast = e.AcquireGpu(0, Duration::zero());
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    EXPECT_EQ(e.TypeOf(*fast).memory_bytes, 4 * kGiB);
    e.Restore(*fast, 0, 256 * kMiB);  // usable at once
    auto started = e.AcquireGpu(0, milliseconds(500));
    ASSERT_TRUE(started.ok());
    slow = *started;
  };
  s.on_ready = [&](GpuId g) {
    EXPECT_EQ(g, slow);
    e.Restore(g, 1, 512 * kMiB);
  };
  s.on_restore = [&](GpuId g, FunctionId f) {
    const RequestId r = 0;
    if (f == 0) e.Run(g, 0, std::span(&r, 1));
    if (f == 1) e.Evict(g, 1, EvictHint::kDiscardIfClean);
  };
  s.on_run = [&](GpuId g, FunctionId f) { e.Evict(g, f, EvictHint::kDiscardIfClean); };
  ASSERT_TRUE(harness.Run(s).ok());
  ASSERT_EQ(s.ready_at.size(), 1u);
  EXPECT_GE(s.ready_at[0], AtSeconds(1.5));  // no earlier (exactly then, simulated)
  EXPECT_FALSE(s.reentered);
}

void CheckRestoreThenRun(ExecutorHarness& harness) {
  harness.Build(ContractGpu(), ContractFunctions(),
                {ContractRequest(0, 1, 0.0), ContractRequest(1, 1, 0.0)});
  Executor& e = harness.executor();
  Script s(e);
  GpuId gpu = 0;
  s.on_request = [&](const Request& r) {
    if (r.id != 0) return;
    gpu = *e.AcquireGpu(0, Duration::zero());
    EXPECT_EQ(e.Instances(1).bound, 0);
    e.Restore(gpu, 1, 512 * kMiB);
    EXPECT_EQ(e.Instances(1).bound, 1);
    EXPECT_TRUE(s.restored_at.empty()) << "OnRestoreDone came from inside Restore";
  };
  s.on_restore = [&](GpuId g, FunctionId f) {
    const RequestId batch[] = {0, 1};
    e.Run(g, f, batch);
    EXPECT_TRUE(s.ran.empty()) << "OnRunDone came from inside Run";
  };
  s.on_run = [&](GpuId g, FunctionId f) { e.Evict(g, f, EvictHint::kDiscardIfClean); };
  ASSERT_TRUE(harness.Run(s).ok());
  ASSERT_EQ(s.restored_at.size(), 1u);
  EXPECT_TRUE(s.restore_status[0].ok());
  // No earlier than the GPU type the executor describes says (its link, its fixed cost).
  EXPECT_GE(s.restored_at[0], TimePoint{} + e.TypeOf(gpu).RestoreTime(200'000'000));
  EXPECT_EQ(s.ran, (std::vector<RequestId>{0, 1}));
  ASSERT_EQ(s.run_results.size(), 1u);
  EXPECT_TRUE(s.run_results[0].status.ok());
  EXPECT_GE(s.run_results[0].elapsed, milliseconds(30));  // a batch of two of 'large'
  EXPECT_FALSE(s.reentered);
  EXPECT_EQ(e.Instances(1).bound, 0);
  EXPECT_EQ(e.Instances(1).idle, 1);  // warm after its slice left
}

void CheckEvictions(ExecutorHarness& harness) {
  harness.Build(ContractGpu(), ContractFunctions(),
                {ContractRequest(0, 0, 0.0), ContractRequest(1, 1, 0.0)});
  Executor& e = harness.executor();
  Script s(e);
  s.on_request = [&](const Request& r) {
    if (r.id != 0) return;
    const GpuId g = *e.AcquireGpu(0, Duration::zero());
    e.Restore(g, 0, 256 * kMiB);
    e.Restore(g, 1, 512 * kMiB);
  };
  int resident = 0;
  s.on_restore = [&](GpuId g, FunctionId) {
    if (++resident < 2) return;
    const RequestId a = 0, b = 1;
    e.Run(g, 0, std::span(&a, 1));
    e.Run(g, 1, std::span(&b, 1));
  };
  s.on_run = [&](GpuId g, FunctionId f) {
    if (f == 0) {
      EXPECT_EQ(e.Evict(g, 0, EvictHint::kDiscardIfClean), EvictOutcome::kDiscarded);
      // The memory is free at once: the slice can come back now.
      EXPECT_EQ(e.Instances(0).idle, 1);
    } else {
      EXPECT_EQ(e.Evict(g, 1, EvictHint::kCheckpoint), EvictOutcome::kCopying);
    }
  };
  bool released = false;
  s.on_evict = [&](GpuId g, FunctionId f, const Status& status) {
    EXPECT_EQ(f, 1u);
    EXPECT_TRUE(status.ok());
    EXPECT_EQ(e.Instances(1).idle, 1);
    e.ReleaseGpu(g);
    released = true;
  };
  ASSERT_TRUE(harness.Run(s).ok());
  EXPECT_EQ(s.evicted_at.size(), 1u);
  EXPECT_TRUE(released);
}

void CheckFailRequestAndViolations(ExecutorHarness& harness) {
  harness.Build(ContractGpu(), ContractFunctions(), {ContractRequest(0, 0, 0.0)});
  {
    Executor& e = harness.executor();
    Script s(e);
    s.on_request = [&](const Request& r) { e.FailRequest(r.id, Unavailable("shed")); };
    EXPECT_TRUE(harness.Run(s).ok()) << "a request answered with an error is answered";
  }
  harness.Build(ContractGpu(), ContractFunctions(), {ContractRequest(0, 0, 0.0)});
  {
    Executor& e = harness.executor();
    Script s(e);
    s.on_request = [&](const Request& r) {
      const GpuId g = *e.AcquireGpu(0, Duration::zero());
      e.Run(g, 0, std::span(&r.id, 1));  // not resident: a scheduler bug
    };
    const Status status = harness.Run(s);
    EXPECT_EQ(status.code(), StatusCode::kInternal) << status.ToString();
  }
  harness.Build(ContractGpu(), ContractFunctions(), {ContractRequest(0, 0, 0.0)});
  {
    Executor& e = harness.executor();
    Script s(e);  // ignores the request
    EXPECT_EQ(harness.Run(s).code(), StatusCode::kInternal) << "an unanswered request";
  }
}

void CheckLatestStartAndCancellation(ExecutorHarness& harness) {
  // Request 0 may start until 0.1 s and is never run; request 1 has no latest start and request
  // 2 until 10 s: both run once function 0 is restored (0.1 s of copy at the least).
  std::vector<Request> requests = {ContractRequest(0, 0, 0.0), ContractRequest(1, 0, 0.0),
                                   ContractRequest(2, 0, 0.0)};
  requests[0].latest_start = AtSeconds(0.1);
  requests[2].latest_start = AtSeconds(10);
  harness.Build(ContractGpu(), ContractFunctions(), requests);
  {
    Executor& e = harness.executor();
    Script s(e);
    GpuId gpu = 0;
    int arrived = 0;
    s.on_request = [&](const Request&) {
      if (++arrived < 3) return;
      gpu = *e.AcquireGpu(0, Duration::zero());
      e.Restore(gpu, 0, 256 * kMiB);
    };
    s.on_restore = [&](GpuId g, FunctionId f) {
      const RequestId batch[] = {1, 2};
      e.Run(g, f, batch);
    };
    s.on_run = [&](GpuId g, FunctionId f) { e.Evict(g, f, EvictHint::kDiscardIfClean); };
    const Status ran = harness.Run(s);
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    ASSERT_EQ(s.cancelled.size(), 1u);
    EXPECT_EQ(s.cancelled[0].request, 0u);
    EXPECT_EQ(s.cancelled[0].status.code(), StatusCode::kDeadlineExceeded);
    EXPECT_GE(s.cancelled[0].at, AtSeconds(0.1));
    EXPECT_EQ(s.ran, (std::vector<RequestId>{1, 2}));
    EXPECT_FALSE(s.reentered);
  }
  // A run naming a cancelled request breaks the contract: the scheduler was told.
  std::vector<Request> late = {ContractRequest(0, 0, 0.0)};
  late[0].latest_start = AtSeconds(0.01);
  harness.Build(ContractGpu(), ContractFunctions(), late);
  {
    Executor& e = harness.executor();
    Script s(e);
    s.on_request = [&](const Request&) {
      const GpuId g = *e.AcquireGpu(0, Duration::zero());
      e.Restore(g, 0, 256 * kMiB);  // 0.1 s at the least: after the latest start
    };
    s.on_restore = [&](GpuId g, FunctionId f) {
      const RequestId batch[] = {0};
      e.Run(g, f, batch);
    };
    const Status ran = harness.Run(s);
    EXPECT_EQ(ran.code(), StatusCode::kInternal) << ran.ToString();
    EXPECT_EQ(s.cancelled.size(), 1u);
  }
}

}  // namespace gshare::testing
