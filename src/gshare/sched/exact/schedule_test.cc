#include "gshare/sched/exact/schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "gshare/sched/exact/test_instances.h"

namespace gshare::exact {
namespace {

using fixtures::AtMs;
using fixtures::RequestAt;
using fixtures::RoundFunction;
using fixtures::RoundInstance;
using fixtures::SliceMs;
using std::chrono::milliseconds;

// Two functions (A: 2 slices, B: 1 slice), 2 ms executions, 5 ms restores, one GPU.
ExactInstance TwoFunctions(std::uint64_t memory_bytes = 40 * kGiB) {
  ExactInstance instance = RoundInstance(1, memory_bytes);
  instance.functions = {RoundFunction("a", 2, 2), RoundFunction("b", 1, 2)};
  instance.requests = {RequestAt(0, 0, 20), RequestAt(0, 0, 20), RequestAt(1, 0, 30)};
  return instance;
}

// A valid schedule of TwoFunctions: A restores [0,5], runs [5,7] and [7,9]; B restores [5,10]
// and runs [10,12].
ExactSchedule ValidSchedule() {
  ExactSchedule schedule;
  schedule.residencies = {Residency{0, 0, AtMs(0), AtMs(9)}, Residency{1, 0, AtMs(5), AtMs(12)}};
  schedule.executions = {Execution{0, AtMs(5), AtMs(7)}, Execution{0, AtMs(7), AtMs(9)},
                         Execution{1, AtMs(10), AtMs(12)}};
  return schedule;
}

void ExpectViolation(const ExactInstance& instance, const ExactSchedule& schedule,
                     const std::string& constraint) {
  const Status status = ValidateSchedule(instance, schedule);
  ASSERT_FALSE(status.ok()) << "expected a " << constraint << " violation";
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message().rfind(constraint + ":", 0), 0u) << status.message();
}

TEST(ExactScheduleTest, ValidScheduleValidatesAndScores) {
  const ExactInstance instance = TwoFunctions();
  const ExactSchedule schedule = ValidSchedule();
  EXPECT_TRUE(ValidateSchedule(instance, schedule).ok())
      << ValidateSchedule(instance, schedule).ToString();
  // A: 2 slices for 9 ms; B: 1 slice for 7 ms.
  EXPECT_DOUBLE_EQ(ScheduleObjective(instance, schedule), SliceMs(2, 9) + SliceMs(1, 7));
}

TEST(ExactScheduleTest, SliceRoundingAndRestoreTime) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {ExactFunction{"f", 100 * kMiB, 129 * kMiB, milliseconds(1)}};
  EXPECT_EQ(instance.SliceBytes(0), 256 * kMiB);
  EXPECT_EQ(instance.Slices(0), 2u);
  // 1 ms overhead + 104857600 bytes at 1e9 B/s = 104.8576 ms.
  EXPECT_EQ(instance.RestoreTime(0), milliseconds(1) + std::chrono::nanoseconds(104'857'600));
}

TEST(ExactScheduleTest, CatchesShape) {
  const ExactInstance instance = TwoFunctions();
  ExactSchedule schedule = ValidSchedule();
  schedule.executions.pop_back();
  ExpectViolation(instance, schedule, "shape");
  schedule = ValidSchedule();
  schedule.executions[2].residency = 0;  // B's request on A's residency
  ExpectViolation(instance, schedule, "shape");
  schedule = ValidSchedule();
  schedule.residencies[1].gpu = 1;
  ExpectViolation(instance, schedule, "shape");
}

TEST(ExactScheduleTest, CatchesDuration) {
  ExactSchedule schedule = ValidSchedule();
  schedule.executions[2].end = AtMs(11);
  ExpectViolation(TwoFunctions(), schedule, "duration");
}

TEST(ExactScheduleTest, CatchesRelease) {
  ExactInstance instance = TwoFunctions();
  instance.requests[2].release = AtMs(10.5);
  ExpectViolation(instance, ValidSchedule(), "release");
}

TEST(ExactScheduleTest, CatchesDeadline) {
  ExactInstance instance = TwoFunctions();
  instance.requests[1].deadline = AtMs(8.5);
  ExpectViolation(instance, ValidSchedule(), "deadline");
}

TEST(ExactScheduleTest, CatchesRunBeforeRestore) {
  ExactSchedule schedule = ValidSchedule();
  schedule.residencies[1].restore_start = AtMs(6);  // B's copy ends at 11, its run starts at 10
  ExpectViolation(TwoFunctions(), schedule, "restore-before");
}

TEST(ExactScheduleTest, CatchesRunAfterResidencyEnd) {
  ExactSchedule schedule = ValidSchedule();
  schedule.residencies[0].end = AtMs(8);
  ExpectViolation(TwoFunctions(), schedule, "restore-before");
}

TEST(ExactScheduleTest, CatchesPrefetch) {
  ExactInstance instance = TwoFunctions();
  instance.requests[2].release = AtMs(4);  // B restores at 5 > 4: fine
  EXPECT_TRUE(ValidateSchedule(instance, ValidSchedule()).ok());
  instance.requests[2].release = AtMs(5.5);  // now B's restore at 5 precedes its only request
  ExpectViolation(instance, ValidSchedule(), "prefetch");
}

TEST(ExactScheduleTest, CatchesGpuExclusive) {
  ExactSchedule schedule = ValidSchedule();
  schedule.executions[1].start = AtMs(9.5);  // A's second run overlaps B's run at 10
  schedule.executions[1].end = AtMs(11.5);
  schedule.residencies[0].end = AtMs(11.5);
  ExpectViolation(TwoFunctions(), schedule, "gpu-exclusive");
}

TEST(ExactScheduleTest, CatchesCopyEngine) {
  ExactSchedule schedule = ValidSchedule();
  schedule.residencies[1].restore_start = AtMs(4);  // B's copy [4, 9) overlaps A's [0, 5)
  ExpectViolation(TwoFunctions(), schedule, "copy-engine");
}

TEST(ExactScheduleTest, CatchesSingleCopy) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("a", 1, 2)};
  instance.requests = {RequestAt(0, 0, 20), RequestAt(0, 0, 20)};
  // Two residencies of A one after the other: [0, 7) and [7, 14).
  ExactSchedule schedule;
  schedule.residencies = {Residency{0, 0, AtMs(0), AtMs(7)}, Residency{0, 0, AtMs(7), AtMs(14)}};
  schedule.executions = {Execution{0, AtMs(5), AtMs(7)}, Execution{1, AtMs(12), AtMs(14)}};
  ASSERT_TRUE(ValidateSchedule(instance, schedule).ok())
      << ValidateSchedule(instance, schedule).ToString();
  schedule.residencies[1].restore_start = AtMs(6);  // copies still disjoint, residencies not
  ExpectViolation(instance, schedule, "single-copy");
}

TEST(ExactScheduleTest, CatchesMemory) {
  // 3 slices of memory: A (2 slices) and B (1 slice) fit together; with 2 slices they do not.
  EXPECT_TRUE(ValidateSchedule(TwoFunctions(3 * kSliceBytes), ValidSchedule()).ok());
  ExpectViolation(TwoFunctions(2 * kSliceBytes), ValidSchedule(), "memory");
  // B restores at 7 ms, the instant A is released: that fits (intervals are half-open).
  ExactInstance instance = TwoFunctions(2 * kSliceBytes);
  instance.requests = {RequestAt(0, 0, 20), RequestAt(1, 0, 30)};
  ExactSchedule schedule;
  schedule.residencies = {Residency{0, 0, AtMs(0), AtMs(7)}, Residency{1, 0, AtMs(7), AtMs(14)}};
  schedule.executions = {Execution{0, AtMs(5), AtMs(7)}, Execution{1, AtMs(12), AtMs(14)}};
  EXPECT_TRUE(ValidateSchedule(instance, schedule).ok())
      << ValidateSchedule(instance, schedule).ToString();
  schedule.residencies[1].restore_start = AtMs(6.9);
  ExpectViolation(instance, schedule, "memory");
}

TEST(ExactScheduleTest, PeakGpusCountsGpusHoldingASliceAtOnce) {
  EXPECT_EQ(PeakGpus(ExactSchedule{}), 0);
  ExactSchedule schedule;
  // GPU 0 holds two overlapping residencies [0, 10) and [5, 12), then [20, 30): one GPU.
  schedule.residencies = {Residency{0, 0, AtMs(0), AtMs(10)}, Residency{1, 0, AtMs(5), AtMs(12)},
                          Residency{0, 0, AtMs(20), AtMs(30)}};
  EXPECT_EQ(PeakGpus(schedule), 1);
  // GPU 1 from 12 to 20, while GPU 0 is empty (half-open: touching periods do not overlap).
  schedule.residencies.push_back(Residency{1, 1, AtMs(12), AtMs(20)});
  EXPECT_EQ(PeakGpus(schedule), 1);
  // GPU 2 from 25 to 40, while GPU 0 holds [20, 30): two at once.
  schedule.residencies.push_back(Residency{1, 2, AtMs(25), AtMs(40)});
  EXPECT_EQ(PeakGpus(schedule), 2);
  // GPU 1 again from 8 to 9 (GPU 0 holds two residencies then): still two.
  schedule.residencies.push_back(Residency{0, 1, AtMs(8), AtMs(9)});
  EXPECT_EQ(PeakGpus(schedule), 2);
  // GPU 3 from 26 to 27: three.
  schedule.residencies.push_back(Residency{0, 3, AtMs(26), AtMs(27)});
  EXPECT_EQ(PeakGpus(schedule), 3);
}

TEST(ExactScheduleTest, RejectsMalformedInstance) {
  ExactInstance instance = TwoFunctions();
  instance.num_gpus = 0;
  EXPECT_EQ(ValidateSchedule(instance, ValidSchedule()).code(), StatusCode::kInvalidArgument);
  instance = TwoFunctions();
  instance.requests[0].function = 7;
  EXPECT_EQ(ValidateInstance(instance).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare::exact
