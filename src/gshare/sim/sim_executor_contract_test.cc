// The simulated executor passes the executor contract (sched/testing/executor_contract.h), and
// every policy answers every request in it when GPUs are capped or instances bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

#include "gshare/sched/policy_registry.h"
#include "gshare/sched/testing/executor_contract.h"
#include "gshare/sched/testing/policy_param_name.h"
#include "gshare/sim/sim_executor.h"
#include "gshare/sim/sim_test_util.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/exec_noise.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

class SimHarness final : public testing::ExecutorHarness {
 public:
  void Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
             std::vector<Request> requests) override {
    workload_ = std::make_unique<Workload>();
    workload_->gpu = gpu;
    workload_->functions = std::move(functions);
    workload_->requests = std::move(requests);
    executor_ = std::make_unique<SimulatedExecutor>(*workload_, SimulatedExecutor::Options{});
  }
  Executor& executor() override { return *executor_; }
  Status Run(Scheduler& scheduler) override {
    executor_->set_scheduler(&scheduler);
    return executor_->RunToEnd(nullptr);
  }

 private:
  std::unique_ptr<Workload> workload_;
  std::unique_ptr<SimulatedExecutor> executor_;
};

TEST(SimulatedExecutorContract, GpuStartup) {
  SimHarness h;
  testing::CheckGpuStartup(h);
}
TEST(SimulatedExecutorContract, RestoreThenRun) {
  SimHarness h;
  testing::CheckRestoreThenRun(h);
}
TEST(SimulatedExecutorContract, Evictions) {
  SimHarness h;
  testing::CheckEvictions(h);
}
TEST(SimulatedExecutorContract, FailRequestAndViolations) {
  SimHarness h;
  testing::CheckFailRequestAndViolations(h);
}
TEST(SimulatedExecutorContract, LatestStartAndCancellation) {
  SimHarness h;
  testing::CheckLatestStartAndCancellation(h);
}

// Three functions, bursts of requests every 300 ms for a minute.
Workload BurstyWorkload() {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(
      testing::MakeFunction("a", 100'000'000, 256 * kMiB, milliseconds(10), milliseconds(200)));
  w.functions.push_back(
      testing::MakeFunction("b", 300'000'000, 2 * kGiB, milliseconds(40), milliseconds(400)));
  w.functions.push_back(
      testing::MakeFunction("c", 50'000'000, 128 * kMiB, milliseconds(5), milliseconds(100)));
  for (int i = 0; i < 200; ++i) {
    for (int k = 0; k < 1 + i % 4; ++k) {
      testing::AddRequest(w, static_cast<FunctionId>((i + k) % 3), 0.3 * i);
    }
  }
  return w;
}

class SimPolicyTest : public ::testing::TestWithParam<std::string_view> {};

TEST_P(SimPolicyTest, ACapOnGpusIsObeyedAndEveryRequestAnswered) {
  const Workload w = BurstyWorkload();
  SimulationOptions options;
  options.policy.keep_alive = std::chrono::seconds(5);
  options.policy.pool_idle = std::chrono::seconds(5);
  options.executor.max_gpus = 1;
  auto capped = Simulate(w, GetParam(), options);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped->requests, w.requests.size());
  EXPECT_EQ(capped->failed_requests, 0u);
  EXPECT_EQ(capped->peak_gpus, 1);
}

TEST_P(SimPolicyTest, MaxInstancesBoundsReplicasAndColdStartsCost) {
  Workload w = BurstyWorkload();
  SimulationOptions options;
  options.policy.keep_alive = std::chrono::seconds(5);
  options.policy.pool_idle = std::chrono::seconds(5);
  auto free = Simulate(w, GetParam(), options);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  // A 300 ms instance start paid by every restore that finds no warm instance: slower.
  options.executor.instance_cold_start = milliseconds(300);
  auto cold = Simulate(w, GetParam(), options);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_GT(cold->latency.max_ms, free->latency.max_ms);
  // With one instance kept warm per function from the start, the first cold start is gone.
  for (auto& f : w.functions) f.min_instances = 1;
  auto warm = Simulate(w, GetParam(), options);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_LT(warm->latency.mean_ms, cold->latency.mean_ms);
  // One instance each: never more than one slice of a function at a time.
  for (auto& f : w.functions) f.max_instances = 1;
  SimulationOptions record = options;
  record.executor.record_schedule = true;
  auto bounded = Simulate(w, GetParam(), record);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_EQ(bounded->requests, w.requests.size());
  for (FunctionId f = 0; f < 3; ++f) {
    std::vector<std::pair<TimePoint, int>> changes;
    for (const auto& r : bounded->schedule.residencies) {
      if (r.function != f) continue;
      changes.emplace_back(r.reserved, +1);
      if (r.released != TimePoint::max()) changes.emplace_back(r.released, -1);
    }
    std::sort(changes.begin(), changes.end());  // a release sorts before a reserve at one time
    int live = 0, most = 0;
    for (const auto& [t, d] : changes) most = std::max(most, live += d);
    EXPECT_EQ(most, 1) << "function " << f;
  }
}

TEST_P(SimPolicyTest, LearnsFromNoisyRunsItNeverSeesAhead) {
  // The policy gets the same requests with and without noise (a Request carries no execution
  // time); only what runs took when they ended differs, and every request is still answered.
  Workload quiet = BurstyWorkload();
  Workload noisy = BurstyWorkload();
  DrawExecNoise(*ParseExecNoise("lognormal:0.5,straggler:0.05:4"), 3, noisy);
  ASSERT_EQ(noisy.exec_factors.size(), noisy.requests.size());
  SimulationOptions options;
  options.policy.keep_alive = std::chrono::seconds(5);
  options.policy.pool_idle = std::chrono::seconds(5);
  auto a = Simulate(quiet, GetParam(), options);
  auto b = Simulate(noisy, GetParam(), options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->requests, quiet.requests.size());
  EXPECT_EQ(b->failed_requests, 0u);
  EXPECT_NE(a->latency.max_ms, b->latency.max_ms);  // the noise reached the runs
}

TEST_P(SimPolicyTest, DecidesTheSameUntilARunTellsItOtherwise) {
  // A policy never sees a drawn execution time: with and without noise, every restore and every
  // run it starts before the first run ends (the first thing noise can change that it sees) is
  // the same, at the same time, on the same GPU.
  Workload quiet = BurstyWorkload();
  Workload noisy = BurstyWorkload();
  DrawExecNoise(*ParseExecNoise("lognormal:0.5,straggler:0.05:4"), 3, noisy);
  SimulationOptions options;
  options.executor.record_schedule = true;
  auto a = Simulate(quiet, GetParam(), options);
  auto b = Simulate(noisy, GetParam(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  TimePoint first_end = TimePoint::max();
  for (const auto* report : {&*a, &*b}) {
    for (const auto& run : report->schedule.runs) first_end = std::min(first_end, run.end);
  }
  auto before = [&](const ScheduleLog& log) {
    std::vector<std::tuple<TimePoint, GpuId, FunctionId, int>> decisions;
    for (const auto& r : log.residencies) {
      if (r.reserved < first_end) decisions.emplace_back(r.reserved, r.gpu, r.function, 0);
    }
    for (const auto& r : log.runs) {
      if (r.start < first_end) decisions.emplace_back(r.start, r.gpu, r.function, 1);
    }
    std::sort(decisions.begin(), decisions.end());
    return decisions;
  };
  const auto quiet_decisions = before(a->schedule);
  EXPECT_FALSE(quiet_decisions.empty());
  EXPECT_EQ(quiet_decisions, before(b->schedule));
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, SimPolicyTest, ::testing::ValuesIn(PolicyNames()),
                         testing::PolicyParamName);

}  // namespace
}  // namespace gshare
