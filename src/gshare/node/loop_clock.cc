#include "gshare/node/loop_clock.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace gshare {
namespace {

class SteadyTimer final : public LoopTimer::Impl {
 public:
  SteadyTimer(boost::asio::io_context& loop, Duration wait, std::function<void()> fire)
      : timer_(loop, std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait)) {
    timer_.async_wait(
        [live = live_, fire = std::move(fire)](const boost::system::error_code& error) {
          if (!error && *live) fire();
        });
  }
  ~SteadyTimer() override { Cancel(); }
  void Cancel() override {
    *live_ = false;
    timer_.cancel();
  }

 private:
  std::shared_ptr<bool> live_ = std::make_shared<bool>(true);
  boost::asio::steady_timer timer_;
};

}  // namespace

LoopTimer SteadyLoopClock::At(TimePoint at, std::function<void()> fire) {
  return LoopTimer(std::make_unique<SteadyTimer>(loop_, std::max(at - Now(), Duration::zero()),
                                                 std::move(fire)));
}

// A pending timer of the manual clock: its entry until it is posted, then its liveness flag.
class ManualLoopClock::Timer final : public LoopTimer::Impl {
 public:
  Timer(ManualLoopClock& clock, Key key, std::shared_ptr<bool> live)
      : clock_(clock), key_(key), live_(std::move(live)) {}
  ~Timer() override { Cancel(); }
  void Cancel() override {
    *live_ = false;
    clock_.timers_.erase(key_);
  }

 private:
  ManualLoopClock& clock_;
  const Key key_;
  std::shared_ptr<bool> live_;
};

ManualLoopClock::~ManualLoopClock() {
  for (auto& [key, entry] : timers_) *entry.live = false;
}

LoopTimer ManualLoopClock::At(TimePoint at, std::function<void()> fire) {
  auto live = std::make_shared<bool>(true);
  const Key key{at, next_sequence_++};
  if (at <= Now()) {
    boost::asio::post(loop_, [live, fire = std::move(fire)] {
      if (*live) fire();
    });
  } else {
    timers_.emplace(key, Entry{std::move(fire), live});
  }
  return LoopTimer(std::make_unique<Timer>(*this, key, std::move(live)));
}

void ManualLoopClock::AdvanceTo(TimePoint to) {
  clock_.AdvanceTo(to);
  const TimePoint now = Now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    Entry entry = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    boost::asio::post(loop_, [live = entry.live, fire = std::move(entry.fire)] {
      if (*live) fire();
    });
  }
}

std::optional<TimePoint> ManualLoopClock::NextTimer() const {
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first.first;
}

Status ManualLoopClock::RunUntil(const std::function<bool()>& done,
                                 const std::function<bool()>& working, std::chrono::seconds limit) {
  const SteadyClock& wall = SteadyClock::Shared();
  const TimePoint give_up = wall.Now() + limit;
  while (!done()) {
    if (loop_.poll() > 0) continue;
    if (done()) break;
    const TimePoint now = Now();
    const std::optional<TimePoint> sleeper = clock_.EarliestSleeper();
    const std::optional<TimePoint> timer = NextTimer();
    std::optional<TimePoint> to;
    if (sleeper && *sleeper > now) to = *sleeper;
    // A timer is next only when nothing else runs, or someone waits on the clock anyway.
    if (timer && ((sleeper && *sleeper > now) || !working())) {
      to = to ? std::min(*to, *timer) : *timer;
    }
    if (to) {
      AdvanceTo(*to);
      continue;
    }
    if (wall.Now() > give_up) {
      return DeadlineExceeded(fmt::format(
          "the node did not settle within {} s of wall time (manual time {:.3f} s, {} timers "
          "pending)",
          limit.count(), ToSeconds(now - TimePoint{}), timers_.size()));
    }
    loop_.run_one_for(std::chrono::milliseconds(10));  // real work posts its completion
  }
  return Status::Ok();
}

}  // namespace gshare
