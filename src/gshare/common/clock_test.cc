#include "gshare/common/clock.h"

#include <gtest/gtest.h>

#include <string>

namespace gshare {
namespace {

using std::chrono::milliseconds;

TEST(SimulatedClockTest, FiresTimersInTimeOrderAndTiesInInsertionOrder) {
  SimulatedClock clock;
  std::string order;
  clock.ScheduleAt(TimePoint(milliseconds(20)), [&] { order += 'c'; });
  clock.ScheduleAt(TimePoint(milliseconds(10)), [&] { order += 'a'; });
  clock.ScheduleAt(TimePoint(milliseconds(10)), [&] { order += 'b'; });
  clock.ScheduleAt(TimePoint(milliseconds(30)), [&] { order += 'd'; });
  clock.RunUntil(TimePoint(milliseconds(25)));
  EXPECT_EQ(order, "abc");
  EXPECT_EQ(clock.Now(), TimePoint(milliseconds(25)));
  EXPECT_TRUE(clock.RunNext());
  EXPECT_EQ(order, "abcd");
  EXPECT_FALSE(clock.RunNext());
}

TEST(SimulatedClockTest, NeverMovesBackwards) {
  SimulatedClock clock;
  ASSERT_TRUE(clock.AdvanceTo(TimePoint(milliseconds(5))).ok());
  const Status back = clock.AdvanceTo(TimePoint(milliseconds(1)));
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(clock.Now(), TimePoint(milliseconds(5)));
  // A timer set in the past fires at the current time.
  TimePoint fired{};
  clock.ScheduleAt(TimePoint(milliseconds(1)), [&] { fired = clock.Now(); });
  clock.RunNext();
  EXPECT_EQ(fired, TimePoint(milliseconds(5)));
}

TEST(SteadyClockTest, IsMonotonic) {
  SteadyClock clock;
  const TimePoint a = clock.Now();
  const TimePoint b = clock.Now();
  EXPECT_LE(a, b);
  EXPECT_GE(a.time_since_epoch().count(), 0);
}

}  // namespace
}  // namespace gshare
