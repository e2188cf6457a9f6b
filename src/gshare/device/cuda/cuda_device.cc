#include "gshare/device/cuda/cuda_device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/device/cuda/chunk_digest_image.h"
#include "gshare/device/cuda/cuda_driver_api.h"
#include "gshare/device/cuda/cuda_presence.h"
#include "gshare/device/cuda/vmm_pool.h"
#include "gshare/device/gpu_uuid.h"

namespace gshare {
namespace {

Status CudaStatus(cudaError_t error, std::string_view what) {
  StatusCode code = StatusCode::kInternal;
  switch (error) {
    case cudaErrorMemoryAllocation:
      code = StatusCode::kResourceExhausted;
      break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
      code = StatusCode::kUnavailable;
      break;
    default:
      break;
  }
  return Status(
      code, fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error)));
}

#define GSHARE_CUDA_RETURN_IF_ERROR(call, what)      \
  do {                                               \
    const cudaError_t gshare_cuda_error_ = (call);   \
    if (gshare_cuda_error_ != cudaSuccess) {         \
      return CudaStatus(gshare_cuda_error_, (what)); \
    }                                                \
  } while (false)

class CudaDevice;

// A buffer's memory: a mapped VMM allocation (exportable), or an address from the runtime.
class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(CudaDevice& owner, std::uint64_t size_bytes, void* address,
             std::optional<VmmAllocation> allocation);
  ~CudaBuffer() override;
  void* address() const { return address_; }
  const std::optional<VmmAllocation>& allocation() const { return allocation_; }

  Result<ExportedMemory> Export() const override;
  // Whether its memory was ever handed out (Export): then it is never reused.
  bool exported() const { return exported_.load(std::memory_order_acquire); }

 private:
  CudaDevice& owner_;
  void* address_;
  const std::optional<VmmAllocation> allocation_;
  mutable std::atomic<bool> exported_{false};
};

class CudaEvent final : public CopyCompletion::Event {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool Done() const override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  Status Wait() const override {
    GSHARE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_), "waiting for a copy");
    return Status::Ok();
  }

 private:
  cudaEvent_t event_;
};

// Why a GPU's memory cannot be exported, from its attributes; empty when it can.
std::string ExportNote(bool virtual_memory, bool posix_handles) {
  if (!virtual_memory) {
    return "the GPU lacks CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED";
  }
  if (!posix_handles) {
    return "the GPU lacks CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED";
  }
  return "";
}

class CudaDevice final : public Device {
 public:
  static Result<std::unique_ptr<CudaDevice>> Create(int ordinal) {
    cudaDeviceProp properties{};
    GSHARE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, ordinal),
                                fmt::format("reading the properties of CUDA GPU {}", ordinal));
    DeviceInfo info;
    info.kind = DeviceKind::kCuda;
    info.index = ordinal;
    info.name = properties.name;
    info.link_bytes_per_second = 0;  // measured by the inventory
    const std::string name = fmt::format("GPU {} ({})", ordinal, info.name);
    GSHARE_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&info.cuda_driver_version),
                                "reading the CUDA driver version");
    GSHARE_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&info.cuda_runtime_version),
                                "reading the CUDA runtime version");

    // Memory: what is free once this process's context exists is what slices may take.
    GSHARE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), fmt::format("selecting {}", name));
    GSHARE_CUDA_RETURN_IF_ERROR(cudaFree(nullptr), fmt::format("creating a context on {}", name));
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    GSHARE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes),
                                fmt::format("reading the memory of {}", name));
    info.memory_bytes = free_bytes;
    info.total_memory_bytes = total_bytes;

    // Identity and memory export, from the driver.
    GSHARE_ASSIGN_OR_RETURN(const CudaDriverApi* api, CudaDriver());
    CUdevice device = 0;
    GSHARE_CU_RETURN_IF_ERROR(*api, api->device_get(&device, ordinal),
                              fmt::format("getting the driver's handle of {}", name));
    CUuuid uuid{};
    GSHARE_CU_RETURN_IF_ERROR(*api, api->device_get_uuid(&uuid, device),
                              fmt::format("reading the UUID of {}", name));
    GpuUuid identity{.kind = IsMigDeviceName(info.name) ? GpuUuidKind::kMig : GpuUuidKind::kGpu};
    for (std::size_t i = 0; i < identity.bytes.size(); ++i) {
      identity.bytes[i] = static_cast<std::uint8_t>(uuid.bytes[i]);
    }
    info.uuid = FormatGpuUuid(identity);
    info.uuid_bytes = identity.bytes;
    int virtual_memory = 0;
    int posix_handles = 0;
    GSHARE_CU_RETURN_IF_ERROR(
        *api,
        api->device_get_attribute(&virtual_memory,
                                  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
        fmt::format("querying virtual memory management support of {}", name));
    GSHARE_CU_RETURN_IF_ERROR(
        *api,
        api->device_get_attribute(&posix_handles,
                                  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                  device),
        fmt::format("querying POSIX file descriptor handle support of {}", name));
    GSHARE_ASSIGN_OR_RETURN(DigestKernel digest, LoadDigestKernel(*api, name));
    info.memory_export_note = ExportNote(virtual_memory != 0, posix_handles != 0);
    info.memory_exportable = info.memory_export_note.empty();
    if (info.memory_exportable) {
      GSHARE_ASSIGN_OR_RETURN(std::unique_ptr<VmmPool> pool, VmmPool::Create(*api, device, name));
      return std::unique_ptr<CudaDevice>(
          new CudaDevice(std::move(info), std::move(digest), std::move(pool), false, nullptr));
    }

    // Not exportable: the stream-ordered pool, or plain cudaMalloc.
    int pools_supported = 0;
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, ordinal),
        "querying memory pool support");
    if (pools_supported != 0) {
      cudaMemPool_t pool = nullptr;
      GSHARE_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, ordinal),
                                  "getting the default memory pool");
      // Keep freed memory in the pool: the next restore reuses it without asking the driver.
      std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
      GSHARE_CUDA_RETURN_IF_ERROR(
          cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
          "setting the memory pool's release threshold");
    }
    cudaStream_t allocation_stream = nullptr;
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&allocation_stream, cudaStreamNonBlocking),
        "creating the allocation stream");
    return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(info), std::move(digest), nullptr,
                                                      pools_supported != 0, allocation_stream));
  }

  ~CudaDevice() override {
    cudaSetDevice(info_.index);
    vmm_.reset();  // releases the cached allocations
    if (allocation_stream_ != nullptr) {
      cudaStreamSynchronize(allocation_stream_);
      cudaStreamDestroy(allocation_stream_);
    }
  }

  const DeviceInfo& info() const override { return info_; }

  Result<std::unique_ptr<DeviceBuffer>> Allocate(std::uint64_t size_bytes) override {
    if (size_bytes == 0) return InvalidArgument(fmt::format("{}: cannot allocate 0 bytes", Name()));
    GSHARE_RETURN_IF_ERROR(Select());
    void* address = nullptr;
    std::optional<VmmAllocation> allocation;
    const std::string what = fmt::format("{}: allocating {}", Name(), FormatBytes(size_bytes));
    if (vmm_ != nullptr) {
      GSHARE_ASSIGN_OR_RETURN(allocation, vmm_->Allocate(size_bytes));
      address = reinterpret_cast<void*>(static_cast<std::uintptr_t>(allocation->address));
      // This memory may be exported whole to a function process, and the pool hands out memory
      // another buffer (another tenant's function) had: no byte of it may reach the next one.
      const cudaError_t cleared =
          cudaMemsetAsync(address, 0, allocation->bytes, allocation_stream_);
      const cudaError_t synced =
          cleared == cudaSuccess ? cudaStreamSynchronize(allocation_stream_) : cleared;
      if (synced != cudaSuccess) {
        vmm_->Release(*allocation);
        return CudaStatus(synced, what + ": clearing it");
      }
    } else if (memory_pools_) {
      GSHARE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&address, size_bytes, allocation_stream_), what);
      // Other streams may use the memory as soon as this returns.
      GSHARE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(allocation_stream_), what);
    } else {
      GSHARE_CUDA_RETURN_IF_ERROR(cudaMalloc(&address, size_bytes), what);
    }
    {
      MutexLock lock(mutex_);
      allocated_bytes_ += size_bytes;
    }
    return std::unique_ptr<DeviceBuffer>(
        new CudaBuffer(*this, size_bytes, address, std::move(allocation)));
  }

  std::uint64_t allocated_bytes() const override {
    MutexLock lock(mutex_);
    return allocated_bytes_;
  }

  Result<DeviceMemoryInfo> QueryMemory() const override {
    GSHARE_RETURN_IF_ERROR(Select());
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    GSHARE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes),
                                fmt::format("{}: reading its memory", Name()));
    return DeviceMemoryInfo{.free_bytes = free_bytes, .total_bytes = total_bytes};
  }

  Status Trim() override {
    if (vmm_ != nullptr) return vmm_->Trim();
    if (!memory_pools_) return Status::Ok();
    GSHARE_RETURN_IF_ERROR(Select());
    // Frees are ordered on the allocation stream: let them land before trimming.
    GSHARE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(allocation_stream_),
                                fmt::format("{}: trimming its memory pool", Name()));
    cudaMemPool_t pool = nullptr;
    GSHARE_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, info_.index),
                                fmt::format("{}: trimming its memory pool", Name()));
    GSHARE_CUDA_RETURN_IF_ERROR(cudaMemPoolTrimTo(pool, 0),
                                fmt::format("{}: trimming its memory pool", Name()));
    return Status::Ok();
  }

  Result<std::unique_ptr<CopyStream>> CreateStream() override;

  Result<Duration> TimedRawCopyToDevice(DeviceBuffer& destination,
                                        std::span<const std::byte> source) override {
    GSHARE_ASSIGN_OR_RETURN(CudaBuffer * buffer, Own(destination));
    if (source.size() > buffer->size_bytes()) {
      return OutOfRange(fmt::format("{}: raw copy of {} bytes into a buffer of {} bytes", Name(),
                                    source.size(), buffer->size_bytes()));
    }
    GSHARE_RETURN_IF_ERROR(Select());
    // From pinned memory, cudaMemcpy returns when the copy is done; it runs on the legacy default
    // stream, which does not wait for the engine's non-blocking streams. The synchronization
    // below only makes the end certain.
    const auto start = std::chrono::steady_clock::now();
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(buffer->address(), source.data(), source.size(), cudaMemcpyHostToDevice),
        fmt::format("{}: raw copy", Name()));
    GSHARE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr),
                                fmt::format("{}: raw copy", Name()));
    return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
  }

  // Makes this GPU current for the calling thread.
  Status Select() const {
    GSHARE_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index),
                                fmt::format("selecting GPU {}", info_.index));
    return Status::Ok();
  }

  Result<CudaBuffer*> Own(const DeviceBuffer& buffer) const {
    if (&buffer.device() != this) {
      return InvalidArgument(
          fmt::format("a buffer of {} was used on {}", buffer.device().info().name, Name()));
    }
    return const_cast<CudaBuffer*>(static_cast<const CudaBuffer*>(&buffer));
  }

  void Free(const CudaBuffer& buffer) {
    if (buffer.allocation() && buffer.exported()) {
      // A process may still hold the memory it imported (one that did not unmap it, whatever it
      // said): released to the driver, which keeps it alive for that process alone, and never
      // handed to another buffer, another tenant's.
      vmm_->Discard(*buffer.allocation());
    } else if (buffer.allocation()) {
      vmm_->Release(*buffer.allocation());
    } else {
      cudaSetDevice(info_.index);
      if (memory_pools_) {
        cudaFreeAsync(buffer.address(), allocation_stream_);
      } else {
        cudaFree(buffer.address());
      }
    }
    MutexLock lock(mutex_);
    allocated_bytes_ -= buffer.size_bytes();
  }

  Result<ExportedMemory> Export(const CudaBuffer& buffer) const {
    if (!buffer.allocation()) {
      return FailedPrecondition(
          fmt::format("{}: this device's memory cannot be shared with a function process: {}",
                      Name(), info_.memory_export_note));
    }
    GSHARE_ASSIGN_OR_RETURN(UniqueFd fd, vmm_->Export(*buffer.allocation()));
    return ExportedMemory{.fd = std::move(fd),
                          .kind = MemoryHandleKind::kCudaPosixFd,
                          .bytes = buffer.allocation()->bytes};
  }

  std::string Name() const { return fmt::format("GPU {} ({})", info_.index, info_.name); }

  // The chunk digest kernel, loaded into this GPU's primary context.
  CUfunction digest_kernel() const { return digest_.function(); }

 private:
  // The loaded kernel; its module is unloaded when the owner goes (so an error in Create after
  // the load leaks nothing).
  class DigestKernel {
   public:
    DigestKernel(CUmodule module, CUfunction function) : module_(module), function_(function) {}
    DigestKernel(DigestKernel&& other) noexcept
        : module_(std::exchange(other.module_, nullptr)), function_(other.function_) {}
    DigestKernel(const DigestKernel&) = delete;
    DigestKernel& operator=(const DigestKernel&) = delete;
    DigestKernel& operator=(DigestKernel&&) = delete;
    ~DigestKernel() {
      if (auto api = CudaDriver(); api.ok() && module_ != nullptr) (*api)->module_unload(module_);
    }
    CUfunction function() const { return function_; }

   private:
    CUmodule module_;
    CUfunction function_;
  };

  // Loads the embedded fat binary (chunk_digest_image.h). Called on the GPU's primary context,
  // current after Create's cudaFree. An error names the driver call.
  static Result<DigestKernel> LoadDigestKernel(const CudaDriverApi& api, const std::string& name) {
    CUmodule module = nullptr;
    GSHARE_CU_RETURN_IF_ERROR(
        api, api.module_load_data(&module, kChunkDigestImage),
        fmt::format("loading gshare's chunk digest kernel on {} (cuModuleLoadData)", name));
    CUfunction function = nullptr;
    const CUresult found = api.module_get_function(&function, module, kChunkDigestKernelName);
    if (found != CUDA_SUCCESS) {
      api.module_unload(module);
      return api.Error(found, fmt::format("finding {} on {} (cuModuleGetFunction)",
                                          kChunkDigestKernelName, name));
    }
    return DigestKernel(module, function);
  }

  CudaDevice(DeviceInfo info, DigestKernel digest, std::unique_ptr<VmmPool> vmm, bool memory_pools,
             cudaStream_t allocation_stream)
      : info_(std::move(info)),
        digest_(std::move(digest)),
        vmm_(std::move(vmm)),
        memory_pools_(memory_pools),
        allocation_stream_(allocation_stream) {}

  const DeviceInfo info_;
  const DigestKernel digest_;
  // Exportable memory where the GPU supports it; otherwise the runtime's allocator, through the
  // stream-ordered pool where the GPU has one.
  std::unique_ptr<VmmPool> vmm_;
  const bool memory_pools_;
  cudaStream_t allocation_stream_;
  mutable Mutex mutex_;
  std::uint64_t allocated_bytes_ GUARDED_BY(mutex_) = 0;
};

CudaBuffer::CudaBuffer(CudaDevice& owner, std::uint64_t size_bytes, void* address,
                       std::optional<VmmAllocation> allocation)
    : DeviceBuffer(owner, size_bytes),
      owner_(owner),
      address_(address),
      allocation_(std::move(allocation)) {}

CudaBuffer::~CudaBuffer() { owner_.Free(*this); }

Result<ExportedMemory> CudaBuffer::Export() const {
  exported_.store(true, std::memory_order_release);
  return owner_.Export(*this);
}

class CudaStream final : public CopyStream {
 public:
  CudaStream(CudaDevice& device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~CudaStream() override {
    // The waiter runs every callback queued before it stops: a transfer may still count on them.
    {
      MutexLock lock(waiter_mutex_);
      stopping_ = true;
    }
    waiter_changed_.NotifyAll();
    if (waiter_.joinable()) waiter_.join();
    cudaSetDevice(device_.info().index);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    MutexLock lock(slots_mutex_);
    for (void* block : slot_blocks_) cudaFreeHost(block);
  }

  Status CopyToDevice(DeviceBuffer& destination, std::uint64_t destination_offset_bytes,
                      std::span<const std::byte> source) override {
    GSHARE_ASSIGN_OR_RETURN(CudaBuffer * buffer, device_.Own(destination));
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, destination_offset_bytes, source.size()));
    GSHARE_RETURN_IF_ERROR(device_.Select());
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(static_cast<std::byte*>(buffer->address()) + destination_offset_bytes,
                        source.data(), source.size(), cudaMemcpyHostToDevice, stream_),
        fmt::format("{}: host-to-device copy", device_.Name()));
    return Status::Ok();
  }

  Status CopyToHost(std::span<std::byte> destination, const DeviceBuffer& source,
                    std::uint64_t source_offset_bytes) override {
    GSHARE_ASSIGN_OR_RETURN(CudaBuffer * buffer, device_.Own(source));
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, source_offset_bytes, destination.size()));
    GSHARE_RETURN_IF_ERROR(device_.Select());
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(destination.data(),
                        static_cast<const std::byte*>(buffer->address()) + source_offset_bytes,
                        destination.size(), cudaMemcpyDeviceToHost, stream_),
        fmt::format("{}: device-to-host copy", device_.Name()));
    return Status::Ok();
  }

  // A kernel on the stream writes one partial sum per block into a slot of mapped pinned host
  // memory; a callback of the stream's own adds them up into `*digest` before any later one runs.
  Status Digest(const DeviceBuffer& source, std::uint64_t offset_bytes, std::uint64_t size_bytes,
                std::uint64_t* digest) override {
    GSHARE_ASSIGN_OR_RETURN(CudaBuffer * buffer, device_.Own(source));
    if (offset_bytes % 8 != 0) {
      return InvalidArgument(fmt::format("{}: a digest at offset {}, not a multiple of 8",
                                         device_.Name(), offset_bytes));
    }
    GSHARE_RETURN_IF_ERROR(CheckRange(*buffer, offset_bytes, size_bytes));
    GSHARE_RETURN_IF_ERROR(device_.Select());
    GSHARE_ASSIGN_OR_RETURN(const CudaDriverApi* api, CudaDriver());
    GSHARE_ASSIGN_OR_RETURN(DigestSlot slot, TakeDigestSlot());
    const std::uint64_t words = size_bytes / 8;
    const std::uint64_t per_block = std::uint64_t{kChunkDigestThreads} * 8;
    const unsigned int blocks = static_cast<unsigned int>(
        std::clamp<std::uint64_t>((words + per_block - 1) / per_block, 1, kDigestBlocks));
    CUdeviceptr data = reinterpret_cast<CUdeviceptr>(buffer->address()) + offset_bytes;
    unsigned long long size = size_bytes;
    CUdeviceptr partials = slot.device;
    void* arguments[] = {&data, &size, &partials};
    const CUresult launched =
        api->launch_kernel(device_.digest_kernel(), blocks, 1, 1, kChunkDigestThreads, 1, 1, 0,
                           reinterpret_cast<CUstream>(stream_), arguments, nullptr);
    if (launched != CUDA_SUCCESS) {
      ReturnDigestSlot(slot);
      return api->Error(launched, fmt::format("{}: launching the chunk digest kernel "
                                              "(cuLaunchKernel)",
                                              device_.Name()));
    }
    // On the waiter thread, before any callback enqueued later: a digest that did not run
    // fails every later callback of the stream (digest_failure_), so no caller goes on with an
    // unwritten digest.
    Then([this, slot, blocks, digest](const Status& ran) {
      if (ran.ok()) {
        std::uint64_t total = 0;
        for (unsigned int b = 0; b < blocks; ++b) total += slot.host[b];
        *digest = total;
      } else {
        digest_failure_ = ran.WithContext(fmt::format("{}: chunk digest", device_.Name()));
      }
      ReturnDigestSlot(slot);
    });
    return Status::Ok();
  }

  Result<CopyCompletion> Record() override { return RecordWith(cudaEventDisableTiming); }

  Status Synchronize() override {
    GSHARE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_),
                                fmt::format("{}: synchronizing a stream", device_.Name()));
    return Status::Ok();
  }

  // Starts the thread of the stream's own that waits for Then's events and calls back: CUDA's
  // host callbacks may not call CUDA, and a transfer's callback enqueues its next copies.
  Status StartWaiter() {
    try {
      waiter_ = std::thread([this] { Wait(); });
    } catch (const std::exception& e) {
      return Internal(fmt::format("{}: cannot start a copy stream's waiter thread: {}",
                                  device_.Name(), e.what()));
    }
    return Status::Ok();
  }

  // The waiter thread waits for an event recorded here (a blocking one: the thread sleeps in the
  // driver rather than spinning), then calls back.
  void Then(std::function<void(Status)> callback) override {
    auto recorded = RecordWith(cudaEventDisableTiming | cudaEventBlockingSync);
    {
      MutexLock lock(waiter_mutex_);
      waiting_.push_back(
          Waiting{recorded.ok() ? std::optional<CopyCompletion>(*recorded) : std::nullopt,
                  recorded.status(), std::move(callback)});
    }
    waiter_changed_.NotifyOne();
  }

 private:
  struct Waiting {
    std::optional<CopyCompletion> completion;  // none when recording it failed
    Status recorded;
    std::function<void(Status)> callback;
  };

  Result<CopyCompletion> RecordWith(unsigned int flags) {
    GSHARE_RETURN_IF_ERROR(device_.Select());
    cudaEvent_t event = nullptr;
    GSHARE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, flags),
                                fmt::format("{}: creating an event", device_.Name()));
    auto owned = std::make_shared<CudaEvent>(event);
    GSHARE_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, stream_),
                                fmt::format("{}: recording an event", device_.Name()));
    return CopyCompletion(std::move(owned));
  }

  void Wait() EXCLUDES(waiter_mutex_) {
    (void)device_.Select();
    for (;;) {
      Waiting next;
      {
        MutexLock lock(waiter_mutex_);
        waiter_changed_.Wait(waiter_mutex_, [this]() REQUIRES(waiter_mutex_) {
          return stopping_ || !waiting_.empty();
        });
        if (waiting_.empty()) return;
        next = std::move(waiting_.front());
        waiting_.pop_front();
      }
      Status status = next.completion ? next.completion->Wait() : Synchronize();
      if (!next.completion && status.ok()) status = next.recorded;
      // Sticky: the callback after the failed digest may be another transfer's (streams are
      // shared), so every later one fails, the failed digest's own among them. An error that
      // surfaces at a kernel's completion is the context's, which is unusable from then on.
      if (!digest_failure_.ok() && status.ok()) status = digest_failure_;
      next.callback(status);
    }
  }

  Status CheckRange(const CudaBuffer& buffer, std::uint64_t offset_bytes,
                    std::uint64_t size_bytes) const {
    if (offset_bytes > buffer.size_bytes() || size_bytes > buffer.size_bytes() - offset_bytes) {
      return OutOfRange(
          fmt::format("{}: copy of {} bytes at offset {} does not fit a buffer of {} bytes",
                      device_.Name(), size_bytes, offset_bytes, buffer.size_bytes()));
    }
    return Status::Ok();
  }

  // Where one digest's kernel writes its partial sums: mapped pinned host memory, which the kernel
  // writes through the bus (kDigestBlocks sums).
  struct DigestSlot {
    const std::uint64_t* host = nullptr;
    CUdeviceptr device = 0;
  };

  // A free slot; a new block of slots when none is free (so that any number of digests may be
  // in flight).
  Result<DigestSlot> TakeDigestSlot() EXCLUDES(slots_mutex_) {
    MutexLock lock(slots_mutex_);
    if (free_slots_.empty()) {
      constexpr std::size_t kSlotBytes = std::size_t{kDigestBlocks} * sizeof(std::uint64_t);
      void* host = nullptr;
      GSHARE_CUDA_RETURN_IF_ERROR(
          cudaHostAlloc(&host, kSlotsPerBlock * kSlotBytes,
                        cudaHostAllocMapped | cudaHostAllocPortable),
          fmt::format("{}: allocating digest slots (cudaHostAlloc)", device_.Name()));
      slot_blocks_.push_back(host);
      void* on_device = nullptr;
      GSHARE_CUDA_RETURN_IF_ERROR(
          cudaHostGetDevicePointer(&on_device, host, 0),
          fmt::format("{}: mapping digest slots (cudaHostGetDevicePointer)", device_.Name()));
      for (std::size_t i = 0; i < kSlotsPerBlock; ++i) {
        free_slots_.push_back(
            {.host = static_cast<const std::uint64_t*>(host) + i * kDigestBlocks,
             .device = reinterpret_cast<CUdeviceptr>(on_device) + i * kSlotBytes});
      }
    }
    const DigestSlot slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  void ReturnDigestSlot(DigestSlot slot) EXCLUDES(slots_mutex_) {
    MutexLock lock(slots_mutex_);
    free_slots_.push_back(slot);
  }

  static constexpr std::size_t kSlotsPerBlock = 16;
  static constexpr unsigned int kDigestBlocks = 1024;  // at most, per digest

  CudaDevice& device_;
  cudaStream_t stream_;
  Mutex slots_mutex_;
  std::vector<void*> slot_blocks_ GUARDED_BY(slots_mutex_);  // cudaHostAlloc'd, freed at the end
  std::vector<DigestSlot> free_slots_ GUARDED_BY(slots_mutex_);
  Status
      digest_failure_;  // the waiter thread's alone: a digest that failed, for every later callback
  Mutex waiter_mutex_;
  CondVar waiter_changed_;
  std::deque<Waiting> waiting_ GUARDED_BY(waiter_mutex_);
  bool stopping_ GUARDED_BY(waiter_mutex_) = false;
  std::thread waiter_;  // started by CreateStream (StartWaiter)
};

Result<std::unique_ptr<CopyStream>> CudaDevice::CreateStream() {
  GSHARE_RETURN_IF_ERROR(Select());
  cudaStream_t stream = nullptr;
  GSHARE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                              fmt::format("{}: creating a copy stream", Name()));
  auto created = std::make_unique<CudaStream>(*this, stream);
  GSHARE_RETURN_IF_ERROR(created->StartWaiter());
  return std::unique_ptr<CopyStream>(std::move(created));
}

class CudaPinnedBuffer final : public PinnedHostBuffer {
 public:
  explicit CudaPinnedBuffer(std::span<std::byte> bytes) : PinnedHostBuffer(bytes, true) {}
  ~CudaPinnedBuffer() override { cudaFreeHost(bytes().data()); }
};

class CudaHostMemory final : public HostMemory {
 public:
  Result<std::unique_ptr<PinnedHostBuffer>> Allocate(std::uint64_t size_bytes) override {
    if (size_bytes == 0) return InvalidArgument("cannot allocate 0 bytes of pinned host memory");
    void* address = nullptr;
    GSHARE_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&address, size_bytes, cudaHostAllocPortable),
        fmt::format("allocating {} of pinned host memory", FormatBytes(size_bytes)));
    return std::unique_ptr<PinnedHostBuffer>(
        new CudaPinnedBuffer(std::span<std::byte>(static_cast<std::byte*>(address), size_bytes)));
  }
};

}  // namespace

Result<std::vector<std::unique_ptr<Device>>> DiscoverCudaDevices() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  std::string loader_error;
  const bool loadable = error == cudaSuccess || CudaDriverLoadable(loader_error);
  const CudaPresence presence = ClassifyCudaPresence(error, count, loadable);
  if (presence != CudaPresence::kGpus) {
    int driver_version = 0;
    if (loadable) (void)cudaDriverGetVersion(&driver_version);
    return CudaPresenceStatus(presence, error, loader_error, driver_version);
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto device = CudaDevice::Create(ordinal);
    if (!device.ok()) {
      // GPUs are there: whatever keeps one from opening is an error, never "no GPU".
      const Status& failed = device.status();
      return Status(failed.code() == StatusCode::kUnavailable ? StatusCode::kFailedPrecondition
                                                              : failed.code(),
                    fmt::format("opening CUDA GPU {}: {}", ordinal, failed.message()));
    }
    devices.push_back(std::move(device).value());
  }
  return devices;
}

void ReadCudaVersions(int& driver, int& runtime) {
  driver = 0;
  runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
}

std::unique_ptr<HostMemory> NewCudaHostMemory() { return std::make_unique<CudaHostMemory>(); }

}  // namespace gshare
