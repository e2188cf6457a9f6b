// InstanceHost: the function processes behind the live executor.
//
// The live executor (live_executor.h) decides when a function instance starts, which slice it is
// bound to and which batch it runs; an InstanceHost carries out the process side: it starts the
// instance's process with its end of the control channel and its device address range, tells
// when the process answers its readiness check and when it ends, sends it batches over the
// function protocol and delivers the answers to whoever sent the requests. The node's host runs
// real processes (node/process); tests may host instances in-process.
//
// Threading: every method is called on the node's event loop, and every callback must be called
// there too, never from inside the call that caused it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/model/request.h"

namespace gshare {

using InstanceId = std::uint64_t;  // unique in one node run

struct InstanceLaunch {
  InstanceId instance = 0;
  FunctionId function = 0;
  // The instance's end of its control channel; invalid: it has none (an unmodified CUDA program
  // that the driver's checkpoint API switches), and no device range either.
  UniqueFd control;
  std::uintptr_t device_base = 0;  // where its device memory is mapped
  std::uint64_t device_reserve_bytes = 0;
  // Set by the node for this instance (CUDA_VISIBLE_DEVICES, LD_PRELOAD): over the command's own.
  std::map<std::string, std::string> environment;
  // The instance answers its readiness check (once), with its program's pid as the node sees it
  // (a host whose instances are no processes of their own gives a stand-in, never 0).
  std::function<void(std::int64_t pid)> on_ready;
  std::function<void(Status)> on_exit;  // the process ended (once; no callback after it)
};

class InstanceHost {
 public:
  virtual ~InstanceHost() = default;

  // Starts the instance's process. An error means it did not start (no callback will fire).
  virtual Status Start(InstanceLaunch launch) = 0;
  // Runs `batch` (requests of the instance's function) on the instance; `done` fires with OK once
  // every request of the batch is answered, or with the error that kept them from it (the
  // requests are then not answered).
  virtual void Infer(InstanceId instance, std::span<const RequestId> batch,
                     std::function<void(Status)> done) = 0;
  // Answers `request` with an error (the scheduler gave up on it).
  virtual void Fail(RequestId request, const Status& status) = 0;
  // Stops the instance's process; its on_exit fires when it has ended.
  virtual void Stop(InstanceId instance) = 0;
};

}  // namespace gshare
