// Device: the boundary between gshare and one GPU, real (CUDA) or emulated.
//
// A Device allocates device memory (DeviceBuffer), creates copy streams (CopyStream) that move
// bytes between pinned host memory and device memory asynchronously, and describes itself
// (DeviceInfo). Nothing above this boundary knows which kind of GPU it drives.
//
// Ownership and lifetime: the creator owns a Device. Every DeviceBuffer and CopyStream a Device
// hands out must be destroyed before the Device. A DeviceBuffer frees its memory when destroyed;
// destroying one while a copy that uses it is still in flight is a caller bug.
//
// Thread safety: Device, DeviceBuffer and CopyStream methods may be called from any thread.
// Copies (and digests) enqueued on one stream run in order; copies on different streams may run
// concurrently.
//
// Errors: every failure is a Status. Out of device memory is ResourceExhausted; a copy that does
// not fit its buffer is OutOfRange; a buffer that belongs to another device is InvalidArgument; a
// driver error is Internal or Unavailable, with the driver's message.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/common/units.h"

namespace gshare {

class Device;

enum class DeviceKind { kEmulated, kCuda };
std::string_view DeviceKindName(DeviceKind kind);  // "emulated", "cuda"

// What a GPU is. Value type.
struct DeviceInfo {
  DeviceKind kind = DeviceKind::kEmulated;
  int index = 0;     // position in the node's inventory (for CUDA: the ordinal)
  std::string name;  // "NVIDIA H100 80GB HBM3", "emulated-gpu-0"
  // Stable identity, used to restore onto a GPU: "GPU-5f0c...", "MIG-..." for a MIG instance,
  // "EMU-..." for an emulated GPU (gpu_uuid.h). uuid_bytes are its 16 raw bytes, as the driver
  // gives them (CUuuid), which the checkpoint API's GPU remapping takes.
  std::string uuid;
  std::array<std::uint8_t, 16> uuid_bytes{};
  // Device memory that allocations may use. CUDA: what the driver reported free once this
  // process's context on the GPU existed (the context and other processes take their share);
  // emulated: the configured capacity.
  std::uint64_t memory_bytes = 0;
  // The GPU's whole memory. CUDA: the driver's total; emulated: memory_bytes.
  std::uint64_t total_memory_bytes = 0;
  // Host-to-device link bandwidth the device is configured for; 0 when it is not configured
  // (CUDA: the physical link, measured by the inventory; emulated: unpaced).
  double link_bytes_per_second = 0;
  // Whether DeviceBuffer::Export works on this GPU (emulated: always; CUDA: where the GPU
  // supports the virtual memory management API and POSIX file descriptor handles), and why not
  // when it does not.
  bool memory_exportable = false;
  std::string memory_export_note;
  // CUDA driver and runtime versions as the CUDA API encodes them (13000 is 13.0); 0 for an
  // emulated GPU. See FormatCudaVersion.
  int cuda_driver_version = 0;
  int cuda_runtime_version = 0;
};

// "13.0" for 13000, "12.4" for 12040; "none" for 0.
std::string FormatCudaVersion(int version);

// What the driver says about a GPU's memory now. Value type.
struct DeviceMemoryInfo {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

// How an exported buffer's memory is handed to another process (the kMap message's `reserved`
// field carries it; fn/control_channel.h).
enum class MemoryHandleKind : std::uint32_t {
  kMemfd = 0,        // a memfd: mmap `bytes` of it
  kCudaPosixFd = 1,  // a CUDA VMM allocation as a POSIX fd: cuMemImportFromShareableHandle
};
std::string_view MemoryHandleKindName(MemoryHandleKind kind);  // "memfd", "cuda-posix-fd"

// A buffer's device memory as a file descriptor another process can map. Move-only value; the
// holder owns the descriptor. `bytes` is what the receiver maps: for a memfd the buffer's size,
// for CUDA the physical allocation's size (a multiple of the allocation granularity, at least
// the buffer's size).
struct ExportedMemory {
  UniqueFd fd;
  MemoryHandleKind kind = MemoryHandleKind::kMemfd;
  std::uint64_t bytes = 0;
};

// Device memory. Move-only through std::unique_ptr; frees its memory when destroyed.
//
// Identity and write generation: every buffer has a process-wide unique id, never reused (a
// buffer freed and another allocated at the same address get different ids), and a write
// generation, a counter that changes whenever its contents may have changed. Whoever lets
// anything write the buffer (a function unlocked to run on it, a restore into it) calls
// MarkWritten() before the writes may start. A host copy that was taken while the generation was
// g (a snapshot) still equals the buffer exactly while id and generation are unchanged; this is
// what lets the restore engine skip a checkpoint (the "fast swap"). Both may be read and
// MarkWritten called from any thread.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::uint64_t size_bytes() const { return size_bytes_; }
  // The device that owns this memory.
  const Device& device() const { return device_; }

  std::uint64_t id() const { return id_; }
  std::uint64_t write_generation() const {
    return write_generation_.load(std::memory_order_acquire);
  }
  // Declares that the contents may change from now on; returns the new generation.
  std::uint64_t MarkWritten() {
    return write_generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  }

  // A new file descriptor for this buffer's memory, for a function process to map (each call
  // makes a new one, owned by the caller). Whoever maps it must unmap it before the buffer is
  // destroyed: the memory may then be reused for another buffer. FailedPrecondition where the
  // device's memory cannot be shared (the message says why).
  virtual Result<ExportedMemory> Export() const;

 protected:
  DeviceBuffer(const Device& device, std::uint64_t size_bytes)
      : device_(device), size_bytes_(size_bytes), id_(NextId()) {}

 private:
  static std::uint64_t NextId();

  const Device& device_;
  std::uint64_t size_bytes_;
  const std::uint64_t id_;
  std::atomic<std::uint64_t> write_generation_{0};
};

// A point in a stream's order: done when every copy enqueued on that stream before it was
// recorded has finished. Copyable handle; all copies refer to the same point.
class CopyCompletion {
 public:
  // What a backend implements: an event that becomes done once.
  class Event {
   public:
    virtual ~Event() = default;
    virtual bool Done() const = 0;
    // Blocks until done. Returns the first error of the copies it covers, or OK.
    virtual Status Wait() const = 0;
  };

  explicit CopyCompletion(std::shared_ptr<const Event> event) : event_(std::move(event)) {}

  bool Done() const { return event_->Done(); }
  Status Wait() const { return event_->Wait(); }

 private:
  std::shared_ptr<const Event> event_;
};

// An ordered queue of copies on one device, like a CUDA stream.
//
// The host side of a copy must be pinned memory from a HostMemory (host_memory.h) of the node,
// and must stay valid until a completion recorded after the copy is done. The device buffer must
// belong to this stream's device. Ranges are checked when the copy is enqueued.
class CopyStream {
 public:
  virtual ~CopyStream() = default;

  // Enqueues a copy of `source` into `destination` at `destination_offset_bytes`.
  virtual Status CopyToDevice(DeviceBuffer& destination, std::uint64_t destination_offset_bytes,
                              std::span<const std::byte> source) = 0;
  // Enqueues a copy of `destination.size()` bytes of `source`, from `source_offset_bytes`.
  virtual Status CopyToHost(std::span<std::byte> destination, const DeviceBuffer& source,
                            std::uint64_t source_offset_bytes) = 0;
  // Enqueues the digest (chunk_digest.h) of `size_bytes` of `source` from `offset_bytes`,
  // computed by the device where the memory is (a kernel on a GPU: no byte crosses the link),
  // and written to `*digest` before any callback enqueued after it (Then) runs; a digest that
  // fails to run leaves `*digest` as it was and makes every such later callback of the stream
  // report the failure (the stream is not used again).
  // A completion (Record, Synchronize) does not order it. `*digest` must stay valid until then, and
  // the range must not be written meanwhile. `offset_bytes` is a multiple of 8 (InvalidArgument
  // otherwise).
  virtual Status Digest(const DeviceBuffer& source, std::uint64_t offset_bytes,
                        std::uint64_t size_bytes, std::uint64_t* digest) = 0;
  // Records a completion after every copy enqueued so far.
  virtual Result<CopyCompletion> Record() = 0;
  // Waits until every copy enqueued so far has finished; returns the first copy error, if any.
  // It waits even when it reports an error, so a caller may rely on it after Record failed.
  virtual Status Synchronize() = 0;
  // Calls `callback` exactly once, never inside this call, on a thread of the device, after every
  // copy enqueued on this stream so far has finished: with the first error among them, or with
  // the error that kept the stream from tracking them (after waiting for them all). The callback
  // may enqueue copies and callbacks on any stream of the device but must not wait for copies;
  // it holds up the stream's later work, so it is short. Callbacks of one stream run in order.
  // This is how a transfer moves on without a thread of its own waiting (restore_engine.h).
  virtual void Then(std::function<void(Status)> callback) = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceInfo& info() const = 0;

  // Allocates `size_bytes` (> 0) of device memory. ResourceExhausted when the device lacks it.
  virtual Result<std::unique_ptr<DeviceBuffer>> Allocate(std::uint64_t size_bytes) = 0;
  // Bytes currently allocated through this Device (the sum of its live buffers' size_bytes).
  virtual std::uint64_t allocated_bytes() const = 0;

  // Free and total memory of the GPU as its driver sees it now (CUDA: cudaMemGetInfo, counting
  // other processes and memory this device keeps cached). The default, for devices that have no
  // driver: total = info().memory_bytes, free = total - allocated_bytes().
  virtual Result<DeviceMemoryInfo> QueryMemory() const;

  // Returns cached memory to the driver: memory freed buffers left for reuse (CUDA). Buffers in
  // use are untouched. The default does nothing.
  virtual Status Trim() { return Status::Ok(); }

  virtual Result<std::unique_ptr<CopyStream>> CreateStream() = 0;

  // The raw copy limit of the link: one synchronous, unchunked copy of `source` into the start of
  // `destination`, timed from call to return. Emulated: a plain memcpy (paced when the device is
  // paced); CUDA: a pinned cudaMemcpy. Benchmarks compare the restore engine against it.
  virtual Result<Duration> TimedRawCopyToDevice(DeviceBuffer& destination,
                                                std::span<const std::byte> source) = 0;
};

}  // namespace gshare
