// SwitchDriver: what moves one function instance between host memory and a GPU slice.
//
// The node keeps one switch driver per instance. Drivers differ in how the instance's device
// memory moves (ChannelSwitch: the node copies a memfd image through its restore engine;
// CheckpointApiSwitch: the NVIDIA driver checkpoints an unmodified CUDA process), not in what
// they offer their caller:
//  - Attach: the instance's first slice; afterwards it is resident and may run;
//  - Checkpoint: the instance leaves its GPU; afterwards it is checkpointed (in host memory only)
//    and the caller may free the slice's buffer;
//  - Restore: onto a slice on any GPU the driver supports; afterwards it is resident again.
//
// Completion: every operation completes by calling its callback once, on the event loop, never
// from inside the call that started it. One operation at a time: a call while another is pending,
// or in the wrong state, completes with FailedPrecondition (Unavailable once the switch failed).
//
// Buffers: the caller's (with their accounting), borrowed. A buffer passed to Attach or Restore
// must stay alive while uses_buffer() is true: until a Checkpoint ends the residency, or the
// operation fails, or the switch fails (then until the pending operation's callback, if any, has
// run). uses_buffer() says whether the switch may still touch the buffer last passed.
//
// Failure: a switch fails when its instance can no longer be switched (it died, broke the
// protocol, or was left by the driver in a state it cannot run from). A pending operation then
// completes with Unavailable; when the switch fails outside an operation, the `on_failure`
// callback its creator gave is called once instead. Every later call fails at once with
// Unavailable. The caller restarts a failed instance: it stops the process and starts another.
// Close ends the switch at the caller's request (it fails, with no on_failure callback).
//
// Threading: every method on the event loop the driver was created with. Drivers are held by
// std::shared_ptr: callbacks in flight keep them alive.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/device/device.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/switch/compute_arbiter.h"

namespace gshare {

// Where an instance stands. Drivers go through the states that fit their mechanism: kMapping and
// kUnmapping are the channel switch's (messages to the instance); a checkpoint-API switch goes
// kResident -> kLocking -> kCheckpointing -> kCheckpointed -> kRestoring -> kResident.
enum class SwitchState {
  kStarting,       // created, not attached yet
  kMapping,        // a segment sent, waiting for the instance to map it
  kResident,       // on its slice and unlocked: it may run
  kLocking,        // waiting for the instance to quiesce
  kCheckpointing,  // its device memory moving into host memory
  kUnmapping,      // waiting for the instance to unmap
  kCheckpointed,   // in host memory only
  kRestoring,      // its device memory moving onto a GPU
  kFailed,         // the instance cannot be switched any more (or the switch was closed)
};
std::string_view SwitchStateName(SwitchState state);

class SwitchDriver {
 public:
  using Done = std::function<void(Status)>;

  virtual ~SwitchDriver() = default;

  // Makes `buffer` the instance's first slice, with `quota_bytes` (<= its size) as its allocation
  // bound, on the GPU whose compute engine `gpu` shares out (the driver may not need it).
  // Precondition: kStarting.
  virtual void Attach(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
                      Done done) = 0;
  // Moves the instance off its slice. Precondition: kResident. `force_copy`: copy its image even
  // when the host copy already holds it (a driver that always copies ignores it). A failure that
  // leaves the instance alive leaves it resident and unlocked, on its buffer.
  virtual void Checkpoint(bool force_copy, Done done) = 0;
  // Moves the instance onto `buffer`'s slice, on any GPU. Precondition: kCheckpointed.
  virtual void Restore(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
                       Done done) = 0;
  // Changes the allocation bound of a resident instance (capped at its slice's size).
  virtual void SetQuota(std::uint64_t quota_bytes) = 0;
  // Ends the switch (see Failure above); a pending operation fails. It does not stop the
  // instance's process: that is the caller's.
  virtual void Close() = 0;
  // Whether the switch may still touch the buffer last passed to Attach or Restore.
  virtual bool uses_buffer() const = 0;

  virtual SwitchState state() const = 0;
  // The instance's process id (0 while the driver does not know it).
  virtual std::int64_t pid() const = 0;
  // The last checkpoint's and restore's transfers (skipped: nothing had to move).
  virtual const TransferReport& last_checkpoint() const = 0;
  virtual const TransferReport& last_restore() const = 0;
  // Allocations the instance was refused for exceeding its quota (0 where the driver cannot see
  // them).
  virtual std::uint64_t quota_exceeded_count() const = 0;
};

}  // namespace gshare
