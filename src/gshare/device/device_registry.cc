#include "gshare/device/device_registry.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <utility>

#include "gshare/device/emulated/emulated_host_memory.h"

#if defined(GSHARE_HAVE_CUDA)
#include "gshare/device/cuda/cuda_device.h"
#endif

namespace gshare {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

Result<DeviceSet> OpenEmulated(const std::vector<EmulatedGpuConfig>& configs) {
  if (configs.empty()) return InvalidArgument("no emulated GPUs configured");
  DeviceSet set;
  set.kind = DeviceKind::kEmulated;
  set.host_memory = std::make_unique<EmulatedHostMemory>();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    GSHARE_ASSIGN_OR_RETURN(std::unique_ptr<EmulatedDevice> device,
                            EmulatedDevice::Create(static_cast<int>(i), configs[i]));
    set.devices.push_back(std::move(device));
  }
  return set;
}

Result<DeviceSet> OpenCuda() {
#if defined(GSHARE_HAVE_CUDA)
  GSHARE_ASSIGN_OR_RETURN(auto devices, DiscoverCudaDevices());
  DeviceSet set;
  set.kind = DeviceKind::kCuda;
  set.host_memory = NewCudaHostMemory();
  set.devices = std::move(devices);
  return set;
#else
  return Unavailable(
      "this gshare was built without CUDA (GSHARE_ENABLE_CUDA=OFF, or no CUDA toolkit where it "
      "was built)");
#endif
}

}  // namespace

CudaVersions CudaVersionsHere() {
  CudaVersions versions;
#if defined(GSHARE_HAVE_CUDA)
  ReadCudaVersions(versions.driver, versions.runtime);
#endif
  return versions;
}

bool CudaBackendBuilt() {
#if defined(GSHARE_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

Result<DeviceBackend> ParseDeviceBackend(std::string_view text) {
  text = Trim(text);
  if (text == "auto") return DeviceBackend::kAuto;
  if (text == "cuda") return DeviceBackend::kCuda;
  if (text == "emulated") return DeviceBackend::kEmulated;
  return InvalidArgument(fmt::format("unknown device '{}' (use auto, cuda or emulated)", text));
}

Result<std::vector<EmulatedGpuConfig>> ParseEmulatedGpus(std::string_view spec,
                                                         double link_bytes_per_second) {
  std::vector<EmulatedGpuConfig> gpus;
  std::string_view rest = spec;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    if (item.empty()) return InvalidArgument(fmt::format("'{}': empty emulated GPU entry", spec));
    std::uint64_t count = 1;
    std::string_view size_text = item;
    const std::size_t times = item.find('x');
    if (times != std::string_view::npos) {
      const std::string_view count_text = Trim(item.substr(0, times));
      auto [end, error] =
          std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
      if (error != std::errc() || end != count_text.data() + count_text.size() || count == 0 ||
          count > 64) {
        return InvalidArgument(
            fmt::format("'{}': '{}' is not a GPU count from 1 to 64", spec, count_text));
      }
      size_text = item.substr(times + 1);
    }
    auto memory_bytes = ParseBytes(size_text);
    if (!memory_bytes.ok()) return memory_bytes.status().WithContext("emulated GPU memory");
    if (*memory_bytes == 0) {
      return InvalidArgument(fmt::format("'{}': emulated GPU memory must be positive", spec));
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      gpus.push_back(EmulatedGpuConfig{"", *memory_bytes, link_bytes_per_second});
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (gpus.size() > 64) return InvalidArgument(fmt::format("'{}': more than 64 GPUs", spec));
  return gpus;
}

Result<double> ParseBandwidth(std::string_view text) {
  std::string_view quantity = Trim(text);
  if (quantity.ends_with("/s")) quantity.remove_suffix(2);
  auto bytes = ParseBytes(quantity);
  if (!bytes.ok()) return bytes.status().WithContext("bandwidth");
  return static_cast<double>(*bytes);
}

Result<DeviceOptions> MakeDeviceOptions(std::string_view backend, std::string_view emulated_gpus,
                                        std::string_view link_bandwidth) {
  DeviceOptions options;
  GSHARE_ASSIGN_OR_RETURN(options.backend, ParseDeviceBackend(backend));
  GSHARE_ASSIGN_OR_RETURN(const double bytes_per_second, ParseBandwidth(link_bandwidth));
  GSHARE_ASSIGN_OR_RETURN(options.emulated, ParseEmulatedGpus(emulated_gpus, bytes_per_second));
  return options;
}

Result<DeviceSet> OpenDevices(const DeviceOptions& options) {
  switch (options.backend) {
    case DeviceBackend::kEmulated:
      return OpenEmulated(options.emulated);
    case DeviceBackend::kCuda: {
      auto cuda = OpenCuda();
      if (!cuda.ok()) return cuda.status().WithContext("--device cuda");
      return cuda;
    }
    case DeviceBackend::kAuto:
      break;
  }
  auto cuda = OpenCuda();
  if (cuda.ok()) return cuda;
  // Only a missing driver or GPU (Unavailable) falls back; a driver that fails is an error.
  if (cuda.status().code() != StatusCode::kUnavailable) {
    return cuda.status().WithContext(
        "--device auto (a driver is installed, so gshare does not fall back to emulated GPUs; "
        "--device emulated asks for them)");
  }
  GSHARE_ASSIGN_OR_RETURN(DeviceSet set, OpenEmulated(options.emulated));
  set.note = fmt::format("{}; using emulated GPUs", cuda.status().message());
  return set;
}

}  // namespace gshare
