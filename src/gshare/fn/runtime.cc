#include "gshare/fn/runtime.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "gshare/fn/control_session.h"

namespace gshare::fn {

Result<std::unique_ptr<FunctionRuntime>> FunctionRuntime::ConnectFromEnvironment(
    RuntimeOptions options) {
  auto fd = ReadNodeNumber(kControlFdEnv, 10);
  if (!fd.ok()) return fd.status();
  auto base = ReadNodeNumber(kDeviceBaseEnv, 16);
  if (!base.ok()) return base.status();
  auto reserve = ReadNodeNumber(kDeviceReserveEnv, 10);
  if (!reserve.ok()) return reserve.status();
  if (*fd > 1 << 20) return InvalidArgument(fmt::format("{} is out of range", kControlFdEnv));
  return Connect(UniqueFd(static_cast<int>(*fd)), static_cast<std::uintptr_t>(*base), *reserve,
                 options);
}

Result<std::unique_ptr<FunctionRuntime>> FunctionRuntime::Connect(UniqueFd control,
                                                                  std::uintptr_t base,
                                                                  std::uint64_t reserve_bytes,
                                                                  RuntimeOptions options) {
  GSHARE_RETURN_IF_ERROR(SealFunctionProcess(control.get()));
  auto memory = DeviceMemory::Reserve(base, reserve_bytes);
  if (!memory.ok()) return memory.status();
  ControlChannel channel(std::move(control));
  GSHARE_RETURN_IF_ERROR(channel.Send(
      {.type = ControlType::kHello, .a = PidAsTheNodeSeesIt(), .b = base, .c = reserve_bytes}));
  std::unique_ptr<FunctionRuntime> runtime(
      new FunctionRuntime(std::move(channel), std::move(memory).value(), options));
  runtime->control_thread_ = std::thread([r = runtime.get()] { r->Serve(); });
  {
    MutexLock lock(runtime->mutex_);
    runtime->changed_.Wait(runtime->mutex_, [&]() REQUIRES(runtime->mutex_) {
      return runtime->mapped_ || runtime->node_gone_;
    });
    if (!runtime->mapped_) return Unavailable("the node closed the channel before mapping");
  }
  return runtime;
}

FunctionRuntime::FunctionRuntime(ControlChannel channel, std::unique_ptr<DeviceMemory> memory,
                                 RuntimeOptions options)
    : channel_(std::move(channel)), memory_(std::move(memory)), options_(options) {}

FunctionRuntime::~FunctionRuntime() {
  {
    MutexLock lock(mutex_);
    node_gone_ = true;  // our own shutdown: do not exit
  }
  ::shutdown(channel_.fd(), SHUT_RDWR);
  if (control_thread_.joinable()) control_thread_.join();
}

void FunctionRuntime::Serve() {
  NodeGone(ServeControl(
      channel_, [this](ReceivedMessage received) { return Handle(std::move(received)); },
      [](std::string_view line) {
        std::fprintf(stderr, "gshare function: %.*s\n", static_cast<int>(line.size()), line.data());
      }));
}

void FunctionRuntime::NodeGone(const Status& why) {
  bool ours;
  {
    MutexLock lock(mutex_);
    ours = node_gone_;
    node_gone_ = true;
    changed_.NotifyAll();
  }
  if (!ours && options_.exit_when_node_gone) {
    std::fprintf(stderr, "gshare function: the node is gone (%s); exiting\n",
                 why.ToString().c_str());
    std::fflush(stderr);
    ::_exit(70);
  }
}

void FunctionRuntime::ReleaseGrantLocked() {
  if (!holding_grant_) return;
  holding_grant_ = false;
  (void)channel_.Send({.type = ControlType::kComputeRelease,
                       .a = static_cast<std::uint64_t>(used_in_grant_.count())});
}

Status FunctionRuntime::Handle(ReceivedMessage received) {
  const ControlMessage& message = received.message;
  switch (message.type) {
    case ControlType::kMap: {
      MutexLock lock(mutex_);
      changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return !kernel_running_; });
      // This runtime maps memfds (emulated GPUs); a CUDA handle is the allocator shim's.
      const Status mapped =
          message.reserved == 0
              ? memory_->Map(std::move(received.fd), message.a, message.b)
              : FailedPrecondition(fmt::format(
                    "device memory of handle kind {} cannot be mapped here (memfd only)",
                    message.reserved));
      if (mapped.ok()) {
        mapped_ = true;
        ++maps_;
        changed_.NotifyAll();
      } else {
        std::fprintf(stderr, "gshare function: map failed: %s\n", mapped.ToString().c_str());
      }
      return channel_.Send(
          {.type = ControlType::kMapped, .a = mapped.ok() ? 0u : 1u, .c = message.c});
    }
    case ControlType::kLock: {
      MutexLock lock(mutex_);
      locked_ = true;
      changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return !kernel_running_; });
      ReleaseGrantLocked();
      grant_requested_ = false;
      const MemoryImage image = memory_->Image();
      return channel_.Send(
          {.type = ControlType::kLocked, .a = image.used_bytes, .b = image.written ? 1u : 0u});
    }
    case ControlType::kUnmap: {
      MutexLock lock(mutex_);
      changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return !kernel_running_; });
      const Status unmapped = memory_->Unmap();
      mapped_ = false;
      if (!unmapped.ok()) return unmapped;
      return channel_.Send({.type = ControlType::kUnmapped});
    }
    case ControlType::kUnlock: {
      MutexLock lock(mutex_);
      locked_ = false;
      changed_.NotifyAll();
      return Status::Ok();
    }
    case ControlType::kComputeGrant: {
      MutexLock lock(mutex_);
      if (!grant_requested_ || locked_ || holding_grant_) {
        // A grant for a request withdrawn by a lock: give it straight back.
        return channel_.Send({.type = ControlType::kComputeRelease});
      }
      grant_requested_ = false;
      holding_grant_ = true;
      ++grants_;
      quantum_ = std::chrono::nanoseconds(static_cast<std::int64_t>(message.a));
      grant_start_ = std::chrono::steady_clock::now();
      used_in_grant_ = {};
      changed_.NotifyAll();
      return Status::Ok();
    }
    case ControlType::kSetQuota:
      return memory_->SetQuota(message.a);
    default:
      return InvalidArgument(
          fmt::format("unexpected {} from the node", ControlTypeName(message.type)));
  }
}

Result<DeviceAllocation> FunctionRuntime::Allocate(std::uint64_t bytes, std::string_view what) {
  auto allocation = memory_->Allocate(bytes, what);
  if (!allocation.ok() && allocation.status().code() == StatusCode::kResourceExhausted) {
    (void)channel_.Send({.type = ControlType::kQuotaExceeded,
                         .a = bytes,
                         .b = memory_->quota_bytes(),
                         .c = memory_->in_use_bytes()});
  }
  return allocation;
}

Status FunctionRuntime::Launch(const std::function<void()>& kernel) {
  {
    MutexLock lock(mutex_);
    for (;;) {
      if (node_gone_) return Unavailable("the node is gone");
      if (locked_ || !mapped_ || kernel_running_) {
        changed_.Wait(mutex_, [this]() REQUIRES(mutex_) {
          return node_gone_ || (!locked_ && mapped_ && !kernel_running_);
        });
        continue;
      }
      if (holding_grant_) break;
      if (!grant_requested_) {
        GSHARE_RETURN_IF_ERROR(channel_.Send({.type = ControlType::kComputeAcquire}));
        grant_requested_ = true;
      }
      changed_.Wait(mutex_, [this]() REQUIRES(mutex_) {
        return node_gone_ || holding_grant_ || locked_ || !grant_requested_;
      });
    }
    kernel_running_ = true;
  }
  const auto start = std::chrono::steady_clock::now();
  Status thrown;
  try {
    kernel();
  } catch (const std::exception& e) {  // a kernel that throws still ends: the GPU is released
    thrown = Internal(std::string("a kernel threw: ") + e.what());
  }
  const auto end = std::chrono::steady_clock::now();
  MutexLock lock(mutex_);
  kernel_running_ = false;
  const auto ran = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start);
  compute_time_ += ran;
  used_in_grant_ += ran;
  if (end - grant_start_ >= quantum_) ReleaseGrantLocked();  // others get their turn
  changed_.NotifyAll();
  return thrown;
}

void FunctionRuntime::EndWork() {
  MutexLock lock(mutex_);
  if (!kernel_running_) ReleaseGrantLocked();
}

std::chrono::nanoseconds FunctionRuntime::compute_time() const {
  MutexLock lock(mutex_);
  return compute_time_;
}

std::uint64_t FunctionRuntime::grants() const {
  MutexLock lock(mutex_);
  return grants_;
}

std::uint64_t FunctionRuntime::maps() const {
  MutexLock lock(mutex_);
  return maps_;
}

}  // namespace gshare::fn
