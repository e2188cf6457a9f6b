#include "gshare/node/switch/channel_switch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <utility>

#include "gshare/common/units.h"

namespace gshare {

// kMap's `reserved` is the fd's kind: the device's name for it and the protocol's agree.
static_assert(static_cast<std::uint32_t>(MemoryHandleKind::kMemfd) ==
              static_cast<std::uint32_t>(fn::MapHandleKind::kMemfd));
static_assert(static_cast<std::uint32_t>(MemoryHandleKind::kCudaPosixFd) ==
              static_cast<std::uint32_t>(fn::MapHandleKind::kCudaPosixFd));
namespace {

using fn::ControlMessage;
using fn::ControlType;

// Memory this switch can hand to a function process: a GPU's whose allocations export as file
// descriptors (an emulated GPU's memfds; CUDA virtual memory, for the allocator shim).
Status CheckShareable(const DeviceBuffer& buffer) {
  const DeviceInfo& info = buffer.device().info();
  if (info.memory_exportable) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{}: its memory cannot be handed to a function process ({})", info.name,
      info.memory_export_note.empty() ? "not an emulated GPU" : info.memory_export_note));
}

}  // namespace

std::shared_ptr<ChannelSwitch> ChannelSwitch::Create(SwitchContext context, std::string snapshot_id,
                                                     fn::ControlChannel channel,
                                                     std::function<void(Status)> on_failure) {
  std::shared_ptr<ChannelSwitch> created(new ChannelSwitch(
      context, std::move(snapshot_id), std::move(channel), std::move(on_failure)));
  created->Listen();
  return created;
}

ChannelSwitch::ChannelSwitch(SwitchContext context, std::string snapshot_id,
                             fn::ControlChannel channel, std::function<void(Status)> on_failure)
    : context_(context),
      snapshot_id_(std::move(snapshot_id)),
      channel_(std::move(channel)),
      reader_(context.loop, ::dup(channel_.fd())),
      on_failure_(std::move(on_failure)) {}

ChannelSwitch::~ChannelSwitch() {
  if (gpu_ != nullptr) gpu_->Withdraw(this);
}

Status ChannelSwitch::Send(const ControlMessage& message, int fd) {
  return channel_.Send(message, fd);
}

void ChannelSwitch::Listen() {
  if (closed_ || state_ == SwitchState::kFailed) return;
  reader_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [weak = weak_from_this()](const boost::system::error_code& error) {
                       auto self = weak.lock();
                       if (!self || error) return;
                       self->OnReadable();
                     });
}

void ChannelSwitch::OnReadable() {
  for (;;) {
    if (closed_ || state_ == SwitchState::kFailed) return;
    bool would_block = false;
    auto received = channel_.TryReceive(would_block);
    if (would_block) break;
    if (!received.ok()) {
      Fail(received.status());
      return;
    }
    OnMessage(std::move(received).value());
  }
  Listen();
}

void ChannelSwitch::OnMessage(fn::ReceivedMessage received) {
  const ControlMessage& message = received.message;
  switch (message.type) {
    case ControlType::kHello:
      if (hello_) return Fail(InvalidArgument("a second hello"));
      hello_ = true;
      pid_ = static_cast<std::int64_t>(message.a);
      if (state_ == SwitchState::kStarting && buffer_ != nullptr) {
        state_ = SwitchState::kMapping;
        SendMap();
      }
      return;
    case ControlType::kMapped:
      if (!awaiting_mapped_ || message.c != generation_) {
        return Fail(InvalidArgument("an unexpected mapped"));
      }
      awaiting_mapped_ = false;
      if (message.a != 0) return Fail(Internal("the instance could not map its device memory"));
      steps_.map = context_.clock.Now() - map_sent_;
      if (state_ == SwitchState::kMapping) return FinishMapping();
      // A restore: the copy may still run, or have failed.
      if (copy_in_flight_) return;
      if (!restore_failure_.ok()) {
        state_ = SwitchState::kUnmapping;
        if (const Status sent = Send({.type = ControlType::kUnmap}); !sent.ok()) Fail(sent);
        return;
      }
      return FinishMapping();
    case ControlType::kLocked:
      if (state_ != SwitchState::kLocking) return Fail(InvalidArgument("an unexpected locked"));
      if (gpu_ != nullptr) gpu_->Withdraw(this);
      return StartCheckpointCopy(message.a, message.b != 0);
    case ControlType::kUnmapped:
      if (state_ != SwitchState::kUnmapping) return Fail(InvalidArgument("an unexpected unmapped"));
      state_ = SwitchState::kCheckpointed;
      gpu_ = nullptr;
      buffer_ = nullptr;
      // A checkpoint's end, or a failed restore's (its buffer no longer mapped).
      timing_restore_ = false;
      return Complete(std::exchange(restore_failure_, Status::Ok()));
    case ControlType::kComputeAcquire:
      // Outside residency the instance is locked or unmapped, and its request is void.
      if (state_ == SwitchState::kResident && gpu_ != nullptr) gpu_->Acquire(this);
      return;
    case ControlType::kComputeRelease:
      if (gpu_ != nullptr) gpu_->Release(this);
      return;
    case ControlType::kQuotaExceeded:
      ++quota_exceeded_;
      spdlog::warn(
          "instance {} (pid {}): an allocation of {} exceeded its slice's quota of {} "
          "({} in use); that request fails",
          snapshot_id_, pid_, FormatBytes(message.a), FormatBytes(message.b),
          FormatBytes(message.c));
      return;
    default:
      return Fail(
          InvalidArgument(fmt::format("the instance sent {}", fn::ControlTypeName(message.type))));
  }
}

void ChannelSwitch::SendMap() {
  ++generation_;
  awaiting_mapped_ = true;
  map_sent_ = context_.clock.Now();
  auto exported = buffer_->Export();
  if (!exported.ok()) return FailSoon(exported.status());
  // The kernel duplicates the descriptor into the message; ours closes when `exported` goes.
  const Status sent = Send({.type = ControlType::kMap,
                            .reserved = static_cast<std::uint32_t>(exported->kind),
                            .a = exported->bytes,
                            .b = quota_bytes_,
                            .c = generation_},
                           exported->fd.get());
  if (!sent.ok()) FailSoon(sent);
}

void ChannelSwitch::Attach(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
                           Done done) {
  Status refused;
  if (state_ != SwitchState::kStarting || buffer_ != nullptr || pending_) {
    refused = FailedPrecondition(
        fmt::format("instance {}: attach while {}", snapshot_id_, SwitchStateName(state_)));
  } else if (Status shareable = CheckShareable(buffer); !shareable.ok()) {
    refused = shareable;
  } else if (quota_bytes > buffer.size_bytes()) {
    refused = InvalidArgument("a quota larger than the slice's memory");
  }
  if (!TakeOn(refused, &buffer, quota_bytes, gpu, done)) return;
  if (hello_) {
    state_ = SwitchState::kMapping;
    SendMap();
  }
}

bool ChannelSwitch::TakeOn(const Status& refused, DeviceBuffer* buffer, std::uint64_t quota_bytes,
                           ComputeArbiter* gpu, Done& done) {
  if (!refused.ok()) {
    boost::asio::post(context_.loop, [done = std::move(done), refused] { done(refused); });
    return false;
  }
  buffer_ = buffer;
  quota_bytes_ = quota_bytes;
  gpu_ = gpu;
  pending_ = std::move(done);
  return true;
}

void ChannelSwitch::Checkpoint(bool force_copy, Done done) {
  if (state_ != SwitchState::kResident || pending_) {
    const Status refused =
        state_ == SwitchState::kFailed
            ? Unavailable(fmt::format("instance {} failed: {}", snapshot_id_, failure_.ToString()))
            : FailedPrecondition(fmt::format("instance {}: checkpoint while {}", snapshot_id_,
                                             SwitchStateName(state_)));
    boost::asio::post(context_.loop, [done = std::move(done), refused] { done(refused); });
    return;
  }
  pending_ = std::move(done);
  force_copy_ = force_copy;
  state_ = SwitchState::kLocking;
  if (const Status sent = Send({.type = ControlType::kLock}); !sent.ok()) FailSoon(sent);
}

void ChannelSwitch::StartCheckpointCopy(std::uint64_t used_bytes, bool written) {
  if (used_bytes > buffer_->size_bytes()) {
    return Fail(
        InvalidArgument(fmt::format("the instance reports {} bytes in use in a {}-byte slice",
                                    used_bytes, buffer_->size_bytes())));
  }
  if (snapshot_ && (used_bytes == 0 || snapshot_->size_bytes() != used_bytes)) {
    snapshot_ = SnapshotRef();
    (void)context_.snapshots.Remove(snapshot_id_);
  }
  if (used_bytes == 0) {  // nothing to keep
    last_checkpoint_ = TransferReport{.skipped = true};
    state_ = SwitchState::kUnmapping;
    if (const Status sent = Send({.type = ControlType::kUnmap}); !sent.ok()) Fail(sent);
    return;
  }
  if (!snapshot_) {
    auto created = context_.snapshots.Create(snapshot_id_, used_bytes);
    if (!created.ok()) {
      // No room in host memory: the instance stays where it is.
      state_ = SwitchState::kResident;
      (void)Send({.type = ControlType::kUnlock});
      return Complete(created.status().WithContext("checkpoint of " + snapshot_id_));
    }
    snapshot_ = std::move(created).value();
  }
  // The function says whether it wrote its image since it was mapped (a frozen image is clean):
  // marking the buffer written makes the restore engine look at it (it copies the chunks whose
  // digest changed, or all of them when the snapshot knows no digests); otherwise a snapshot
  // that holds this buffer is skipped (fast swap). A forced checkpoint copies everything.
  if (written) buffer_->MarkWritten();
  state_ = SwitchState::kCheckpointing;
  copy_in_flight_ = true;
  // The copy holds its own handle on the snapshot: Close may drop the switch's meanwhile.
  // The last handles (the switch, the snapshot) go with the posted handler, on the loop, never on
  // the device's thread.
  auto on_copied = [self = shared_from_this(),
                    snapshot = snapshot_](Result<TransferReport> report) mutable {
    boost::asio::io_context& loop = self->context_.loop;
    boost::asio::post(loop, [self = std::move(self), snapshot = std::move(snapshot),
                             report = std::move(report)]() mutable {
      self->OnCheckpointCopied(std::move(report));
    });
  };
  if (Status not_started = context_.engine.StartCheckpointImage(
          *buffer_, snapshot_->size_bytes(), *snapshot_, nullptr, on_copied,
          // Digests only for an image that may have been written: a frozen one is skipped.
          {.copy_all = force_copy_, .digests = written});
      !not_started.ok()) {
    on_copied(std::move(not_started));
  }
}

bool ChannelSwitch::EndCopy() {
  copy_in_flight_ = false;
  if (state_ != SwitchState::kFailed) return false;
  buffer_ = nullptr;  // no copy touches it any more
  Complete(failure_);
  return true;
}

void ChannelSwitch::OnCheckpointCopied(Result<TransferReport> report) {
  if (EndCopy()) return;
  if (!report.ok()) {
    state_ = SwitchState::kResident;
    (void)Send({.type = ControlType::kUnlock});
    return Complete(report.status());
  }
  last_checkpoint_ = *report;
  state_ = SwitchState::kUnmapping;
  if (const Status sent = Send({.type = ControlType::kUnmap}); !sent.ok()) Fail(sent);
}

void ChannelSwitch::Restore(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
                            Done done) {
  Status refused;
  if (state_ != SwitchState::kCheckpointed || pending_) {
    refused =
        state_ == SwitchState::kFailed
            ? Unavailable(fmt::format("instance {} failed: {}", snapshot_id_, failure_.ToString()))
            : FailedPrecondition(fmt::format("instance {}: restore while {}", snapshot_id_,
                                             SwitchStateName(state_)));
  } else if (Status shareable = CheckShareable(buffer); !shareable.ok()) {
    refused = shareable;
  } else if (quota_bytes > buffer.size_bytes() ||
             (snapshot_ && snapshot_->size_bytes() > quota_bytes)) {
    refused = InvalidArgument(fmt::format(
        "instance {}: a quota of {} does not hold its image of {} in a slice of {}", snapshot_id_,
        quota_bytes, snapshot_ ? snapshot_->size_bytes() : 0, buffer.size_bytes()));
  }
  if (!TakeOn(refused, &buffer, quota_bytes, gpu, done)) return;
  steps_ = RestoreSteps{};
  restore_started_ = context_.clock.Now();
  timing_restore_ = true;
  if (!snapshot_) {  // an empty image: nothing to copy
    last_restore_ = TransferReport{.skipped = true};
    state_ = SwitchState::kMapping;
    SendMap();
    return;
  }
  state_ = SwitchState::kRestoring;
  copy_in_flight_ = true;
  // The map goes out first: the instance maps its new slice while the bytes are copied into it.
  SendMap();
  // The engine's last copy stream callback posts the end to the loop (the handles with it).
  auto on_copied = [self = shared_from_this(),
                    snapshot = snapshot_](Result<TransferReport> report) mutable {
    boost::asio::io_context& loop = self->context_.loop;
    boost::asio::post(
        loop, [self = std::move(self), snapshot = std::move(snapshot),
               report = std::move(report)]() mutable { self->OnRestoreCopied(std::move(report)); });
  };
  if (Status not_started = context_.engine.StartRestore(*snapshot_, *buffer_, nullptr, on_copied);
      !not_started.ok()) {
    on_copied(std::move(not_started));
  }
}

void ChannelSwitch::OnRestoreCopied(Result<TransferReport> report) {
  if (EndCopy()) return;
  if (!report.ok()) {
    restore_failure_ = report.status();
    if (awaiting_mapped_) return;  // the instance's answer unmaps it (OnMessage)
    state_ = SwitchState::kUnmapping;
    if (const Status sent = Send({.type = ControlType::kUnmap}); !sent.ok()) Fail(sent);
    return;
  }
  last_restore_ = *report;
  steps_.start = report->started - restore_started_;
  steps_.copy = report->elapsed;
  steps_.copy_notice = context_.clock.Now() - (report->started + report->elapsed);
  if (!awaiting_mapped_) FinishMapping();
}

void ChannelSwitch::FinishMapping() {
  if (const Status unlocked = Send({.type = ControlType::kUnlock}); !unlocked.ok()) {
    return Fail(unlocked);
  }
  state_ = SwitchState::kResident;
  if (std::exchange(timing_restore_, false)) {
    steps_.total = context_.clock.Now() - restore_started_;
    last_restore_steps_ = steps_;
  }
  Complete(Status::Ok());
}

void ChannelSwitch::Complete(Status status) {
  Done done = std::move(pending_);
  pending_ = nullptr;
  if (done) done(std::move(status));
}

void ChannelSwitch::Fail(Status why) {
  if (state_ == SwitchState::kFailed) return;
  state_ = SwitchState::kFailed;
  timing_restore_ = false;
  failure_ =
      Unavailable(fmt::format("instance {} (pid {}): {}", snapshot_id_, pid_, why.message()));
  if (!closed_) spdlog::warn("{}", failure_.message());
  if (gpu_ != nullptr) gpu_->Withdraw(this);
  gpu_ = nullptr;
  boost::system::error_code ignored;
  reader_.close(ignored);
  if (pending_) {
    // A copy in flight still touches the buffer: its completion lets it go.
    if (!copy_in_flight_) {
      buffer_ = nullptr;
      Complete(failure_);
    }
    return;
  }
  if (!copy_in_flight_) buffer_ = nullptr;
  if (on_failure_) on_failure_(failure_);
}

void ChannelSwitch::SetQuota(std::uint64_t quota_bytes) {
  if (state_ != SwitchState::kResident || buffer_ == nullptr) return;
  quota_bytes_ = std::min(quota_bytes, buffer_->size_bytes());
  if (const Status sent = Send({.type = ControlType::kSetQuota, .a = quota_bytes_}); !sent.ok()) {
    FailSoon(sent);
  }
}

void ChannelSwitch::FailSoon(Status why) {
  // From inside a caller's action: the failure (and any callback it completes) comes on the loop.
  boost::asio::post(context_.loop, [weak = weak_from_this(), why = std::move(why)] {
    if (auto self = weak.lock()) self->Fail(why);
  });
}

void ChannelSwitch::Close() {
  if (closed_) return;
  closed_ = true;
  if (snapshot_) {
    snapshot_ = SnapshotRef();
    (void)context_.snapshots.Remove(snapshot_id_);
  }
  on_failure_ = nullptr;  // the caller asked for it
  Fail(Cancelled("closed"));
}

void ChannelSwitch::GrantCompute(Duration quantum) {
  const Status sent =
      Send({.type = ControlType::kComputeGrant,
            .a = static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(quantum).count())});
  if (!sent.ok()) {
    // Not from inside the arbiter's call: fail on the loop.
    boost::asio::post(context_.loop, [weak = weak_from_this(), sent] {
      if (auto self = weak.lock()) self->Fail(sent);
    });
  }
}

}  // namespace gshare
