#include "gshare/fn/cuda_shim/shim_core.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "gshare/fn/control_session.h"

namespace gshare::fn::cuda_shim {
namespace {

std::string Decimal(std::uint64_t value) { return std::to_string(value); }

}  // namespace

Result<std::unique_ptr<ShimCore>> ShimCore::Connect(UniqueFd control, std::uintptr_t base_hint,
                                                    std::uint64_t reserve_bytes,
                                                    std::unique_ptr<MemoryBackend> backend,
                                                    ShimOptions options) {
  if (!control.valid()) return InvalidArgument("cuda shim: no control channel");
  if (reserve_bytes == 0) return InvalidArgument("cuda shim: an empty address range");
  GSHARE_RETURN_IF_ERROR(SealFunctionProcess(control.get()).WithContext("cuda shim"));
  auto range = backend->Reserve(base_hint, reserve_bytes);
  if (!range.ok()) return range.status();
  ControlChannel channel(std::move(control));
  GSHARE_RETURN_IF_ERROR(channel.Send({.type = ControlType::kHello,
                                       .a = PidAsTheNodeSeesIt(),
                                       .b = range->base,
                                       .c = range->bytes}));
  std::unique_ptr<ShimCore> core(
      new ShimCore(std::move(channel), std::move(backend), *range, std::move(options)));
  core->control_thread_ = std::thread([c = core.get()] { c->Serve(); });
  {
    MutexLock lock(core->mutex_);
    core->changed_.Wait(core->mutex_,
                        [&]() REQUIRES(core->mutex_) { return core->mapped_ || core->node_gone_; });
    if (!core->mapped_) return Unavailable("cuda shim: the node closed the channel before mapping");
  }
  return core;
}

ShimCore::ShimCore(ControlChannel channel, std::unique_ptr<MemoryBackend> backend,
                   MemoryBackend::Range range, ShimOptions options)
    : channel_(std::move(channel)),
      backend_(std::move(backend)),
      base_(range.base),
      reserve_bytes_(range.bytes),
      options_(std::move(options)),
      allocator_(range.bytes / kAlignment * kAlignment, kAlignment) {}

ShimCore::~ShimCore() {
  {
    MutexLock lock(mutex_);
    node_gone_ = true;  // our own shutdown: do not exit
    changed_.NotifyAll();
  }
  ::shutdown(channel_.fd(), SHUT_RDWR);
  if (control_thread_.joinable()) control_thread_.join();
}

void ShimCore::Log(std::string_view line) const {
  if (options_.log) {
    options_.log(line);
    return;
  }
  std::fprintf(stderr, "gshare-cuda-shim: %.*s\n", static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

void ShimCore::Serve() {
  NodeGone(ServeControl(
      channel_, [this](ReceivedMessage received) { return Handle(std::move(received)); },
      [this](std::string_view line) { Log(line); }));
}

void ShimCore::NodeGone(const Status& why) {
  bool ours;
  {
    MutexLock lock(mutex_);
    ours = node_gone_;
    node_gone_ = true;
    changed_.NotifyAll();
  }
  if (!ours && options_.exit_when_node_gone) {
    Log("the node is gone (" + why.ToString() + "); exiting");
    ::_exit(70);
  }
}

Status ShimCore::Handle(ReceivedMessage received) {
  const ControlMessage& message = received.message;
  switch (message.type) {
    case ControlType::kMap:
      return HandleMap(std::move(received));
    case ControlType::kLock: {
      {
        MutexLock lock(mutex_);
        locked_ = true;
      }
      // No allocation is handed out from here on; the device finishes what it was given.
      if (const Status synchronized = backend_->Synchronize(); !synchronized.ok()) {
        Log("synchronize before a checkpoint: " + synchronized.ToString());
      }
      std::uint64_t image_bytes;
      {
        MutexLock lock(mutex_);
        image_bytes = allocator_.high_water_bytes();
      }
      return channel_.Send({.type = ControlType::kLocked, .a = image_bytes, .b = 1});
    }
    case ControlType::kUnmap: {
      MutexLock lock(mutex_);
      const Status unmapped = backend_->Unmap();
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
    case ControlType::kSetQuota: {
      MutexLock lock(mutex_);
      const std::uint64_t limit = mapped_ ? mapped_bytes_ : allocator_.capacity_bytes();
      if (message.a > limit || message.a < allocator_.high_water_bytes()) {
        return InvalidArgument("cuda shim: a quota of " + Decimal(message.a) +
                               " bytes must lie between the allocations' end " +
                               Decimal(allocator_.high_water_bytes()) + " and " + Decimal(limit));
      }
      quota_bytes_ = message.a;
      return Status::Ok();
    }
    case ControlType::kComputeGrant:
      // Never asked for: a real GPU time-slices itself. Give it straight back.
      return channel_.Send({.type = ControlType::kComputeRelease});
    default:
      return InvalidArgument(std::string("cuda shim: unexpected ") +
                             std::string(ControlTypeName(message.type)) + " from the node");
  }
}

Status ShimCore::HandleMap(ReceivedMessage received) {
  const ControlMessage& message = received.message;
  const std::uint64_t bytes = message.a;
  const std::uint64_t quota = message.b;
  Status mapped;
  {
    MutexLock lock(mutex_);
    if (mapped_) {
      mapped = FailedPrecondition("cuda shim: a map while mapped");
    } else if (bytes == 0 || bytes > reserve_bytes_ || quota > bytes) {
      mapped =
          InvalidArgument("cuda shim: cannot map " + Decimal(bytes) + " bytes with a quota of " +
                          Decimal(quota) + " into a range of " + Decimal(reserve_bytes_));
    } else if (allocator_.high_water_bytes() > quota) {
      mapped = FailedPrecondition("cuda shim: allocations up to " +
                                  Decimal(allocator_.high_water_bytes()) +
                                  " do not fit a quota of " + Decimal(quota));
    } else {
      mapped = backend_->Map(std::move(received.fd), static_cast<MapHandleKind>(message.reserved),
                             bytes);
      if (mapped.ok()) {
        mapped_ = true;
        mapped_bytes_ = bytes;
        quota_bytes_ = quota;
        ++maps_;
        changed_.NotifyAll();
      }
    }
  }
  if (!mapped.ok()) Log("map failed: " + mapped.ToString());
  return channel_.Send({.type = ControlType::kMapped, .a = mapped.ok() ? 0u : 1u, .c = message.c});
}

Result<std::uintptr_t> ShimCore::Allocate(std::uint64_t bytes) {
  if (bytes == 0) return InvalidArgument("cuda shim: an allocation of 0 bytes");
  std::uint64_t quota;
  std::uint64_t in_use;
  {
    MutexLock lock(mutex_);
    const auto ready = [this]() REQUIRES(mutex_) { return node_gone_ || (mapped_ && !locked_); };
    if (!ready()) {
      if (options_.on_allocation_waits) options_.on_allocation_waits();
      changed_.Wait(mutex_, ready);
    }
    if (node_gone_) return Unavailable("cuda shim: the node is gone");
    if (const auto offset = allocator_.Allocate(bytes, quota_bytes_)) return base_ + *offset;
    quota = quota_bytes_;
    in_use = allocator_.in_use_bytes();
  }
  const std::string refused = "allocation of " + Decimal(bytes) +
                              " bytes refused: the slice's quota is " + Decimal(quota) +
                              " bytes, " + Decimal(in_use) + " in use";
  Log(refused);
  (void)channel_.Send({.type = ControlType::kQuotaExceeded, .a = bytes, .b = quota, .c = in_use});
  return ResourceExhausted("cuda shim: " + refused);
}

ShimCore::FreeOutcome ShimCore::Free(std::uintptr_t address) {
  if (!Owns(address)) return FreeOutcome::kNotOurs;
  MutexLock lock(mutex_);
  if (!allocator_.Free(address - base_)) return FreeOutcome::kNoSuchAllocation;
  return FreeOutcome::kFreed;
}

SliceUsage ShimCore::usage() const {
  MutexLock lock(mutex_);
  return {.quota_bytes = quota_bytes_, .in_use_bytes = allocator_.in_use_bytes()};
}

std::uint64_t ShimCore::maps() const {
  MutexLock lock(mutex_);
  return maps_;
}

std::optional<PitchedLayout> LayOutPitched(std::size_t width_bytes, std::size_t height) {
  constexpr std::size_t kAlignment = ShimCore::kAlignment;
  if (width_bytes > SIZE_MAX - (kAlignment - 1)) return std::nullopt;
  const std::size_t row = (width_bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (row != 0 && height > SIZE_MAX / row) return std::nullopt;
  return PitchedLayout{.row_bytes = row, .total_bytes = row * height};
}

}  // namespace gshare::fn::cuda_shim
