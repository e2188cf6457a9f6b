#include "gshare/device/emulated/emulated_device.h"

#include "gshare/device/chunk_digest.h"
#include "gshare/device/emulated/copy_engine.h"
#include "gshare/device/gpu_uuid.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

namespace gshare {

namespace {
// The link delivers at the time it computed, not up to the kernel's default timer slack (50 us)
// later: a thread that waits for a paced copy asks for its sleeps to end on time (once per thread;
// it only narrows how late the kernel may wake it).
void PreciseSleeps() {
  thread_local const bool set = ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  (void)set;
}

}  // namespace

// One direction of an emulated link: a serial resource that a copy of n bytes holds for
// n / bandwidth seconds. Copies reserve their slot in arrival order.
class EmulatedDevice::LinkPacer {
 public:
  LinkPacer(double bytes_per_second, const Clock& clock)
      : bytes_per_second_(bytes_per_second), clock_(clock) {}

  // Reserves the link for `bytes` starting no earlier than now; returns when the transfer ends.
  // Unpaced links return nothing: there is nothing to wait for.
  std::optional<TimePoint> Reserve(std::uint64_t bytes) EXCLUDES(mutex_) {
    if (bytes_per_second_ <= 0) return std::nullopt;
    const Duration duration = TransferTime(bytes, bytes_per_second_);
    MutexLock lock(mutex_);
    const TimePoint start = std::max(clock_.Now(), next_free_);
    next_free_ = start + duration;
    return next_free_;
  }

  // Copies `bytes` from `source` to `destination` over the link with `copy`, then waits until
  // the link would have delivered them.
  template <typename CopyFunction>
  void Copy(void* destination, const void* source, std::size_t bytes, CopyFunction copy) {
    const std::optional<TimePoint> delivered = Reserve(bytes);
    copy(destination, source, bytes);
    if (delivered) {
      PreciseSleeps();
      clock_.SleepUntil(*delivered);
    }
  }

  const Clock& clock() const { return clock_; }

 private:
  const double bytes_per_second_;
  const Clock& clock_;
  Mutex mutex_;
  TimePoint next_free_ GUARDED_BY(mutex_){};
};

namespace {

// A completion of an emulated stream: set by the stream's worker when it reaches it.
class EmulatedEvent final : public CopyCompletion::Event {
 public:
  bool Done() const override {
    MutexLock lock(mutex_);
    return done_;
  }
  Status Wait() const override {
    MutexLock lock(mutex_);
    done_changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return done_; });
    return Status::Ok();
  }
  void Set() {
    {
      MutexLock lock(mutex_);
      done_ = true;
    }
    done_changed_.NotifyAll();
  }

 private:
  mutable Mutex mutex_;
  mutable CondVar done_changed_;
  bool done_ GUARDED_BY(mutex_) = false;
};

// A stream: a FIFO of operations run by one worker thread.
class EmulatedStream final : public CopyStream {
 public:
  explicit EmulatedStream(EmulatedDevice& device) : device_(device) {}

  ~EmulatedStream() override {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
    }
    queue_changed_.NotifyAll();
    if (worker_.joinable()) worker_.join();
  }

  Status Start() {
    try {
      worker_ = std::thread([this] { Run(); });
    } catch (const std::exception& e) {
      return Internal(
          fmt::format("{}: cannot start a copy stream thread: {}", device_.info().name, e.what()));
    }
    return Status::Ok();
  }

  Status CopyToDevice(DeviceBuffer& destination, std::uint64_t destination_offset_bytes,
                      std::span<const std::byte> source) override {
    GSHARE_ASSIGN_OR_RETURN(EmulatedBuffer * buffer, device_.Own(destination));
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, destination_offset_bytes, source.size(), "to"));
    Enqueue(Operation{buffer->bytes().data() + destination_offset_bytes,
                      source.data(),
                      source.size(),
                      &device_.host_to_device_link(),
                      nullptr,
                      {}});
    return Status::Ok();
  }

  Status CopyToHost(std::span<std::byte> destination, const DeviceBuffer& source,
                    std::uint64_t source_offset_bytes) override {
    GSHARE_ASSIGN_OR_RETURN(EmulatedBuffer * buffer, device_.Own(source));
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, source_offset_bytes, destination.size(), "from"));
    Enqueue(Operation{destination.data(),
                      buffer->bytes().data() + source_offset_bytes,
                      destination.size(),
                      &device_.device_to_host_link(),
                      nullptr,
                      {}});
    return Status::Ok();
  }

  // Computed by the stream's thread on the segment: device-local work, not paced by the link.
  Status Digest(const DeviceBuffer& source, std::uint64_t offset_bytes, std::uint64_t size_bytes,
                std::uint64_t* digest) override {
    GSHARE_ASSIGN_OR_RETURN(EmulatedBuffer * buffer, device_.Own(source));
    if (offset_bytes % 8 != 0) {
      return InvalidArgument(fmt::format("{}: a digest at offset {}, not a multiple of 8",
                                         device_.info().name, offset_bytes));
    }
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, offset_bytes, size_bytes, "from"));
    Enqueue(Operation{
        nullptr, buffer->bytes().data() + offset_bytes, size_bytes, nullptr, nullptr, {}, digest});
    return Status::Ok();
  }

  Result<CopyCompletion> Record() override {
    auto event = std::make_shared<EmulatedEvent>();
    Enqueue(Operation{nullptr, nullptr, 0, nullptr, event, {}});
    return CopyCompletion(std::move(event));
  }

  Status Synchronize() override {
    GSHARE_ASSIGN_OR_RETURN(CopyCompletion completion, Record());
    return completion.Wait();
  }

  void Then(std::function<void(Status)> callback) override {
    Enqueue(Operation{nullptr, nullptr, 0, nullptr, nullptr, std::move(callback)});
  }

 private:
  struct Operation {
    void* destination = nullptr;
    const void* source = nullptr;
    std::size_t bytes = 0;
    EmulatedDevice::LinkPacer* link = nullptr;  // null for a completion marker or a callback
    std::shared_ptr<EmulatedEvent> event;       // set for a completion marker
    std::function<void(Status)> then;           // set for a callback (Then)
    std::uint64_t* digest = nullptr;            // set for a digest of `source`
  };

  Status CheckRange(const EmulatedBuffer& buffer, std::uint64_t offset_bytes,
                    std::uint64_t size_bytes, const char* direction) const {
    if (offset_bytes > buffer.size_bytes() || size_bytes > buffer.size_bytes() - offset_bytes) {
      return OutOfRange(fmt::format(
          "{}: copy of {} bytes {} offset {} does not fit a device buffer of {} bytes",
          device_.info().name, size_bytes, direction, offset_bytes, buffer.size_bytes()));
    }
    return Status::Ok();
  }

  void Enqueue(Operation operation) EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      queue_.push_back(std::move(operation));
    }
    queue_changed_.NotifyOne();
  }

  void Run() EXCLUDES(mutex_) {
    for (;;) {
      Operation operation;
      {
        MutexLock lock(mutex_);
        queue_changed_.Wait(mutex_,
                            [this]() REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
        // Finish what was enqueued before stopping: a caller may still wait on it.
        if (queue_.empty()) return;
        operation = std::move(queue_.front());
        queue_.pop_front();
      }
      if (operation.then) {
        operation.then(Status::Ok());  // emulated copies do not fail
      } else if (operation.event != nullptr) {
        operation.event->Set();
      } else if (operation.digest != nullptr) {
        *operation.digest =
            ChunkDigest({static_cast<const std::byte*>(operation.source), operation.bytes});
      } else if (operation.bytes > 0) {
        operation.link->Copy(operation.destination, operation.source, operation.bytes,
                             CopyEngineCopy);
      }
    }
  }

  EmulatedDevice& device_;
  Mutex mutex_;
  CondVar queue_changed_;
  std::deque<Operation> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread worker_;
};

}  // namespace

EmulatedBuffer::EmulatedBuffer(EmulatedDevice& owner, std::uint64_t size_bytes, int fd,
                               std::span<std::byte> bytes)
    : DeviceBuffer(owner, size_bytes), owner_(owner), fd_(fd), bytes_(bytes) {}

Result<ExportedMemory> EmulatedBuffer::Export() const {
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return IoError(fmt::format("{}: duplicating a buffer's memfd: {}", owner_.info().name,
                               std::strerror(errno)));
  }
  return ExportedMemory{
      .fd = UniqueFd(fd), .kind = MemoryHandleKind::kMemfd, .bytes = size_bytes()};
}

EmulatedBuffer::~EmulatedBuffer() {
  FreeSegment({fd_, bytes_});  // never recycled: a function may still map it
  owner_.ReleaseCapacity(size_bytes());
}

Result<std::unique_ptr<EmulatedDevice>> EmulatedDevice::Create(int index,
                                                               EmulatedGpuConfig config) {
  if (config.memory_bytes == 0) {
    return InvalidArgument(fmt::format("emulated GPU {}: memory capacity must be positive", index));
  }
  if (!(config.link_bytes_per_second >= 0)) {
    return InvalidArgument(
        fmt::format("emulated GPU {}: link bandwidth must be non-negative", index));
  }
  DeviceInfo info;
  info.kind = DeviceKind::kEmulated;
  info.index = index;
  info.name = config.name.empty() ? fmt::format("emulated-gpu-{}", index) : config.name;
  GpuUuid uuid{.kind = GpuUuidKind::kEmulated};
  for (int i = 0; i < 4; ++i) {
    uuid.bytes[i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(index) >> (24 - 8 * i));
  }
  info.uuid = FormatGpuUuid(uuid);  // "EMU-00000003-0000-0000-0000-000000000000"
  info.uuid_bytes = uuid.bytes;
  info.memory_bytes = config.memory_bytes;
  info.total_memory_bytes = config.memory_bytes;
  info.link_bytes_per_second = config.link_bytes_per_second;
  info.memory_exportable = true;
  const Clock& link_clock = config.clock != nullptr ? *config.clock : SteadyClock::Shared();
  return std::unique_ptr<EmulatedDevice>(
      new EmulatedDevice(std::move(info), config.prepared_bytes, link_clock));
}

EmulatedDevice::EmulatedDevice(DeviceInfo info, std::uint64_t prepared_bytes, const Clock& clock)
    : info_(std::move(info)),
      host_to_device_(std::make_unique<LinkPacer>(info_.link_bytes_per_second, clock)),
      device_to_host_(std::make_unique<LinkPacer>(info_.link_bytes_per_second, clock)),
      preparer_(std::make_unique<SegmentPreparer>(fmt::format("gshare-{}", info_.name),
                                                  prepared_bytes)) {}

EmulatedDevice::~EmulatedDevice() = default;

const DeviceInfo& EmulatedDevice::info() const { return info_; }

std::uint64_t EmulatedDevice::allocated_bytes() const {
  MutexLock lock(mutex_);
  return allocated_bytes_;
}

void EmulatedDevice::ReleaseCapacity(std::uint64_t size_bytes) {
  MutexLock lock(mutex_);
  allocated_bytes_ -= size_bytes;
}

Result<std::unique_ptr<DeviceBuffer>> EmulatedDevice::Allocate(std::uint64_t size_bytes) {
  if (size_bytes == 0) {
    return InvalidArgument(fmt::format("{}: cannot allocate 0 bytes", info_.name));
  }
  {
    // Reserve the capacity first, so that concurrent allocations never overshoot it.
    MutexLock lock(mutex_);
    if (size_bytes > info_.memory_bytes - allocated_bytes_) {
      return ResourceExhausted(fmt::format(
          "{}: cannot allocate {} ({} bytes): {} of {} in use, {} free", info_.name,
          FormatBytes(size_bytes), size_bytes, FormatBytes(allocated_bytes_),
          FormatBytes(info_.memory_bytes), FormatBytes(info_.memory_bytes - allocated_bytes_)));
    }
    allocated_bytes_ += size_bytes;
  }
  std::optional<Segment> segment = preparer_->Take(size_bytes);
  if (!segment) {
    auto made = MakeSegment(fmt::format("gshare-{}", info_.name), size_bytes, /*populate=*/false);
    if (!made.ok()) {
      ReleaseCapacity(size_bytes);
      return made.status();
    }
    segment = *made;
  }
  return std::unique_ptr<DeviceBuffer>(
      new EmulatedBuffer(*this, size_bytes, segment->fd, segment->bytes));
}

std::uint64_t EmulatedDevice::prepared_allocations() const { return preparer_->hits(); }

std::uint64_t EmulatedDevice::fresh_allocations() const { return preparer_->misses(); }

Result<EmulatedBuffer*> EmulatedDevice::Own(const DeviceBuffer& buffer) const {
  if (&buffer.device() != this) {
    return InvalidArgument(
        fmt::format("a buffer of {} was used on {}", buffer.device().info().name, info_.name));
  }
  // Only this device makes buffers whose device() is this device.
  return const_cast<EmulatedBuffer*>(static_cast<const EmulatedBuffer*>(&buffer));
}

Result<std::unique_ptr<CopyStream>> EmulatedDevice::CreateStream() {
  auto stream = std::make_unique<EmulatedStream>(*this);
  GSHARE_RETURN_IF_ERROR(stream->Start());
  return std::unique_ptr<CopyStream>(std::move(stream));
}

Result<Duration> EmulatedDevice::TimedRawCopyToDevice(DeviceBuffer& destination,
                                                      std::span<const std::byte> source) {
  GSHARE_ASSIGN_OR_RETURN(EmulatedBuffer * buffer, Own(destination));
  if (source.size() > buffer->size_bytes()) {
    return OutOfRange(fmt::format("{}: raw copy of {} bytes into a buffer of {} bytes", info_.name,
                                  source.size(), buffer->size_bytes()));
  }
  const Clock& link_clock = host_to_device_->clock();
  const TimePoint start = link_clock.Now();
  // The raw limit is a plain memcpy, by definition (see device.h).
  host_to_device_->Copy(
      buffer->bytes().data(), source.data(), source.size(),
      [](void* to, const void* from, std::size_t n) { std::memcpy(to, from, n); });
  return link_clock.Now() - start;
}

}  // namespace gshare
