// EmulatedDevice: a GPU made of host memory, for development and CI where there is no GPU.
//
// An emulated GPU has a memory capacity and a host-to-device link bandwidth. Its device memory is
// real memory: each DeviceBuffer is a shared-memory segment (memfd) mapped into this process, so
// a function process can be handed the same segment (EmulatedBuffer::fd) and see its "device
// memory". Capacity is a hard limit: an allocation that would exceed it fails with
// ResourceExhausted and changes nothing. Segment pages are allocated by the kernel when first
// touched, so capacity larger than the host's memory is accepted but cannot be filled.
//
// Copies are real copies (copy_engine.h), run by one worker thread per CopyStream. When the link
// bandwidth is set, copies are paced to it: each direction of the link is a serial resource that a
// copy of n bytes holds for n / bandwidth seconds, shared by all streams of the device (copies on
// several streams therefore share the bandwidth, as on a PCIe link). Bandwidth 0 means unpaced:
// copies run at the machine's memcpy speed. Pacing reads the machine's steady clock: it emulates
// hardware, which runs in real time.
//
// Thread safety: as Device (device.h).
#pragma once

#include "gshare/device/emulated/segment_pool.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gshare/common/clock.h"
#include "gshare/common/mutex.h"
#include "gshare/device/device.h"

namespace gshare {

struct EmulatedGpuConfig {
  std::string name;  // empty: "emulated-gpu-<index>"
  std::uint64_t memory_bytes = 16 * kGiB;
  double link_bytes_per_second = 0;  // 0: unpaced
  // Fresh segments made and faulted in ahead of need, within this many bytes (segment_pool.h):
  // device memory that is there when allocated, as a GPU's is. 0: none.
  std::uint64_t prepared_bytes = 0;
  // The link's time: a paced copy ends on this clock (a node's own clock, a test's manual one);
  // null: the machine's steady clock. Must outlive the device.
  const Clock* clock = nullptr;
};

class EmulatedDevice;

// A DeviceBuffer of an EmulatedDevice: a mapped memfd segment.
class EmulatedBuffer final : public DeviceBuffer {
 public:
  ~EmulatedBuffer() override;

  // The mapped segment. Touching it directly bypasses the link (and its pacing): for a function's
  // own use of its device memory, and for tests.
  std::span<std::byte> bytes() const { return bytes_; }
  // The memfd of the segment, owned by this buffer; a function process may map it.
  int fd() const { return fd_; }
  // A duplicate of the memfd (kMemfd, size_bytes()). A segment is never reused, so a mapping
  // that outlives the buffer sees no other buffer's bytes.
  Result<ExportedMemory> Export() const override;

 private:
  friend class EmulatedDevice;
  EmulatedBuffer(EmulatedDevice& owner, std::uint64_t size_bytes, int fd,
                 std::span<std::byte> bytes);

  EmulatedDevice& owner_;
  int fd_;
  std::span<std::byte> bytes_;
};

class EmulatedDevice final : public Device {
 public:
  class LinkPacer;

  // Creates emulated GPU number `index`. InvalidArgument when the capacity is zero or the
  // bandwidth negative.
  static Result<std::unique_ptr<EmulatedDevice>> Create(int index, EmulatedGpuConfig config);
  ~EmulatedDevice() override;

  const DeviceInfo& info() const override;
  Result<std::unique_ptr<DeviceBuffer>> Allocate(std::uint64_t size_bytes) override;
  std::uint64_t allocated_bytes() const override;
  Result<std::unique_ptr<CopyStream>> CreateStream() override;
  Result<Duration> TimedRawCopyToDevice(DeviceBuffer& destination,
                                        std::span<const std::byte> source) override;

  // Allocations that took a segment prepared ahead (EmulatedGpuConfig::prepared_bytes), and
  // allocations that had to make a fresh one (whose pages a first touch then faults in).
  std::uint64_t prepared_allocations() const;
  std::uint64_t fresh_allocations() const;

  // The EmulatedBuffer behind `buffer`, or InvalidArgument when it belongs to another device.
  Result<EmulatedBuffer*> Own(const DeviceBuffer& buffer) const;

  // The pacer of the host-to-device and device-to-host directions of the link.
  LinkPacer& host_to_device_link() const { return *host_to_device_; }
  LinkPacer& device_to_host_link() const { return *device_to_host_; }

 private:
  friend class EmulatedBuffer;
  EmulatedDevice(DeviceInfo info, std::uint64_t prepared_bytes, const Clock& clock);
  void ReleaseCapacity(std::uint64_t size_bytes) EXCLUDES(mutex_);

  const DeviceInfo info_;
  const std::unique_ptr<LinkPacer> host_to_device_;
  const std::unique_ptr<LinkPacer> device_to_host_;
  const std::unique_ptr<SegmentPreparer> preparer_;
  mutable Mutex mutex_;
  std::uint64_t allocated_bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gshare
