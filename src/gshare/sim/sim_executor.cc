#include "gshare/sim/sim_executor.h"

#include "gshare/common/clock.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>

namespace gshare {

SimulatedExecutor::SimulatedExecutor(const Workload& workload, Options options)
    : workload_(workload),
      functions_(workload.functions),
      options_(options),
      completion_(workload.requests.size(), TimePoint::max()),
      answered_(workload.requests.size(), false),
      started_(workload.requests.size(), false),
      instances_(workload.functions.size()),
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
  gpu->memory_used += reserve_bytes;
  Residency residency{reserve_bytes, ResidencyState::kRestoring, 0, 0, 0};
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

  const TimePoint start = std::max(now_ + bind_delay, gpu->h2d_free_at);
  const TimePoint done = start + workload_.gpu.RestoreTime(spec.model_bytes);
  Residency& placed = gpu->residents.at(function);
  placed.copy_start = start;
  placed.copy_done = done;
  gpu->h2d_free_at = done;
  gpu->copies_in_flight += 1;
  events_.Push(done, Event{EventType::kRestoreDone, gpu_id, function, 0});
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
  const TimePoint start = std::max(now_, gpu->d2h_free_at);
  const TimePoint done = start + TransferTime(model_bytes, workload_.gpu.h2d_bytes_per_second);
  gpu->d2h_free_at = done;
  gpu->copies_in_flight += 1;
  events_.Push(done, Event{EventType::kEvictDone, gpu_id, function, 0});
  return EvictOutcome::kCopying;
}

void SimulatedExecutor::Resize(GpuId gpu_id, FunctionId function, std::uint64_t new_bytes) {
  Gpu* gpu = CheckGpu(gpu_id, "Resize");
  if (gpu == nullptr) return;
  auto it = gpu->residents.find(function);
  if (it == gpu->residents.end() || it->second.state != ResidencyState::kResident) {
    return Fail(
        Internal(fmt::format("Resize: function {} is not resident on GPU {}", function, gpu_id)));
  }
  const ResolvedFunction& spec = functions_[function];
  Residency& residency = it->second;
  if (new_bytes < spec.gpu_memory_bytes + residency.batch_bytes_in_flight) {
    return Fail(Internal(fmt::format("Resize: {} is below what '{}' needs on GPU {}",
                                     FormatBytes(new_bytes), spec.name, gpu_id)));
  }
  if (new_bytes > residency.bytes &&
      gpu->memory_used + (new_bytes - residency.bytes) > workload_.gpu.memory_bytes) {
    return Fail(Internal(fmt::format("Resize: '{}' cannot grow to {} on GPU {}, which has {} free",
                                     spec.name, FormatBytes(new_bytes), gpu_id,
                                     FormatBytes(workload_.gpu.memory_bytes - gpu->memory_used))));
  }
  const double delta = static_cast<double>(new_bytes) - static_cast<double>(residency.bytes);
  gpu->memory_used = gpu->memory_used + new_bytes - residency.bytes;
  residency.bytes = new_bytes;
  meter_.Reserved(now_, function, delta);
  if (residency.runs_in_flight > 0) meter_.Active(now_, function, delta);
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
  Duration exec = spec.ExecLatency(static_cast<int>(batch.size()));
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
                         static_cast<double>(spec.ExecLatency(1).count());
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

  if (pipelined) {
    // Ten layer groups: the run's compute starts when its first group is on the GPU, and late
    // enough that it never waits for a group: alone on the GPU it ends max(L, E) + min(L, E) / 10
    // after the copy starts.
    const Duration load = it->second.copy_done - it->second.copy_start;
    const Duration group = load / Executor::kPipelineGroups;
    const Duration wait_for_bytes = load - exec + exec / Executor::kPipelineGroups;
    const TimePoint enter = it->second.copy_start + std::max(group, wait_for_bytes);
    if (enter > now_) {
      events_.Push(enter, Event{EventType::kEnterCompute, gpu_id, function,
                                static_cast<std::uint64_t>(index)});
      return;
    }
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
    case EventType::kRestoreDone: {
      Gpu& gpu = gpus_[event.gpu];
      gpu.copies_in_flight -= 1;
      Residency& residency = gpu.residents.at(event.function);
      residency.state = ResidencyState::kResident;
      if (options_.record_schedule) log_.residencies[residency.record].ready = now_;
      scheduler_->OnRestoreDone(event.gpu, event.function, Status::Ok());
      return;
    }
    case EventType::kEvictDone: {
      Gpu& gpu = gpus_[event.gpu];
      gpu.copies_in_flight -= 1;
      auto it = gpu.residents.find(event.function);
      const std::uint64_t bytes = it->second.bytes;
      if (options_.record_schedule) log_.residencies[it->second.record].released = now_;
      gpu.memory_used -= bytes;
      gpu.residents.erase(it);
      meter_.Reserved(now_, event.function, -static_cast<double>(bytes));
      UnbindInstance(event.function);
      scheduler_->OnEvictDone(event.gpu, event.function, Status::Ok());
      return;
    }
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
