#include "gshare/node/switch/checkpoint_api_switch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>
#include <vector>

namespace gshare {
namespace {

constexpr std::string_view kRestartAdvice =
    "it cannot run, and must be killed and another instance started";

// "the process was left checkpointed", or why its state is unknown.
std::string StateLeft(const Result<ProcessCheckpointState>& found) {
  if (!found.ok()) return fmt::format("its state could not be read ({})", found.status().message());
  return fmt::format("the process was left {}", ProcessCheckpointStateName(*found));
}

}  // namespace

std::shared_ptr<CheckpointApiSwitch> CheckpointApiSwitch::Create(
    CheckpointApiSwitchContext context, std::string name, int pid,
    CheckpointApiSwitchOptions options) {
  return std::shared_ptr<CheckpointApiSwitch>(
      new CheckpointApiSwitch(context, std::move(name), pid, options));
}

CheckpointApiSwitch::CheckpointApiSwitch(CheckpointApiSwitchContext context, std::string name,
                                         int pid, CheckpointApiSwitchOptions options)
    : context_(context), name_(std::move(name)), pid_(pid), options_(options) {}

template <typename Call, typename Then>
void CheckpointApiSwitch::OnWorker(Call call, Then then) {
  call_in_flight_ = true;
  boost::asio::post(context_.workers, [self = shared_from_this(), call = std::move(call),
                                       then = std::move(then)]() mutable {
    const TimePoint began = self->context_.clock.Now();
    auto result = call(self->context_.api, static_cast<int>(self->pid_));
    const Duration took = self->context_.clock.Now() - began;
    boost::asio::post(self->context_.loop,
                      [self, then = std::move(then), result = std::move(result), took]() mutable {
                        self->call_in_flight_ = false;
                        if (self->state_ == SwitchState::kFailed) {  // closed meanwhile
                          self->buffer_ = nullptr;
                          return self->Complete(self->failure_);
                        }
                        then(std::move(result), took);
                      });
  });
}

Status CheckpointApiSwitch::CheckState(SwitchState expected, std::string_view operation) const {
  if (state_ == SwitchState::kFailed) return Unavailable(failure_.message());
  if (state_ != expected || pending_) {
    return FailedPrecondition(fmt::format("{} while {}{}", Context(operation),
                                          SwitchStateName(state_),
                                          pending_ ? " (an operation is pending)" : ""));
  }
  return Status::Ok();
}

bool CheckpointApiSwitch::Begin(const Status& refused, Done& done) {
  if (!refused.ok()) {
    boost::asio::post(context_.loop, [done = std::move(done), refused] { done(refused); });
    return false;
  }
  pending_ = std::move(done);
  timings_ = CheckpointApiTimings{};
  return true;
}

Result<GpuUuidBytes> CheckpointApiSwitch::CheckBuffer(const DeviceBuffer& buffer,
                                                      std::uint64_t quota_bytes) const {
  if (quota_bytes > buffer.size_bytes()) {
    return InvalidArgument(fmt::format("{}: a quota of {} is larger than its slice of {}", name_,
                                       quota_bytes, buffer.size_bytes()));
  }
  auto uuid = ParseGpuUuid(buffer.device().info().uuid);
  if (!uuid.ok()) {
    return uuid.status().WithContext(name_ + ": a checkpoint-API switch needs a CUDA GPU's slice");
  }
  if (uuid->kind != GpuUuidKind::kGpu &&
      !(options_.accept_emulated_gpus && uuid->kind == GpuUuidKind::kEmulated)) {
    return InvalidArgument(fmt::format(
        "{}: a checkpoint-API switch needs a whole CUDA GPU's slice, not {} (a MIG instance or an "
        "emulated GPU)",
        name_, buffer.device().info().uuid));
  }
  return uuid->bytes;
}

std::optional<GpuUuidBytes> CheckpointApiSwitch::BeginWithSlice(SwitchState expected,
                                                                std::string_view operation,
                                                                DeviceBuffer& buffer,
                                                                std::uint64_t quota_bytes,
                                                                Done& done) {
  Status refused = CheckState(expected, operation);
  Result<GpuUuidBytes> uuid = GpuUuidBytes{};
  if (refused.ok()) uuid = CheckBuffer(buffer, quota_bytes);
  if (refused.ok() && !uuid.ok()) refused = uuid.status();
  if (!Begin(refused, done)) return std::nullopt;
  buffer_ = &buffer;
  quota_bytes_ = quota_bytes;
  return *uuid;
}

void CheckpointApiSwitch::Attach(DeviceBuffer& buffer, std::uint64_t quota_bytes,
                                 ComputeArbiter* /*gpu*/, Done done) {
  const std::optional<GpuUuidBytes> gpu =
      BeginWithSlice(SwitchState::kStarting, "attach", buffer, quota_bytes, done);
  if (!gpu) return;
  gpu_ = *gpu;
  // The process made its own context on this GPU: nothing to move. Completes on the loop, as a
  // driver call would.
  call_in_flight_ = true;
  boost::asio::post(context_.loop, [self = shared_from_this()] {
    self->call_in_flight_ = false;
    if (self->state_ == SwitchState::kFailed) {
      self->buffer_ = nullptr;
      return self->Complete(self->failure_);
    }
    self->state_ = SwitchState::kResident;
    self->Complete(Status::Ok());
  });
}

void CheckpointApiSwitch::Checkpoint(bool /*force_copy*/, Done done) {
  if (!Begin(CheckState(SwitchState::kResident, "checkpoint"), done)) return;
  state_ = SwitchState::kLocking;
  OnWorker([timeout = options_.lock_timeout](ProcessCheckpointApi& api,
                                             int pid) { return api.Lock(pid, timeout); },
           [this](Status locked, Duration took) {
             timings_.lock = took;
             OnLocked(std::move(locked));
           });
}

void CheckpointApiSwitch::OnLocked(Status locked) {
  if (locked.ok()) {
    state_ = SwitchState::kCheckpointing;
    OnWorker([](ProcessCheckpointApi& api, int pid) { return api.Checkpoint(pid); },
             [this](Status checkpointed, Duration took) {
               timings_.checkpoint = took;
               OnCheckpointed(std::move(checkpointed));
             });
    return;
  }
  const std::string context = Context("checkpoint");
  if (locked.code() == StatusCode::kUnavailable) {
    // The driver refuses the API here: the process was never touched.
    state_ = SwitchState::kResident;
    return Complete(FailedPrecondition(fmt::format("{}: {}: {}; it stays resident", context,
                                                   kCheckpointApiRefused, locked.message())));
  }
  if (locked.code() == StatusCode::kDeadlineExceeded) {
    // The driver leaves a process whose lock timed out running; unlocking is a safeguard.
    OnWorker([](ProcessCheckpointApi& api, int pid) { return api.Unlock(pid); },
             [this, context, locked](Status unlocked, Duration took) {
               timings_.unlock = took;
               state_ = SwitchState::kResident;
               Complete(DeadlineExceeded(fmt::format(
                   "{}: its work in flight did not end within {} ms ({}); it stays resident "
                   "(unlock attempted: {})",
                   context, options_.lock_timeout.count(), locked.message(),
                   unlocked.ok() ? "done" : unlocked.message())));
             });
    return;
  }
  Recover(locked.WithContext(context));
}

void CheckpointApiSwitch::OnCheckpointed(Status checkpointed) {
  if (!checkpointed.ok()) return Recover(checkpointed.WithContext(Context("checkpoint")));
  state_ = SwitchState::kCheckpointed;
  buffer_ = nullptr;  // the driver holds the memory now, in the process's host memory
  // The driver's calls that moved the memory (the bytes are the driver's and not counted).
  last_checkpoint_ = TransferReport{.elapsed = timings_.lock + timings_.checkpoint};
  Complete(Status::Ok());
}

void CheckpointApiSwitch::Recover(Status error) {
  OnWorker(
      [](ProcessCheckpointApi& api, int pid) { return api.Unlock(pid); },
      [this, error](Status unlocked, Duration took) {
        timings_.unlock = took;
        if (unlocked.ok()) {
          state_ = SwitchState::kResident;
          return Complete(Status(error.code(), error.message() + "; it stays resident"));
        }
        OnWorker(
            [](ProcessCheckpointApi& api, int pid) { return api.GetState(pid); },
            [this, error, unlocked](Result<ProcessCheckpointState> found, Duration query_took) {
              timings_.state_query = query_took;
              if (found.ok() && *found == ProcessCheckpointState::kRunning) {
                state_ = SwitchState::kResident;
                return Complete(Status(error.code(), error.message() + "; it stays resident"));
              }
              Fail(Status(error.code(),
                          fmt::format("{}; unlock failed too ({}); {}: {}", error.message(),
                                      unlocked.message(), StateLeft(found), kRestartAdvice)));
            });
      });
}

void CheckpointApiSwitch::Restore(DeviceBuffer& buffer, std::uint64_t quota_bytes,
                                  ComputeArbiter* /*gpu*/, Done done) {
  const std::optional<GpuUuidBytes> target =
      BeginWithSlice(SwitchState::kCheckpointed, "restore", buffer, quota_bytes, done);
  if (!target) return;
  target_ = *target;
  state_ = SwitchState::kRestoring;
  std::vector<GpuPair> pairs;
  if (target_ != gpu_) pairs.push_back(GpuPair{.from = gpu_, .to = target_});
  OnWorker([pairs = std::move(pairs)](ProcessCheckpointApi& api,
                                      int pid) { return api.Restore(pid, pairs); },
           [this](Status restored, Duration took) {
             timings_.restore = took;
             OnRestored(std::move(restored));
           });
}

void CheckpointApiSwitch::OnRestored(Status restored) {
  if (!restored.ok()) return FailWithState(restored.WithContext(Context("restore")));
  OnWorker([](ProcessCheckpointApi& api, int pid) { return api.Unlock(pid); },
           [this](Status unlocked, Duration took) {
             timings_.unlock = took;
             OnRestoreUnlocked(std::move(unlocked));
           });
}

void CheckpointApiSwitch::OnRestoreUnlocked(Status unlocked) {
  if (!unlocked.ok()) {
    return FailWithState(unlocked.WithContext(Context("unlock after its restore")));
  }
  gpu_ = target_;
  state_ = SwitchState::kResident;
  last_restore_ = TransferReport{.elapsed = timings_.restore + timings_.unlock};
  Complete(Status::Ok());
}

void CheckpointApiSwitch::FailWithState(Status error) {
  OnWorker([](ProcessCheckpointApi& api, int pid) { return api.GetState(pid); },
           [this, error](Result<ProcessCheckpointState> found, Duration took) {
             timings_.state_query = took;
             Fail(Status(error.code(), fmt::format("{}; {}: {}", error.message(), StateLeft(found),
                                                   kRestartAdvice)));
           });
}

void CheckpointApiSwitch::SetQuota(std::uint64_t quota_bytes) {
  if (state_ != SwitchState::kResident || buffer_ == nullptr) return;
  quota_bytes_ = std::min(quota_bytes, buffer_->size_bytes());
}

std::string CheckpointApiSwitch::Context(std::string_view operation) const {
  return fmt::format("{} (pid {}): {}", name_, pid_, operation);
}

void CheckpointApiSwitch::Complete(Status status) {
  Done done = std::move(pending_);
  pending_ = nullptr;
  if (done) done(std::move(status));
}

void CheckpointApiSwitch::Fail(Status why) {
  if (state_ == SwitchState::kFailed) return;
  state_ = SwitchState::kFailed;
  failure_ = Unavailable(why.message());
  if (!closed_) spdlog::warn("{}", failure_.message());
  // A driver call in flight still counts on the buffer: its completion lets it go.
  if (call_in_flight_) return;
  buffer_ = nullptr;
  Complete(failure_);
}

void CheckpointApiSwitch::Close() {
  if (closed_) return;
  closed_ = true;
  Fail(Cancelled(Context("closed")));
}

}  // namespace gshare
