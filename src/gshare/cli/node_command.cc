// gshare node ...: the node agent's commands.
//
//   gshare node info [--device auto|cuda|emulated] [--emulated 2x16Gi] [--link-bandwidth 0]
//                    [--no-measure] [--json]
//
// Lists the GPUs of this machine (CUDA GPUs, or emulated ones where there is no driver or GPU)
// with their memory (what slices may use, the total, and what the driver reports free now), UUID,
// whether their memory can be handed to a function process, and measured host-to-device link
// bandwidth; the CUDA driver and runtime versions ("none" on emulated GPUs); and whether the
// driver's process checkpoint API (which moves unmodified CUDA processes) can be used here.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/device/cuda/cuda_checkpoint.h"
#include "gshare/node/gpu_inventory.h"

namespace gshare::cli {
namespace {

struct NodeInfoFlags {
  std::string device = "auto";
  std::string emulated = "2x16Gi";
  std::string link_bandwidth = "0";
  bool no_measure = false;
  bool json = false;
};

std::string FormatRate(double bytes_per_second) {
  if (bytes_per_second <= 0) return "-";
  return fmt::format("{:.1f} GB/s", bytes_per_second / 1e9);
}

// How a GPU's memory reaches a function process: "cuda-vmm" (exported as a POSIX fd), "memfd"
// (emulated), "no" (a CUDA GPU without the virtual memory API or POSIX handles).
std::string ExportName(const DeviceInfo& info) {
  if (!info.memory_exportable) return "no";
  return info.kind == DeviceKind::kCuda ? "cuda-vmm" : "memfd";
}

int RunNodeInfo(const NodeInfoFlags& flags) {
  auto devices = MakeDeviceOptions(flags.device, flags.emulated, flags.link_bandwidth);
  if (!devices.ok()) {
    std::fprintf(stderr, "gshare node info: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  GpuInventoryOptions options;
  options.devices = std::move(devices).value();
  options.measure_links = !flags.no_measure;
  auto inventory = GpuInventory::Open(options);
  if (!inventory.ok()) {
    std::fprintf(stderr, "gshare node info: %s\n", inventory.status().ToString().c_str());
    return 1;
  }
  const GpuInventory& node = **inventory;
  // The driver's figure now; nullopt when it could not be read (the table shows "-").
  std::vector<std::optional<DeviceMemoryInfo>> memory;
  for (Device* device : node.devices()) {
    auto queried = device->QueryMemory();
    if (!queried.ok()) {
      std::fprintf(stderr, "gshare node info: %s\n", queried.status().ToString().c_str());
      memory.emplace_back();
    } else {
      memory.emplace_back(*queried);
    }
  }
  // After the memory queries: a query the driver does not answer is waited for a bounded time and
  // left behind (ProbeProcessCheckpointApi), so that the answer is printed; the driver calls of the
  // command's end (the devices' teardown) may still wait for it.
  const std::string checkpoint_api = ProbeProcessCheckpointApi();

  const DeviceInfo* first = node.gpus().empty() ? nullptr : &node.gpus().front().info;
  // The GPUs' own figures where they are CUDA GPUs; otherwise what this binary's runtime and the
  // driver (if any) say.
  const CudaVersions here = CudaVersionsHere();
  const bool cuda = first != nullptr && first->kind == DeviceKind::kCuda;
  const std::string driver = FormatCudaVersion(cuda ? first->cuda_driver_version : here.driver);
  const std::string runtime = FormatCudaVersion(cuda ? first->cuda_runtime_version : here.runtime);

  if (flags.json) {
    nlohmann::json gpus = nlohmann::json::array();
    for (std::size_t i = 0; i < node.gpus().size(); ++i) {
      const GpuRecord& gpu = node.gpus()[i];
      gpus.push_back({{"index", gpu.info.index},
                      {"kind", DeviceKindName(gpu.info.kind)},
                      {"name", gpu.info.name},
                      {"uuid", gpu.info.uuid},
                      {"memory_bytes", gpu.info.memory_bytes},
                      {"total_memory_bytes", gpu.info.total_memory_bytes},
                      {"free_memory_bytes",
                       memory[i] ? nlohmann::json(memory[i]->free_bytes) : nlohmann::json(nullptr)},
                      {"memory_export", ExportName(gpu.info)},
                      {"memory_export_note", gpu.info.memory_export_note},
                      {"measured_link_bytes_per_second", gpu.measured_link_bytes_per_second},
                      {"configured_link_bytes_per_second", gpu.info.link_bytes_per_second}});
    }
    nlohmann::json out = {{"backend", DeviceKindName(node.kind())},
                          {"cuda_built", CudaBackendBuilt()},
                          {"cuda_driver_version", driver},
                          {"cuda_runtime_version", runtime},
                          {"note", node.note()},
                          {"process_checkpoint_api", checkpoint_api},
                          {"gpus", gpus}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  if (!node.note().empty()) std::printf("%s\n\n", node.note().c_str());
  std::printf("CUDA driver %s, runtime %s\n\n", driver.c_str(), runtime.c_str());
  const bool emulated = node.kind() == DeviceKind::kEmulated;
  std::printf("%s\n", fmt::format("{:>3}  {:<24} {:<40} {:>10} {:>10} {:>10}  {:<8}  {:>14}{}",
                                  "GPU", "NAME", "UUID", "MEMORY", "TOTAL", "FREE", "EXPORT",
                                  "LINK MEASURED", emulated ? "  LINK PACED AT" : "")
                          .c_str());
  for (std::size_t i = 0; i < node.gpus().size(); ++i) {
    const GpuRecord& gpu = node.gpus()[i];
    std::string paced;
    if (emulated) {
      paced = fmt::format("  {:>14}", gpu.info.link_bytes_per_second > 0
                                          ? FormatRate(gpu.info.link_bytes_per_second)
                                          : "unpaced");
    }
    std::printf(
        "%s\n",
        fmt::format("{:>3}  {:<24} {:<40} {:>10} {:>10} {:>10}  {:<8}  {:>14}{}", gpu.info.index,
                    gpu.info.name, gpu.info.uuid, FormatBytes(gpu.info.memory_bytes),
                    FormatBytes(gpu.info.total_memory_bytes),
                    memory[i] ? FormatBytes(memory[i]->free_bytes) : "-", ExportName(gpu.info),
                    FormatRate(gpu.measured_link_bytes_per_second), paced)
            .c_str());
  }
  for (const GpuRecord& gpu : node.gpus()) {
    if (!gpu.info.memory_exportable) {
      std::printf("GPU %d: memory cannot be handed to a function process: %s\n", gpu.info.index,
                  gpu.info.memory_export_note.c_str());
    }
  }
  std::printf("\n%zu %s GPU%s; CUDA backend %s.\n", node.gpus().size(),
              std::string(DeviceKindName(node.kind())).c_str(), node.gpus().size() == 1 ? "" : "s",
              CudaBackendBuilt() ? "built" : "not built");
  std::printf("Process checkpoint API: %s.\n", checkpoint_api.c_str());
  return 0;
}

}  // namespace

void AddNodeCommands(CLI::App& app, CommandContext& context) {
  CLI::App* node = app.add_subcommand("node", "The node agent: GPUs, snapshots and restores");
  node->require_subcommand(1);

  auto flags = std::make_shared<NodeInfoFlags>();
  CLI::App* info = node->add_subcommand(
      "info", "List the GPUs found (CUDA, or emulated where there is none) and their links");
  info->add_option("--device", flags->device, "auto, cuda or emulated")->capture_default_str();
  info->add_option("--emulated", flags->emulated,
                   "Emulated GPUs when they are used: 2x16Gi, or 16Gi,8Gi")
      ->capture_default_str();
  info->add_option("--link-bandwidth", flags->link_bandwidth,
                   "Link speed of emulated GPUs, e.g. 12GB/s; 0 runs copies unpaced")
      ->capture_default_str();
  info->add_flag("--no-measure", flags->no_measure, "Do not measure the links");
  info->add_flag("--json", flags->json, "Print JSON");
  info->callback([flags, &context] { context.exit_code = RunNodeInfo(*flags); });
  AddNodeReplayCommand(*node, context);
}

}  // namespace gshare::cli
