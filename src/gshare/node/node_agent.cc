#include "gshare/node/node_agent.h"

#include <fmt/format.h>

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gshare/common/units.h"

namespace gshare {

Result<std::unique_ptr<NodeAgent>> NodeAgent::Create(NodeAgentOptions options) {
  if (options.copy_threads < 1 || options.copy_threads > 64) {
    return InvalidArgument(fmt::format("{} copy threads: from 1 to 64", options.copy_threads));
  }
  // The node holds every function's device memory (memfds): no process of its uid may reach its
  // descriptors or memory through /proc, functions running under the node's uid included.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Internal(fmt::format("prctl(PR_SET_DUMPABLE): {}", std::strerror(errno)));
  }
  std::unique_ptr<NodeAgent> agent(new NodeAgent());
  GpuInventoryOptions inventory_options;
  inventory_options.devices = options.devices;
  for (EmulatedGpuConfig& gpu : inventory_options.devices.emulated) {
    gpu.prepared_bytes = options.prepared_bytes_per_gpu;
  }
  inventory_options.measure_links = false;
  auto inventory = GpuInventory::Open(inventory_options);
  if (!inventory.ok()) return inventory.status();
  agent->inventory_ = std::move(inventory).value();
  if (agent->inventory_->kind() != DeviceKind::kEmulated && !options.allow_cuda) {
    return FailedPrecondition(
        "the live node serves functions on emulated GPUs only: its executor does not start CUDA "
        "functions yet (use --device emulated; gshare bench function switches one CUDA function)");
  }
  for (const Device* device : agent->inventory_->devices()) {
    if (device->info().memory_bytes < options.slice_granularity.bytes()) {
      return InvalidArgument(fmt::format("GPU '{}' has {}, less than one slice of {}",
                                         device->info().name,
                                         FormatBytes(device->info().memory_bytes),
                                         FormatBytes(options.slice_granularity.bytes())));
    }
  }
  agent->vgpus_ =
      std::make_unique<VGpuManager>(agent->inventory_->devices(), options.slice_granularity);
  auto staging = EmulatedDevice::Create(static_cast<int>(agent->inventory_->devices().size()),
                                        {.name = "host-staging",
                                         .memory_bytes = options.staging_bytes,
                                         .link_bytes_per_second = 0,
                                         .prepared_bytes = 0});
  if (!staging.ok()) return staging.status();
  agent->staging_ = std::move(staging).value();
  auto snapshots = SnapshotStore::Create(
      agent->inventory_->host_memory(),
      {.pool_bytes = options.snapshot_pool_bytes, .chunk_bytes = options.snapshot_chunk_bytes});
  if (!snapshots.ok()) return snapshots.status();
  agent->snapshots_ = std::move(snapshots).value();
  std::vector<Device*> all(agent->inventory_->devices().begin(),
                           agent->inventory_->devices().end());
  all.push_back(agent->staging_.get());
  auto engine = RestoreEngine::Create(all, options.engine, agent->clock_);
  if (!engine.ok()) return engine.status();
  agent->engine_ = std::move(engine).value();
  agent->copies_ =
      std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(options.copy_threads));
  return agent;
}

NodeAgent::~NodeAgent() {
  // Copies in flight finish before what they copy goes away.
  if (copies_) copies_->join();
}

NodeResources NodeAgent::resources() {
  return NodeResources{loop_,    *copies_,   inventory_->devices(), *vgpus_, *staging_,
                       *engine_, *snapshots_};
}

Result<GpuType> NodeAgent::DescribeGpus(Duration restore_overhead,
                                        double price_per_hour_usd) const {
  GpuType type;
  std::uint64_t memory = UINT64_MAX;
  double link = 0;
  for (int gpu = 0; gpu < vgpus_->gpu_count(); ++gpu) {
    auto usage = vgpus_->gpu(gpu);
    if (!usage.ok()) return usage.status();
    memory = std::min(memory, usage->capacity_bytes);
  }
  for (const Device* device : inventory_->devices()) link = device->info().link_bytes_per_second;
  if (link <= 0) {  // unpaced: as fast as this machine copies
    auto measured = MeasureLinkBandwidth(*inventory_->devices().front(), inventory_->host_memory(),
                                         64 * kMiB, 5);
    if (!measured.ok()) return measured.status();
    link = *measured;
  }
  type.name = fmt::format("emulated-{}", FormatBytes(memory));
  type.description = fmt::format("emulated GPU of {}", FormatBytes(memory));
  type.memory_bytes = memory;
  type.h2d_bytes_per_second = link;
  type.restore_overhead = restore_overhead;
  type.price_per_hour_usd = price_per_hour_usd;
  type.relative_latency = 1.0;
  return type;
}

}  // namespace gshare
