#include "gshare/common/clock.h"
#include "gshare/common/timer_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace gshare {
namespace {

using std::chrono::milliseconds;

TEST(TimerQueueTest, PopsInTimeOrderAndTiesInInsertionOrder) {
  // The simulator's event order: what makes a seeded run reproducible.
  TimerQueue<char> queue;
  queue.Push(TimePoint(milliseconds(20)), 'c');
  queue.Push(TimePoint(milliseconds(10)), 'a');
  queue.Push(TimePoint(milliseconds(10)), 'b');
  queue.Push(TimePoint(milliseconds(30)), 'd');
  queue.Push(TimePoint(milliseconds(10)), 'x');
  std::string order;
  while (!queue.empty()) order += queue.Pop().payload;
  EXPECT_EQ(order, "abxcd");
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
