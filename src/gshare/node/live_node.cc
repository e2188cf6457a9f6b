#include "gshare/node/live_node.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <algorithm>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "gshare/common/units.h"
#include "gshare/sched/policy_registry.h"

namespace gshare {
namespace {

// The request source of a node whose owner submits no request.
class NoRequests final : public RequestSource {
 public:
  const InferRequest* Input(RequestId) override { return nullptr; }
  void Answer(RequestId, InferResponse) override {}
  void Fail(RequestId, const Status&) override {}
};

}  // namespace

Result<std::unique_ptr<LiveNode>> LiveNode::Create(LiveNodeOptions options, LiveNodeParts parts) {
  std::unique_ptr<LiveNode> node(new LiveNode());
  GSHARE_RETURN_IF_ERROR(node->Build(std::move(options), std::move(parts)));
  return node;
}

Status LiveNode::Build(LiveNodeOptions options, LiveNodeParts parts) {
  if (options.copy_threads < 1 || options.copy_threads > 64) {
    return InvalidArgument(fmt::format("{} copy threads: from 1 to 64", options.copy_threads));
  }
  // The node holds every function's device memory (memfds): no process of its uid may reach its
  // descriptors or memory through /proc, functions running under the node's uid included.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Internal(fmt::format("prctl(PR_SET_DUMPABLE): {}", std::strerror(errno)));
  }
  clock_ = parts.clock ? parts.clock(loop_) : std::make_unique<SteadyLoopClock>(loop_);
  work_.emplace(loop_.get_executor());
  switches_ = parts.switches ? std::move(parts.switches) : SwitchFactory(CreateSwitchDriver);

  const SliceGranularity granularity = options.policy_options.slice_granularity;
  GpuInventoryOptions inventory_options;
  inventory_options.devices = options.devices;
  for (EmulatedGpuConfig& gpu : inventory_options.devices.emulated) {
    gpu.prepared_bytes = options.prepared_bytes_per_gpu;
    gpu.clock = clock_.get();  // the link's time is the node's
  }
  inventory_options.measure_links = false;
  GSHARE_ASSIGN_OR_RETURN(inventory_, GpuInventory::Open(inventory_options));
  if (inventory_->kind() == DeviceKind::kCuda && options.host.sandbox_devices.empty()) {
    // A sandboxed runtime on a CUDA GPU reaches the driver through its device nodes.
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
      const std::string name = entry.path().filename().string();
      std::error_code type_error;
      if (name.starts_with("nvidia") && entry.is_character_file(type_error)) {
        options.host.sandbox_devices.push_back(entry.path().string());
      }
    }
    std::sort(options.host.sandbox_devices.begin(), options.host.sandbox_devices.end());
  }
  if (parts.checkpoint_api) {
    checkpoint_api_ = std::move(parts.checkpoint_api);
  } else if (inventory_->kind() == DeviceKind::kCuda) {
    auto api = OpenProcessCheckpointApi();
    if (api.ok()) {
      checkpoint_api_ = std::move(api).value();
    } else {
      checkpoint_api_note_ = std::string(api.status().message());
      spdlog::info("functions with switch: checkpoint cannot run here: {}", checkpoint_api_note_);
    }
  } else {
    checkpoint_api_note_ = "it needs CUDA GPUs; this node's are emulated";
  }
  for (const Device* device : inventory_->devices()) {
    if (device->info().memory_bytes < granularity.bytes()) {
      return InvalidArgument(
          fmt::format("GPU '{}' has {}, less than one slice of {}", device->info().name,
                      FormatBytes(device->info().memory_bytes), FormatBytes(granularity.bytes())));
    }
  }
  vgpus_ = std::make_unique<VGpuManager>(inventory_->devices(), granularity);
  GSHARE_ASSIGN_OR_RETURN(staging_,
                          EmulatedDevice::Create(static_cast<int>(inventory_->devices().size()),
                                                 {.name = "host-staging",
                                                  .memory_bytes = options.staging_bytes,
                                                  .link_bytes_per_second = 0,
                                                  .prepared_bytes = 0,
                                                  .clock = clock_.get()}));
  GSHARE_ASSIGN_OR_RETURN(snapshots_,
                          SnapshotStore::Create(inventory_->host_memory(),
                                                {.pool_bytes = options.snapshot_pool_bytes,
                                                 .chunk_bytes = options.snapshot_chunk_bytes}));
  std::vector<Device*> all(inventory_->devices().begin(), inventory_->devices().end());
  all.push_back(staging_.get());
  RestoreEngineOptions engine_options = options.engine;
  if (options.calibrate_copies) {
    CopyCalibrationOptions calibration_options;
    calibration_options.piece_bytes = options.snapshot_chunk_bytes;
    // 1, 2 and 4 threads, and 8 where the machine runs 8 at once.
    if (std::thread::hardware_concurrency() >= 8) calibration_options.threads.push_back(8);
    auto calibrated = CalibrateCopies(calibration_options);
    if (!calibrated.ok()) return calibrated.status().WithContext("measuring the copy engine");
    copy_calibration_ = *calibrated;
    SetCopyRoutine(calibrated->best.routine);
    if (inventory_->kind() == DeviceKind::kEmulated) {
      engine_options.streams_per_device = calibrated->best.threads;
    }
    spdlog::info("copy engine: {}", calibrated->Summary());
  }
  GSHARE_ASSIGN_OR_RETURN(engine_, RestoreEngine::Create(all, engine_options, *clock_));
  copies_ =
      std::make_unique<boost::asio::thread_pool>(static_cast<std::size_t>(options.copy_threads));
  driver_calls_ = std::make_unique<boost::asio::thread_pool>(2);
  GSHARE_ASSIGN_OR_RETURN(gpu_type_,
                          DescribeGpus(options.restore_overhead, options.price_per_hour_usd));

  if (parts.host) {
    host_ = parts.host(*clock_, registry_, parts.requests);
  } else {
    // A node whose owner sends it no request (a tool that switches functions itself) still has
    // a host; requests it never gets have no input.
    static NoRequests none;
    RequestSource& requests = parts.requests != nullptr ? *parts.requests : none;
    auto host = std::make_unique<ProcessHost>(*clock_, std::vector<InstanceCommand>{}, requests,
                                              options.host);
    process_host_ = host.get();
    host_ = std::move(host);
  }
  LiveExecutorOptions executor_options = std::move(options.executor);
  executor_options.gpu_type = gpu_type_;
  executor_options.quantum = options.policy_options.quantum;
  auto user_drained = std::move(executor_options.on_drained);
  executor_options.on_drained = [this, user_drained](FunctionId function) {
    if (user_drained) user_drained(function);
    if (auto it = on_drained_.find(function); it != on_drained_.end()) {
      auto done = std::move(it->second);
      on_drained_.erase(it);
      if (done) done();
    }
    if (process_host_ != nullptr) process_host_->RemoveCommand(function);
    (void)registry_.Forget(function);
  };
  executor_ =
      std::make_unique<LiveExecutor>(resources(), registry_, *host_, std::move(executor_options));
  if (!options.policy.empty()) {
    GSHARE_ASSIGN_OR_RETURN(scheduler_, MakePolicy(options.policy, {&registry_, executor_.get()},
                                                   options.policy_options));
    executor_->set_scheduler(scheduler_.get());
  }
  return Status::Ok();
}

LiveNode::~LiveNode() {
  Shutdown();
  // Copies in flight finish before what they copy goes away, and before the loop they post to.
  FinishCopies();
}

NodeResources LiveNode::resources() {
  return NodeResources{*clock_,
                       switches_,
                       *copies_,
                       inventory_->devices(),
                       *vgpus_,
                       *staging_,
                       *engine_,
                       *snapshots_,
                       driver_calls_.get(),
                       checkpoint_api_.get(),
                       checkpoint_api_note_};
}

SwitchContext LiveNode::switch_context() {
  return SwitchContext{loop_, *copies_, *engine_, *snapshots_, *clock_, driver_calls_.get()};
}

FunctionId LiveNode::AddFunction(FunctionLaunch launch) {
  const FunctionId id = registry_.Add(std::move(launch.function));
  if (process_host_ != nullptr) process_host_->SetCommand(id, std::move(launch.command));
  executor_->SetRunTimeout(id, launch.run_timeout);
  executor_->SetSwitchMechanism(id, launch.mechanism);
  if (scheduler_ != nullptr) scheduler_->OnFunctionAdded(id);
  return id;
}

Status LiveNode::RemoveFunction(FunctionId function, std::function<void()> on_drained) {
  GSHARE_RETURN_IF_ERROR(registry_.Remove(function));
  if (on_drained) on_drained_[function] = std::move(on_drained);
  if (scheduler_ != nullptr) scheduler_->OnFunctionRemoved(function);
  executor_->FunctionRemoved(function);
  return Status::Ok();
}

LiveNode::Tables LiveNode::tables() const {
  Tables t;
  t.registry = registry_.held();
  t.scheduler = scheduler_ != nullptr ? scheduler_->FunctionsHeld() : 0;
  t.executor = executor_->functions_held();
  t.host = process_host_ != nullptr ? process_host_->commands() : 0;
  t.draining = on_drained_.size();
  return t;
}

void LiveNode::StartLoopThread() {
  if (loop_thread_.joinable()) return;
  loop_thread_ = std::thread([this] { loop_.run(); });
}

void LiveNode::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (loop_thread_.joinable()) {
    OnLoop([this] { executor_->Shutdown(); });  // no scheduler callback after it
    work_.reset();
    loop_.stop();
    loop_thread_.join();
  } else if (executor_ != nullptr) {
    executor_->Shutdown();
    work_.reset();
  }
  // The function processes end (SIGTERM, then SIGKILL) as the host is destroyed, the loop
  // stopped; what the host still calls back finds the executor, shut down.
  host_.reset();
  process_host_ = nullptr;
  executor_.reset();
  scheduler_.reset();
}

void LiveNode::FinishCopies() {
  if (engine_) engine_->WaitForTransfers();
  if (copies_) copies_->join();
  if (driver_calls_) driver_calls_->join();
}

Result<GpuType> LiveNode::DescribeGpus(Duration restore_overhead, double price_per_hour_usd) const {
  // The smallest GPU's memory that slices can have (rounded down to the slice granularity, as the
  // vGPU manager hands it out), the link's configured bandwidth (measured when unpaced).
  GpuType type;
  std::uint64_t memory = UINT64_MAX;
  double link = 0;
  for (int gpu = 0; gpu < vgpus_->gpu_count(); ++gpu) {
    auto usage = vgpus_->gpu(gpu);
    if (!usage.ok()) return usage.status();
    memory = std::min(memory, usage->capacity_bytes);
  }
  for (const Device* device : inventory_->devices()) link = device->info().link_bytes_per_second;
  if (link <= 0 && copy_calibration_ && inventory_->kind() == DeviceKind::kEmulated) {
    // Unpaced emulated GPUs: as fast as this machine copies, which the calibration just measured
    // (its copy routine on its threads, from and to memory already faulted in: an upper bound of
    // a restore's rate). A probe would also leave its size among those the GPUs' segment
    // preparers make ahead. CUDA GPUs are measured: their link is not the host's memory.
    link = copy_calibration_->best.gbps * 1e9;
  } else if (link <= 0) {  // unpaced: as fast as this machine copies
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
