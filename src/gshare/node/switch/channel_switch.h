// ChannelSwitch: the SwitchDriver (switch_driver.h) that moves one function instance between
// host memory and GPUs over its control channel.
//
// The node side of the switching protocol (fn/control_channel.h) for one instance whose device
// memory the node hands it as a descriptor: a memfd segment of an emulated GPU (device/emulated),
// mapped by the function library, or an exported CUDA virtual-memory allocation, mapped by the
// CUDA allocator shim (the "shim" mechanism, switch_factory.h). The instance's code never knows:
//  - Attach maps the instance's first slice (it initializes its model there);
//  - Checkpoint locks the instance (its kernel in flight finishes, no other starts), copies the
//    image it reports through the restore engine into its host snapshot (nothing is copied when
//    the snapshot already holds it: fast swap), and unmaps the segment in the instance, after
//    which the caller may free the slice's buffer;
//  - Restore copies the snapshot into a buffer on any GPU of the node and, at the same time, has
//    the instance map that buffer at the same addresses (it is locked: nothing runs on the bytes
//    being copied); once both are done it unlocks the instance. A copy that fails after the map
//    was sent has the instance unmap the buffer before the restore completes with the error.
// While resident, the instance's compute requests go to the arbiter of its GPU.
//
// Every operation completes by calling its callback on the event loop, never from inside the
// call. Buffers are the caller's (with their accounting) and are borrowed: one passed to Attach or
// Restore must stay alive until a Checkpoint ends the residency, or until the operation fails, or
// until the switch fails (on_failure, or the failed operation's callback). When the instance dies
// or breaks the protocol, the switch fails: a pending operation completes with Unavailable once
// no copy touches its buffer any more, and every later call fails at once.
//
// Threading: every method on the event loop (`context.loop`); copies run on the restore engine's
// copy streams, whose last callback posts the transfer's end to the loop. The loop starts the
// transfers, so it takes the snapshot's transfer lock: the snapshot is the switch's own, and
// nothing else may transfer, read or write it (the loop would wait for it).
// Created through Create as a shared_ptr: callbacks in flight keep it alive.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gshare/common/status.h"
#include "gshare/device/device.h"
#include "gshare/fn/control_channel.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"
#include "gshare/node/switch/compute_arbiter.h"
#include "gshare/node/switch/switch_driver.h"

namespace gshare {

struct SwitchContext {
  boost::asio::io_context& loop;
  boost::asio::thread_pool& copies;
  RestoreEngine& engine;
  SnapshotStore& snapshots;
  const Clock& clock;  // times the steps of a restore (RestoreSteps)
  // Where a checkpoint-API switch runs the driver's blocking calls; null: on `copies`.
  boost::asio::thread_pool* driver_calls = nullptr;
};

// Where a channel switch's last restore spent its time, on its context's clock. The map round
// trip overlaps the copy, so the steps do not add up to the total.
struct RestoreSteps {
  Duration start{};        // from Restore to the transfer's start (the map message goes first)
  Duration copy{};         // the restore engine's transfer, from its start on the loop to its
                           // last piece's end on a copy stream (the hand-off to the streams in it)
  Duration copy_notice{};  // from the transfer's end to the event loop seeing it (a hand-off)
  Duration map{};          // from the map message to the instance's answer
  Duration total{};        // from Restore to its completion
};

class ChannelSwitch final : public SwitchDriver,
                            public std::enable_shared_from_this<ChannelSwitch>,
                            private ComputeArbiter::Client {
 public:
  // `snapshot_id` names the instance's snapshot in the store (unique per instance).
  // `on_failure` is called once when the switch fails outside an operation (may be empty).
  static std::shared_ptr<ChannelSwitch> Create(SwitchContext context, std::string snapshot_id,
                                               fn::ControlChannel channel,
                                               std::function<void(Status)> on_failure = {});
  ~ChannelSwitch() override;

  // Maps `buffer` (an emulated GPU's) as the instance's first device memory, with `quota_bytes`
  // as its allocation bound, once it has said hello. Precondition: kStarting.
  void Attach(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
              Done done) override;
  // Precondition: kResident. `force_copy`: copy even when the snapshot holds the image already
  // (no fast swap). On a failure that leaves the instance alive (no room in the snapshot store, a
  // copy error) it stays resident and unlocked, on its buffer.
  void Checkpoint(bool force_copy, Done done) override;
  // Precondition: kCheckpointed.
  void Restore(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
               Done done) override;
  // Changes the allocation bound of a resident instance (<= its slice's memory).
  void SetQuota(std::uint64_t quota_bytes) override;
  // Stops listening to the instance and withdraws it from its GPU's compute engine. The
  // snapshot is removed from the store. A pending operation fails.
  void Close() override;
  // Whether the switch may still touch the buffer last passed to Attach or Restore.
  bool uses_buffer() const override { return buffer_ != nullptr; }

  SwitchState state() const override { return state_; }
  std::int64_t pid() const override { return pid_; }
  // The last checkpoint's and restore's transfers (skipped: a fast swap).
  const TransferReport& last_checkpoint() const override { return last_checkpoint_; }
  const TransferReport& last_restore() const override { return last_restore_; }
  // The last successful restore's steps.
  const RestoreSteps& last_restore_steps() const { return last_restore_steps_; }
  std::uint64_t quota_exceeded_count() const override { return quota_exceeded_; }

 private:
  ChannelSwitch(SwitchContext context, std::string snapshot_id, fn::ControlChannel channel,
                std::function<void(Status)> on_failure);
  void Listen();
  void OnReadable();
  void OnMessage(fn::ReceivedMessage received);
  void SendMap();
  // A copy ended (on the loop); when the switch failed meanwhile, completes the pending operation
  // with the failure and returns true.
  bool EndCopy();
  // The copy of a checkpoint ended (on the loop), with `report`.
  void OnCheckpointCopied(Result<TransferReport> report);
  // The copy of a restore ended (on the loop), with `report`.
  void OnRestoreCopied(Result<TransferReport> report);
  // Both halves of a restore (or an attach's map) are done: unlock and complete.
  void FinishMapping();
  void Fail(Status why);
  void FailSoon(Status why);
  void Complete(Status status);
  // Posts `refused` to `done` when it is an error (false); otherwise binds the buffer, quota and
  // GPU and makes `done` the pending operation's (true).
  bool TakeOn(const Status& refused, DeviceBuffer* buffer, std::uint64_t quota_bytes,
              ComputeArbiter* gpu, Done& done);
  void StartCheckpointCopy(std::uint64_t used_bytes, bool written);
  void GrantCompute(Duration quantum) override;
  Status Send(const fn::ControlMessage& message, int fd = -1);

  SwitchContext context_;
  const std::string snapshot_id_;
  fn::ControlChannel channel_;
  boost::asio::posix::stream_descriptor reader_;
  std::function<void(Status)> on_failure_;

  SwitchState state_ = SwitchState::kStarting;
  bool hello_ = false;
  bool closed_ = false;
  bool copy_in_flight_ = false;
  bool awaiting_mapped_ = false;  // a kMap sent, its kMapped not yet received
  Status restore_failure_;        // a restore's failed copy, reported once the instance unmapped
  std::int64_t pid_ = 0;
  DeviceBuffer* buffer_ = nullptr;  // the slice's memory (borrowed) while the switch may use it
  bool force_copy_ = false;
  std::uint64_t quota_bytes_ = 0;
  std::uint64_t generation_ = 0;
  ComputeArbiter* gpu_ = nullptr;
  SnapshotRef snapshot_;  // empty until the first checkpoint, and while the image is empty
  Done pending_;
  Status failure_;
  TransferReport last_checkpoint_;
  TransferReport last_restore_;
  RestoreSteps steps_;  // of the restore in progress
  TimePoint restore_started_{};
  bool timing_restore_ = false;  // a restore in progress, whose steps are being timed
  TimePoint map_sent_{};
  RestoreSteps last_restore_steps_;
  std::uint64_t quota_exceeded_ = 0;
};

}  // namespace gshare
