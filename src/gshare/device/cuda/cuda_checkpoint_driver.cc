#include "gshare/device/cuda/cuda_checkpoint_driver.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gshare/device/cuda/cuda_driver_api.h"
#include "gshare/device/device.h"

namespace gshare {
namespace {

// The driver is opened at run time, never linked: the binary starts where there is none.
constexpr const char* kDriverLibrary = "libcuda.so.1";
// cuDriverGetVersion of the first driver branch (R580) that restores onto another GPU.
constexpr int kRemapDriverVersion = 13000;
// How long the probe waits for the driver's answer about this process.
constexpr std::chrono::seconds kProbeTimeout{5};

// A dlopen'ed library, closed when destroyed.
class SharedLibrary {
 public:
  explicit SharedLibrary(void* handle) : handle_(handle) {}
  ~SharedLibrary() { ::dlclose(handle_); }
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The entry point `name` as a `Function`, or nullptr where the library lacks it.
  template <typename Function>
  Function Find(const char* name) const {
    return reinterpret_cast<Function>(::dlsym(handle_, name));
  }

 private:
  void* handle_;
};

struct EntryPoints {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  decltype(&cuCheckpointProcessLock) lock = nullptr;
  decltype(&cuCheckpointProcessCheckpoint) checkpoint = nullptr;
  decltype(&cuCheckpointProcessRestore) restore = nullptr;
  decltype(&cuCheckpointProcessUnlock) unlock = nullptr;
  decltype(&cuCheckpointProcessGetState) get_state = nullptr;
};

class DriverProcessCheckpointApi final : public ProcessCheckpointApi {
 public:
  DriverProcessCheckpointApi(std::unique_ptr<SharedLibrary> library, EntryPoints entry,
                             int driver_version)
      : library_(std::move(library)), entry_(entry), driver_version_(driver_version) {}

  int driver_version() const { return driver_version_; }

  Status Lock(int pid, std::chrono::milliseconds timeout) override {
    CUcheckpointLockArgs args{};
    args.timeoutMs = static_cast<unsigned int>(std::clamp<std::chrono::milliseconds::rep>(
        timeout.count(), 0, std::numeric_limits<unsigned int>::max()));
    return Check(entry_.lock(pid, &args), "cuCheckpointProcessLock", pid);
  }

  Status Checkpoint(int pid) override {
    return Check(entry_.checkpoint(pid, nullptr), "cuCheckpointProcessCheckpoint", pid);
  }

  Status Restore(int pid, std::span<const GpuPair> pairs) override {
    if (pairs.empty()) {
      return Check(entry_.restore(pid, nullptr), "cuCheckpointProcessRestore", pid);
    }
    std::vector<CUcheckpointGpuPair> raw(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      static_assert(sizeof(raw[i].oldUuid.bytes) == sizeof(GpuUuidBytes));
      std::memcpy(raw[i].oldUuid.bytes, pairs[i].from.data(), pairs[i].from.size());
      std::memcpy(raw[i].newUuid.bytes, pairs[i].to.data(), pairs[i].to.size());
    }
    CUcheckpointRestoreArgs args{};
    args.gpuPairs = raw.data();
    args.gpuPairsCount = static_cast<unsigned int>(raw.size());
    return Check(entry_.restore(pid, &args), "cuCheckpointProcessRestore", pid);
  }

  Status Unlock(int pid) override {
    return Check(entry_.unlock(pid, nullptr), "cuCheckpointProcessUnlock", pid);
  }

  Result<ProcessCheckpointState> GetState(int pid) override {
    CUprocessState state = CU_PROCESS_STATE_RUNNING;
    GSHARE_RETURN_IF_ERROR(
        Check(entry_.get_state(pid, &state), "cuCheckpointProcessGetState", pid));
    switch (state) {
      case CU_PROCESS_STATE_RUNNING:
        return ProcessCheckpointState::kRunning;
      case CU_PROCESS_STATE_LOCKED:
        return ProcessCheckpointState::kLocked;
      case CU_PROCESS_STATE_CHECKPOINTED:
        return ProcessCheckpointState::kCheckpointed;
      case CU_PROCESS_STATE_FAILED:
        return ProcessCheckpointState::kFailed;
    }
    return Internal(fmt::format("cuCheckpointProcessGetState (pid {}): unknown state {}", pid,
                                static_cast<int>(state)));
  }

 private:
  Status Check(CUresult result, std::string_view call, int pid) const {
    if (result == CUDA_SUCCESS) return Status::Ok();
    const CuResultText described =
        DescribeCuResult(result, entry_.get_error_name, entry_.get_error_string);
    std::string message =
        fmt::format("{} (pid {}): {} ({})", call, pid, described.name, described.text);
    switch (result) {
      case CUDA_ERROR_OUT_OF_MEMORY:
        return ResourceExhausted(std::move(message));
      case CUDA_ERROR_TIMEOUT:
        return DeadlineExceeded(std::move(message));
      case CUDA_ERROR_NOT_READY:
        // What a lock returns when its timeout runs out.
        if (call == "cuCheckpointProcessLock") return DeadlineExceeded(std::move(message));
        return Internal(std::move(message));
      case CUDA_ERROR_ILLEGAL_STATE:
        return FailedPrecondition(std::move(message));
      case CUDA_ERROR_NOT_SUPPORTED:
        return Unavailable(message +
                           ": the driver refuses the process checkpoint API here (a sandbox "
                           "runtime such as gVisor needs support for it)");
      case CUDA_ERROR_INVALID_VALUE:
      case CUDA_ERROR_NOT_INITIALIZED:
        return InvalidArgument(message + ": no such process, or one with no CUDA state");
      default:
        return Internal(std::move(message));
    }
  }

  std::unique_ptr<SharedLibrary> library_;  // keeps the entry points valid
  const EntryPoints entry_;
  const int driver_version_;
};

Result<std::unique_ptr<DriverProcessCheckpointApi>> OpenDriver() {
  void* handle = ::dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Unavailable(fmt::format("no NVIDIA driver: {} could not be loaded ({})", kDriverLibrary,
                                   why != nullptr ? why : "unknown reason"));
  }
  auto library = std::make_unique<SharedLibrary>(handle);
  const auto init = library->Find<decltype(&cuInit)>("cuInit");
  const auto get_version = library->Find<decltype(&cuDriverGetVersion)>("cuDriverGetVersion");
  if (init == nullptr || get_version == nullptr) {
    return Unavailable(fmt::format("{} is not a CUDA driver (no cuInit)", kDriverLibrary));
  }
  EntryPoints entry;
  entry.get_error_name = library->Find<PFN_cuGetErrorName_v6000>("cuGetErrorName");
  entry.get_error_string = library->Find<PFN_cuGetErrorString_v6000>("cuGetErrorString");
  // A restore needs cuInit in the calling process (or persistence mode).
  if (const CUresult initialized = init(0); initialized != CUDA_SUCCESS) {
    return Unavailable(fmt::format(
        "the NVIDIA driver could not initialize: cuInit: {}",
        DescribeCuResult(initialized, entry.get_error_name, entry.get_error_string).name));
  }
  int version = 0;
  if (get_version(&version) != CUDA_SUCCESS) version = 0;
  entry.lock = library->Find<decltype(&cuCheckpointProcessLock)>("cuCheckpointProcessLock");
  entry.checkpoint =
      library->Find<decltype(&cuCheckpointProcessCheckpoint)>("cuCheckpointProcessCheckpoint");
  entry.restore =
      library->Find<decltype(&cuCheckpointProcessRestore)>("cuCheckpointProcessRestore");
  entry.unlock = library->Find<decltype(&cuCheckpointProcessUnlock)>("cuCheckpointProcessUnlock");
  entry.get_state =
      library->Find<decltype(&cuCheckpointProcessGetState)>("cuCheckpointProcessGetState");
  std::vector<std::string_view> missing;
  if (entry.lock == nullptr) missing.push_back("cuCheckpointProcessLock");
  if (entry.checkpoint == nullptr) missing.push_back("cuCheckpointProcessCheckpoint");
  if (entry.restore == nullptr) missing.push_back("cuCheckpointProcessRestore");
  if (entry.unlock == nullptr) missing.push_back("cuCheckpointProcessUnlock");
  if (entry.get_state == nullptr) missing.push_back("cuCheckpointProcessGetState");
  if (!missing.empty()) {
    return Unavailable(fmt::format(
        "the NVIDIA driver ({}) lacks the process checkpoint API ({} not found): it needs "
        "driver R570 or later",
        "CUDA " + FormatCudaVersion(version), fmt::join(missing, ", ")));
  }
  return std::make_unique<DriverProcessCheckpointApi>(std::move(library), entry, version);
}

}  // namespace

Result<std::unique_ptr<ProcessCheckpointApi>> OpenDriverProcessCheckpointApi() {
  GSHARE_ASSIGN_OR_RETURN(auto api, OpenDriver());
  return std::unique_ptr<ProcessCheckpointApi>(std::move(api));
}

std::string ProbeDriverProcessCheckpointApi() {
  auto opened = OpenDriver();
  if (!opened.ok()) return "unsupported: " + opened.status().message();
  // This process's own state: a driver that refuses the API here says so (not supported); one
  // that allows it answers, or says that this process has no CUDA state to report. Asked on a
  // thread of its own and waited for a bounded time: how the driver treats a query of the calling
  // process is not documented, and a probe must not hang the command that asks. A thread that
  // never returns is left behind (detached), holding the API it uses.
  std::shared_ptr<DriverProcessCheckpointApi> api = std::move(opened).value();
  auto answer = std::make_shared<std::promise<Status>>();
  std::future<Status> answered = answer->get_future();
  std::thread([api, answer, pid = static_cast<int>(::getpid())]() mutable {
    auto own = api->GetState(pid);
    // Let go of the API before answering: the caller's copy is then the last, released on its
    // thread. (When the caller gave up waiting, a copy it left behind keeps the API alive.)
    api.reset();
    answer->set_value(own.ok() ? Status::Ok() : own.status());
  }).detach();
  if (answered.wait_for(kProbeTimeout) != std::future_status::ready) {
    // Left behind on purpose, never destroyed: the thread may return while the process exits,
    // and must not close the driver library then.
    (void)new std::shared_ptr<DriverProcessCheckpointApi>(api);
    return fmt::format(
        "unknown: cuCheckpointProcessGetState on this process did not answer within {} s (gshare "
        "bench function --mechanism checkpoint tries it on a function process)",
        std::chrono::duration_cast<std::chrono::seconds>(kProbeTimeout).count());
  }
  if (const Status own = answered.get(); !own.ok() && own.code() == StatusCode::kUnavailable) {
    return "unsupported: " + own.message();
  }
  const int version = api->driver_version();
  return fmt::format("supported (driver {}; restore onto another GPU of the same chip type: {})",
                     "CUDA " + FormatCudaVersion(version),
                     version >= kRemapDriverVersion ? "yes" : "no, it needs driver R580");
}

}  // namespace gshare
