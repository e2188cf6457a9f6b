#include "gshare/common/clock.h"

#include <fmt/format.h>

namespace gshare {

SteadyClock::SteadyClock() : origin_(std::chrono::steady_clock::now()) {}

TimePoint SteadyClock::Now() const {
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - origin_));
}

Status SimulatedClock::AdvanceTo(TimePoint t) {
  if (t < now_) {
    return FailedPrecondition(fmt::format("simulated clock cannot move back from {} to {}",
                                          FormatDuration(now_.time_since_epoch()),
                                          FormatDuration(t.time_since_epoch())));
  }
  now_ = t;
  return Status::Ok();
}

void SimulatedClock::ScheduleAt(TimePoint at, std::function<void()> callback) {
  timers_.Push(at < now_ ? now_ : at, std::move(callback));
}

bool SimulatedClock::RunNext() {
  if (timers_.empty()) return false;
  auto entry = timers_.Pop();
  now_ = entry.time;
  entry.payload();
  return true;
}

void SimulatedClock::RunUntil(TimePoint t) {
  while (!timers_.empty() && timers_.Top().time <= t) RunNext();
  if (t > now_) now_ = t;
}

}  // namespace gshare
