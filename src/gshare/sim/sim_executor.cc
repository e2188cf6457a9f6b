#include "gshare/sim/sim_executor.h"

#include "gshare/common/clock.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>

namespace gshare {
namespace {

// The profiles the policy is given: each function's execution times off by a factor drawn
// uniformly in [1 - error, 1 + error] per function (its own stream of the seed).
std::vector<ResolvedFunction> PolicyProfiles(const std::vector<ResolvedFunction>& truth,
                                             const WorldModel& world) {
  std::vector<ResolvedFunction> profiles = truth;
  if (world.prior_error <= 0) return profiles;
  Random random(world.seed ^ 0x7072696f72ull);
  for (ResolvedFunction& f : profiles) {
    const double factor = random.Uniform(1 - world.prior_error, 1 + world.prior_error);
    for (Duration& d : f.exec_by_batch) {
      d = Duration(
          std::max<std::int64_t>(1, std::llround(static_cast<double>(d.count()) * factor)));
    }
  }
  return profiles;
}

Duration ScaleDuration(Duration d, double factor) {
  // Clamped to 30 days, as execution noise is: a straggler stays a representable time.
  const double ns = std::min(static_cast<double>(d.count()) * factor, 30 * 86400e9);
  return Duration(std::max<std::int64_t>(0, std::llround(ns)));
}

}  // namespace

SimulatedExecutor::SimulatedExecutor(const Workload& workload, Options options)
    : workload_(workload),
      functions_(PolicyProfiles(workload.functions, options.world)),
      options_(options),
      completion_(workload.requests.size(), TimePoint::max()),
      answered_(workload.requests.size(), false),
      started_(workload.requests.size(), false),
      instances_(workload.functions.size()),
      restore_random_(options.world.seed ^ 0x72657374ull),
      meter_({&workload.gpu, 1}, options.accounting_start) {
  if (options_.quantum <= Duration::zero()) options_.quantum = kDefaultComputeQuantum;
  // Each function starts with its min_instances warm (started before the replay).
  for (std::size_t f = 0; f < workload.functions.size(); ++f) {
    const int warm = std::max(0, workload.functions[f].min_instances);
    instances_[f].idle_since.assign(static_cast<std::size_t>(warm), TimePoint{});
  }
}

void SimulatedExecutor::Fail(Status status) {
  if (error_.ok()) error_ = std::move(status);
}

SimulatedExecutor::Gpu* SimulatedExecutor::CheckGpu(GpuId gpu, const char* call) {
  if (gpu >= gpus_.size() || !gpus_[gpu].held) {
    Fail(Internal(fmt::format("{}: GPU {} is not held", call, gpu)));
    return nullptr;
  }
  if (!gpus_[gpu].ready) {
    Fail(Internal(fmt::format("{}: GPU {} is still starting", call, gpu)));
    return nullptr;
  }
  return &gpus_[gpu];
}

int SimulatedExecutor::ExpiredInstances(FunctionId function) const {
  // Idle instances stop after instance_keep, oldest first, down to min_instances.
  const InstancePool& pool = instances_[function];
  const int keep_at_least = std::max(0, functions_[function].min_instances - pool.bound);
  int expired = 0;
  const int idle = static_cast<int>(pool.idle_since.size());
  while (expired < idle - keep_at_least &&
         pool.idle_since[static_cast<std::size_t>(expired)] + options_.instance_keep <= now_) {
    ++expired;
  }
  return expired;
}

InstanceView SimulatedExecutor::Instances(FunctionId function) const {
  InstanceView view;
  view.max_instances = functions_[function].max_instances;
  view.cold_start = options_.instance_cold_start;
  if (function >= instances_.size()) return view;
  const InstancePool& pool = instances_[function];
  view.bound = pool.bound;
  view.idle = static_cast<int>(pool.idle_since.size()) - ExpiredInstances(function);
  return view;
}

void SimulatedExecutor::UnbindInstance(FunctionId function) {
  InstancePool& pool = instances_[function];
  pool.bound -= 1;
  pool.idle_since.push_back(now_);
}

void SimulatedExecutor::Answer(RequestId id, AnswerOutcome outcome) {
  answered_[id] = true;
  if (outcome == AnswerOutcome::kOk) completion_[id] = now_;
  completed_ += 1;
  meter_.Answered(now_, workload_.requests[id], outcome);
  if (completed_ == workload_.requests.size()) meter_.Freeze(now_);
}

void SimulatedExecutor::LatestStartPassed(RequestId id) {
  if (answered_[id] || started_[id]) return;
  Answer(id, AnswerOutcome::kNeverRan);
  scheduler_->OnRequestCancelled(id, DeadlineExceeded("the request was not started by its latest "
                                                      "start"));
}

void SimulatedExecutor::FailRequest(RequestId id, const Status& status) {
  if (id >= workload_.requests.size() || answered_[id]) {
    return Fail(Internal(fmt::format("FailRequest: request {} is unknown or answered", id)));
  }
  if (status.ok()) return Fail(Internal("FailRequest: an OK status"));
  Answer(id, AnswerOutcome::kFailed);
}

Result<GpuId> SimulatedExecutor::AcquireGpu(GpuTypeId type, Duration startup) {
  if (type != 0) {
    Fail(Internal(fmt::format("AcquireGpu: no GPU type {}", type)));
    return Internal("AcquireGpu: unknown GPU type");
  }
  if (options_.max_gpus > 0 && gpus_held_ >= options_.max_gpus) {
    return ResourceExhausted(fmt::format("all {} GPUs are held", options_.max_gpus));
  }
  gpus_held_ += 1;
  const auto id = static_cast<GpuId>(gpus_.size());
  gpus_.emplace_back();
  Gpu& gpu = gpus_.back();
  gpu.held = true;
  gpu.ready = startup <= Duration::zero();
  if (options_.world.contended()) {
    // The first node with room (nodes are filled as a cluster packs its machines).
    std::size_t node = 0;
    while (node < nodes_.size() && nodes_[node].gpus >= options_.world.gpus_per_node) ++node;
    if (node == nodes_.size()) nodes_.emplace_back();
    nodes_[node].gpus += 1;
    gpu.node = node;
  }
  meter_.GpuAcquired(now_, 0);
  if (!gpu.ready) events_.Push(now_ + startup, Event{EventType::kGpuReady, id, 0, 0});
  return id;
}

void SimulatedExecutor::ReleaseGpu(GpuId gpu_id) {
  Gpu* gpu = CheckGpu(gpu_id, "ReleaseGpu");
  if (gpu == nullptr) return;
  if (!gpu->residents.empty() || gpu->current >= 0 || gpu->memory_used != 0) {
    Fail(Internal(fmt::format("ReleaseGpu: GPU {} still holds {} function(s)", gpu_id,
                              gpu->residents.size())));
    return;
  }
  gpu->held = false;
  if (options_.world.contended()) nodes_[gpu->node].gpus -= 1;
  gpu->residents = {};
  gpu->waiting = {};
  gpus_held_ -= 1;
  meter_.GpuReleased(now_, 0);
}

void SimulatedExecutor::Restore(GpuId gpu_id, FunctionId function, std::uint64_t reserve_bytes) {
  Gpu* gpu = CheckGpu(gpu_id, "Restore");
  if (gpu == nullptr) return;
  if (function >= functions_.size()) {
    return Fail(Internal(fmt::format("Restore: unknown function {}", function)));
  }
  if (!Instances(function).CanBind()) {
    return Fail(
        Internal(fmt::format("Restore: '{}' is at its {} instances", functions_[function].name,
                             functions_[function].max_instances)));
  }
  const ResolvedFunction& spec = functions_[function];
  if (gpu->residents.contains(function)) {
    return Fail(
        Internal(fmt::format("Restore: function '{}' is already on GPU {}", spec.name, gpu_id)));
  }
  if (reserve_bytes < spec.gpu_memory_bytes) {
    return Fail(Internal(fmt::format("Restore: reserving {} for '{}', which needs {}",
                                     FormatBytes(reserve_bytes), spec.name,
                                     FormatBytes(spec.gpu_memory_bytes))));
  }
  if (gpu->memory_used + reserve_bytes > workload_.gpu.memory_bytes) {
    return Fail(Internal(fmt::format("Restore: '{}' needs {} on GPU {}, which has {} free",
                                     spec.name, FormatBytes(reserve_bytes), gpu_id,
                                     FormatBytes(workload_.gpu.memory_bytes - gpu->memory_used))));
  }
  std::uint64_t offset = 0;
  if (options_.world.fragmentation) {
    const std::optional<std::uint64_t> range = FirstFit(*gpu, reserve_bytes);
    if (!range) {
      // The memory is free in total, but in pieces: the restore fails, as an allocator that
      // needs a contiguous range would.
      events_.Push(now_, Event{EventType::kRestoreFailed, gpu_id, function, reserve_bytes});
      return;
    }
    offset = *range;
    gpu->ranges.emplace(offset, reserve_bytes);
    RangesChanged(*gpu);
  }
  gpu->memory_used += reserve_bytes;
  Residency residency{reserve_bytes, ResidencyState::kRestoring, 0, 0, 0};
  residency.offset = offset;
  if (options_.record_schedule) {
    residency.record = log_.residencies.size();
    log_.residencies.push_back({gpu_id, function, now_, TimePoint::max(), TimePoint::max()});
  }
  gpu->residents.emplace(function, residency);
  meter_.Reserved(now_, function, static_cast<double>(reserve_bytes));
  meter_.Restored(now_, function, spec.model_bytes);

  // Bind a warm instance, or start one: its cold start comes before the copy.
  InstancePool& pool = instances_[function];
  Duration bind_delay{};
  const int expired = ExpiredInstances(function);
  pool.idle_since.erase(pool.idle_since.begin(), pool.idle_since.begin() + expired);
  if (!pool.idle_since.empty()) {
    pool.idle_since.pop_back();  // the most recently used
  } else {
    bind_delay = options_.instance_cold_start;
  }
  pool.bound += 1;

  Residency& placed = gpu->residents.at(function);
  if (options_.world.contended()) {
    const double factor = options_.world.restore_noise.none()
                              ? 1.0
                              : DrawNoiseFactor(options_.world.restore_noise, restore_random_);
    QueueTransfer(
        gpu_id, kToDevice,
        Transfer{function, static_cast<double>(spec.model_bytes) * factor, now_ + bind_delay,
                 ScaleDuration(workload_.gpu.restore_overhead, factor), false});
    return;
  }
  const TimePoint start = std::max(now_ + bind_delay, gpu->h2d_free_at);
  const TimePoint done = start + Noisy(workload_.gpu.RestoreTime(spec.model_bytes));
  placed.copy_start = start;
  placed.copy_done = done;
  placed.copy_started = true;
  gpu->h2d_free_at = done;
  events_.Push(done, Event{EventType::kRestoreDone, gpu_id, function, 0});
}

std::optional<std::uint64_t> SimulatedExecutor::FirstFit(const Gpu& gpu,
                                                         std::uint64_t bytes) const {
  std::uint64_t cursor = 0;
  for (const auto& [offset, size] : gpu.ranges) {
    if (offset - cursor >= bytes) return cursor;
    cursor = offset + size;
  }
  if (workload_.gpu.memory_bytes >= cursor && workload_.gpu.memory_bytes - cursor >= bytes) {
    return cursor;
  }
  return std::nullopt;
}

void SimulatedExecutor::RangesChanged(Gpu& gpu) const {
  gpu.largest_gap = LargestGapWithout(gpu, {});
}

std::uint64_t SimulatedExecutor::LargestGapWithout(const Gpu& gpu,
                                                   std::span<const std::uint64_t> skipped) const {
  // `skipped`: offsets of ranges counted as free, sorted.
  std::uint64_t cursor = 0;
  std::uint64_t largest = 0;
  for (const auto& [offset, size] : gpu.ranges) {
    if (std::binary_search(skipped.begin(), skipped.end(), offset)) continue;
    largest = std::max(largest, offset - cursor);
    cursor = offset + size;
  }
  const std::uint64_t memory = workload_.gpu.memory_bytes;
  if (memory > cursor) largest = std::max(largest, memory - cursor);
  return largest;
}

std::uint64_t SimulatedExecutor::LargestFreeRange(GpuId gpu) const {
  if (!options_.world.fragmentation) return UINT64_MAX;
  if (gpu >= gpus_.size()) return 0;
  return gpus_[gpu].ranges.empty() ? workload_.gpu.memory_bytes : gpus_[gpu].largest_gap;
}

std::uint64_t SimulatedExecutor::LargestFreeRangeWithout(
    GpuId gpu, std::span<const FunctionId> released) const {
  if (!options_.world.fragmentation) return UINT64_MAX;
  if (gpu >= gpus_.size()) return 0;
  const Gpu& g = gpus_[gpu];
  skipped_.clear();
  for (FunctionId f : released) {
    auto it = g.residents.find(f);
    if (it != g.residents.end() && it->second.state == ResidencyState::kResident) {
      skipped_.push_back(it->second.offset);
    }
  }
  if (skipped_.empty()) return LargestFreeRange(gpu);
  std::sort(skipped_.begin(), skipped_.end());
  return LargestGapWithout(g, skipped_);
}

Duration SimulatedExecutor::Noisy(Duration d) {
  if (options_.world.restore_noise.none()) return d;
  return ScaleDuration(d, DrawNoiseFactor(options_.world.restore_noise, restore_random_));
}

EvictOutcome SimulatedExecutor::Evict(GpuId gpu_id, FunctionId function, EvictHint hint) {
  Gpu* gpu = CheckGpu(gpu_id, "Evict");
  if (gpu == nullptr) return EvictOutcome::kDiscarded;
  auto it = gpu->residents.find(function);
  if (it == gpu->residents.end() || it->second.state != ResidencyState::kResident) {
    Fail(Internal(fmt::format("Evict: function {} is not resident on GPU {}", function, gpu_id)));
    return EvictOutcome::kDiscarded;
  }
  if (it->second.runs_in_flight > 0) {
    Fail(Internal(fmt::format("Evict: function {} is running on GPU {}", function, gpu_id)));
    return EvictOutcome::kDiscarded;
  }
  // The device copy is always clean here: a kDiscardIfClean hint discards.
  if (hint == EvictHint::kDiscardIfClean) {
    const std::uint64_t bytes = it->second.bytes;
    if (options_.world.fragmentation) {
      gpu->ranges.erase(it->second.offset);
      RangesChanged(*gpu);
    }
    if (options_.record_schedule) log_.residencies[it->second.record].released = now_;
    gpu->memory_used -= bytes;
    gpu->residents.erase(it);
    meter_.Reserved(now_, function, -static_cast<double>(bytes));
    UnbindInstance(function);
    return EvictOutcome::kDiscarded;
  }
  it->second.state = ResidencyState::kEvicting;
  const std::uint64_t model_bytes = functions_[function].model_bytes;
  meter_.Checkpointed(now_, function, model_bytes);
  if (options_.world.contended()) {
    const double factor = options_.world.restore_noise.none()
                              ? 1.0
                              : DrawNoiseFactor(options_.world.restore_noise, restore_random_);
    QueueTransfer(gpu_id, kToHost,
                  Transfer{function, static_cast<double>(model_bytes) * factor, now_, {}, false});
    return EvictOutcome::kCopying;
  }
  const TimePoint start = std::max(now_, gpu->d2h_free_at);
  const TimePoint done =
      start + Noisy(TransferTime(model_bytes, workload_.gpu.h2d_bytes_per_second));
  gpu->d2h_free_at = done;
  events_.Push(done, Event{EventType::kEvictDone, gpu_id, function, 0});
  return EvictOutcome::kCopying;
}

bool SimulatedExecutor::Resize(GpuId gpu_id, FunctionId function, std::uint64_t new_bytes) {
  Gpu* gpu = CheckGpu(gpu_id, "Resize");
  if (gpu == nullptr) return false;
  auto it = gpu->residents.find(function);
  if (it == gpu->residents.end() || it->second.state != ResidencyState::kResident) {
    Fail(Internal(fmt::format("Resize: function {} is not resident on GPU {}", function, gpu_id)));
    return false;
  }
  const ResolvedFunction& spec = functions_[function];
  Residency& residency = it->second;
  if (new_bytes < spec.gpu_memory_bytes + residency.batch_bytes_in_flight) {
    Fail(Internal(fmt::format("Resize: {} is below what '{}' needs on GPU {}",
                              FormatBytes(new_bytes), spec.name, gpu_id)));
    return false;
  }
  if (new_bytes > residency.bytes &&
      gpu->memory_used + (new_bytes - residency.bytes) > workload_.gpu.memory_bytes) {
    Fail(Internal(fmt::format("Resize: '{}' cannot grow to {} on GPU {}, which has {} free",
                              spec.name, FormatBytes(new_bytes), gpu_id,
                              FormatBytes(workload_.gpu.memory_bytes - gpu->memory_used))));
    return false;
  }
  if (options_.world.fragmentation && new_bytes != residency.bytes) {
    auto range = gpu->ranges.find(residency.offset);
    const auto next = std::next(range);
    const std::uint64_t limit =
        next == gpu->ranges.end() ? workload_.gpu.memory_bytes : next->first;
    if (new_bytes <= residency.bytes || residency.offset + new_bytes <= limit) {
      range->second = new_bytes;  // in place
    } else {
      // Not in place: move to a free range that holds it (its own range counts as free), or
      // refuse. A move copies the slice within the GPU's memory; its next run waits for it. A
      // slice with a run in flight cannot move.
      if (residency.runs_in_flight > 0) return false;
      gpu->ranges.erase(range);
      const std::optional<std::uint64_t> moved = FirstFit(*gpu, new_bytes);
      if (!moved) {
        gpu->ranges.emplace(residency.offset, residency.bytes);
        return false;
      }
      gpu->ranges.emplace(*moved, new_bytes);
      residency.offset = *moved;
      const double seconds =
          static_cast<double>(residency.bytes) / options_.world.move_bytes_per_second;
      residency.moved_until =
          std::max(now_, residency.moved_until) + Duration(std::llround(seconds * 1e9));
    }
    RangesChanged(*gpu);
  }
  const double delta = static_cast<double>(new_bytes) - static_cast<double>(residency.bytes);
  gpu->memory_used = gpu->memory_used + new_bytes - residency.bytes;
  residency.bytes = new_bytes;
  meter_.Reserved(now_, function, delta);
  if (residency.runs_in_flight > 0) meter_.Active(now_, function, delta);
  return true;
}

void SimulatedExecutor::Run(GpuId gpu_id, FunctionId function, std::span<const RequestId> batch) {
  StartRun(gpu_id, function, batch, /*pipelined=*/false);
}

void SimulatedExecutor::RunPipelined(GpuId gpu_id, FunctionId function,
                                     std::span<const RequestId> batch) {
  StartRun(gpu_id, function, batch, /*pipelined=*/true);
}

void SimulatedExecutor::StartRun(GpuId gpu_id, FunctionId function,
                                 std::span<const RequestId> batch, bool pipelined) {
  Gpu* gpu = CheckGpu(gpu_id, pipelined ? "RunPipelined" : "Run");
  if (gpu == nullptr) return;
  auto it = gpu->residents.find(function);
  const ResidencyState wanted = pipelined ? ResidencyState::kRestoring : ResidencyState::kResident;
  if (it == gpu->residents.end() || it->second.state != wanted) {
    return Fail(Internal(fmt::format("{}: function {} is not {} on GPU {}",
                                     pipelined ? "RunPipelined" : "Run", function,
                                     pipelined ? "restoring" : "resident", gpu_id)));
  }
  if (batch.empty()) return Fail(Internal("Run: empty batch"));
  const ResolvedFunction& spec = functions_[function];
  const std::uint64_t batch_bytes =
      spec.MemoryForBatch(static_cast<int>(batch.size())) - spec.gpu_memory_bytes;
  if (spec.gpu_memory_bytes + it->second.batch_bytes_in_flight + batch_bytes > it->second.bytes) {
    return Fail(Internal(fmt::format(
        "Run: a batch of {} of '{}' needs {} more than its GPU memory; its slice on GPU {} is {}",
        batch.size(), spec.name, FormatBytes(batch_bytes), gpu_id, FormatBytes(it->second.bytes))));
  }
  // The run follows the truth; the policy was given spec's profile (functions()).
  const ResolvedFunction& truth = workload_.functions[function];
  Duration exec = truth.ExecLatency(static_cast<int>(batch.size()));
  Duration longest_override{};
  double factor_sum = 0;
  for (RequestId id : batch) {
    if (id >= workload_.requests.size() || workload_.requests[id].function != function) {
      return Fail(Internal(fmt::format("Run: request {} is not a request of '{}'", id, spec.name)));
    }
    if (answered_[id]) return Fail(Internal(fmt::format("Run: request {} is answered", id)));
    if (started_[id]) return Fail(Internal(fmt::format("Run: request {} is running", id)));
    if (!workload_.exec_times.empty()) {
      longest_override = std::max(longest_override, workload_.exec_times[id]);
    }
    if (!workload_.exec_factors.empty()) factor_sum += workload_.exec_factors[id];
  }
  if (longest_override > Duration::zero()) {
    // The trace gave this request's execution time: scale the batch latency by it.
    const double scale = static_cast<double>(longest_override.count()) /
                         static_cast<double>(truth.ExecLatency(1).count());
    exec = Duration(static_cast<std::int64_t>(static_cast<double>(exec.count()) * scale));
  }
  if (!workload_.exec_factors.empty()) {
    // Execution noise: the batch latency times the mean factor of its requests (at least 1 ns).
    // Clamped to 30 days: a trace duration (at most a day) times a straggler's factor stays a
    // finite, representable time.
    const double mean = factor_sum / static_cast<double>(batch.size());
    const double ns = std::min(static_cast<double>(exec.count()) * mean, 30 * 86400e9);
    exec = Duration(std::max<std::int64_t>(1, static_cast<std::int64_t>(ns)));
  }

  std::int32_t index;
  if (!free_executions_.empty()) {
    index = free_executions_.back();
    free_executions_.pop_back();
  } else {
    index = static_cast<std::int32_t>(executions_.size());
    executions_.emplace_back();
  }
  for (RequestId id : batch) started_[id] = true;
  Execution& execution = executions_[static_cast<std::size_t>(index)];
  execution.function = function;
  execution.remaining = exec;
  execution.batch.assign(batch.begin(), batch.end());
  execution.batch_bytes = batch_bytes;
  execution.started = now_;
  it->second.batch_bytes_in_flight += batch_bytes;
  if (options_.record_schedule) {
    execution.record = log_.runs.size();
    log_.runs.push_back({gpu_id, function, it->second.record,
                         std::vector<RequestId>(batch.begin(), batch.end()), now_,
                         TimePoint::max()});
  }
  if (it->second.runs_in_flight++ == 0) ChangeActive(function, it->second.bytes, true);

  if (it->second.moved_until > now_) {
    // The slice is being moved within the GPU's memory (a Resize): its run waits for the copy,
    // which is not the run's execution time (what the policy learns from).
    execution.started = it->second.moved_until;
    events_.Push(it->second.moved_until, Event{EventType::kEnterCompute, gpu_id, function,
                                               static_cast<std::uint64_t>(index)});
    return;
  }
  if (pipelined) {
    if (!it->second.copy_started) {
      // Contended world: the copy's speed is known when it starts.
      it->second.pipelined_waiting.push_back(index);
      return;
    }
    return TimePipelined(gpu_id, index);
  }
  EnterCompute(gpu_id, index);
}

void SimulatedExecutor::TimePipelined(GpuId gpu_id, std::int32_t index) {
  // Ten layer groups: the run's compute starts when its first group is on the GPU, and late
  // enough that it never waits for a group: alone on the GPU it ends max(L, E) + min(L, E) / 10
  // after the copy starts. (In the contended world L is the copy's time at the speed it started
  // with; a run whose compute ends before its copy is answered when the copy ends.)
  const Execution& execution = executions_[static_cast<std::size_t>(index)];
  const Residency& residency = gpus_[gpu_id].residents.at(execution.function);
  const Duration exec = execution.remaining;
  const Duration load = residency.copy_done - residency.copy_start;
  const Duration group = load / Executor::kPipelineGroups;
  const Duration wait_for_bytes = load - exec + exec / Executor::kPipelineGroups;
  const TimePoint enter = residency.copy_start + std::max(group, wait_for_bytes);
  if (enter > now_) {
    events_.Push(enter, Event{EventType::kEnterCompute, gpu_id, execution.function,
                              static_cast<std::uint64_t>(index)});
    return;
  }
  EnterCompute(gpu_id, index);
}

void SimulatedExecutor::EnterCompute(GpuId gpu_id, std::int32_t index) {
  Gpu* gpu = &gpus_[gpu_id];
  if (gpu->current < 0) {
    gpu->current = index;
    StartSlice(gpu_id);
    return;
  }
  gpu->waiting.push_back(index);
  if (gpu->waiting.size() == 1) {
    // The running execution had the GPU to itself: its quantum now ends at the next boundary.
    const Duration q = options_.quantum;
    const auto elapsed = now_ - gpu->slice_start;
    const auto quanta = (elapsed.count() + q.count() - 1) / q.count();
    TimePoint boundary = gpu->slice_start + Duration(std::max<std::int64_t>(quanta, 1) * q.count());
    if (boundary < gpu->slice_end) {
      gpu->slice_end = boundary;
      events_.Push(boundary, Event{EventType::kSliceEnd, gpu_id, 0, ++gpu->slice_generation});
    }
  }
}

void SimulatedExecutor::SetTimer(TimePoint at, std::uint64_t token) {
  events_.Push(std::max(at, now_), Event{EventType::kTimer, 0, 0, token});
}

void SimulatedExecutor::StartSlice(GpuId gpu_id) {
  Gpu& gpu = gpus_[gpu_id];
  const Execution& execution = executions_[static_cast<std::size_t>(gpu.current)];
  gpu.slice_start = now_;
  const Duration length =
      gpu.waiting.empty() ? execution.remaining : std::min(execution.remaining, options_.quantum);
  gpu.slice_end = now_ + length;
  events_.Push(gpu.slice_end, Event{EventType::kSliceEnd, gpu_id, 0, ++gpu.slice_generation});
}

void SimulatedExecutor::OnSliceEnd(GpuId gpu_id, std::uint64_t generation) {
  Gpu& gpu = gpus_[gpu_id];
  if (generation != gpu.slice_generation || gpu.current < 0) return;  // superseded
  const std::int32_t index = gpu.current;
  Execution& execution = executions_[static_cast<std::size_t>(index)];
  execution.remaining -= now_ - gpu.slice_start;
  if (execution.remaining <= Duration::zero()) {
    gpu.current = -1;
    if (!gpu.waiting.empty()) {
      gpu.current = gpu.waiting.front();
      gpu.waiting.pop_front();
      StartSlice(gpu_id);
    }
    CompleteExecution(gpu_id, index);
    return;
  }
  if (!gpu.waiting.empty()) {  // quantum over: round robin
    gpu.waiting.push_back(index);
    gpu.current = gpu.waiting.front();
    gpu.waiting.pop_front();
  }
  StartSlice(gpu_id);
}

void SimulatedExecutor::ChangeActive(FunctionId function, std::uint64_t bytes, bool start) {
  const double delta = static_cast<double>(bytes);
  meter_.Active(now_, function, start ? delta : -delta);
}

void SimulatedExecutor::CompleteExecution(GpuId gpu_id, std::int32_t index) {
  Execution& execution = executions_[static_cast<std::size_t>(index)];
  const FunctionId function = execution.function;
  // The batch leaves the slot during the callback: the scheduler may start runs from inside it.
  std::vector<RequestId> batch;
  batch.swap(execution.batch);
  if (options_.record_schedule) log_.runs[execution.record].end = now_;
  for (RequestId id : batch) {
    if (answered_[id]) {
      return Fail(Internal(fmt::format("request {} was answered while it ran", id)));
    }
  }
  Residency& residency = gpus_[gpu_id].residents.at(function);
  if (residency.state == ResidencyState::kRestoring) {
    // Contended world: a pipelined run outran its copy; it ends with the copy.
    batch.swap(execution.batch);
    residency.ended_before_restore.push_back(index);
    return;
  }
  residency.batch_bytes_in_flight -= execution.batch_bytes;
  if (--residency.runs_in_flight == 0) ChangeActive(function, residency.bytes, false);
  for (RequestId id : batch) Answer(id, AnswerOutcome::kOk);
  scheduler_->OnRunDone(gpu_id, function, batch, RunResult{Status::Ok(), now_ - execution.started});
  batch.clear();  // keep the capacity for the slot's next run
  executions_[static_cast<std::size_t>(index)].batch.swap(batch);
  free_executions_.push_back(index);
}

void SimulatedExecutor::Dispatch(const Event& event) {
  switch (event.type) {
    case EventType::kGpuReady:
      if (event.gpu < gpus_.size() && gpus_[event.gpu].held) {
        gpus_[event.gpu].ready = true;
        scheduler_->OnGpuReady(event.gpu);
      }
      return;
    case EventType::kRestoreDone:
      return FinishRestore(event.gpu, event.function);
    case EventType::kEvictDone:
      return FinishCheckpoint(event.gpu, event.function);
    case EventType::kSliceEnd:
      OnSliceEnd(event.gpu, event.value);
      return;
    case EventType::kTimer:
      scheduler_->OnTimer(event.value);
      return;
    case EventType::kEnterCompute:
      EnterCompute(event.gpu, static_cast<std::int32_t>(event.value));
      return;
    case EventType::kLatestStart:
      LatestStartPassed(event.value);
      return;
    case EventType::kTransferStep:
      OnTransferStep(event.gpu, static_cast<int>(event.function), event.value);
      return;
    case EventType::kRestoreFailed:
      scheduler_->OnRestoreDone(
          event.gpu, event.function,
          ResourceExhausted(fmt::format("no free range of GPU {} holds {} (its memory is "
                                        "fragmented: the largest free range is {})",
                                        event.gpu, FormatBytes(event.value),
                                        FormatBytes(LargestFreeRange(event.gpu)))));
      return;
  }
}

void SimulatedExecutor::FinishRestore(GpuId gpu_id, FunctionId function) {
  Gpu& gpu = gpus_[gpu_id];
  Residency& residency = gpu.residents.at(function);
  residency.state = ResidencyState::kResident;
  if (options_.record_schedule) log_.residencies[residency.record].ready = now_;
  std::vector<std::int32_t> ended;
  ended.swap(residency.ended_before_restore);
  scheduler_->OnRestoreDone(gpu_id, function, Status::Ok());
  for (const std::int32_t index : ended) CompleteExecution(gpu_id, index);
}

void SimulatedExecutor::FinishCheckpoint(GpuId gpu_id, FunctionId function) {
  Gpu& gpu = gpus_[gpu_id];
  auto it = gpu.residents.find(function);
  const std::uint64_t bytes = it->second.bytes;
  if (options_.record_schedule) log_.residencies[it->second.record].released = now_;
  if (options_.world.fragmentation) {
    gpu.ranges.erase(it->second.offset);
    RangesChanged(gpu);
  }
  gpu.memory_used -= bytes;
  gpu.residents.erase(it);
  meter_.Reserved(now_, function, -static_cast<double>(bytes));
  UnbindInstance(function);
  scheduler_->OnEvictDone(gpu_id, function, Status::Ok());
}

// The contended world's copies: a fluid model. Each GPU has a FIFO engine per direction; the
// front copy waits for its instance, pays its fixed overhead, then moves bytes. Every copy moving
// bytes on a node gets an equal share of the node's host bandwidth, at most its GPU's link; when
// one starts or ends, the others on its node are brought up to date and re-timed (the events
// they had pending go stale by generation).
void SimulatedExecutor::QueueTransfer(GpuId gpu_id, int direction, Transfer transfer) {
  CopyEngine& engine = gpus_[gpu_id].engines[direction];
  engine.queue.push_back(transfer);
  if (engine.queue.size() == 1) StartFront(gpu_id, direction);
}

void SimulatedExecutor::StartFront(GpuId gpu_id, int direction) {
  Gpu& gpu = gpus_[gpu_id];
  CopyEngine& engine = gpu.engines[direction];
  const Transfer& front = engine.queue.front();
  const TimePoint start = std::max(now_, front.ready_at);
  if (direction == kToDevice) {
    // Pipelined runs are timed on the speed the copy would have if it started moving now.
    Residency& residency = gpu.residents.at(front.function);
    const auto& moving = nodes_[gpu.node].moving;
    const double rate =
        std::min(workload_.gpu.h2d_bytes_per_second,
                 options_.world.host_bytes_per_second / static_cast<double>(moving.size() + 1));
    residency.copy_start = start;
    residency.copy_done =
        start + front.overhead + Duration(std::llround(front.bytes_left / rate * 1e9));
    residency.copy_started = true;
    std::vector<std::int32_t> waiting;
    waiting.swap(residency.pipelined_waiting);
    for (const std::int32_t index : waiting) TimePipelined(gpu_id, index);
  }
  events_.Push(start + front.overhead,
               Event{EventType::kTransferStep, gpu_id, static_cast<FunctionId>(direction),
                     ++engine.generation});
}

void SimulatedExecutor::OnTransferStep(GpuId gpu_id, int direction, std::uint64_t generation) {
  Gpu& gpu = gpus_[gpu_id];
  CopyEngine& engine = gpu.engines[direction];
  if (generation != engine.generation || engine.queue.empty()) return;  // re-timed since
  Node& node = nodes_[gpu.node];
  CatchUpNode(gpu.node);
  Transfer& front = engine.queue.front();
  if (!front.moving) {
    front.moving = true;
    node.moving.emplace_back(gpu_id, direction);
    PaceNode(gpu.node);
    return;
  }
  // Its bytes are all moved.
  const FunctionId function = front.function;
  node.moving.erase(
      std::find(node.moving.begin(), node.moving.end(), std::pair<GpuId, int>(gpu_id, direction)));
  engine.queue.pop_front();
  PaceNode(gpu.node);
  if (!engine.queue.empty()) StartFront(gpu_id, direction);
  if (direction == kToDevice) {
    FinishRestore(gpu_id, function);
  } else {
    FinishCheckpoint(gpu_id, function);
  }
}

void SimulatedExecutor::CatchUpNode(std::size_t node) {
  for (const auto& [gpu_id, direction] : nodes_[node].moving) {
    CopyEngine& engine = gpus_[gpu_id].engines[direction];
    Transfer& front = engine.queue.front();
    front.bytes_left =
        std::max(0.0, front.bytes_left - engine.rate * ToSeconds(now_ - engine.since));
    engine.since = now_;
  }
}

void SimulatedExecutor::PaceNode(std::size_t node) {
  const auto& moving = nodes_[node].moving;
  if (moving.empty()) return;
  const double rate =
      std::min(workload_.gpu.h2d_bytes_per_second,
               options_.world.host_bytes_per_second / static_cast<double>(moving.size()));
  for (const auto& [gpu_id, direction] : moving) {
    CopyEngine& engine = gpus_[gpu_id].engines[direction];
    engine.rate = rate;
    engine.since = now_;
    const double ns = std::ceil(engine.queue.front().bytes_left / rate * 1e9);
    events_.Push(now_ + Duration(static_cast<std::int64_t>(ns)),
                 Event{EventType::kTransferStep, gpu_id, static_cast<FunctionId>(direction),
                       ++engine.generation});
  }
}

Status SimulatedExecutor::RunToEnd(const std::function<void(TimePoint, std::uint64_t)>& progress) {
  if (scheduler_ == nullptr) return FailedPrecondition("SimulatedExecutor: no scheduler set");
  const auto& requests = workload_.requests;
  const SteadyClock& wall = SteadyClock::Shared();  // the decisions' own latency, when timed
  std::size_t next = 0;
  while (error_.ok()) {
    const bool have_event = !events_.empty();
    const bool have_arrival = next < requests.size();
    if (!have_event && !have_arrival) break;
    // Events before arrivals at equal times: completions free resources first.
    const TimePoint wall_start = options_.time_decisions ? wall.Now() : TimePoint{};
    if (have_arrival && (!have_event || requests[next].arrival < events_.Top().time)) {
      now_ = requests[next].arrival;
      if (requests[next].latest_start != TimePoint::max()) {
        events_.Push(std::max(requests[next].latest_start, now_),
                     Event{EventType::kLatestStart, 0, 0, requests[next].id});
      }
      scheduler_->OnRequest(requests[next]);
      ++next;
    } else {
      const auto entry = events_.Pop();
      now_ = entry.time;
      Dispatch(entry.payload);
    }
    if (options_.time_decisions) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(wall.Now() - wall_start).count();
      decision_ns_.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(ns, UINT32_MAX)));
    }
    ++events_processed_;
    if (progress && (events_processed_ & 0xFFFF) == 0) progress(now_, completed_);
  }
  GSHARE_RETURN_IF_ERROR(error_.WithContext(
      fmt::format("policy '{}' at t={:.6f}s", scheduler_->name(), SinceEpochSeconds(now_))));
  if (completed_ != requests.size()) {
    return Internal(fmt::format("policy '{}' left {} of {} requests unserved", scheduler_->name(),
                                requests.size() - completed_, requests.size()));
  }
  meter_.Freeze(now_);
  if (progress) progress(now_, completed_);
  return Status::Ok();
}

}  // namespace gshare
