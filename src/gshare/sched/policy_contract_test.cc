// Every policy against the Executor contract, in a world that fails: restores that fail, GPUs
// refused or lost, runs that fail, instances that die, snapshots that must be copied back,
// functions added and removed at run time. Under each, every request is answered exactly once
// (OK, or with the error that stopped it), no action breaks a precondition, the policy holds
// state for exactly the requests not yet answered after every event, and at the end it holds
// no request and no GPU.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gshare/common/random.h"
#include "gshare/sched/policy_registry.h"
#include "gshare/sched/testing/executor_contract.h"
#include "gshare/sched/testing/fake_executor.h"
#include "gshare/sched/testing/fake_harness.h"
#include "gshare/sched/testing/policy_param_name.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using testing::FakeExecutor;
using testing::FaultPlan;

GpuType Gpu(std::string name, std::uint64_t memory_bytes) {
  GpuType gpu;
  gpu.name = std::move(name);
  gpu.memory_bytes = memory_bytes;
  gpu.h2d_bytes_per_second = 10e9;
  gpu.restore_overhead = milliseconds(2);
  gpu.price_per_hour_usd = 2;
  return gpu;
}

ResolvedFunction Function(std::string name, std::uint64_t model_bytes, std::uint64_t memory,
                          int exec_ms, int max_batch) {
  ResolvedFunction f;
  f.name = std::move(name);
  f.tenant = "t";
  f.model_bytes = model_bytes;
  f.gpu_memory_bytes = memory;
  f.max_batch = max_batch;
  for (int b = 1; b <= max_batch; ++b) f.exec_by_batch.push_back(milliseconds(exec_ms + 2 * b));
  f.slo = milliseconds(400);
  return f;
}

std::vector<ResolvedFunction> Functions() {
  return {Function("small", 100'000'000, 256 * kMiB, 10, 1),
          Function("medium", 500'000'000, kGiB, 30, 4),
          Function("large", 1'500'000'000, 3 * kGiB, 50, 1),
          Function("batchy", 200'000'000, 512 * kMiB, 15, 8)};
}

// Bursty arrivals over `seconds` for the functions in [0, count).
std::vector<Request> Arrivals(const std::vector<ResolvedFunction>& functions, int count,
                              double seconds, std::uint64_t seed, RequestId first_id = 0,
                              FunctionId first_function = 0, double start = 0) {
  Random random(seed);
  std::vector<Request> requests;
  double t = start;
  while (static_cast<int>(requests.size()) < count) {
    t += random.Exponential(static_cast<double>(count) / seconds);
    const auto f =
        static_cast<FunctionId>(first_function + random.Below(functions.size() - first_function));
    const int burst = random.Uniform() < 0.1 ? 6 : 1;
    for (int i = 0; i < burst && static_cast<int>(requests.size()) < count; ++i) {
      Request r;
      r.id = first_id + requests.size();
      r.function = f;
      r.arrival = AtSeconds(t);
      r.deadline = r.arrival + functions[f].slo;
      requests.push_back(r);
    }
  }
  return requests;
}

PolicyOptions Options() {
  PolicyOptions options;
  options.keep_alive = std::chrono::seconds(20);
  options.pool_idle = std::chrono::seconds(5);
  options.instance_start = milliseconds(200);
  return options;
}

struct Outcome {
  std::size_t ok = 0;
  std::size_t failed = 0;
  std::map<StatusCode, std::size_t> codes;
};

class PolicyContractTest : public ::testing::TestWithParam<std::string_view> {
 protected:
  // Runs the policy in `executor`; checks the invariants every policy keeps under any plan.
  Outcome RunAndCheck(FakeExecutor& executor, FunctionRegistry& registry, std::size_t requests,
                      const PolicyOptions& options = Options()) {
    SchedulerContext context{&registry, &executor};
    auto policy = MakePolicy(GetParam(), context, options);
    EXPECT_TRUE(policy.ok()) << policy.status().ToString();
    if (!policy.ok()) return {};
    Scheduler& scheduler = **policy;
    executor.set_scheduler(&scheduler);
    std::size_t mismatches = 0;
    std::size_t most_held = 0;
    const Status status = executor.RunToEnd(2'000'000, [&] {
      // State for exactly the requests in flight, after every event.
      if (scheduler.RequestsHeld() != executor.unanswered()) ++mismatches;
      most_held = std::max(most_held, scheduler.RequestsHeld());
    });
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(mismatches, 0u) << "RequestsHeld() differed from the requests in flight";
    EXPECT_EQ(scheduler.RequestsHeld(), 0u);
    most_held_ = most_held;
    EXPECT_EQ(executor.arrived(), requests);
    EXPECT_EQ(executor.gpus_held(), 0) << "GPUs still held after every idle timer fired";
    EXPECT_EQ(executor.slices(), 0u);
    Outcome outcome;
    for (const auto& [id, answer] : executor.answers()) {
      EXPECT_EQ(answer.times, 1) << "request " << id;
      if (answer.ok) {
        ++outcome.ok;
      } else {
        ++outcome.failed;
        ++outcome.codes[answer.code];
      }
    }
    EXPECT_EQ(outcome.ok + outcome.failed, requests);
    return outcome;
  }

  Outcome RunPlan(const FaultPlan& plan, int requests = 400, double seconds = 30) {
    FunctionRegistry registry(Functions());
    FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, plan);
    for (const Request& r : Arrivals(Functions(), requests, seconds, 7)) executor.Arrive(r);
    Outcome outcome = RunAndCheck(executor, registry, static_cast<std::size_t>(requests));
    copies_back_ = executor.copies_back();
    injected_ = executor.injected();
    return outcome;
  }

  std::uint64_t copies_back_ = 0;
  std::size_t most_held_ = 0;  // the most requests the policy held at once
  FakeExecutor::Injected injected_;
};

TEST_P(PolicyContractTest, AnswersEveryRequestWhenNothingFails) {
  const Outcome o = RunPlan({});
  EXPECT_EQ(o.ok, 400u);
}

TEST_P(PolicyContractTest, HoldsStateForTheLoadNotForTheLengthOfTheRun) {
  // 20,000 requests over 2,000 s at a steady load: the policy's per-request state (checked equal
  // to the requests in flight after every event) stays at the load's level.
  const Outcome o = RunPlan({}, 20'000, 2'000);
  EXPECT_EQ(o.ok, 20'000u);
  EXPECT_LE(most_held_, 60u);
}

TEST_P(PolicyContractTest, SurvivesFailedRestores) {
  FaultPlan plan;
  plan.fail_restore_every = 3;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.restores, 0);
  EXPECT_GT(o.ok, 300u);
  for (const auto& [code, n] : o.codes) EXPECT_EQ(code, StatusCode::kIo) << n;
}

TEST_P(PolicyContractTest, AnswersWithTheRefusalWhenNoGpuCanBeHad) {
  FaultPlan plan;
  plan.refuse_all_gpus = true;
  Outcome o = RunPlan(plan, 50);
  EXPECT_EQ(o.ok, 0u);
  EXPECT_EQ(o.codes[StatusCode::kResourceExhausted], 50u);
}

TEST_P(PolicyContractTest, NoRequestWaitsForeverUnderMemoryPressure) {
  // Twelve 3 GiB functions on at most two 8 GiB GPUs (four slices at once), called in an
  // interleaved stream for 60 s: models must be swapped all the time. Every request is served,
  // none waits longer than the trace, a keep-alive and the whole work done one request at a time,
  // and no model is restored more often than requests come (no swap churn). Plain keepalive
  // evicts nothing: a function without an instance waits for instances to expire, one keep-alive
  // per pair of functions ahead of it.
  std::vector<ResolvedFunction> functions;
  for (int i = 0; i < 12; ++i) {
    functions.push_back(Function("f" + std::to_string(i), 1'000'000'000, 3 * kGiB, 20, 1));
  }
  FunctionRegistry registry(functions);
  FaultPlan plan;
  plan.max_gpus = 2;
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, plan);
  const std::vector<Request> requests = Arrivals(functions, 600, 60, 11);
  for (const Request& r : requests) executor.Arrive(r);
  const Outcome o = RunAndCheck(executor, registry, requests.size());
  EXPECT_EQ(o.ok, requests.size());
  const Duration one = std::chrono::milliseconds(102 + 22);  // restore + execution
  const int keep_alives = GetParam() == "keepalive" ? 12 / 2 : 1;
  const Duration bound = std::chrono::seconds(60) + Options().keep_alive * keep_alives + one * 600;
  EXPECT_LE(executor.max_latency(), bound) << ToSeconds(executor.max_latency()) << " s";
  EXPECT_LE(executor.restores(), requests.size());
}

TEST_P(PolicyContractTest, WaitsForTheGpusThereAreUnderACap) {
  FaultPlan plan;
  plan.max_gpus = 1;
  const Outcome o = RunPlan(plan);
  EXPECT_EQ(o.ok, 400u);
}

TEST_P(PolicyContractTest, RetriesFailedRuns) {
  FaultPlan plan;
  plan.fail_run_every = 4;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.runs, 20);
  EXPECT_GT(o.ok, 380u);
  for (const auto& [code, n] : o.codes) EXPECT_EQ(code, StatusCode::kUnavailable) << n;
}

TEST_P(PolicyContractTest, RecoversFromInstancesThatDie) {
  FaultPlan plan;
  plan.kill_instance_every = 5;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.instances, 20);
  EXPECT_GT(o.ok, 380u);
}

TEST_P(PolicyContractTest, RecoversFromLostGpus) {
  FaultPlan plan;
  plan.lose_gpu_every = 11;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.gpus, 5);
  EXPECT_GT(o.ok, 380u);
}

TEST_P(PolicyContractTest, WaitsForCopiesBackOfStateThatRunsWrote) {
  FaultPlan plan;
  plan.runs_write_state = true;
  const Outcome o = RunPlan(plan);
  EXPECT_EQ(o.ok, 400u);
  EXPECT_GT(copies_back_, 0u);
}

TEST_P(PolicyContractTest, RecoversFromInstancesThatDieWhileLoading) {
  FaultPlan plan;
  plan.kill_restoring_every = 2;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.instances, 0);
  EXPECT_GT(o.ok, 300u);
}

TEST_P(PolicyContractTest, CarriesOnWhenACopyBackFails) {
  FaultPlan plan;
  plan.runs_write_state = true;
  plan.fail_copy_back_every = 2;
  const Outcome o = RunPlan(plan);
  EXPECT_GT(injected_.copies_back, 0);
  EXPECT_EQ(o.ok, 400u);
}

TEST_P(PolicyContractTest, SurvivesEveryFailureAtOnce) {
  FaultPlan plan;
  plan.max_gpus = 3;
  plan.fail_restore_every = 5;
  plan.fail_run_every = 7;
  plan.kill_instance_every = 9;
  plan.lose_gpu_every = 13;
  plan.runs_write_state = true;
  plan.kill_restoring_every = 6;
  plan.fail_copy_back_every = 2;
  plan.cold_start = milliseconds(300);
  const Outcome o = RunPlan(plan);  // the invariants are the test
  EXPECT_GT(o.ok, 0u);
  EXPECT_GT(injected_.restores + injected_.runs + injected_.instances + injected_.gpus, 10);
}

TEST_P(PolicyContractTest, UsesTheGpuTypeItIsGiven) {
  // Type 0 is refused; the policy takes a GPU of type 1 and fits its slices in type 1's memory
  // (the executor checks every reservation against the GPU's own type).
  FaultPlan plan;
  plan.refuse_first_type = true;
  FunctionRegistry registry(Functions());
  FakeExecutor executor({Gpu("big", 80 * kGiB), Gpu("small", 4 * kGiB)}, &registry, plan);
  for (const Request& r : Arrivals(Functions(), 200, 20, 3)) executor.Arrive(r);
  const Outcome o = RunAndCheck(executor, registry, 200);
  EXPECT_EQ(o.ok, 200u);
  EXPECT_EQ(executor.types_acquired(), (std::set<GpuTypeId>{1}));
}

TEST_P(PolicyContractTest, ServesFunctionsAddedAndRemovedWhileRunning) {
  // Functions 0-1 from the start; function 2 ("large") and 3 ("batchy") come at 5 s and 8 s;
  // function 0 goes at 12 s, with requests still queued: those are answered NotFound.
  const std::vector<ResolvedFunction> all = Functions();
  FunctionRegistry registry({all[0], all[1]});
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, {});
  executor.AddFunctionAt(AtSeconds(5), all[2]);
  executor.AddFunctionAt(AtSeconds(8), all[3]);
  executor.RemoveFunctionAt(AtSeconds(12), 0);
  std::vector<Request> requests;
  for (int i = 0; i < 60; ++i) {  // function 0: a burst just before its removal, and earlier
    Request r;
    r.id = requests.size();
    r.function = 0;
    r.arrival = AtSeconds(i < 40 ? 0.25 * i : 12 - 1e-4);
    r.deadline = r.arrival + all[0].slo;
    requests.push_back(r);
  }
  for (const Request& r : Arrivals(all, 100, 10, 5, requests.size(), 1, 0)) {
    // Functions 2 and 3 only after they exist.
    if (r.function >= 2 && r.arrival < AtSeconds(r.function == 2 ? 5.5 : 8.5)) continue;
    requests.push_back(r);
  }
  for (Request& r : requests) r.id = static_cast<RequestId>(&r - requests.data());
  for (const Request& r : requests) executor.Arrive(r);
  const Outcome o = RunAndCheck(executor, registry, requests.size());
  EXPECT_EQ(o.ok + o.failed, requests.size());
  for (const auto& [code, n] : o.codes) EXPECT_EQ(code, StatusCode::kNotFound) << n;
  EXPECT_GT(o.ok, requests.size() / 2);
}

TEST_P(PolicyContractTest, KeepsWithinMaxInstances) {
  // "small" may have one instance: the executor flags a second restore while one is bound.
  std::vector<ResolvedFunction> functions = Functions();
  functions[0].max_instances = 1;
  functions[1].min_instances = 2;
  FunctionRegistry registry(functions);
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, {});
  for (const Request& r : Arrivals(functions, 300, 10, 11)) executor.Arrive(r);
  const Outcome o = RunAndCheck(executor, registry, 300);
  EXPECT_EQ(o.ok, 300u);
}

// Corner cases a review found, each once broken in some policy.

Request RequestAt(RequestId id, FunctionId function, double seconds, Duration slo) {
  Request r;
  r.id = id;
  r.function = function;
  r.arrival = AtSeconds(seconds);
  r.deadline = r.arrival + slo;
  return r;
}

TEST(GShareDispatchTest, AGpuHeldForARestoreThatFailsServesTheRunItHeldBack) {
  // One GPU (1 GB/s, 1 ms overhead). l: 1 MB model (restore 2 ms), 50 ms run, SLO 1 s. u: 20 MB
  // (restore 21 ms), 10 ms run, SLO 40 ms; every restore of u fails. l0 at 0 runs 2-52 ms. u0
  // at 40 ms restores 40-61 ms; l1 arrives at 45 ms. At 52 ms gshare holds l1 back for u0's
  // restore (u0's latest start is 80 - 14 = 66 ms; l1's run is predicted to take 70). At 61 ms
  // the restore fails and the GPU is dispatched again: l1 runs 61-111 ms, 66 ms after it came.
  // (Left idle, the GPU would serve l1 only at its lazy re-check, near its deadline.) u0's third
  // failed restore, at 103 ms, answers it with the failure.
  GpuType gpu = Gpu("g", 8 * kGiB);
  gpu.h2d_bytes_per_second = 1e9;
  gpu.restore_overhead = milliseconds(1);
  ResolvedFunction l = Function("l", 1'000'000, 256 * kMiB, 48, 1);
  l.slo = milliseconds(1000);
  ResolvedFunction u = Function("u", 20'000'000, 256 * kMiB, 8, 1);
  u.slo = milliseconds(40);
  FunctionRegistry registry({l, u});
  FaultPlan plan;
  plan.max_gpus = 1;
  plan.fail_restores_of = 1;
  FakeExecutor executor({gpu}, &registry, plan);
  executor.Arrive(RequestAt(0, 0, 0.000, l.slo));
  executor.Arrive(RequestAt(1, 1, 0.040, u.slo));
  executor.Arrive(RequestAt(2, 0, 0.045, l.slo));
  PolicyOptions options = Options();
  options.instance_start = Duration::zero();
  options.max_gpus = 1;
  SchedulerContext context{&registry, &executor};
  auto policy = MakePolicy("gshare", context, options);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  executor.set_scheduler(policy->get());
  const Status status = executor.RunToEnd(100'000);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(executor.answers().size(), 3u);
  EXPECT_TRUE(executor.answers().at(0).ok);
  EXPECT_FALSE(executor.answers().at(1).ok);
  EXPECT_TRUE(executor.answers().at(2).ok);
  EXPECT_EQ(executor.max_latency(), milliseconds(66));
}

TEST_P(PolicyContractTest, RemovesAFunctionWhileItsModelLoads) {
  // The slice is still restoring when the function goes: it must be evicted, not leaked into a
  // GPU given back with a slice on it.
  FunctionRegistry registry({Function("f", 500'000'000, kGiB, 30, 1)});
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, {});
  executor.Arrive(RequestAt(0, 0, 0.0, milliseconds(400)));
  executor.RemoveFunctionAt(AtSeconds(0.21), 0);
  Outcome o = RunAndCheck(executor, registry, 1);
  EXPECT_EQ(o.ok + o.codes[StatusCode::kNotFound], 1u);
}

TEST_P(PolicyContractTest, NeverTakesAGpuTypeTooSmallForTheFunction) {
  // Type 0 is refused and type 1 cannot hold the function: the requests are answered with the
  // refusal, and no slice is ever asked of a GPU too small for it.
  FaultPlan plan;
  plan.refuse_first_type = true;
  FunctionRegistry registry({Function("large", 1'500'000'000, 3 * kGiB, 50, 1)});
  FakeExecutor executor({Gpu("big", 80 * kGiB), Gpu("small", 2 * kGiB)}, &registry, plan);
  for (RequestId i = 0; i < 3; ++i) {
    executor.Arrive(RequestAt(i, 0, 0.1 * static_cast<double>(i), milliseconds(400)));
  }
  Outcome o = RunAndCheck(executor, registry, 3);
  EXPECT_EQ(o.codes[StatusCode::kResourceExhausted], 3u);
  EXPECT_TRUE(executor.types_acquired().empty());
}

TEST_P(PolicyContractTest, WaitsForItsOnlyInstanceToCopyBack) {
  // max_instances 1, and the one instance is still copying its state back when the next request
  // comes: the request waits for it instead of waiting forever.
  ResolvedFunction f = Function("f", 5'000'000'000, 6 * kGiB, 10, 1);
  f.max_instances = 1;
  FunctionRegistry registry({f});
  FaultPlan plan;
  plan.runs_write_state = true;
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, plan);
  executor.Arrive(RequestAt(0, 0, 0.0, milliseconds(400)));
  executor.Arrive(RequestAt(1, 0, 1.85, milliseconds(400)));
  PolicyOptions options = Options();
  options.keep_alive = std::chrono::seconds(1);
  options.instance_start = Duration::zero();
  options.pool_idle = std::chrono::seconds(1);
  const Outcome o = RunAndCheck(executor, registry, 2, options);
  EXPECT_EQ(o.ok, 2u);
}

TEST_P(PolicyContractTest, GrowsNoSliceIntoMemoryStillCopyingBack) {
  // One 4 GiB GPU: A (2 GiB) ran and is evicted with a copy back while B's batches want to grow
  // its slice into the memory the copy still holds.
  ResolvedFunction b = Function("B", 2'000'000'000, kGiB, 15, 8);
  b.batch_memory_bytes = 256 * kMiB;
  b.slo = milliseconds(220);
  FunctionRegistry registry({Function("A", 1'000'000'000, 2 * kGiB, 10, 1), b});
  FaultPlan plan;
  plan.runs_write_state = true;
  plan.max_gpus = 1;
  FakeExecutor executor({Gpu("g4", 4 * kGiB)}, &registry, plan);
  RequestId id = 0;
  executor.Arrive(RequestAt(id++, 1, 0.0, milliseconds(220)));
  executor.Arrive(RequestAt(id++, 0, 1.0, milliseconds(400)));
  for (int k = 0; k < 20; ++k) {
    for (int i = 0; i < 8; ++i) {
      executor.Arrive(RequestAt(id++, 1, 1.0 + 0.1 * k + 1e-6 * i, milliseconds(220)));
    }
  }
  PolicyOptions options = Options();
  options.keep_alive = std::chrono::seconds(1);
  const Outcome o = RunAndCheck(executor, registry, id, options);
  EXPECT_EQ(o.ok, id);
}

TEST_P(PolicyContractTest, WaitsForAGpuThatIsBeingReleased) {
  // A cap of one GPU, and the pool's only GPU is copying state back on its way out when a burst
  // comes: the burst waits for the GPU to come free instead of failing.
  FunctionRegistry registry({Function("f", 500'000'000, kGiB, 10, 1)});
  FaultPlan plan;
  plan.runs_write_state = true;
  plan.max_gpus = 1;
  FakeExecutor executor({Gpu("g8", 8 * kGiB)}, &registry, plan);
  executor.Arrive(RequestAt(0, 0, 0.0, milliseconds(60)));
  for (RequestId i = 1; i < 40; ++i) {
    executor.Arrive(RequestAt(i, 0, 5.2645 + 0.002 * static_cast<double>(i), milliseconds(60)));
  }
  PolicyOptions options = Options();
  options.keep_alive = std::chrono::seconds(1);
  const Outcome o = RunAndCheck(executor, registry, 40, options);
  EXPECT_EQ(o.ok, 40u);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyContractTest, ::testing::ValuesIn(PolicyNames()),
                         testing::PolicyParamName);

// The fake executor itself passes the executor contract.
TEST(FakeExecutorContract, GpuStartup) {
  testing::FakeHarness h;
  testing::CheckGpuStartup(h);
}
TEST(FakeExecutorContract, RestoreThenRun) {
  testing::FakeHarness h;
  testing::CheckRestoreThenRun(h);
}
TEST(FakeExecutorContract, Evictions) {
  testing::FakeHarness h;
  testing::CheckEvictions(h);
}
TEST(FakeExecutorContract, FailRequestAndViolations) {
  testing::FakeHarness h;
  testing::CheckFailRequestAndViolations(h);
}
TEST(FakeExecutorContract, LatestStartAndCancellation) {
  testing::FakeHarness h;
  testing::CheckLatestStartAndCancellation(h);
}

}  // namespace
}  // namespace gshare
