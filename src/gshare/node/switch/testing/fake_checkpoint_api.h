// FakeCheckpointApi: the driver's process checkpoint API (device/cuda/cuda_checkpoint.h) as a
// state machine per pid, with scripted failures, for tests of the checkpoint switch and of the
// live node's checkpoint functions on machines without a GPU.
//
// Every pid starts running. Calls in the wrong state fail as the driver's do (ILLEGAL_STATE); a
// scripted failure leaves the state as it was, or as scripted. Every call is recorded.
//
// Thread safety: every method may be called from any thread (the switches call from a worker).
// Test-only: not part of any library.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gshare/device/cuda/cuda_checkpoint.h"

namespace gshare::testing {

class FakeCheckpointApi final : public ProcessCheckpointApi {
 public:
  using State = ProcessCheckpointState;
  struct Call {
    std::string name{};
    int pid = 0;
    std::chrono::milliseconds timeout{};
    std::vector<GpuPair> pairs{};
  };

  // The next call `name` ("Lock", "Checkpoint", "Restore", "Unlock", "GetState"), of any pid,
  // fails with `status`, leaving that process in `leaves` (unchanged when empty).
  void FailNext(const std::string& name, Status status, std::optional<State> leaves = {}) {
    std::lock_guard lock(mutex_);
    failures_[name].push_back({std::move(status), leaves});
  }
  // The next call `name` blocks inside the driver until Release().
  void HoldNext(const std::string& name) {
    std::lock_guard lock(mutex_);
    hold_ = name;
  }
  void WaitUntilHeld() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return held_; });
  }
  // The same, for at most `limit` of wall time (a test's bound, not a synchronization): false
  // when no call was held by then.
  bool WaitUntilHeld(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return held_; });
  }
  void Release() {
    std::lock_guard lock(mutex_);
    hold_.reset();
    changed_.notify_all();
  }

  std::vector<std::string> call_names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const Call& call : calls_) names.push_back(call.name);
    return names;
  }
  std::vector<Call> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  // How many calls `name` were made.
  int count(const std::string& name) const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (const Call& call : calls_) n += call.name == name ? 1 : 0;
    return n;
  }
  void ClearCalls() {
    std::lock_guard lock(mutex_);
    calls_.clear();
  }
  State state(int pid) const {
    std::lock_guard lock(mutex_);
    auto it = states_.find(pid);
    return it == states_.end() ? State::kRunning : it->second;
  }

  Status Lock(int pid, std::chrono::milliseconds timeout) override {
    return Transition({.name = "Lock", .pid = pid, .timeout = timeout}, State::kRunning,
                      State::kLocked);
  }
  Status Checkpoint(int pid) override {
    return Transition({.name = "Checkpoint", .pid = pid}, State::kLocked, State::kCheckpointed);
  }
  Status Restore(int pid, std::span<const GpuPair> pairs) override {
    return Transition({.name = "Restore", .pid = pid, .pairs = {pairs.begin(), pairs.end()}},
                      State::kCheckpointed, State::kLocked);
  }
  Status Unlock(int pid) override {
    return Transition({.name = "Unlock", .pid = pid}, State::kLocked, State::kRunning);
  }
  Result<State> GetState(int pid) override {
    std::unique_lock lock(mutex_);
    if (auto failed = Enter({.name = "GetState", .pid = pid}, lock)) return *failed;
    return StateLocked(pid);
  }

 private:
  struct Failure {
    Status status;
    std::optional<State> leaves;
  };

  State& StateLocked(int pid) { return states_.try_emplace(pid, State::kRunning).first->second; }

  // Records the call, holds it when asked to, and returns its scripted failure, if any.
  std::optional<Status> Enter(Call call, std::unique_lock<std::mutex>& lock) {
    const std::string name = call.name;
    const int pid = call.pid;
    calls_.push_back(std::move(call));
    if (hold_ == name) {
      held_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !hold_.has_value(); });
      held_ = false;
    }
    auto it = failures_.find(name);
    if (it == failures_.end() || it->second.empty()) return std::nullopt;
    Failure failure = std::move(it->second.front());
    it->second.pop_front();
    if (failure.leaves) StateLocked(pid) = *failure.leaves;
    return failure.status;
  }

  Status Transition(Call call, State from, State to) {
    std::unique_lock lock(mutex_);
    const std::string name = call.name;
    const int pid = call.pid;
    if (auto failed = Enter(std::move(call), lock)) return *failed;
    State& state = StateLocked(pid);
    if (state != from) {
      return FailedPrecondition(
          fmt::format("cuCheckpointProcess{} (pid {}): CUDA_ERROR_ILLEGAL_STATE (while {})", name,
                      pid, ProcessCheckpointStateName(state)));
    }
    state = to;
    return Status::Ok();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, State> states_;
  std::vector<Call> calls_;
  std::map<std::string, std::deque<Failure>> failures_;
  std::optional<std::string> hold_;
  bool held_ = false;
};

}  // namespace gshare::testing
