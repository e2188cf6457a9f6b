#include "gshare/sched/exact/best_fit.h"

#include <gtest/gtest.h>

#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/test_instances.h"

namespace gshare::exact {
namespace {

using fixtures::AtMs;
using fixtures::RequestAt;
using fixtures::RoundFunction;
using fixtures::RoundInstance;
using fixtures::SliceMs;

void ExpectResidency(const ExactSchedule& schedule, std::size_t q, std::size_t function, int gpu,
                     double restore_ms, double end_ms) {
  ASSERT_LT(q, schedule.residencies.size());
  const Residency& residency = schedule.residencies[q];
  EXPECT_EQ(residency.function, function) << "residency " << q;
  EXPECT_EQ(residency.gpu, gpu) << "residency " << q;
  EXPECT_EQ(residency.restore_start, AtMs(restore_ms)) << "residency " << q;
  EXPECT_EQ(residency.end, AtMs(end_ms)) << "residency " << q;
}

void ExpectRun(const ExactSchedule& schedule, std::size_t r, std::size_t residency,
               double start_ms) {
  ASSERT_LT(r, schedule.executions.size());
  EXPECT_EQ(schedule.executions[r].residency, residency) << "request " << r;
  EXPECT_EQ(schedule.executions[r].start, AtMs(start_ms)) << "request " << r;
}

// Two GPUs of 8 slices (1 GiB); restores take 5 ms, runs 10 ms.
TEST(BestFitTest, HandWorkedInstance) {
  ExactInstance instance = RoundInstance(2, 1 * kGiB);
  instance.functions = {RoundFunction("f0", 4, 10), RoundFunction("f1", 2, 10),
                        RoundFunction("f2", 2, 10)};
  instance.requests = {RequestAt(0, 0, 100), RequestAt(0, 2, 100), RequestAt(1, 3, 30),
                       RequestAt(2, 4, 100), RequestAt(1, 40, 100)};
  auto schedule = ScheduleBestFit(instance);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  ASSERT_EQ(schedule->residencies.size(), 4u);
  // r0 (f0 at 0): both GPUs empty, the tie goes to GPU 0: restore [0, 5), run [5, 15).
  ExpectRun(*schedule, 0, 0, 5);
  // r1 (f0 at 2): GPU 0 holds f0 and has 4 slices free (GPU 1: 8), so it joins there and runs
  // after r0, [15, 25); f0 is released at 25.
  ExpectRun(*schedule, 1, 0, 15);
  ExpectResidency(*schedule, 0, 0, 0, 0, 25);
  // r2 (f1 at 3, deadline 30): on GPU 0 it would run after r1 and end at 35, too late; GPU 1
  // restores [3, 8) and runs it [8, 18).
  ExpectResidency(*schedule, 1, 1, 1, 3, 18);
  ExpectRun(*schedule, 2, 1, 8);
  // r3 (f2 at 4): GPU 0 has 4 slices free, GPU 1 has 6; both meet the deadline, so GPU 0 (best
  // fit) although GPU 1 would finish sooner: the restore waits for GPU 0's copy engine (free at
  // 5), [5, 10), and the run for r1, [25, 35).
  ExpectResidency(*schedule, 2, 2, 0, 5, 35);
  ExpectRun(*schedule, 3, 2, 25);
  // r4 (f1 at 40): everything was released; both GPUs empty, GPU 0: restore [40, 45), run
  // [45, 55).
  ExpectResidency(*schedule, 3, 1, 0, 40, 55);
  ExpectRun(*schedule, 4, 3, 45);

  EXPECT_TRUE(ValidateSchedule(instance, *schedule).ok())
      << ValidateSchedule(instance, *schedule).ToString();
  EXPECT_DOUBLE_EQ(ScheduleObjective(instance, *schedule),
                   SliceMs(4, 25) + SliceMs(2, 15) + SliceMs(2, 30) + SliceMs(2, 15));
  EXPECT_EQ(PeakGpus(*schedule), 2);
}

// One GPU of 4 slices, functions of 2 slices: new slices wait for memory, and a residency that
// cannot be extended in memory is followed by a new one.
TEST(BestFitTest, WaitsForMemory) {
  ExactInstance instance = RoundInstance(1, 4 * kSliceBytes);
  instance.functions = {RoundFunction("a", 2, 10), RoundFunction("b", 2, 10),
                        RoundFunction("c", 2, 10)};
  instance.requests = {RequestAt(0, 0, 100), RequestAt(1, 1, 100), RequestAt(2, 2, 100),
                       RequestAt(0, 3, 100)};
  auto schedule = ScheduleBestFit(instance);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  ASSERT_EQ(schedule->residencies.size(), 4u);
  // a: [0, 15), runs [5, 15).
  ExpectResidency(*schedule, 0, 0, 0, 0, 15);
  // b: restore after a's copy, [5, 10); runs after a, [15, 25). Memory 2 + 2 fits.
  ExpectResidency(*schedule, 1, 1, 0, 5, 25);
  ExpectRun(*schedule, 1, 1, 15);
  // c: the copy engine is free at 10, but a and b fill the GPU until a's release at 15: restore
  // [15, 20), run after b, [25, 35).
  ExpectResidency(*schedule, 2, 2, 0, 15, 35);
  ExpectRun(*schedule, 2, 2, 25);
  // a again at 3: joining a's residency would hold it until 45, over b and c (6 slices), so a
  // new residency of a starts at b's release, 25: restore [25, 30), run after c, [35, 45).
  ExpectResidency(*schedule, 3, 0, 0, 25, 45);
  ExpectRun(*schedule, 3, 3, 35);
  EXPECT_TRUE(ValidateSchedule(instance, *schedule).ok())
      << ValidateSchedule(instance, *schedule).ToString();
  EXPECT_DOUBLE_EQ(ScheduleObjective(instance, *schedule),
                   SliceMs(2, 15) + SliceMs(2, 20) + SliceMs(2, 20) + SliceMs(2, 20));
}

TEST(BestFitTest, MissesADeadlineNoGpuCanMeet) {
  // One GPU: a long run of a (50 ms) is bound first; b, released at 1 with a deadline at 30,
  // must run after it, [55, 65), although running b first would have met both deadlines.
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("a", 2, 50), RoundFunction("b", 2, 10)};
  instance.requests = {RequestAt(0, 0, 200), RequestAt(1, 1, 30)};
  auto schedule = ScheduleBestFit(instance);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  ExpectRun(*schedule, 1, 1, 55);
  const Status status = ValidateSchedule(instance, *schedule);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind("deadline:", 0), 0u) << status.message();
}

TEST(BestFitTest, KeepsEveryConstraintButDeadlinesOnGeneratedInstances) {
  int misses = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const int gpus = 1 + static_cast<int>(seed % 3);
    auto instance = GenerateExactInstance(seed, 30, gpus, SampleFunctions(), SampleGpu());
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    // Every other seed on GPUs just large enough for the two largest functions, so memory binds.
    if (seed % 2 == 0) {
      std::vector<std::uint64_t> slices;
      for (std::size_t f = 0; f < instance->functions.size(); ++f) {
        slices.push_back(instance->SliceBytes(f));
      }
      std::sort(slices.rbegin(), slices.rend());
      instance->gpu.memory_bytes = slices[0] + (slices.size() > 1 ? slices[1] : 0);
    }
    auto schedule = ScheduleBestFit(*instance);
    ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
    if (!ValidateSchedule(*instance, *schedule).ok()) misses += 1;
    // With the deadlines lifted, the same schedule is valid: every other constraint holds.
    for (ExactRequest& request : instance->requests) request.deadline = TimePoint::max();
    EXPECT_TRUE(ValidateSchedule(*instance, *schedule).ok())
        << "seed " << seed << ": " << ValidateSchedule(*instance, *schedule).ToString();
  }
  EXPECT_LT(misses, 40);  // it is not merely failing everywhere
}

TEST(BestFitTest, RejectsAFunctionLargerThanAGpu) {
  ExactInstance instance = RoundInstance(1, 2 * kSliceBytes);
  instance.functions = {RoundFunction("big", 3, 10)};
  instance.requests = {RequestAt(0, 0, 100)};
  EXPECT_EQ(ScheduleBestFit(instance).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare::exact
