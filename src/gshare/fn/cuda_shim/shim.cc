#include "gshare/fn/cuda_shim/shim.h"

#include <dlfcn.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "gshare/fn/control_channel.h"
#include "gshare/fn/control_session.h"
#include "gshare/fn/cuda_shim/cuda_backend.h"

namespace gshare::fn::cuda_shim {
namespace {

constexpr const char* kVerboseEnv = "GSHARE_SHIM_VERBOSE";

// The descriptor GSHARE_CONTROL_FD names, when it is a control channel (a SOCK_SEQPACKET socket);
// -1 otherwise. A program that the function starts inherits the variable but not the channel (the
// shim marks it close-on-exec), and must not take whatever else has that number for one.
int ControlChannelFd() {
  auto number = ReadNodeNumber(kControlFdEnv, 10);
  if (!number.ok() || *number > 1 << 20) return -1;
  const int fd = static_cast<int>(*number);
  int type = 0;
  socklen_t length = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_SEQPACKET) {
    return -1;
  }
  return fd;
}

struct Connection {
  CUcontext context = nullptr;
  ShimCore* slice = nullptr;  // never destroyed: serves the node until the process ends
};

// PyTorch's expandable segments allocate with the driver's virtual memory API (cuMemCreate,
// cuMemMap), which the shim does not catch: the model would live outside the slice, and a
// checkpoint would move nothing while seeming to work. FailedPrecondition naming the variable
// where PyTorch's allocator settings turn them on.
Status RefuseExpandableSegments() {
  for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    std::string settings;
    for (const char* c = value; *c != '\0'; ++c) {
      if (*c != ' ') settings += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    }
    if (settings.find("expandable_segments:true") != std::string::npos) {
      return FailedPrecondition(std::string(name) + "=" + value +
                                " turns on PyTorch's expandable segments, whose cuMemCreate "
                                "memory the shim cannot switch; unset it for the shim mechanism");
    }
  }
  return Status::Ok();
}

// Connects the slice over the channel `control` (closed on failure, so that the node hears of it).
Result<Connection> Connect(UniqueFd control) {
  GSHARE_RETURN_IF_ERROR(RefuseExpandableSegments());
  auto base = ReadNodeNumber(kDeviceBaseEnv, 16);
  if (!base.ok()) return base.status();
  auto reserve = ReadNodeNumber(kDeviceReserveEnv, 10);
  if (!reserve.ok()) return reserve.status();
  const CudaDriver* driver = Driver();
  if (driver == nullptr) return Unavailable("the CUDA driver (libcuda.so.1) cannot be loaded");
  GSHARE_RETURN_IF_ERROR(driver->Check("cuInit", driver->init(0)));
  CUdevice device = 0;
  GSHARE_RETURN_IF_ERROR(driver->Check("cuDeviceGet(0)", driver->device_get(&device, 0)));
  Connection connection;
  GSHARE_RETURN_IF_ERROR(driver->Check(
      "cuDevicePrimaryCtxRetain", driver->primary_context_retain(&connection.context, device)));
  auto backend = CudaBackend::Create(*driver, connection.context, device);
  if (!backend.ok()) return backend.status();
  auto core = ShimCore::Connect(std::move(control), static_cast<std::uintptr_t>(*base), *reserve,
                                std::move(backend).value());
  if (!core.ok()) return core.status();
  connection.slice = core.value().release();
  if (Verbose()) {
    char base_text[32];
    std::snprintf(base_text, sizeof(base_text), "%#llx",
                  static_cast<unsigned long long>(connection.slice->base()));
    LogLine("serving the slice: " + std::to_string(connection.slice->reserve_bytes()) +
            " bytes of addresses at " + base_text);
  }
  return connection;
}

int control_fd = -1;  // decided once, by Active()
std::once_flag connect_once;
Connection serving;  // written once, under connect_once, before `connected` is set
std::atomic<ShimCore*> connected{nullptr};

}  // namespace

bool Verbose() {
  const char* verbose = std::getenv(kVerboseEnv);
  return verbose != nullptr && *verbose != '\0' && std::string_view(verbose) != "0";
}

void LogLine(std::string_view line) {
  std::fprintf(stderr, "gshare-cuda-shim: %.*s\n", static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

bool Active() {
  static const bool active = [] {
    const char* control = std::getenv(kControlFdEnv);
    if (control == nullptr || *control == '\0') {
      if (Verbose()) {
        LogLine(std::string(kControlFdEnv) +
                " is not set: passive, every CUDA call goes to the real driver and runtime");
      }
      return false;
    }
    control_fd = ControlChannelFd();
    if (control_fd < 0) {
      LogLine(std::string(kControlFdEnv) + "=" + control +
              " is not a control channel (a program the function started?): passive");
      return false;
    }
    return true;
  }();
  return active;
}

const CudaDriver* Driver() {
  static const CudaDriver* const driver = []() -> const CudaDriver* {
    auto loaded = CudaDriver::Load(RealDlsym());
    if (!loaded.ok()) {
      if (Active() || Verbose()) LogLine(loaded.status().message());
      return nullptr;
    }
    return new CudaDriver(std::move(loaded).value());  // for the life of the process
  }();
  return driver;
}

ShimCore* Slice() {
  if (!Active()) return nullptr;
  std::call_once(connect_once, [] {
    auto made = Connect(UniqueFd(control_fd));
    if (!made.ok()) {
      LogLine("cannot serve the slice, every allocation fails: " + made.status().ToString());
      return;
    }
    serving = *made;
    connected.store(serving.slice, std::memory_order_release);
  });
  return connected.load(std::memory_order_acquire);
}

ShimCore* ConnectedSlice() { return connected.load(std::memory_order_acquire); }

void SynchronizeDevice() {
  const CudaDriver* driver = Driver();
  if (driver == nullptr || ConnectedSlice() == nullptr) return;
  ScopedContext current(*driver, serving.context);
  if (current.result() == CUDA_SUCCESS) (void)driver->context_synchronize();
}

CUresult SynchronizeStream(CUstream stream) {
  const CudaDriver* driver = Driver();
  if (driver == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext current = nullptr;
  if (driver->context_get_current(&current) == CUDA_SUCCESS && current != nullptr) {
    return driver->stream_synchronize(stream);
  }
  if (ConnectedSlice() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  ScopedContext primary(*driver, serving.context);
  if (primary.result() != CUDA_SUCCESS) return primary.result();
  return driver->stream_synchronize(stream);
}

bool IsCapturing(CUstream stream) {
  const CudaDriver* driver = Driver();
  if (driver == nullptr) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver->stream_is_capturing(stream, &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace gshare::fn::cuda_shim
