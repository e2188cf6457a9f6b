// The control channel between the node and one function instance: the switching protocol.
//
// A Unix SOCK_SEQPACKET socket pair, one end inherited by the function process (its number in
// GSHARE_CONTROL_FD), the other kept by the node. Each datagram is one fixed-size
// ControlMessage; a kMap message carries a file descriptor of the instance's device memory as
// SCM_RIGHTS (DeviceBuffer::Export). Everything else is data only, and a datagram of any other
// size, of an unknown type, or with a file descriptor where none belongs is rejected (the
// descriptor closed).
//
// kMap's `reserved` field carries the descriptor's kind (MapHandleKind here, the same values as
// MemoryHandleKind in device/device.h):
//   0  a memfd (emulated GPU): mmap `a` bytes of it at the instance's reserved addresses (the
//      function library, fn/runtime.h).
//   1  a CUDA VMM allocation exported as a POSIX file descriptor: import it with
//      cuMemImportFromShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and cuMemMap `a`
//      bytes (a multiple of the allocation granularity) at the instance's reserved addresses (the
//      CUDA allocator shim, fn/cuda_shim).
// Every other message has `reserved` 0.
//
// The conversation (docs/node.md, "Switching"):
//   function -> node  kHello            a = pid, b = device base address, c = reserved bytes
//   node -> function  kMap + fd         a = mapped bytes, b = quota bytes, c = generation,
//                                       reserved = the fd's MapHandleKind
//   function -> node  kMapped           c = generation
//   node -> function  kLock             quiesce: finish the kernel in flight, start no other
//   function -> node  kLocked           a = bytes in use (the image to keep), b = 1 if written
//   node -> function  kUnmap            drop the mapping; the address range stays reserved
//   function -> node  kUnmapped
//   node -> function  kUnlock           device work may go on (after a kMap)
//   function -> node  kComputeAcquire   wants the GPU's compute engine for a quantum
//   node -> function  kComputeGrant     a = quantum in nanoseconds
//   function -> node  kComputeRelease   a = nanoseconds of compute used
//   function -> node  kQuotaExceeded    a = bytes asked, b = quota, c = bytes in use
//   node -> function  kSetQuota         a = new quota bytes (<= mapped bytes)
//
// Thread safety: Send may be called from several threads (each datagram is atomic); Receive from
// one thread at a time.
#pragma once

#include <cstdint>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"

namespace gshare::fn {

enum class ControlType : std::uint32_t {
  kHello = 1,
  kMapped = 2,
  kLocked = 3,
  kUnmapped = 4,
  kComputeAcquire = 5,
  kComputeRelease = 6,
  kQuotaExceeded = 7,
  kMap = 101,
  kLock = 102,
  kUnmap = 103,
  kUnlock = 104,
  kComputeGrant = 105,
  kSetQuota = 106,
};
std::string_view ControlTypeName(ControlType type);

// What the descriptor of a kMap is. A function refuses a kind it cannot map (kMapped, a = 1).
enum class MapHandleKind : std::uint32_t {
  kMemfd = 0,        // shared memory of an emulated GPU, mapped with mmap
  kCudaPosixFd = 1,  // CUDA VMM memory (cuMemCreate), imported with cuMemImportFromShareableHandle
};

struct ControlMessage {
  ControlType type = ControlType::kHello;
  std::uint32_t reserved = 0;  // kMap: the MapHandleKind of its descriptor; otherwise 0
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  std::uint64_t c = 0;
};

struct ReceivedMessage {
  ControlMessage message;
  UniqueFd fd;  // valid only for kMap
};

// The environment variables through which the node hands a function process its channel and
// its device address range.
inline constexpr const char* kControlFdEnv = "GSHARE_CONTROL_FD";
// The exit status of a function process whose model did not load because of what the tenant gave
// (a file that is not the model the runtime reads, tensors that do not match it, a handler that
// fails): the node answers the deploy 400 with what the process printed last, not 503
// (sysexits' EX_CONFIG). The Python runtimes use the same number (kserve_unix.py).
inline constexpr int kExitModelRejected = 78;
inline constexpr const char* kDeviceBaseEnv = "GSHARE_DEVICE_BASE";
inline constexpr const char* kDeviceReserveEnv = "GSHARE_DEVICE_RESERVE";
// Where the node maps instances' device memory unless told otherwise: high in the address space,
// above where the kernel places heaps, and outside the ranges AddressSanitizer reserves.
inline constexpr std::uintptr_t kDefaultDeviceBase = 0x7e0000000000ULL;

class ControlChannel {
 public:
  ControlChannel() = default;
  explicit ControlChannel(UniqueFd socket) : socket_(std::move(socket)) {}

  // A connected pair: first for the node, second for the function. Both are close-on-exec: a
  // child gets the function's end as a descriptor passed to it (ProcessSpec::pass_fds, which
  // dup2 makes inheritable in the child alone), so that no other child inherits it.
  static Result<std::pair<ControlChannel, UniqueFd>> CreatePair();

  int fd() const { return socket_.get(); }
  bool valid() const { return socket_.valid(); }

  // Sends one message, with `fd` attached when it is >= 0 (duplicated by the kernel; the caller
  // keeps its own). Unavailable when the peer is gone.
  Status Send(const ControlMessage& message, int fd = -1) const;
  // Blocks for the next message. Unavailable when the peer closed the channel; InvalidArgument
  // for a malformed datagram (the channel stays usable).
  Result<ReceivedMessage> Receive() const;
  // As Receive, without blocking: NotFound-free variant; returns Unavailable("would block") with
  // `would_block` set when there is nothing to read.
  Result<ReceivedMessage> TryReceive(bool& would_block) const;

 private:
  Result<ReceivedMessage> ReceiveWithFlags(int flags, bool* would_block) const;

  UniqueFd socket_;
};

}  // namespace gshare::fn
