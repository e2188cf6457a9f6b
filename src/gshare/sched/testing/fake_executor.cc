#include "gshare/sched/testing/fake_executor.h"

#include <fmt/format.h>

#include <algorithm>

namespace gshare::testing {

FakeExecutor::FakeExecutor(std::vector<GpuType> gpu_types, FunctionRegistry* functions,
                           FaultPlan plan)
    : gpu_types_(std::move(gpu_types)), functions_(functions), plan_(plan) {}

void FakeExecutor::Violation(std::string what) {
  violations_.push_back(fmt::format("t={:.6f}s: {}", SinceEpochSeconds(now_), what));
}

FakeExecutor::Gpu* FakeExecutor::Check(GpuId gpu, const char* call) {
  if (gpu >= gpus_.size() || !gpus_[gpu].held) {
    Violation(fmt::format("{}: GPU {} is not held", call, gpu));
    return nullptr;
  }
  if (!gpus_[gpu].ready) {
    Violation(fmt::format("{}: GPU {} is still starting", call, gpu));
    return nullptr;
  }
  return &gpus_[gpu];
}

const GpuType& FakeExecutor::TypeOf(GpuId gpu) const {
  if (gpu >= gpus_.size()) violations_.push_back(fmt::format("TypeOf: no GPU {}", gpu));
  return gpu_types_[gpu < gpus_.size() ? gpus_[gpu].type : 0];
}

void FakeExecutor::Arrive(const Request& request) {
  events_.Push(request.arrival, Event{Kind::kArrival, 0, request.function, request.id});
  if (request.latest_start != TimePoint::max()) {
    events_.Push(std::max(request.latest_start, request.arrival),
                 Event{Kind::kCancel, 0, 0, request.id});
  }
  requests_.emplace(request.id, request);
}

void FakeExecutor::CancelAt(TimePoint at, RequestId request) {
  events_.Push(at, Event{Kind::kCancel, 0, 1, request});
}

void FakeExecutor::Cancel(RequestId id, const Status& status) {
  if (!delivered_.contains(id) || answers_.contains(id) || running_.contains(id)) return;
  ++never_ran_;
  Give(id, false, status.code());
  scheduler_->OnRequestCancelled(id, status);
}

bool FakeExecutor::Drained(FunctionId function) const {
  for (const Gpu& gpu : gpus_) {
    if (gpu.held && gpu.slices.contains(function)) return false;
  }
  if (auto it = bound_.find(function); it != bound_.end() && it->second > 0) return false;
  for (const RequestId id : delivered_) {
    if (requests_.at(id).function == function && !answers_.contains(id)) return false;
  }
  return true;
}

void FakeExecutor::AddFunctionAt(TimePoint at, ResolvedFunction function) {
  events_.Push(at, Event{Kind::kAdd, 0, 0, pending_adds_.size()});
  pending_adds_.push_back(std::move(function));
}

void FakeExecutor::RemoveFunctionAt(TimePoint at, FunctionId function) {
  events_.Push(at, Event{Kind::kRemove, 0, function, 0});
}

std::size_t FakeExecutor::slices() const {
  std::size_t n = 0;
  for (const Gpu& gpu : gpus_) {
    if (gpu.held) n += gpu.slices.size();
  }
  return n;
}

InstanceView FakeExecutor::Instances(FunctionId function) const {
  InstanceView view;
  if (!functions_->contains(function)) {
    violations_.push_back(fmt::format("Instances: no function {}", function));
    return view;
  }
  view.max_instances = functions_->Get(function).max_instances;
  view.cold_start = plan_.cold_start;
  if (auto it = bound_.find(function); it != bound_.end()) view.bound = it->second;
  if (auto it = idle_.find(function); it != idle_.end()) view.idle = it->second;
  return view;
}

void FakeExecutor::Unbind(FunctionId function) {
  bound_[function] -= 1;
  idle_[function] += 1;
}

Result<GpuId> FakeExecutor::AcquireGpu(GpuTypeId type, Duration startup) {
  if (type >= gpu_types_.size()) {
    Violation(fmt::format("AcquireGpu: no GPU type {}", type));
    return Internal("unknown GPU type");
  }
  if (plan_.refuse_all_gpus || (plan_.refuse_first_type && type == 0) ||
      (plan_.max_gpus > 0 && gpus_held_ >= plan_.max_gpus)) {
    ++gpus_refused_;
    return ResourceExhausted("no free GPU");
  }
  const auto id = static_cast<GpuId>(gpus_.size());
  Gpu gpu;
  gpu.type = type;
  gpu.held = true;
  gpu.ready = startup <= Duration::zero();
  gpus_.push_back(gpu);
  ++gpus_held_;
  peak_gpus_held_ = std::max(peak_gpus_held_, gpus_held_);
  types_acquired_.insert(type);
  if (!gpus_.back().ready) events_.Push(now_ + startup, Event{Kind::kGpuReady, id, 0, 0});
  return id;
}

void FakeExecutor::ReleaseGpu(GpuId gpu_id) {
  Gpu* gpu = Check(gpu_id, "ReleaseGpu");
  if (gpu == nullptr) return;
  if (!gpu->slices.empty()) {
    return Violation(
        fmt::format("ReleaseGpu: GPU {} still has {} slice(s)", gpu_id, gpu->slices.size()));
  }
  gpu->held = false;
  --gpus_held_;
  if (!gpu->restored) ++gpus_never_used_;
}

void FakeExecutor::Restore(GpuId gpu_id, FunctionId function, std::uint64_t reserve_bytes) {
  Gpu* gpu = Check(gpu_id, "Restore");
  if (gpu == nullptr) return;
  if (!functions_->contains(function)) return Violation("Restore: unknown function");
  gpu->restored = true;
  const ResolvedFunction& spec = functions_->Get(function);
  if (gpu->slices.contains(function)) {
    return Violation(fmt::format("Restore: '{}' already has a slice on GPU {}", spec.name, gpu_id));
  }
  if (reserve_bytes < spec.gpu_memory_bytes) {
    return Violation(fmt::format("Restore: {} is less than '{}' needs", reserve_bytes, spec.name));
  }
  if (gpu->used + reserve_bytes > gpu_types_[gpu->type].memory_bytes) {
    return Violation(fmt::format("Restore: '{}' does not fit on GPU {}", spec.name, gpu_id));
  }
  if (!Instances(function).CanBind()) {
    return Violation(fmt::format("Restore: '{}' is at its max_instances", spec.name));
  }
  Duration delay{};
  if (idle_[function] > 0) {
    idle_[function] -= 1;
  } else {
    delay = plan_.cold_start;
  }
  bound_[function] += 1;
  ++restores_;
  Slice slice;
  slice.bytes = reserve_bytes;
  slice.generation = next_generation_++;
  slice.write_generation = snapshot_generation_[function];
  ++restore_count_;
  const auto every = [&](int n) {
    return n > 0 && restore_count_ % static_cast<std::uint64_t>(n) == 0;
  };
  slice.fail_restore =
      every(plan_.fail_restore_every) ||
      (plan_.fail_restores_of >= 0 && function == static_cast<FunctionId>(plan_.fail_restores_of));
  slice.kill_restore = !slice.fail_restore && every(plan_.kill_restoring_every);
  gpu->used += reserve_bytes;
  gpu->slices.emplace(function, slice);
  events_.Push(now_ + delay + gpu_types_[gpu->type].RestoreTime(spec.model_bytes),
               Event{Kind::kRestoreDone, gpu_id, function, slice.generation});
}

EvictOutcome FakeExecutor::Evict(GpuId gpu_id, FunctionId function, EvictHint hint) {
  Gpu* gpu = Check(gpu_id, "Evict");
  if (gpu == nullptr) return EvictOutcome::kDiscarded;
  auto it = gpu->slices.find(function);
  if (it == gpu->slices.end() || it->second.state != SliceState::kResident) {
    Violation(fmt::format("Evict: function {} is not resident on GPU {}", function, gpu_id));
    return EvictOutcome::kDiscarded;
  }
  if (it->second.runs > 0) {
    Violation(fmt::format("Evict: function {} is running on GPU {}", function, gpu_id));
    return EvictOutcome::kDiscarded;
  }
  const bool clean = it->second.write_generation == snapshot_generation_[function];
  if (hint == EvictHint::kDiscardIfClean && clean) {
    gpu->used -= it->second.bytes;
    gpu->slices.erase(it);
    Unbind(function);
    return EvictOutcome::kDiscarded;
  }
  ++copies_back_;
  it->second.state = SliceState::kEvicting;
  events_.Push(now_ + TransferTime(functions_->Get(function).model_bytes,
                                   gpu_types_[gpu->type].h2d_bytes_per_second),
               Event{Kind::kEvictDone, gpu_id, function, it->second.generation});
  return EvictOutcome::kCopying;
}

bool FakeExecutor::Resize(GpuId gpu_id, FunctionId function, std::uint64_t new_bytes) {
  Gpu* gpu = Check(gpu_id, "Resize");
  if (gpu == nullptr) return false;
  auto it = gpu->slices.find(function);
  if (it == gpu->slices.end() || it->second.state != SliceState::kResident) {
    Violation(fmt::format("Resize: function {} is not resident on GPU {}", function, gpu_id));
    return false;
  }
  if (new_bytes < functions_->Get(function).gpu_memory_bytes + it->second.batch_bytes) {
    Violation("Resize: below what the function and its runs in flight need");
    return false;
  }
  if (gpu->used - it->second.bytes + new_bytes > gpu_types_[gpu->type].memory_bytes) {
    Violation("Resize: does not fit");
    return false;
  }
  gpu->used = gpu->used - it->second.bytes + new_bytes;
  it->second.bytes = new_bytes;
  return true;
}

void FakeExecutor::Run(GpuId gpu_id, FunctionId function, std::span<const RequestId> batch) {
  Gpu* gpu = Check(gpu_id, "Run");
  if (gpu == nullptr) return;
  auto it = gpu->slices.find(function);
  if (it == gpu->slices.end() || it->second.state != SliceState::kResident) {
    return Violation(fmt::format("Run: function {} is not resident on GPU {}", function, gpu_id));
  }
  const ResolvedFunction& spec = functions_->Get(function);
  if (batch.empty() || batch.size() > static_cast<std::size_t>(spec.max_batch)) {
    return Violation(fmt::format("Run: a batch of {} of '{}'", batch.size(), spec.name));
  }
  const std::uint64_t batch_bytes =
      spec.MemoryForBatch(static_cast<int>(batch.size())) - spec.gpu_memory_bytes;
  if (spec.gpu_memory_bytes + it->second.batch_bytes + batch_bytes > it->second.bytes) {
    return Violation("Run: the slice does not hold the batch beside the runs in flight");
  }
  for (RequestId id : batch) {
    auto r = requests_.find(id);
    if (r == requests_.end() || !delivered_.contains(id) || r->second.function != function) {
      return Violation(
          fmt::format("Run: request {} is not an arrived request of '{}'", id, spec.name));
    }
    if (answers_.contains(id)) return Violation(fmt::format("Run: request {} is answered", id));
    if (running_.contains(id)) return Violation(fmt::format("Run: request {} is running", id));
  }
  running_.insert(batch.begin(), batch.end());
  RunRecord run;
  run.gpu = gpu_id;
  run.function = function;
  run.slice_generation = it->second.generation;
  run.batch.assign(batch.begin(), batch.end());
  run.batch_bytes = batch_bytes;
  it->second.batch_bytes += batch_bytes;
  run.started = now_;
  ++run_count_;
  const auto every = [&](int n) {
    return n > 0 && run_count_ % static_cast<std::uint64_t>(n) == 0;
  };
  if (every(plan_.lose_gpu_every)) {
    run.end = RunRecord::End::kLose;
  } else if (every(plan_.kill_instance_every)) {
    run.end = RunRecord::End::kKill;
  } else if (every(plan_.fail_run_every)) {
    run.end = RunRecord::End::kFail;
  }
  it->second.runs += 1;
  if (plan_.runs_write_state) it->second.write_generation = next_write_++;
  const Duration exec = spec.ExecLatency(static_cast<int>(batch.size()));
  // A killed instance or a lost GPU strikes halfway through the run.
  const Duration until =
      run.end == RunRecord::End::kKill || run.end == RunRecord::End::kLose ? exec / 2 : exec;
  events_.Push(now_ + until, Event{Kind::kRunEnd, gpu_id, function, runs_.size()});
  runs_.push_back(std::move(run));
}

void FakeExecutor::Give(RequestId id, bool ok, StatusCode code) {
  Answer& answer = answers_[id];
  answer.times += 1;
  answer.ok = ok;
  answer.code = code;
  if (auto r = requests_.find(id); r != requests_.end()) {
    max_latency_ = std::max(max_latency_, now_ - r->second.arrival);
  }
  if (answer.times > 1) Violation(fmt::format("request {} answered {} times", id, answer.times));
}

void FakeExecutor::FailRequest(RequestId id, const Status& status) {
  if (!delivered_.contains(id)) {
    return Violation(fmt::format("FailRequest: request {} has not arrived", id));
  }
  if (status.ok()) return Violation("FailRequest: an OK status");
  Give(id, false, status.code());
}

void FakeExecutor::SetTimer(TimePoint at, std::uint64_t token) {
  events_.Push(std::max(at, now_), Event{Kind::kTimer, 0, 0, token});
}

std::vector<RequestId> FakeExecutor::CancelRuns(GpuId gpu, FunctionId function, bool all) {
  std::vector<RequestId> lost;
  for (RunRecord& run : runs_) {
    if (!run.live || run.gpu != gpu || (!all && run.function != function)) continue;
    run.live = false;
    lost.insert(lost.end(), run.batch.begin(), run.batch.end());
    for (const RequestId id : run.batch) running_.erase(id);
  }
  return lost;
}

void FakeExecutor::EndRun(std::uint64_t run_id) {
  RunRecord& run = runs_[run_id];
  if (!run.live) return;  // cancelled with its slice or GPU
  Gpu& gpu = gpus_[run.gpu];
  auto it = gpu.slices.find(run.function);
  if (!gpu.held || it == gpu.slices.end() || it->second.generation != run.slice_generation) {
    run.live = false;
    for (const RequestId id : run.batch) running_.erase(id);
    return;
  }
  if (run.end == RunRecord::End::kOk || run.end == RunRecord::End::kFail) {
    for (const RequestId id : run.batch) running_.erase(id);
  }
  switch (run.end) {
    case RunRecord::End::kOk:
    case RunRecord::End::kFail: {
      run.live = false;
      it->second.runs -= 1;
      it->second.batch_bytes -= run.batch_bytes;
      const bool ok = run.end == RunRecord::End::kOk;
      if (!ok) ++injected_.runs;
      if (ok) {
        for (RequestId id : run.batch) Give(id, true, StatusCode::kOk);
      }
      std::vector<RequestId> batch = std::move(run.batch);
      scheduler_->OnRunDone(
          run.gpu, run.function, batch,
          RunResult{ok ? Status::Ok() : Unavailable("the function failed"), now_ - run.started});
      return;
    }
    case RunRecord::End::kKill: {
      ++injected_.instances;
      const GpuId gpu_id = run.gpu;
      const FunctionId function = run.function;
      std::vector<RequestId> lost = CancelRuns(gpu_id, function, false);
      gpu.used -= it->second.bytes;
      gpu.slices.erase(it);
      bound_[function] -= 1;  // the instance is dead: neither bound nor idle
      scheduler_->OnInstanceDied(gpu_id, function, lost, Unavailable("the instance died"));
      return;
    }
    case RunRecord::End::kLose: {
      ++injected_.gpus;
      const GpuId gpu_id = run.gpu;
      std::vector<RequestId> lost = CancelRuns(gpu_id, 0, true);
      for (const auto& [function, slice] : gpu.slices) bound_[function] -= 1;
      gpu.slices.clear();
      gpu.used = 0;
      gpu.held = false;
      --gpus_held_;
      scheduler_->OnGpuLost(gpu_id, lost, Unavailable("the GPU fell off the bus"));
      return;
    }
  }
}

void FakeExecutor::Dispatch(const Event& event) {
  switch (event.kind) {
    case Kind::kArrival:
      ++arrived_;
      delivered_.insert(event.value);
      scheduler_->OnRequest(requests_.at(event.value));
      return;
    case Kind::kAdd: {
      const FunctionId id = functions_->Add(pending_adds_[event.value]);
      const int warm = std::max(0, functions_->Get(id).min_instances);
      idle_[id] = warm;
      scheduler_->OnFunctionAdded(id);
      return;
    }
    case Kind::kRemove:
      if (!functions_->Remove(event.function).ok()) return Violation("remove: bad function");
      removed_.insert(event.function);
      scheduler_->OnFunctionRemoved(event.function);
      return;
    case Kind::kCancel:
      Cancel(event.value, event.function == 1
                              ? Cancelled("the client went away")
                              : DeadlineExceeded("not started by its latest start"));
      return;
    case Kind::kDrained:
      ++drained_;
      scheduler_->OnFunctionDrained(event.function);
      if (!functions_->Forget(event.function).ok()) Violation("forget: bad function");
      return;
    case Kind::kGpuReady:
      if (event.gpu < gpus_.size() && gpus_[event.gpu].held) {
        gpus_[event.gpu].ready = true;
        scheduler_->OnGpuReady(event.gpu);
      }
      return;
    case Kind::kRestoreDone: {
      Gpu& gpu = gpus_[event.gpu];
      auto it = gpu.slices.find(event.function);
      if (!gpu.held || it == gpu.slices.end() || it->second.generation != event.value) return;
      if (it->second.kill_restore) {
        ++injected_.instances;
        gpu.used -= it->second.bytes;
        gpu.slices.erase(it);
        bound_[event.function] -= 1;  // dead: neither bound nor idle
        scheduler_->OnInstanceDied(event.gpu, event.function, {},
                                   Unavailable("the instance died while loading"));
        return;
      }
      if (it->second.fail_restore) {
        ++injected_.restores;
        gpu.used -= it->second.bytes;
        gpu.slices.erase(it);
        Unbind(event.function);
        scheduler_->OnRestoreDone(event.gpu, event.function, IoError("the restore failed"));
        return;
      }
      it->second.state = SliceState::kResident;
      scheduler_->OnRestoreDone(event.gpu, event.function, Status::Ok());
      return;
    }
    case Kind::kRunEnd:
      EndRun(event.value);
      return;
    case Kind::kEvictDone: {
      Gpu& gpu = gpus_[event.gpu];
      auto it = gpu.slices.find(event.function);
      if (!gpu.held || it == gpu.slices.end() || it->second.generation != event.value) return;
      ++copy_back_count_;
      const bool copied =
          !(plan_.fail_copy_back_every > 0 &&
            copy_back_count_ % static_cast<std::uint64_t>(plan_.fail_copy_back_every) == 0);
      // The host snapshot now holds what the device held, unless the copy failed.
      if (copied) {
        snapshot_generation_[event.function] = it->second.write_generation;
      } else {
        ++injected_.copies_back;
      }
      gpu.used -= it->second.bytes;
      gpu.slices.erase(it);
      Unbind(event.function);
      scheduler_->OnEvictDone(event.gpu, event.function,
                              copied ? Status::Ok() : IoError("the copy back failed"));
      return;
    }
    case Kind::kTimer:
      scheduler_->OnTimer(event.value);
      return;
  }
}

Status FakeExecutor::RunToEnd(std::uint64_t max_events, const std::function<void()>& check) {
  if (scheduler_ == nullptr) return FailedPrecondition("FakeExecutor: no scheduler");
  // Functions in the registry before the run start with their min_instances warm.
  for (FunctionId f = 0; f < functions_->size(); ++f) {
    if (functions_->contains(f) && !idle_.contains(f)) {
      idle_[f] = std::max(0, functions_->Get(f).min_instances);
    }
  }
  std::uint64_t processed = 0;
  while (!events_.empty() && violations_.empty()) {
    if (++processed > max_events) {
      return Internal(fmt::format("more than {} events: a livelock?", max_events));
    }
    const auto entry = events_.Pop();
    now_ = entry.time;
    Dispatch(entry.payload);
    // A removed function with nothing left is reported by an event of its own.
    for (auto it = removed_.begin(); it != removed_.end();) {
      if (Drained(*it)) {
        events_.Push(now_, Event{Kind::kDrained, 0, *it, 0});
        it = removed_.erase(it);
      } else {
        ++it;
      }
    }
    if (check) check();
  }
  if (!violations_.empty()) {
    return Internal(
        fmt::format("policy '{}' broke the contract: {}", scheduler_->name(), violations_.front()));
  }
  if (const std::size_t left = unanswered(); left > 0) {
    return Internal(
        fmt::format("policy '{}' left {} request(s) unanswered", scheduler_->name(), left));
  }
  return Status::Ok();
}

}  // namespace gshare::testing
