#include "gshare/sim/sim_executor.h"

#include <gtest/gtest.h>

#include <functional>

#include "gshare/sched/testing/null_scheduler.h"
#include "gshare/sim/sim_test_util.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using testing::AddRequest;
using testing::MakeFunction;
using testing::RoundGpu;

// A scripted scheduler: the test drives the executor from the callbacks it installs.
class ScriptedScheduler : public testing::NullScheduler {
 public:
  std::string_view name() const override { return "scripted"; }
  void OnRequest(const Request& r) override {
    if (on_request) on_request(r);
  }
  void OnRestoreDone(GpuId g, FunctionId f, const Status&) override {
    restore_done.emplace_back(g, f);
    if (on_restore) on_restore(g, f);
  }
  void OnRunDone(GpuId, FunctionId, std::span<const RequestId> batch, const RunResult&) override {
    for (auto id : batch) finished.push_back(id);
  }

  std::function<void(const Request&)> on_request;
  std::function<void(GpuId, FunctionId)> on_restore;
  std::vector<std::pair<GpuId, FunctionId>> restore_done;
  std::vector<RequestId> finished;
};

Workload TwoFunctionWorkload() {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("a", 100'000'000, 256 * kMiB, milliseconds(50), milliseconds(500)));
  w.functions.push_back(
      MakeFunction("b", 200'000'000, 512 * kMiB, milliseconds(30), milliseconds(500)));
  return w;
}

TEST(SimulatedExecutorTest, TimeSlicingRoundRobinsInQuanta) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 0.0);
  SimulatedExecutor executor(w, {milliseconds(20)});
  ScriptedScheduler s;
  GpuId gpu = 0;
  int restored = 0;
  s.on_request = [&](const Request& r) {
    if (r.id == 0) {
      gpu = *executor.AcquireGpu(0, Duration::zero());
      executor.Restore(gpu, 0, 256 * kMiB);
      executor.Restore(gpu, 1, 512 * kMiB);
    }
  };
  s.on_restore = [&](GpuId g, FunctionId) {
    if (++restored == 2) {
      const RequestId a = 0, b = 1;
      executor.Run(g, 0, std::span(&a, 1));
      executor.Run(g, 1, std::span(&b, 1));
    }
  };
  executor.set_scheduler(&s);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  // Restores are FIFO on one copy engine: a at 1 + 100 ms, b at 101 + 1 + 200 = 302 ms.
  const TimePoint start = AtSeconds(0.302);
  // a (50 ms) and b (30 ms) in 20 ms quanta: a 0-20, b 20-40, a 40-60, b 60-70 (done), a 70-80.
  EXPECT_EQ(executor.completion_times()[1], start + milliseconds(70));
  EXPECT_EQ(executor.completion_times()[0], start + milliseconds(80));
  EXPECT_EQ(s.finished, (std::vector<RequestId>{1, 0}));
}

TEST(SimulatedExecutorTest, NewcomerWaitsForTheCurrentQuantumBoundary) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 0.333);  // 31 ms into a's run, which started at 0.302
  SimulatedExecutor executor(w, {milliseconds(20)});
  ScriptedScheduler s;
  s.on_request = [&](const Request& r) {
    if (r.id == 0) {
      ASSERT_TRUE(executor.AcquireGpu(0, Duration::zero()).ok());
      executor.Restore(0, 0, 256 * kMiB);
      executor.Restore(0, 1, 512 * kMiB);
    } else {
      const RequestId b = 1;
      executor.Run(0, 1, std::span(&b, 1));
    }
  };
  s.on_restore = [&](GpuId g, FunctionId f) {
    if (f == 1) {
      const RequestId a = 0;
      executor.Run(g, 0, std::span(&a, 1));
    }
  };
  executor.set_scheduler(&s);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  const TimePoint start = AtSeconds(0.302);
  // a runs alone from 0 to the 40 ms quantum boundary (b came at 31 ms), b 40-60, a 60-70
  // (done: 50 ms of work), b 70-80 (done: 30 ms).
  EXPECT_EQ(executor.completion_times()[0], start + milliseconds(70));
  EXPECT_EQ(executor.completion_times()[1], start + milliseconds(80));
}

TEST(SimulatedExecutorTest, ExecutionNoiseScalesABatchByItsMeanFactor) {
  Workload w = TwoFunctionWorkload();  // a: 50 ms, restore 101 ms
  w.functions[0].max_batch = 2;
  w.functions[0].exec_by_batch = {milliseconds(50), milliseconds(60)};
  AddRequest(w, 0, 0.0);
  AddRequest(w, 0, 0.0);
  AddRequest(w, 0, 1.0);
  w.exec_factors = {0.5f, 1.5f, 2.0f};  // the pair averages 1.0; the third runs twice as long
  SimulatedExecutor executor(w, {});
  std::vector<Duration> elapsed;
  struct Spy : ScriptedScheduler {
    std::vector<Duration>* elapsed = nullptr;
    void OnRunDone(GpuId g, FunctionId f, std::span<const RequestId> batch,
                   const RunResult& result) override {
      elapsed->push_back(result.elapsed);
      ScriptedScheduler::OnRunDone(g, f, batch, result);
    }
  } spy;
  spy.elapsed = &elapsed;
  spy.on_request = [&](const Request& r) {
    if (r.id == 0) {
      ASSERT_TRUE(executor.AcquireGpu(0, Duration::zero()).ok());
      executor.Restore(0, 0, 256 * kMiB);
    } else if (r.id == 2) {
      executor.Run(0, 0, std::span(&r.id, 1));
    }
  };
  spy.on_restore = [&](GpuId g, FunctionId f) {
    const RequestId pair[] = {0, 1};
    executor.Run(g, f, pair);
  };
  executor.set_scheduler(&spy);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  ASSERT_EQ(elapsed.size(), 2u);
  EXPECT_EQ(elapsed[0], milliseconds(60));   // batch-2 latency x mean(0.5, 1.5)
  EXPECT_EQ(elapsed[1], milliseconds(100));  // 50 ms x 2.0
  EXPECT_EQ(executor.completion_times()[2], AtSeconds(1.1));
}

TEST(SimulatedExecutorTest, OverfullRestoreFailsTheRun) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  SimulatedExecutor executor(w, {});
  ScriptedScheduler s;
  s.on_request = [&](const Request&) {
    ASSERT_TRUE(executor.AcquireGpu(0, Duration::zero()).ok());
    executor.Restore(0, 0, 39 * kGiB);
    executor.Restore(0, 1, 2 * kGiB);  // 41 GiB on a 40 GiB GPU
  };
  executor.set_scheduler(&s);
  const Status status = executor.RunToEnd(nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("free"), std::string::npos) << status.ToString();
}

TEST(SimulatedExecutorTest, RunningAFunctionThatIsNotResidentFails) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  SimulatedExecutor executor(w, {});
  ScriptedScheduler s;
  s.on_request = [&](const Request&) {
    ASSERT_TRUE(executor.AcquireGpu(0, Duration::zero()).ok());
    const RequestId a = 0;
    executor.Run(0, 0, std::span(&a, 1));
  };
  executor.set_scheduler(&s);
  EXPECT_EQ(executor.RunToEnd(nullptr).code(), StatusCode::kInternal);
}

TEST(SimulatedExecutorTest, UnservedRequestsAreReported) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  SimulatedExecutor executor(w, {});
  ScriptedScheduler s;  // ignores the request
  executor.set_scheduler(&s);
  const Status status = executor.RunToEnd(nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("unserved"), std::string::npos);
}

TEST(SimulatedExecutorTest, MetersOneRestoreAndOneRun) {
  Workload w = TwoFunctionWorkload();
  AddRequest(w, 0, 0.0);
  SimulatedExecutor executor(w, {});
  ScriptedScheduler s;
  s.on_request = [&](const Request&) {
    ASSERT_TRUE(executor.AcquireGpu(0, Duration::zero()).ok());
    executor.Restore(0, 0, 256 * kMiB);
  };
  s.on_restore = [&](GpuId g, FunctionId f) {
    const RequestId a = 0;
    executor.Run(g, f, std::span(&a, 1));
  };
  executor.set_scheduler(&s);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  EXPECT_EQ(executor.totals().restores, 1u);
  EXPECT_EQ(executor.totals().restore_bytes, 100'000'000u);
  // Held from 0; the horizon is a's completion at 101 + 50 ms.
  EXPECT_EQ(executor.totals().horizon, AtSeconds(0.151));
  EXPECT_NEAR(executor.totals().gpu_seconds, 0.151, 1e-9);
  // 256 MiB reserved from 0 to 0.151 s.
  EXPECT_NEAR(executor.totals().reserved_byte_seconds, 256.0 * kMiB * 0.151, 1.0);
  EXPECT_NEAR(executor.totals().functions[0].active_byte_seconds, 256.0 * kMiB * 0.050, 1.0);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

TEST(SimulatedExecutorTest, ResizeAccountsExactlyAndRefusesWhatDoesNotFit) {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(testing::MakeFunction("a", 1'000'000, 256 * kMiB,
                                              std::chrono::milliseconds(10),
                                              std::chrono::seconds(1), /*max_batch=*/2));
  w.functions[0].batch_memory_bytes = kGiB;
  testing::AddRequest(w, 0, 0.0);
  testing::AddRequest(w, 0, 0.0);
  SimulatedExecutor executor(w, {});
  struct Script : testing::NullScheduler {
    SimulatedExecutor* e = nullptr;
    bool grow = true;
    std::string_view name() const override { return "resize"; }
    void OnRequest(const Request& r) override {
      if (r.id == 0) {
        ASSERT_TRUE(e->AcquireGpu(0, Duration::zero()).ok());
        e->Restore(0, 0, 256 * kMiB);
      }
    }
    void OnRestoreDone(GpuId g, FunctionId f, const Status&) override {
      if (grow) {
        EXPECT_TRUE(e->Resize(g, f, 256 * kMiB + kGiB));  // room for a batch of two
      }
      const RequestId batch[] = {0, 1};
      e->Run(g, f, batch);
    }
    void OnRunDone(GpuId g, FunctionId f, std::span<const RequestId>, const RunResult&) override {
      EXPECT_TRUE(e->Resize(g, f, 256 * kMiB));
    }
  } script;
  script.e = &executor;
  executor.set_scheduler(&script);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  // Restore 0-2 ms at 256 MiB, then 1.25 GiB for the 10 ms run.
  EXPECT_NEAR(executor.totals().reserved_byte_seconds,
              256.0 * kMiB * 0.002 + (256.0 * kMiB + kGiB) * 0.010, 1.0);

  // Without the growth the batch of two does not fit its slice: the run fails, naming it.
  SimulatedExecutor strict(w, {});
  script.e = &strict;
  script.grow = false;
  strict.set_scheduler(&script);
  const Status status = strict.RunToEnd(nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("batch of 2"), std::string::npos) << status.ToString();
}

}  // namespace
}  // namespace gshare
