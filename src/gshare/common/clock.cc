#include "gshare/common/clock.h"

#include <algorithm>
#include <thread>

namespace gshare {

std::chrono::system_clock::time_point SystemTimeAfter(Duration after) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(after);
}

SteadyClock::SteadyClock() : origin_(std::chrono::steady_clock::now()) {}

TimePoint SteadyClock::Now() const {
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - origin_));
}

void SteadyClock::SleepUntil(TimePoint at) const {
  std::this_thread::sleep_until(
      origin_ +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(at.time_since_epoch()));
}

const SteadyClock& SteadyClock::Shared() {
  static const SteadyClock* const clock = new SteadyClock();
  return *clock;
}

TimePoint ManualClock::Now() const {
  MutexLock lock(mutex_);
  return now_;
}

void ManualClock::SleepUntil(TimePoint at) const {
  {
    MutexLock lock(mutex_);
    if (now_ >= at) return;
    if (!free_) {
      sleepers_.push_back(at);
      moved_.Wait(mutex_, [&]() REQUIRES(mutex_) { return now_ >= at || free_; });
      sleepers_.erase(std::find(sleepers_.begin(), sleepers_.end(), at));
      if (now_ >= at) return;
    }
    now_ = at;  // running free: the sleeper moves time itself
  }
  moved_.NotifyAll();
}

void ManualClock::RunFree() {
  {
    MutexLock lock(mutex_);
    free_ = true;
  }
  moved_.NotifyAll();
}

void ManualClock::AdvanceTo(TimePoint to) {
  {
    MutexLock lock(mutex_);
    if (to <= now_) return;
    now_ = to;
  }
  moved_.NotifyAll();
}

void ManualClock::Advance(Duration by) {
  {
    MutexLock lock(mutex_);
    if (by <= Duration::zero()) return;
    now_ += by;
  }
  moved_.NotifyAll();
}

std::optional<TimePoint> ManualClock::EarliestSleeper() const {
  MutexLock lock(mutex_);
  if (sleepers_.empty()) return std::nullopt;
  return *std::min_element(sleepers_.begin(), sleepers_.end());
}

}  // namespace gshare
