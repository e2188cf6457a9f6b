// FunctionRuntime: the client library a function process links to use an emulated GPU.
//
// The node starts a function instance with a control channel (control_channel.h) and a device
// address range in its environment. ConnectFromEnvironment makes the process non-dumpable (so
// that no other process of its uid reaches its memory or descriptors through /proc), reserves the
// range, says hello, and waits until the node maps the instance's first slice. From then on:
//  - device memory comes from memory() (device_memory.h): allocations past the slice's quota fail
//    in the request that made them, and the node hears of it (kQuotaExceeded);
//  - device work runs through Launch: a kernel runs only while the instance is mapped and
//    unlocked and holds its GPU's compute engine, which the node grants in quanta (20 ms by
//    default) round-robin among the instances that want it, as a GPU time-slices contexts;
//    a kernel is never preempted: the grant is given back at the first kernel boundary after the
//    quantum, or by EndWork at the end of a request;
//  - the node may lock the instance at any time: Launch calls then wait; the kernel in flight
//    finishes first; the node copies the device memory away and unmaps it, and later maps a copy
//    at the same addresses (on the same or another GPU) and unlocks: the function's pointers stay
//    valid and its code never knows.
//
// Threading: one control thread, started here, serves the node. Launch, EndWork and memory() may
// be called from any thread; kernels of one instance run one at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/fn/control_channel.h"
#include "gshare/fn/device_memory.h"

namespace gshare::fn {

struct RuntimeOptions {
  // What to do when the node closes the channel: end the process (a function without its node
  // has nothing to do), or only fail every later call (for tests).
  bool exit_when_node_gone = true;
};

class FunctionRuntime {
 public:
  // Reads kControlFdEnv, kDeviceBaseEnv and kDeviceReserveEnv; InvalidArgument naming the
  // variable when one is missing or malformed.
  static Result<std::unique_ptr<FunctionRuntime>> ConnectFromEnvironment(
      RuntimeOptions options = {});
  static Result<std::unique_ptr<FunctionRuntime>> Connect(UniqueFd control, std::uintptr_t base,
                                                          std::uint64_t reserve_bytes,
                                                          RuntimeOptions options = {});
  ~FunctionRuntime();
  FunctionRuntime(const FunctionRuntime&) = delete;
  FunctionRuntime& operator=(const FunctionRuntime&) = delete;

  DeviceMemory& memory() { return *memory_; }

  // Allocates device memory; past the quota, also tells the node.
  Result<DeviceAllocation> Allocate(std::uint64_t bytes, std::string_view what);

  // Runs `kernel` on the GPU (see above). Unavailable when the node is gone.
  Status Launch(const std::function<void()>& kernel) EXCLUDES(mutex_);
  // Gives the compute engine back (call at the end of a request).
  void EndWork() EXCLUDES(mutex_);

  // Kernel time run so far, and the number of grants received (for tests and logs).
  std::chrono::nanoseconds compute_time() const EXCLUDES(mutex_);
  std::uint64_t grants() const EXCLUDES(mutex_);
  std::uint64_t maps() const EXCLUDES(mutex_);

 private:
  FunctionRuntime(ControlChannel channel, std::unique_ptr<DeviceMemory> memory,
                  RuntimeOptions options);
  void Serve();
  Status Handle(ReceivedMessage received) EXCLUDES(mutex_);
  void ReleaseGrantLocked() REQUIRES(mutex_);
  void NodeGone(const Status& why) EXCLUDES(mutex_);

  const ControlChannel channel_;
  const std::unique_ptr<DeviceMemory> memory_;
  const RuntimeOptions options_;

  mutable Mutex mutex_;
  CondVar changed_;
  bool mapped_ GUARDED_BY(mutex_) = false;
  bool locked_ GUARDED_BY(mutex_) = false;
  bool kernel_running_ GUARDED_BY(mutex_) = false;
  bool grant_requested_ GUARDED_BY(mutex_) = false;
  bool holding_grant_ GUARDED_BY(mutex_) = false;
  bool node_gone_ GUARDED_BY(mutex_) = false;
  std::chrono::nanoseconds quantum_ GUARDED_BY(mutex_){};
  std::chrono::steady_clock::time_point grant_start_ GUARDED_BY(mutex_){};
  std::chrono::nanoseconds used_in_grant_ GUARDED_BY(mutex_){};
  std::chrono::nanoseconds compute_time_ GUARDED_BY(mutex_){};
  std::uint64_t grants_ GUARDED_BY(mutex_) = 0;
  std::uint64_t maps_ GUARDED_BY(mutex_) = 0;
  std::thread control_thread_;
};

}  // namespace gshare::fn
