// gshare node ...: the node agent's commands.
//
//   gshare node info [--device auto|cuda|emulated] [--emulated 2x16Gi] [--link-bandwidth 0]
//                    [--no-measure] [--json]
//
// Lists the GPUs of this machine (CUDA GPUs, or emulated ones where there is no driver or GPU)
// with their memory, UUID and measured host-to-device link bandwidth, and whether the driver's
// process checkpoint API (which moves unmodified CUDA processes) can be used here.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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
  const std::string checkpoint_api = ProbeProcessCheckpointApi();

  if (flags.json) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuRecord& gpu : node.gpus()) {
      gpus.push_back({{"index", gpu.info.index},
                      {"kind", DeviceKindName(gpu.info.kind)},
                      {"name", gpu.info.name},
                      {"uuid", gpu.info.uuid},
                      {"memory_bytes", gpu.info.memory_bytes},
                      {"measured_link_bytes_per_second", gpu.measured_link_bytes_per_second},
                      {"configured_link_bytes_per_second", gpu.info.link_bytes_per_second}});
    }
    nlohmann::json out = {{"backend", DeviceKindName(node.kind())},
                          {"cuda_built", CudaBackendBuilt()},
                          {"note", node.note()},
                          {"process_checkpoint_api", checkpoint_api},
                          {"gpus", gpus}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  if (!node.note().empty()) std::printf("%s\n\n", node.note().c_str());
  const bool emulated = node.kind() == DeviceKind::kEmulated;
  std::printf("%s\n", fmt::format("{:>3}  {:<24} {:<40} {:>10}  {:>14}{}", "GPU", "NAME", "UUID",
                                  "MEMORY", "LINK MEASURED", emulated ? "  LINK PACED AT" : "")
                          .c_str());
  for (const GpuRecord& gpu : node.gpus()) {
    std::string paced;
    if (emulated) {
      paced = fmt::format("  {:>14}", gpu.info.link_bytes_per_second > 0
                                          ? FormatRate(gpu.info.link_bytes_per_second)
                                          : "unpaced");
    }
    std::printf("%s\n",
                fmt::format("{:>3}  {:<24} {:<40} {:>10}  {:>14}{}", gpu.info.index, gpu.info.name,
                            gpu.info.uuid, FormatBytes(gpu.info.memory_bytes),
                            FormatRate(gpu.measured_link_bytes_per_second), paced)
                    .c_str());
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
