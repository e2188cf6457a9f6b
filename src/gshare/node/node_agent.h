// NodeAgent: one machine's node, composed: its GPUs, the vGPU manager that cuts them into slices
// (quotas enforced, in multiples of the program's one slice granularity), the host snapshot
// store, the restore engine, a staging area where new instances load their models, the copy
// threads, and the one serial event loop on which the scheduler and the live executor run.
//
// Create makes the node's process non-dumpable: it holds every function's device memory.
//
// The live node drives emulated GPUs (device/emulated): its executor does not yet start CUDA
// functions, so Create refuses CUDA GPUs with FailedPrecondition and says so, rather than silently
// emulating, unless `allow_cuda` says the caller drives its switches itself (gshare bench
// function).
//
// Ownership: the agent owns everything above; objects made from it (executors, switches) must be
// destroyed before it. Threading: loop() is run by one thread, the caller's; everything made
// from resources() lives on it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/model/gpu_type.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/live_executor.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"
#include "gshare/node/vgpu_manager.h"

namespace gshare {

struct NodeAgentOptions {
  DeviceOptions devices;  // the GPUs (emulated ones on this node; see above)
  // The program's one slice granularity: the policies get the same (PolicyOptions). Every GPU
  // must have at least this much memory (InvalidArgument otherwise).
  SliceGranularity slice_granularity;
  std::uint64_t snapshot_pool_bytes = 4 * kGiB;
  std::uint64_t snapshot_chunk_bytes = 8 * kMiB;
  // Address space for instances loading their models (pages are used only while they load).
  std::uint64_t staging_bytes = 64 * kGiB;
  RestoreEngineOptions engine;
  int copy_threads = 2;
  // Device memory made ready ahead of allocations, per GPU (device/emulated/segment_pool.h).
  std::uint64_t prepared_bytes_per_gpu = 512 * kMiB;
  // Accept CUDA GPUs: for tools that start and switch their function processes themselves.
  bool allow_cuda = false;
};

class NodeAgent {
 public:
  static Result<std::unique_ptr<NodeAgent>> Create(NodeAgentOptions options);
  ~NodeAgent();

  boost::asio::io_context& loop() { return loop_; }
  NodeResources resources();
  const GpuInventory& inventory() const { return *inventory_; }
  // Slices of the node's GPUs (GPU i is inventory().devices()[i]); the live executor's slices.
  const VGpuManager& vgpus() const { return *vgpus_; }
  SnapshotStore& snapshots() { return *snapshots_; }

  // A GPU type that describes the node's GPUs to policies, the meter and the simulator: the
  // smallest GPU's memory that slices can have (rounded down to the slice granularity, as the
  // vGPU manager hands it out), the link's configured bandwidth (measured when unpaced), the given
  // fixed restore cost and price.
  Result<GpuType> DescribeGpus(Duration restore_overhead, double price_per_hour_usd) const;

 private:
  NodeAgent() = default;

  // Destroyed in reverse order: the loop first (handlers still queued hold buffers of the
  // devices, which must outlive them), after the destructor has joined the copy threads (which
  // post to the loop).
  SteadyClock clock_;
  std::unique_ptr<GpuInventory> inventory_;
  std::unique_ptr<VGpuManager> vgpus_;  // over inventory_'s devices; after the loop's handlers
  std::unique_ptr<EmulatedDevice> staging_;
  std::unique_ptr<SnapshotStore> snapshots_;
  std::unique_ptr<RestoreEngine> engine_;
  std::unique_ptr<boost::asio::thread_pool> copies_;
  boost::asio::io_context loop_;
};

}  // namespace gshare
