#include "gshare/node/live_executor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <utility>

#include "gshare/common/units.h"
#include "gshare/fn/control_channel.h"

namespace gshare {
namespace {

std::uint64_t PageBytes() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

SwitchContext SwitchContextOf(const NodeResources& resources) {
  return {resources.clock.loop(), resources.copies, resources.engine,
          resources.snapshots,    resources.clock,  resources.driver_calls};
}

}  // namespace

// A slice of the vGPU manager, bound to an instance, with its segment allocated through the
// manager. Shared by the executor's slice and the switch operations in flight on the segment: the
// last holder frees the segment, then unbinds and destroys the slice.
class LiveExecutor::SliceMemory {
 public:
  // Creates a slice of `quota_bytes` on the manager's GPU `gpu`, binds it to `holder` and
  // allocates `segment_bytes` charged to it (`accounting_only`: charged, no memory behind it: the
  // process allocates its own); on failure nothing is left in the manager.
  static Result<std::shared_ptr<SliceMemory>> Create(VGpuManager& manager, int gpu,
                                                     const std::string& holder,
                                                     std::uint64_t quota_bytes,
                                                     std::uint64_t segment_bytes,
                                                     bool accounting_only) {
    auto id = manager.CreateSlice(gpu, quota_bytes);
    if (!id.ok()) return id.status();
    auto memory = std::shared_ptr<SliceMemory>(new SliceMemory(manager, *id));
    GSHARE_RETURN_IF_ERROR(manager.Bind(*id, holder));
    memory->bound_ = true;
    auto allocation = manager.Allocate(*id, segment_bytes, accounting_only);
    if (!allocation.ok()) return allocation.status();
    memory->allocation_ = std::move(allocation).value();
    return memory;
  }
  ~SliceMemory() {
    allocation_.reset();  // the segment first: a slice with memory in use cannot be unbound
    if (bound_) LogIfFailed(manager_.Unbind(id_));
    LogIfFailed(manager_.DestroySlice(id_));
  }
  SliceMemory(const SliceMemory&) = delete;
  SliceMemory& operator=(const SliceMemory&) = delete;

  SliceId id() const { return id_; }
  DeviceBuffer& segment() const { return allocation_->buffer(); }
  std::uint64_t segment_bytes() const { return allocation_->size_bytes(); }

 private:
  SliceMemory(VGpuManager& manager, SliceId id) : manager_(manager), id_(id) {}
  static void LogIfFailed(const Status& status) {
    if (!status.ok()) spdlog::error("vGPU slice release: {}", status.ToString());
  }

  VGpuManager& manager_;
  const SliceId id_;
  bool bound_ = false;
  std::unique_ptr<SliceAllocation> allocation_;
};

LiveExecutor::LiveExecutor(NodeResources resources, const FunctionRegistry& functions,
                           InstanceHost& host, LiveExecutorOptions options)
    : resources_(resources),
      functions_(functions),
      host_(host),
      options_(std::move(options)),
      meters_(options_.meters),
      staging_compute_(options_.quantum),
      device_held_(resources.devices.size(), false) {
  std::uint64_t largest = 0;
  for (const Device* device : resources_.devices) {
    largest = std::max(largest, device->info().memory_bytes);
  }
  device_reserve_bytes_ = RoundUp(std::max<std::uint64_t>(largest, 1), PageBytes());
  cuda_gpus_ =
      !resources_.devices.empty() && resources_.devices.front()->info().kind == DeviceKind::kCuda;
  if (resources_.vgpus.gpu_count() != static_cast<int>(resources_.devices.size())) {
    violation_ = Internal(fmt::format("the vGPU manager has {} GPUs, the node {} devices",
                                      resources_.vgpus.gpu_count(), resources_.devices.size()));
  }
}

LiveExecutor::~LiveExecutor() { Shutdown(); }

void LiveExecutor::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  timers_.clear();  // cancels them
  for (auto& [id, held] : requests_) held.latest_start.Cancel();
  for (auto& [id, instance] : instances_) {
    if (instance.switcher) instance.switcher->Close();
    host_.Stop(id);
  }
  instances_.clear();
  for (Gpu& gpu : gpus_) gpu.slices.clear();  // slices in copies stay alive with the copies
}

std::string LiveExecutor::DebugState() const {
  std::string out;
  for (GpuId id = 0; id < gpus_.size(); ++id) {
    const Gpu& gpu = gpus_[id];
    if (!gpu.held && gpu.leaving == 0) continue;
    const auto usage = resources_.vgpus.gpu(static_cast<int>(gpu.device));
    out += fmt::format(
        "GPU {} (device {}): scheduled {}, vGPU reserved {} used {} in {} slices, leaving {}, "
        "runs {}, waiting memory {}, compute holder {}, waiting {}\n",
        id, gpu.device, ScheduledBytes(gpu), usage.ok() ? usage->reserved_bytes : 0,
        usage.ok() ? usage->used_bytes : 0, usage.ok() ? usage->slice_count : 0, gpu.leaving,
        gpu.runs_in_flight, gpu.waiting_memory.size(), gpu.arbiter->holder() != nullptr,
        gpu.arbiter->waiting());
    for (const auto& [function, slice] : gpu.slices) {
      out +=
          fmt::format("  slice of {}: instance {}, state {}, runs {}\n", functions_[function].name,
                      slice.instance, static_cast<int>(slice.state), slice.runs.size());
    }
  }
  for (const auto& [id, instance] : instances_) {
    out += fmt::format("instance {} of {}: state {}, switch {}, ready {}, attached {}, rebind {}\n",
                       id, functions_[instance.function].name, static_cast<int>(instance.state),
                       instance.switcher ? SwitchStateName(instance.switcher->state()) : "-",
                       instance.ready, instance.attached, instance.rebind);
  }
  out += fmt::format("requests unanswered {}, scheduler timers {}\n", requests_.size(),
                     scheduler_timers_);
  return out;
}

bool LiveExecutor::WorkInFlight() const {
  for (const Gpu& gpu : gpus_) {
    if (gpu.leaving > 0) return true;
    for (const auto& [function, slice] : gpu.slices) {
      if (slice.state != SliceState::kResident || !slice.runs.empty()) return true;
    }
  }
  for (const auto& [id, instance] : instances_) {
    if (instance.state == InstanceState::kDetaching || instance.state == InstanceState::kStarting ||
        instance.state == InstanceState::kReserved || instance.state == InstanceState::kPreparing) {
      return true;
    }
    // A removed function's instance on its way out: its end makes the function drained.
    if (instance.state == InstanceState::kStopping && removed_.contains(instance.function)) {
      return true;
    }
  }
  return false;
}

void LiveExecutor::Violation(Status status) {
  spdlog::error("scheduler contract violation: {}", status.ToString());
  if (violation_.ok()) violation_ = std::move(status);
}

LiveExecutor::Gpu* LiveExecutor::CheckGpu(GpuId gpu, const char* call) {
  if (gpu >= gpus_.size() || !gpus_[gpu].held) {
    Violation(Internal(fmt::format("{}: GPU {} is not held", call, gpu)));
    return nullptr;
  }
  if (!gpus_[gpu].ready) {
    Violation(Internal(fmt::format("{}: GPU {} is not ready", call, gpu)));
    return nullptr;
  }
  return &gpus_[gpu];
}

LiveExecutor::Slice* LiveExecutor::CheckSlice(Gpu& gpu, GpuId id, FunctionId function,
                                              const char* call) {
  auto it = gpu.slices.find(function);
  if (it == gpu.slices.end() || it->second.state != SliceState::kResident) {
    Violation(
        Internal(fmt::format("{}: function {} is not resident on GPU {}", call, function, id)));
    return nullptr;
  }
  return &it->second;
}

void LiveExecutor::Submit(const Request& request) {
  if (shut_down_) return;
  Held& held = requests_[request.id];
  held.request = request;
  if (request.latest_start != TimePoint::max()) {
    const RequestId id = request.id;
    held.latest_start = resources_.clock.At(request.latest_start, [this, id] {
      (void)Cancel(id, DeadlineExceeded("the request could not start by its latest start"));
    });
  }
  if (scheduler_ != nullptr) scheduler_->OnRequest(request);
}

bool LiveExecutor::Cancel(RequestId request, const Status& status) {
  if (shut_down_) return false;
  auto it = requests_.find(request);
  if (it == requests_.end() || running_.contains(request)) return false;
  AnswerWithoutRun(request, status, AnswerOutcome::kNeverRan);
  if (scheduler_ != nullptr) scheduler_->OnRequestCancelled(request, status);
  return true;
}

void LiveExecutor::AnswerWithoutRun(RequestId request, const Status& status,
                                    AnswerOutcome outcome) {
  auto it = requests_.find(request);
  const Request answered = it->second.request;
  Account([&](auto& m) { m.Answered(Now(), answered, outcome); });
  requests_.erase(it);  // its latest-start timer with it
  host_.Fail(request, status);
  CheckDrained(answered.function);
}

void LiveExecutor::SetRunTimeout(FunctionId function, Duration timeout) {
  if (timeout > Duration::zero()) {
    run_timeouts_[function] = timeout;
  } else {
    run_timeouts_.erase(function);
  }
}

void LiveExecutor::SetSwitchMechanism(FunctionId function, SwitchMechanism mechanism) {
  if (mechanism == SwitchMechanism::kShim) {
    mechanisms_.erase(function);
  } else {
    mechanisms_[function] = mechanism;
  }
}

SwitchMechanism LiveExecutor::MechanismOf(FunctionId function) const {
  auto it = mechanisms_.find(function);
  return it == mechanisms_.end() ? SwitchMechanism::kShim : it->second;
}

bool LiveExecutor::StartsOnGpu(FunctionId function) const {
  return cuda_gpus_ || options_.start_on_first_slice ||
         MechanismOf(function) == SwitchMechanism::kCheckpoint;
}

Status LiveExecutor::NotPreparedAhead(FunctionId function) const {
  return FailedPrecondition(
      fmt::format("'{}': its instances start on their first GPU slice (CUDA GPUs, or the "
                  "checkpoint mechanism); none starts ahead of need",
                  functions_[function].name));
}

void LiveExecutor::FunctionRemoved(FunctionId function) {
  removed_.insert(function);
  std::vector<InstanceId> idle;
  for (const auto& [id, instance] : instances_) {
    if (instance.function == function && instance.state == InstanceState::kIdle) {
      idle.push_back(id);
    }
  }
  for (const InstanceId id : idle) StopInstance(instances_.at(id));
  CheckDrained(function);
}

bool LiveExecutor::Drained(FunctionId function) const {
  for (const auto& [id, instance] : instances_) {
    if (instance.function == function) return false;
  }
  for (const Gpu& gpu : gpus_) {
    if (gpu.slices.contains(function)) return false;
  }
  for (const auto& [id, held] : requests_) {
    if (held.request.function == function) return false;
  }
  return true;
}

void LiveExecutor::CheckDrained(FunctionId function) {
  if (!removed_.contains(function) || !Drained(function)) return;
  // Reported on an event of its own: this may run inside a scheduler's action.
  boost::asio::post(resources_.clock.loop(), [this, function] {
    if (shut_down_ || !removed_.contains(function) || !Drained(function)) return;
    removed_.erase(function);
    cold_.erase(function);
    run_timeouts_.erase(function);
    start_failures_.erase(function);
    mechanisms_.erase(function);
    if (scheduler_ != nullptr) scheduler_->OnFunctionDrained(function);
    if (options_.on_drained) options_.on_drained(function);
  });
}

void LiveExecutor::SetKeptWarm(FunctionId function, bool warm) {
  if (warm) {
    cold_.erase(function);
    return;
  }
  if (shut_down_ || !functions_.active(function)) return;
  cold_.insert(function);
  std::vector<InstanceId> idle;
  for (const auto& [id, instance] : instances_) {
    if (instance.function == function && instance.state == InstanceState::kIdle) {
      idle.push_back(id);
    }
  }
  for (const InstanceId id : idle) StopInstance(instances_.at(id));
}

void LiveExecutor::Prepare(FunctionId function, std::function<void(Status)> done) {
  const auto fail = [this, &done](Status status) {
    boost::asio::post(resources_.clock.loop(),
                      [done = std::move(done), status = std::move(status)] { done(status); });
  };
  if (shut_down_) return fail(Unavailable("the node is shutting down"));
  if (!functions_.active(function)) {
    return fail(NotFound(fmt::format("Prepare: function {} is not served", function)));
  }
  if (!PreparesAhead(function)) return fail(NotPreparedAhead(function));
  const InstanceId instance_id = next_instance_++;
  Instance& instance = instances_[instance_id];
  instance.id = instance_id;
  instance.function = function;
  instance.state = InstanceState::kPreparing;
  instance.started = Now();
  if (const Status launched = LaunchInstance(instance, functions_[function].gpu_memory_bytes);
      !launched.ok()) {
    return fail(launched);  // LaunchInstance forgot the instance
  }
  instances_.at(instance_id).on_prepared = std::move(done);
}

Result<GpuId> LiveExecutor::AcquireGpu(GpuTypeId type, Duration startup) {
  if (type != 0) return InvalidArgument(fmt::format("the node has no GPU type {}", type));
  std::size_t device = 0;
  while (device < device_held_.size() && device_held_[device]) ++device;
  if (device == device_held_.size()) {
    return ResourceExhausted(
        fmt::format("all {} GPUs of the node are held", resources_.devices.size()));
  }
  device_held_[device] = true;
  const auto id = static_cast<GpuId>(gpus_.size());
  Gpu& gpu = gpus_.emplace_back();
  gpu.device = device;
  gpu.held = true;
  gpu.ready = startup <= Duration::zero();
  gpu.arbiter = std::make_unique<ComputeArbiter>(options_.quantum);
  Account([&](auto& m) { m.GpuAcquired(Now(), 0); });
  if (!gpu.ready) {
    const std::uint64_t key = next_timer_++;
    ++scheduler_timers_;
    timers_[key] = resources_.clock.After(startup, [this, id, key] {
      timers_.erase(key);
      --scheduler_timers_;
      if (shut_down_ || !gpus_[id].held) return;
      gpus_[id].ready = true;
      if (scheduler_ != nullptr) scheduler_->OnGpuReady(id);
    });
  }
  return id;
}

void LiveExecutor::ReleaseGpu(GpuId id) {
  if (id >= gpus_.size() || !gpus_[id].held) {
    return Violation(Internal(fmt::format("ReleaseGpu: GPU {} is not held", id)));
  }
  Gpu& gpu = gpus_[id];
  if (!gpu.slices.empty()) {
    return Violation(Internal(fmt::format("ReleaseGpu: GPU {} still has slices", id)));
  }
  gpu.held = false;
  Account([&](auto& m) { m.GpuReleased(Now(), 0); });
  // The device is free once the instances leaving it have unmapped.
  if (gpu.leaving == 0) device_held_[gpu.device] = false;
}

std::uint64_t LiveExecutor::SliceBytes(std::uint64_t reserve_bytes) const {
  return RoundUp(reserve_bytes, PageBytes());
}

std::uint64_t LiveExecutor::QuotaFor(const Slice& slice, std::uint64_t reserve_bytes) const {
  const SliceGranularity granularity = resources_.vgpus.granularity();
  const std::uint64_t segment = slice.memory ? slice.memory->segment_bytes() : 0;
  return granularity.RoundUp(std::max(reserve_bytes, segment));
}

std::uint64_t LiveExecutor::ScheduledBytes(const Gpu& gpu) {
  std::uint64_t bytes = 0;
  for (const auto& [function, slice] : gpu.slices) bytes += slice.reserve_bytes;
  return bytes;
}

bool LiveExecutor::MemoryComing(const Gpu& gpu) const {
  if (gpu.leaving > 0) return true;
  const SliceGranularity granularity = resources_.vgpus.granularity();
  for (const auto& [function, slice] : gpu.slices) {
    if (!slice.memory) continue;
    auto info = resources_.vgpus.slice(slice.memory->id());
    if (info.ok() && info->quota_bytes > granularity.RoundUp(slice.reserve_bytes)) return true;
  }
  return false;
}

Status LiveExecutor::SetSliceQuota(const Gpu& gpu, const Slice& slice,
                                   std::uint64_t reserve_bytes) {
  const Status resized =
      resources_.vgpus.Resize(slice.memory->id(), QuotaFor(slice, reserve_bytes));
  if (resized.code() == StatusCode::kResourceExhausted && MemoryComing(gpu)) return Status::Ok();
  return resized;
}

std::uintptr_t LiveExecutor::DeviceBase(InstanceId id) const {
  if (!options_.distinct_device_ranges) return options_.device_base;
  return options_.device_base + static_cast<std::uintptr_t>(id * device_reserve_bytes_);
}

void LiveExecutor::Restore(GpuId id, FunctionId function, std::uint64_t reserve_bytes) {
  Gpu* gpu = CheckGpu(id, "Restore");
  if (gpu == nullptr) return;
  if (!functions_.active(function)) {
    return Violation(Internal(fmt::format("Restore: function {} is not served", function)));
  }
  const ResolvedFunction& spec = functions_[function];
  if (gpu->slices.contains(function)) {
    return Violation(
        Internal(fmt::format("Restore: '{}' already has a slice on GPU {}", spec.name, id)));
  }
  const std::uint64_t scheduled = ScheduledBytes(*gpu);
  if (reserve_bytes < spec.gpu_memory_bytes ||
      scheduled + reserve_bytes > options_.gpu_type.memory_bytes) {
    return Violation(Internal(fmt::format(
        "Restore: {} for '{}' on GPU {} ({} reserved of {})", FormatBytes(reserve_bytes), spec.name,
        id, FormatBytes(scheduled), FormatBytes(options_.gpu_type.memory_bytes))));
  }
  if (!Instances(function).CanBind()) {
    return Violation(Internal(fmt::format("Restore: '{}' has no instance to bind", spec.name)));
  }
  if (auto failing = start_failures_.find(function);
      failing != start_failures_.end() && failing->second.in_a_row >= options_.max_start_failures &&
      Now() - failing->second.last < options_.start_failure_cooldown &&
      Instances(function).idle == 0) {
    // Reserved and failed on the loop, as any failed restore: the slice is gone, memory free.
    Slice& doomed = gpu->slices[function];
    doomed.reserve_bytes = reserve_bytes;
    doomed.state = SliceState::kRestoring;
    Account([&](auto& m) { m.Reserved(Now(), function, static_cast<double>(reserve_bytes)); });
    const Status why = FailedPrecondition(fmt::format(
        "'{}': {} instances in a row died before they were ready (last: {}); see its log",
        spec.name, failing->second.in_a_row, failing->second.why.message()));
    boost::asio::post(resources_.clock.loop(), [this, id, function, why] {
      if (!shut_down_) RestoreFinished(id, function, why);
    });
    return;
  }
  // Bind an instance now, so that Instances() tells the truth from this call on.
  // An idle instance before one still detaching; one that started on this GPU before another
  // (a CUDA instance keeps the device it started on where it can).
  Instance* bound = nullptr;
  const auto rank = [&](const Instance& instance) {
    const bool home = !instance.home_device || *instance.home_device == gpu->device;
    return (home ? 2 : 0) + (instance.state == InstanceState::kIdle ? 1 : 0);
  };
  for (auto& [instance_id, instance] : instances_) {
    if (instance.function != function) continue;
    const bool idle =
        instance.state == InstanceState::kIdle || (instance.state == InstanceState::kDetaching &&
                                                   !instance.rebind && !instance.stop_after_detach);
    if (idle && (bound == nullptr || rank(instance) > rank(*bound))) bound = &instance;
  }
  if ((cuda_gpus_ || options_.keep_instances_on_their_gpu) && bound != nullptr &&
      bound->home_device && *bound->home_device != gpu->device) {
    // A CUDA process stays on the GPU it started on (its CUDA_VISIBLE_DEVICES): a new one starts
    // here, and the idle one away makes room for it within max_instances (one still detaching,
    // once its detach ends).
    if (bound->state == InstanceState::kIdle) {
      StopInstance(*bound);
    } else {
      bound->stop_after_detach = true;
    }
    bound = nullptr;
  }
  if (bound == nullptr) {
    const InstanceId instance_id = next_instance_++;
    bound = &instances_[instance_id];
    bound->id = instance_id;
    bound->function = function;
    bound->state = InstanceState::kStarting;
    bound->started = Now();
  } else if (bound->state == InstanceState::kIdle) {
    bound->state = InstanceState::kReserved;
    ++bound->keep_generation;  // its keep timer is void
  } else {
    bound->rebind = true;  // detaching: bound now, restored once its detach ends
  }
  bound->gpu = id;
  Slice& slice = gpu->slices[function];
  slice.instance = bound->id;
  slice.reserve_bytes = reserve_bytes;
  slice.restore_began = Now();
  slice.state = SliceState::kWaitingMemory;
  Account([&](auto& m) { m.Reserved(Now(), function, static_cast<double>(reserve_bytes)); });
  Account([&](auto& m) { m.Restored(Now(), function, spec.model_bytes); });
  boost::asio::post(resources_.clock.loop(), [this, id, function] {
    if (!shut_down_) StartSliceMemory(id, function);
  });
}

void LiveExecutor::StartSliceMemory(GpuId id, FunctionId function) {
  Gpu& gpu = gpus_[id];
  auto it = gpu.slices.find(function);
  if (it == gpu.slices.end() || it->second.state != SliceState::kWaitingMemory) return;
  Slice& slice = it->second;
  Instance& instance = instances_.at(slice.instance);
  if (instance.state == InstanceState::kDetaching) {
    // Re-bound while it leaves a slice: an instance holds one slice at a time.
    instance.after_detach = [this, id, function] { StartSliceMemory(id, function); };
    return;
  }
  auto memory =
      SliceMemory::Create(resources_.vgpus, static_cast<int>(gpu.device),
                          fmt::format("{}#{}", functions_[function].name, instance.id),
                          QuotaFor(slice, slice.reserve_bytes), SliceBytes(slice.reserve_bytes),
                          MechanismOf(function) == SwitchMechanism::kCheckpoint);
  if (!memory.ok()) {
    if (memory.status().code() == StatusCode::kResourceExhausted && MemoryComing(gpu)) {
      gpu.waiting_memory.push_back(function);  // memory still being given back
      return;
    }
    return RestoreFinished(id, function, memory.status());
  }
  slice.memory = std::move(memory).value();
  slice.state = SliceState::kRestoring;
  BindInstance(id, function);
}

void LiveExecutor::BindInstance(GpuId id, FunctionId function) {
  Slice& slice = gpus_[id].slices.at(function);
  Instance& instance = instances_.at(slice.instance);
  if (instance.state == InstanceState::kStarting) return StartInstance(id, function);
  instance.state = InstanceState::kBound;
  const InstanceId instance_id = instance.id;
  const std::shared_ptr<SliceMemory> keep_alive = slice.memory;
  instance.switcher->Restore(
      slice.memory->segment(), slice.reserve_bytes, gpus_[id].arbiter.get(),
      [this, id, function, instance_id, keep_alive](Status status) {
        if (shut_down_) return;
        auto it = gpus_[id].slices.find(function);
        if (it == gpus_[id].slices.end() || it->second.instance != instance_id) return;
        if (!status.ok() && status.code() == StatusCode::kUnavailable) {
          return InstanceLost(instance_id, status);
        }
        RestoreFinished(id, function, status);
      });
}

void LiveExecutor::StartInstance(GpuId id, FunctionId function) {
  Slice& slice = gpus_[id].slices.at(function);
  Instance& instance = instances_.at(slice.instance);
  const std::optional<GpuId> on_gpu =
      StartsOnGpu(function) ? std::optional<GpuId>(id) : std::nullopt;
  if (const Status launched = LaunchInstance(instance, slice.reserve_bytes, on_gpu);
      !launched.ok()) {
    // A start refused here (no shim library, no checkpoint API) counts as one that died: after
    // max_start_failures the function's restores fail at once for the cooldown.
    StartFailures& failures = start_failures_[function];
    ++failures.in_a_row;
    failures.last = Now();
    failures.why = launched;
    return RestoreFinished(id, function, launched);  // the slice is gone and its memory free
  }
}

Status LiveExecutor::LaunchInstance(Instance& instance, std::uint64_t reserve_bytes,
                                    std::optional<GpuId> on_gpu) {
  const InstanceId instance_id = instance.id;
  const FunctionId function = instance.function;
  const SwitchMechanism mechanism = MechanismOf(function);
  const auto forget = [&](Status why) {
    instances_.erase(instance_id);
    return why;
  };
  if (StartsOnGpu(function) && !on_gpu) return forget(NotPreparedAhead(function));
  if (mechanism == SwitchMechanism::kCheckpoint && resources_.checkpoint_api == nullptr) {
    return forget(FailedPrecondition(
        fmt::format("'{}' (switch: checkpoint): the driver's process checkpoint API is not "
                    "available on this node: {}",
                    functions_[function].name, resources_.checkpoint_api_note)));
  }
  InstanceLaunch launch;
  launch.instance = instance_id;
  launch.function = function;
  if (on_gpu) {
    const Device& device = *resources_.devices[gpus_[*on_gpu].device];
    instance.home_device = gpus_[*on_gpu].device;
    if (device.info().kind == DeviceKind::kCuda) {
      launch.environment["CUDA_VISIBLE_DEVICES"] = device.info().uuid;
      if (mechanism == SwitchMechanism::kShim) {
        std::error_code error;
        if (options_.cuda_shim_library.empty() ||
            !std::filesystem::exists(options_.cuda_shim_library, error)) {
          return forget(NotFound(fmt::format(
              "'{}': the CUDA allocator shim that a shim function preloads is missing ({}); "
              "install it beside gshare, or deploy the function with switch: checkpoint",
              functions_[function].name,
              options_.cuda_shim_library.empty() ? std::string(kCudaShimLibrary)
                                                 : options_.cuda_shim_library)));
        }
        launch.environment["LD_PRELOAD"] = options_.cuda_shim_library;
      }
    }
  }
  if (mechanism == SwitchMechanism::kShim) {
    auto pair = fn::ControlChannel::CreatePair();
    if (!pair.ok()) return forget(pair.status());
    auto switcher = resources_.switches(
        SwitchContextOf(resources_), SwitchTarget{.mechanism = SwitchMechanism::kShim,
                                                  .name = fmt::format("instance-{}", instance_id),
                                                  .pid = 0,
                                                  .channel = std::move(pair->first),
                                                  .checkpoint_api = nullptr,
                                                  .clock = &resources_.clock,
                                                  .on_failure = [this, instance_id](Status status) {
                                                    InstanceLost(instance_id, status);
                                                  }});
    if (!switcher.ok()) return forget(switcher.status());
    instance.switcher = std::move(switcher).value();
    launch.control = std::move(pair->second);
    launch.device_base = DeviceBase(instance_id);
    launch.device_reserve_bytes = device_reserve_bytes_;
  }
  launch.on_ready = [this, instance_id, mechanism](std::int64_t pid) {
    auto it = instances_.find(instance_id);
    if (it == instances_.end()) return;
    it->second.ready = true;
    start_failures_.erase(it->second.function);  // the count is of failures in a row
    if (mechanism == SwitchMechanism::kCheckpoint) return AttachUnmodified(instance_id, pid);
    MaybeRestoreDone(it->second);
  };
  launch.on_exit = [this, instance_id](Status status) {
    auto it = instances_.find(instance_id);
    if (it != instances_.end() && it->second.switch_failure && status.ok() &&
        it->second.state != InstanceState::kStopping) {
      status = *it->second.switch_failure;  // what failed first, when its exit says nothing more
    }
    if (status.ok()) status = Unavailable("the process ended");
    InstanceLost(instance_id, status, /*exited=*/true);
  };
  if (const Status started = host_.Start(std::move(launch)); !started.ok()) {
    if (instance.switcher) instance.switcher->Close();
    return forget(started);
  }
  if (mechanism == SwitchMechanism::kCheckpoint) return Status::Ok();  // attached once ready
  DeviceBuffer* buffer = nullptr;
  ComputeArbiter* arbiter = &staging_compute_;
  std::shared_ptr<void> keep_alive;
  if (on_gpu) {
    Slice& slice = gpus_[*on_gpu].slices.at(function);
    buffer = &slice.memory->segment();
    arbiter = gpus_[*on_gpu].arbiter.get();
    keep_alive = slice.memory;
  } else {
    auto staging = resources_.staging.Allocate(SliceBytes(reserve_bytes));
    if (!staging.ok()) {
      // Stopped, and forgotten at once: its exit finds no instance.
      instance.switcher->Close();
      host_.Stop(instance_id);
      return forget(staging.status());
    }
    instance.staging = std::move(staging).value();
    buffer = instance.staging.get();
    keep_alive = instance.staging;
  }
  AttachFirst(instance, *buffer, reserve_bytes, arbiter, std::move(keep_alive));
  return Status::Ok();
}

void LiveExecutor::AttachFirst(Instance& instance, DeviceBuffer& buffer,
                               std::uint64_t reserve_bytes, ComputeArbiter* arbiter,
                               std::shared_ptr<void> keep_alive) {
  const InstanceId instance_id = instance.id;
  instance.switcher->Attach(buffer, reserve_bytes, arbiter,
                            [this, instance_id, keep_alive](Status status) {
                              if (shut_down_) return;
                              auto it = instances_.find(instance_id);
                              if (it == instances_.end()) return;
                              if (!status.ok()) return InstanceLost(instance_id, status);
                              it->second.attached = true;
                              MaybeRestoreDone(it->second);
                            });
}

void LiveExecutor::AttachUnmodified(InstanceId instance_id, std::int64_t pid) {
  Instance& instance = instances_.at(instance_id);
  const FunctionId function = instance.function;
  auto slice_it = gpus_[instance.gpu].slices.find(function);
  if (instance.state != InstanceState::kStarting || slice_it == gpus_[instance.gpu].slices.end() ||
      slice_it->second.instance != instance_id) {
    return;  // its slice went meanwhile (InstanceLost or RestoreFinished handled it)
  }
  auto switcher = resources_.switches(SwitchContextOf(resources_),
                                      SwitchTarget{.mechanism = SwitchMechanism::kCheckpoint,
                                                   .name = fmt::format("instance-{}", instance_id),
                                                   .pid = pid,
                                                   .channel = fn::ControlChannel(),
                                                   .checkpoint_api = resources_.checkpoint_api,
                                                   .clock = &resources_.clock,
                                                   .on_failure = {}});
  if (!switcher.ok()) return InstanceLost(instance_id, switcher.status(), /*exited=*/false);
  instance.switcher = std::move(switcher).value();
  Slice& slice = slice_it->second;
  AttachFirst(instance, slice.memory->segment(), slice.reserve_bytes,
              gpus_[instance.gpu].arbiter.get(), slice.memory);
}

void LiveExecutor::MaybeRestoreDone(Instance& instance) {
  if ((instance.state != InstanceState::kStarting && instance.state != InstanceState::kPreparing) ||
      !instance.ready || !instance.attached) {
    return;
  }
  const InstanceId instance_id = instance.id;
  if (instance.home_device && instance.state == InstanceState::kStarting) {
    // Started on its slice: resident there now.
    instance.state = InstanceState::kBound;
    observed_cold_start_total_ += Now() - instance.started;
    ++observed_cold_starts_;
    return RestoreFinished(instance.gpu, instance.function, Status::Ok());
  }
  // Loaded in host memory: into its snapshot, then onto the GPU like any restore (or idle, when
  // prepared ahead of need).
  const std::shared_ptr<DeviceBuffer> keep_alive = instance.staging;
  instance.switcher->Checkpoint(true, [this, instance_id, keep_alive](Status status) {
    if (shut_down_) return;
    auto it = instances_.find(instance_id);
    if (it == instances_.end()) return;
    if (!status.ok()) {
      // The pool is full, and an instance on its way out will give its snapshot back: try again
      // when it has ended.
      if (status.code() == StatusCode::kResourceExhausted && InstanceStopping()) {
        waiting_pool_.push_back(instance_id);
        return;
      }
      return InstanceLost(instance_id, status);
    }
    it->second.staging.reset();
    if (it->second.state == InstanceState::kPreparing) {
      std::function<void(Status)> done = std::move(it->second.on_prepared);
      it->second.on_prepared = nullptr;
      BecomeIdle(it->second);
      if (done) done(Status::Ok());
      return;
    }
    RestoreFromStaging(instance_id);
  });
}

bool LiveExecutor::InstanceStopping() const {
  for (const auto& [id, instance] : instances_) {
    if (instance.state == InstanceState::kStopping) return true;
  }
  return false;
}

void LiveExecutor::RetryWaitingPool() {
  std::vector<InstanceId> waiting;
  waiting.swap(waiting_pool_);
  for (const InstanceId id : waiting) {
    if (auto it = instances_.find(id); it != instances_.end()) MaybeRestoreDone(it->second);
  }
}

void LiveExecutor::RestoreFromStaging(InstanceId instance_id) {
  Instance& instance = instances_.at(instance_id);
  const GpuId id = instance.gpu;
  const FunctionId function = instance.function;
  auto it = gpus_[id].slices.find(function);
  if (it == gpus_[id].slices.end() || it->second.instance != instance_id) return;
  Slice& slice = it->second;
  const std::shared_ptr<SliceMemory> keep_alive = slice.memory;
  instance.switcher->Restore(slice.memory->segment(), slice.reserve_bytes, gpus_[id].arbiter.get(),
                             [this, id, function, instance_id, keep_alive](Status status) {
                               if (shut_down_) return;
                               auto instance_it = instances_.find(instance_id);
                               if (instance_it == instances_.end()) return;
                               if (!status.ok()) return InstanceLost(instance_id, status);
                               instance_it->second.state = InstanceState::kBound;
                               observed_cold_start_total_ += Now() - instance_it->second.started;
                               ++observed_cold_starts_;
                               RestoreFinished(id, function, Status::Ok());
                             });
}

void LiveExecutor::RestoreFinished(GpuId id, FunctionId function, const Status& status) {
  Gpu& gpu = gpus_[id];
  auto it = gpu.slices.find(function);
  if (it == gpu.slices.end()) return;
  if (status.ok()) {
    it->second.state = SliceState::kResident;
    if (options_.on_restored) options_.on_restored(function, Now() - it->second.restore_began);
    if (scheduler_ != nullptr) scheduler_->OnRestoreDone(id, function, status);
    return;
  }
  // The slice is gone and its memory free; its instance, if it lives, is idle again.
  const InstanceId instance_id = it->second.instance;
  Account([&](auto& m) {
    m.Reserved(Now(), function, -static_cast<double>(it->second.reserve_bytes));
  });
  gpu.slices.erase(it);
  if (auto instance = instances_.find(instance_id); instance != instances_.end()) {
    if (instance->second.state == InstanceState::kStarting) {
      StopInstance(instance->second);
    } else {
      BecomeIdle(instance->second);
    }
  }
  RetryWaitingMemory(id);
  if (scheduler_ != nullptr) scheduler_->OnRestoreDone(id, function, status);
  CheckDrained(function);
}

EvictOutcome LiveExecutor::Evict(GpuId id, FunctionId function, EvictHint hint) {
  Gpu* gpu = CheckGpu(id, "Evict");
  if (gpu == nullptr) return EvictOutcome::kDiscarded;
  Slice* slice = CheckSlice(*gpu, id, function, "Evict");
  if (slice == nullptr) return EvictOutcome::kDiscarded;
  if (!slice->runs.empty()) {
    Violation(Internal(fmt::format("Evict: function {} is running on GPU {}", function, id)));
    return EvictOutcome::kDiscarded;
  }
  const bool report = hint == EvictHint::kCheckpoint;
  Instance& instance = instances_.at(slice->instance);
  const InstanceId instance_id = instance.id;
  std::shared_ptr<SliceMemory> memory = std::move(slice->memory);
  ++gpu->leaving;
  Account(
      [&](auto& m) { m.Reserved(Now(), function, -static_cast<double>(slice->reserve_bytes)); });
  gpu->slices.erase(function);
  instance.state = InstanceState::kDetaching;
  instance.switcher->Checkpoint(
      report, [this, instance_id, id, function, memory, report](Status status) mutable {
        if (shut_down_) return;
        auto it = instances_.find(instance_id);
        TransferReport moved;
        if (it != instances_.end() && status.ok()) moved = it->second.switcher->last_checkpoint();
        Detached(instance_id, id, function, std::move(memory), report, status, moved.bytes,
                 moved.unchanged_bytes);
      });
  return report ? EvictOutcome::kCopying : EvictOutcome::kDiscarded;
}

void LiveExecutor::Detached(InstanceId instance_id, GpuId id, FunctionId function,
                            std::shared_ptr<SliceMemory> memory, bool report, const Status& status,
                            std::uint64_t copied_bytes, std::uint64_t skipped_bytes) {
  Gpu& gpu = gpus_[id];
  auto it = instances_.find(instance_id);
  if (copied_bytes > 0) Account([&](auto& m) { m.Checkpointed(Now(), function, copied_bytes); });
  if (skipped_bytes > 0) {
    Account([&](auto& m) { m.CheckpointSkipped(Now(), function, skipped_bytes); });
  }
  if (status.ok() || it == instances_.end() || !it->second.switcher->uses_buffer()) {
    --gpu.leaving;
    memory.reset();  // the slice is freed, unbound and destroyed
  } else {
    // The checkpoint failed but the instance holds on to its memory: it is stopped, and its
    // slice (still counted as leaving) goes with it.
    it->second.orphan = std::move(memory);
    it->second.orphan_gpu = id;
  }
  if (it != instances_.end()) {
    Instance& instance = it->second;
    if (!status.ok()) {
      spdlog::warn("instance {} could not leave GPU {}: {}", instance_id, id, status.ToString());
      if (instance.switcher->state() == SwitchState::kFailed) {
        // The switch broke (the process died or broke the protocol): the instance is lost.
        const Status lost = status;
        InstanceLost(instance_id, lost);
        if (!gpu.held && gpu.leaving == 0) device_held_[gpu.device] = false;
        RetryWaitingMemory(id);
        if (report && scheduler_ != nullptr) scheduler_->OnEvictDone(id, function, status);
        return;
      }
      StopInstance(instance);
    } else if (instance.rebind) {
      instance.rebind = false;
      instance.state = InstanceState::kReserved;
      if (instance.after_detach) {
        auto next = std::move(instance.after_detach);
        instance.after_detach = nullptr;
        next();
      }
    } else if (instance.stop_after_detach) {
      StopInstance(instance);
    } else {
      BecomeIdle(instance);
    }
  }
  if (!gpu.held && gpu.leaving == 0) device_held_[gpu.device] = false;
  RetryWaitingMemory(id);
  if (report && scheduler_ != nullptr) scheduler_->OnEvictDone(id, function, status);
  CheckDrained(function);
}

void LiveExecutor::RetryWaitingMemory(GpuId id) {
  Gpu& gpu = gpus_[id];
  // Growth that waited for memory first: those slices are resident already.
  for (const auto& [function, slice] : gpu.slices) {
    if (!slice.memory) continue;
    auto info = resources_.vgpus.slice(slice.memory->id());
    if (info.ok() && info->quota_bytes < QuotaFor(slice, slice.reserve_bytes)) {
      (void)SetSliceQuota(gpu, slice, slice.reserve_bytes);  // or later, when more comes back
    }
  }
  std::deque<FunctionId> waiting;
  waiting.swap(gpu.waiting_memory);
  for (const FunctionId function : waiting) StartSliceMemory(id, function);
}

bool LiveExecutor::Resize(GpuId id, FunctionId function, std::uint64_t new_bytes) {
  Gpu* gpu = CheckGpu(id, "Resize");
  if (gpu == nullptr) return false;
  Slice* slice = CheckSlice(*gpu, id, function, "Resize");
  if (slice == nullptr) return false;
  const ResolvedFunction& spec = functions_[function];
  if (new_bytes < spec.gpu_memory_bytes ||
      ScheduledBytes(*gpu) - slice->reserve_bytes + new_bytes > options_.gpu_type.memory_bytes) {
    Violation(Internal(
        fmt::format("Resize: '{}' to {} on GPU {}", spec.name, FormatBytes(new_bytes), id)));
    return false;
  }
  if (const Status quota = SetSliceQuota(*gpu, *slice, new_bytes); !quota.ok()) {
    Violation(Internal(fmt::format("Resize: '{}' to {} on GPU {}: {}", spec.name,
                                   FormatBytes(new_bytes), id, quota.ToString())));
    return false;
  }
  const double delta = static_cast<double>(new_bytes) - static_cast<double>(slice->reserve_bytes);
  slice->reserve_bytes = new_bytes;
  Account([&](auto& m) { m.Reserved(Now(), function, delta); });
  if (!slice->runs.empty()) Account([&](auto& m) { m.Active(Now(), function, delta); });
  // The function's allocations follow the new quota, within the slice's segment.
  instances_.at(slice->instance)
      .switcher->SetQuota(std::min<std::uint64_t>(new_bytes, slice->memory->segment_bytes()));
  return true;
}

void LiveExecutor::Run(GpuId id, FunctionId function, std::span<const RequestId> batch) {
  Gpu* gpu = CheckGpu(id, "Run");
  if (gpu == nullptr) return;
  Slice* slice = CheckSlice(*gpu, id, function, "Run");
  if (slice == nullptr) return;
  if (batch.empty()) return Violation(Internal("Run: an empty batch"));
  for (const RequestId request : batch) {
    auto it = requests_.find(request);
    if (it == requests_.end() || it->second.request.function != function) {
      return Violation(Internal(fmt::format(
          "Run: request {} is not an unanswered request of function {}", request, function)));
    }
    if (running_.contains(request)) {
      return Violation(Internal(fmt::format("Run: request {} is running already", request)));
    }
  }
  for (const RequestId request : batch) {
    running_.insert(request);
    requests_.at(request).latest_start.Cancel();  // it starts now
  }
  const std::uint64_t run_id = next_run_++;
  if (slice->runs.empty()) {
    Account([&](auto& m) { m.Active(Now(), function, static_cast<double>(slice->reserve_bytes)); });
  }
  // A run that overlaps another on its GPU shares the compute: both say so to the profile learner.
  const bool shared = gpu->runs_in_flight > 0;
  if (shared) {
    for (auto& [other_function, other] : gpu->slices) {
      for (auto& [other_id, other_run] : other.runs) other_run.shared = true;
    }
  }
  ++gpu->runs_in_flight;
  RunInFlight& run = slice->runs[run_id];
  run.batch.assign(batch.begin(), batch.end());
  run.started = Now();
  run.shared = shared;
  const InstanceId instance_id = slice->instance;
  if (auto timeout = run_timeouts_.find(function); timeout != run_timeouts_.end()) {
    run.timeout = resources_.clock.After(timeout->second, [this, instance_id] {
      if (shut_down_) return;
      auto it = instances_.find(instance_id);
      if (it == instances_.end() || it->second.state == InstanceState::kStopping) return;
      spdlog::warn("instance {} of '{}' exceeded its run timeout: stopping it", instance_id,
                   functions_[it->second.function].name);
      host_.Stop(instance_id);  // its exit returns the requests of its runs to the policy
    });
  }
  host_.Infer(instance_id, batch, [this, id, function, instance_id, run_id](Status status) {
    if (shut_down_) return;
    auto it = gpus_[id].slices.find(function);
    if (it == gpus_[id].slices.end() || it->second.instance != instance_id) return;
    Slice& owner = it->second;
    auto run_it = owner.runs.find(run_id);
    if (run_it == owner.runs.end()) return;  // cancelled: the instance died
    std::vector<RequestId> done_batch = std::move(run_it->second.batch);
    for (const RequestId request : done_batch) running_.erase(request);
    const int ran = static_cast<int>(done_batch.size());
    const Duration elapsed = Now() - run_it->second.started;
    const bool alone = !run_it->second.shared;
    owner.runs.erase(run_it);
    --gpus_[id].runs_in_flight;
    if (status.ok() && options_.on_run_observed) {
      options_.on_run_observed(function, ran, elapsed, alone);
    }
    if (owner.runs.empty()) {
      Account(
          [&](auto& m) { m.Active(Now(), function, -static_cast<double>(owner.reserve_bytes)); });
    }
    if (status.ok()) {
      for (const RequestId request : done_batch) {
        auto request_it = requests_.find(request);
        if (request_it == requests_.end()) continue;
        const Request answered = request_it->second.request;
        Account([&](auto& m) { m.Answered(Now(), answered, AnswerOutcome::kOk); });
        requests_.erase(request_it);
      }
    }
    if (scheduler_ != nullptr) {
      scheduler_->OnRunDone(id, function, done_batch, RunResult{status, elapsed});
    }
    CheckDrained(function);
  });
}

void LiveExecutor::FailRequest(RequestId request, const Status& status) {
  if (!requests_.contains(request) || running_.contains(request)) {
    return Violation(Internal(
        fmt::format("FailRequest: request {} is not an unanswered request out of a run", request)));
  }
  AnswerWithoutRun(request, status, AnswerOutcome::kFailed);
}

InstanceView LiveExecutor::Instances(FunctionId function) const {
  InstanceView view;
  for (const auto& [id, instance] : instances_) {
    if (instance.function != function) continue;
    switch (instance.state) {
      case InstanceState::kPreparing:  // neither: a restore cannot bind it until it is idle
        break;
      case InstanceState::kStarting:
      case InstanceState::kReserved:
      case InstanceState::kBound:
        ++view.bound;
        break;
      case InstanceState::kDetaching:
        if (!instance.stop_after_detach) ++(instance.rebind ? view.bound : view.idle);
        break;
      case InstanceState::kIdle:
        ++view.idle;
        break;
      case InstanceState::kStopping:
        break;
    }
  }
  if (functions_.contains(function)) view.max_instances = functions_[function].max_instances;
  view.cold_start =
      observed_cold_starts_ == 0
          ? options_.cold_start_estimate
          : observed_cold_start_total_ / static_cast<std::int64_t>(observed_cold_starts_);
  return view;
}

void LiveExecutor::SetTimer(TimePoint at, std::uint64_t token) {
  const std::uint64_t key = next_timer_++;
  ++scheduler_timers_;
  timers_[key] = resources_.clock.At(at, [this, key, token] {
    timers_.erase(key);
    --scheduler_timers_;
    if (shut_down_ || scheduler_ == nullptr) return;
    scheduler_->OnTimer(token);
  });
}

void LiveExecutor::BecomeIdle(Instance& instance) {
  instance.state = InstanceState::kIdle;
  // Removed, or kept cold: nothing of it stays in the snapshot pool without work.
  if (!functions_.active(instance.function) || cold_.contains(instance.function)) {
    return StopInstance(instance);
  }
  const std::uint64_t generation = ++instance.keep_generation;
  const InstanceId instance_id = instance.id;
  const std::uint64_t key = next_timer_++;
  timers_[key] =
      resources_.clock.After(options_.instance_keep, [this, key, instance_id, generation] {
        timers_.erase(key);
        if (shut_down_) return;
        auto it = instances_.find(instance_id);
        if (it == instances_.end() || it->second.state != InstanceState::kIdle ||
            it->second.keep_generation != generation) {
          return;
        }
        int alive = 0;
        for (const auto& [id, other] : instances_) {
          if (other.function == it->second.function && other.state != InstanceState::kStopping) {
            ++alive;
          }
        }
        if (alive > functions_[it->second.function].min_instances) StopInstance(it->second);
      });
}

void LiveExecutor::StopInstance(Instance& instance) {
  instance.state = InstanceState::kStopping;
  instance.exit_wait.Cancel();
  host_.Stop(instance.id);
}

void LiveExecutor::InstanceLost(InstanceId instance_id, const Status& status, bool exited) {
  if (shut_down_) return;
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return;
  if (!exited && status.code() == StatusCode::kUnavailable &&
      (it->second.state == InstanceState::kStarting ||
       it->second.state == InstanceState::kPreparing)) {
    // A starting instance whose channel failed is going: its exit says why (a model that did not
    // load is the tenant's mistake, not a lost instance). A process that closed its channel and
    // stayed is stopped after a grace (a stop at once would race the exit status it is giving).
    if (!it->second.switch_failure) {
      it->second.switch_failure = status;
      it->second.exit_wait = resources_.clock.After(
          std::chrono::seconds(2), [this, instance_id] { host_.Stop(instance_id); });
    }
    return;
  }
  Instance instance = std::move(it->second);
  instances_.erase(it);
  if (instance.orphan) {  // the memory a failed checkpoint left with it
    Gpu& held = gpus_[instance.orphan_gpu];
    --held.leaving;
    instance.orphan.reset();
    if (!held.held && held.leaving == 0) device_held_[held.device] = false;
    RetryWaitingMemory(instance.orphan_gpu);
  }
  if (instance.state == InstanceState::kStarting || instance.state == InstanceState::kPreparing) {
    StartFailures& failures = start_failures_[instance.function];
    ++failures.in_a_row;
    failures.last = Now();
    failures.why = status;
  }
  if (instance.switcher) instance.switcher->Close();  // its snapshot goes back to the pool
  host_.Stop(instance_id);  // when the switch failed first, the process may still run
  RetryWaitingPool();
  if (instance.on_prepared) instance.on_prepared(status);
  CheckDrained(instance.function);
  // A detach in flight reports through Detached. A slice bound to the instance (starting,
  // reserved, restored, or waiting for the instance's detach), whatever its state now, is gone.
  for (GpuId id = 0; id < gpus_.size(); ++id) {
    Gpu& gpu = gpus_[id];
    for (auto slice_it = gpu.slices.begin(); slice_it != gpu.slices.end(); ++slice_it) {
      if (slice_it->second.instance != instance_id) continue;
      const FunctionId function = slice_it->first;
      Slice& slice = slice_it->second;
      std::vector<RequestId> lost;
      for (auto& [run_id, run] : slice.runs) {
        lost.insert(lost.end(), run.batch.begin(), run.batch.end());
        for (const RequestId request : run.batch) running_.erase(request);
        --gpu.runs_in_flight;
      }
      const double reserved = static_cast<double>(slice.reserve_bytes);
      if (!slice.runs.empty()) Account([&](auto& m) { m.Active(Now(), function, -reserved); });
      Account([&](auto& m) { m.Reserved(Now(), function, -reserved); });
      if (slice.state == SliceState::kWaitingMemory) std::erase(gpu.waiting_memory, function);
      gpu.slices.erase(slice_it);
      RetryWaitingMemory(id);
      spdlog::warn("instance {} of '{}' on GPU {} died: {}", instance_id, functions_[function].name,
                   id, status.ToString());
      if (scheduler_ != nullptr) scheduler_->OnInstanceDied(id, function, lost, status);
      return;
    }
  }
}

}  // namespace gshare
