#include "gshare/sched/faaswap_edf.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace gshare {
namespace {

constexpr std::uint64_t kForwardTag = 1ULL << 62;
constexpr std::uint64_t kIdleTag = 2ULL << 62;
constexpr std::uint64_t kPayloadMask = (1ULL << 62) - 1;

}  // namespace

FaaSwapEdfPolicy::FaaSwapEdfPolicy(const SchedulerContext& context, const PolicyOptions& options)
    : context_(context), options_(options), estimator_(context.functions), sizer_(options) {}

void FaaSwapEdfPolicy::OnFunctionAdded(FunctionId /*function*/) {}

void FaaSwapEdfPolicy::OnFunctionDrained(FunctionId function) {
  queues_.erase(function);
  holders_.erase(function);
  estimator_.Forget(function);
}

std::size_t FaaSwapEdfPolicy::FunctionsHeld() const {
  std::size_t held = 0;
  for (FunctionId f = 0; f < context_.functions->size(); ++f) {
    held += queues_.contains(f) || holders_.contains(f) || estimator_.Knows(f);
  }
  return held;
}

std::uint64_t FaaSwapEdfPolicy::ReserveBytes(FunctionId function) const {
  // A fixed reservation, sized for the largest batch: no elastic slices.
  const ResolvedFunction& spec = (*context_.functions)[function];
  return spec.MemoryForBatch(spec.max_batch);
}

Duration FaaSwapEdfPolicy::SwapTime(FunctionId function) const {
  return context_.executor->gpu_types()[0].RestoreTime(
             (*context_.functions)[function].model_bytes) +
         context_.executor->Instances(function).BindDelay();
}

Duration FaaSwapEdfPolicy::ColdRun(Duration swap, Duration exec) const {
  if (!context_.executor->pipelines_loading()) return swap + exec;
  return std::max(swap, exec) + std::min(swap, exec) / Executor::kPipelineGroups;
}

void FaaSwapEdfPolicy::Answer(RequestId id, const Status& status) {
  if (!status.ok()) context_.executor->FailRequest(id, status);
  requests_.Erase(id);
}

// --- queues --------------------------------------------------------------------------------------

void FaaSwapEdfPolicy::Enqueue(RequestId id, bool front) {
  const FunctionId function = requests_.Get(id).function;
  Queue& queue = queues_[function];
  if (front) {
    queue.requests.push_front(id);
  } else {
    queue.requests.push_back(id);
  }
  queued_ += 1;
  queued_work_ += estimator_.Estimate(function, 1);
  Reindex(function);
}

void FaaSwapEdfPolicy::Dequeue(FunctionId function, std::size_t count) {
  Queue& queue = queues_.at(function);
  const Duration each = estimator_.Estimate(function, 1);
  for (std::size_t i = 0; i < count; ++i) queue.requests.pop_front();
  queued_ -= count;
  queued_work_ -= each * static_cast<std::int64_t>(count);
  // Estimates move between a request's arrival and its run: the sum is reset when the queues
  // empty, so it never drifts far.
  if (queued_work_ < Duration::zero() || queued_ == 0) queued_work_ = Duration::zero();
  Reindex(function);
}

void FaaSwapEdfPolicy::Reindex(FunctionId function) {
  auto it = queues_.find(function);
  if (it == queues_.end()) return;
  Queue& queue = it->second;
  edf_.erase({queue.key, function});
  if (queue.requests.empty()) {
    queues_.erase(it);
    return;
  }
  queue.key = requests_.Get(queue.requests.front()).deadline;
  edf_.insert({queue.key, function});
}

void FaaSwapEdfPolicy::AnswerQueue(FunctionId function, const Status& status) {
  auto it = queues_.find(function);
  if (it == queues_.end()) return;
  const std::deque<RequestId> requests = std::move(it->second.requests);
  it->second.requests.clear();
  Reindex(function);  // empty: out of the index and the map
  queued_ -= requests.size();
  queued_work_ -= estimator_.Estimate(function, 1) * static_cast<std::int64_t>(requests.size());
  if (queued_work_ < Duration::zero()) queued_work_ = Duration::zero();
  for (RequestId id : requests) Answer(id, status);
}

void FaaSwapEdfPolicy::Requeue(std::span<const RequestId> requests, const Status& status) {
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    const FunctionId function = requests_.Get(*it).function;
    if (!context_.functions->active(function)) {
      Answer(*it, NotFound(fmt::format("function '{}' was removed",
                                       (*context_.functions)[function].name)));
    } else if (requests_.Retry(*it)) {
      Enqueue(*it, /*front=*/true);
    } else {
      Answer(*it, status);
    }
  }
}

// --- events --------------------------------------------------------------------------------------

void FaaSwapEdfPolicy::OnRequest(const Request& request) {
  requests_.Add(request);
  const Duration exec = (*context_.functions)[request.function].ExecLatency(1);
  const Duration proxy = Duration(static_cast<std::int64_t>(static_cast<double>(exec.count()) *
                                                            options_.proxy_overhead_fraction));
  if (proxy <= Duration::zero()) {
    Forward(request.id);
    return;
  }
  context_.executor->SetTimer(context_.executor->Now() + proxy, kForwardTag | request.id);
}

void FaaSwapEdfPolicy::Forward(RequestId id) {
  if (!requests_.Holds(id)) return;  // cancelled in the proxy
  const Request& request = requests_.Get(id);
  if (!context_.functions->active(request.function)) {
    return Answer(id, NotFound(fmt::format("function '{}' was removed",
                                           (*context_.functions)[request.function].name)));
  }
  MaybeGrow(request);
  if (alive_count_ == 0) {
    return Answer(id, ResourceExhausted("no GPU for the pool: every acquisition was refused"));
  }
  Enqueue(id, /*front=*/false);
  Kick();
}

void FaaSwapEdfPolicy::OnRequestCancelled(RequestId request, const Status& /*status*/) {
  if (!requests_.Holds(request)) return;
  const FunctionId function = requests_.Get(request).function;
  if (auto it = queues_.find(function); it != queues_.end()) {
    auto& requests = it->second.requests;
    if (auto r = std::find(requests.begin(), requests.end(), request); r != requests.end()) {
      requests.erase(r);
      queued_ -= 1;
      queued_work_ -= estimator_.Estimate(function, 1);
      if (queued_work_ < Duration::zero()) queued_work_ = Duration::zero();
      Reindex(function);
    }
  }
  requests_.Erase(request);
}

void FaaSwapEdfPolicy::OnFunctionRemoved(FunctionId function) {
  AnswerQueue(function, NotFound(fmt::format("function '{}' was removed",
                                             (*context_.functions)[function].name)));
  // Its models leave now unless a run of it is in flight (then LRU takes it later).
  if (auto it = holders_.find(function); it != holders_.end()) {
    const std::vector<std::size_t> slots = it->second;
    for (std::size_t slot : slots) {
      PoolGpu& gpu = pool_[slot];
      auto resident = gpu.resident.find(function);
      if (resident == gpu.resident.end() || (gpu.running && gpu.running_function == function)) {
        continue;
      }
      gpu.lru.erase(resident->second);
      EvictModel(slot, function);
      MaybeIdle(slot);
    }
  }
  estimator_.Forget(function);
  Kick();
}

void FaaSwapEdfPolicy::OnGpuReady(GpuId id) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].ready = true;
  sizer_.BecameReady();
  SetFree(slot, true);
  StartWork(slot);
  Kick();
  MaybeIdle(slot);
}

void FaaSwapEdfPolicy::OnRestoreDone(GpuId id, FunctionId function, const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  const bool give_up = pool_[slot].RestoreEnded(function, status.ok(), ReserveBytes(function),
                                                RequestTable::kMaxAttempts);
  if (!status.ok()) {
    // The slice is gone. Try again; after kMaxAttempts failures in a row here, answer the
    // function's queued requests with the failure.
    DropHolder(slot, function);
    if (give_up) AnswerQueue(function, status);
  }
  StartWork(slot);
  Kick();
  MaybeIdle(slot);
}

void FaaSwapEdfPolicy::OnRunDone(GpuId id, FunctionId function, std::span<const RequestId> batch,
                                 const RunResult& result) {
  const std::size_t slot = slot_of_gpu_.at(id);
  PoolGpu& gpu = pool_[slot];
  gpu.running = false;
  gpu.running_batch.clear();
  const bool pipelined = std::exchange(gpu.running_pipelined, false);
  SetFree(slot, true);
  if (result.status.ok()) {
    // A pipelined run's time includes waiting for its model: it says nothing of its execution.
    if (!pipelined) estimator_.Observe(function, static_cast<int>(batch.size()), result.elapsed);
    for (RequestId r : batch) requests_.Erase(r);
  } else {
    Requeue(batch, result.status);
  }
  StartWork(slot);
  Kick();
  MaybeIdle(slot);
}

void FaaSwapEdfPolicy::OnEvictDone(GpuId id, FunctionId function, const Status& /*status*/) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].EvictDone(function);
  StartWork(slot);
  Kick();
  MaybeIdle(slot);
}

void FaaSwapEdfPolicy::Unload(std::size_t slot, FunctionId function) {
  // The function's slice on the GPU is gone (its instance died).
  PoolGpu& gpu = pool_[slot];
  const GpuModelCache::Lost lost = gpu.Forget(function, ReserveBytes(function));
  if (lost == GpuModelCache::Lost::kResident || lost == GpuModelCache::Lost::kRestoring) {
    DropHolder(slot, function);
  }
  if (gpu.running && gpu.running_function == function) {
    gpu.running = false;
    gpu.running_pipelined = false;
    gpu.running_batch.clear();
    SetFree(slot, true);
  }
}

void FaaSwapEdfPolicy::OnInstanceDied(GpuId id, FunctionId function,
                                      std::span<const RequestId> lost, const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  Unload(slot, function);
  Requeue(lost, status);
  StartWork(slot);
  Kick();
  MaybeIdle(slot);
}

void FaaSwapEdfPolicy::OnGpuLost(GpuId id, std::span<const RequestId> lost, const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  Retire(slot);
  Requeue(lost, status);
  Kick();
}

void FaaSwapEdfPolicy::OnTimer(std::uint64_t token) {
  if ((token & ~kPayloadMask) == kForwardTag) {
    Forward(token & kPayloadMask);
    return;
  }
  const auto slot = static_cast<std::size_t>((token & kPayloadMask) >> 32);
  const auto generation = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  if (slot >= pool_.size()) return;
  PoolGpu& gpu = pool_[slot];
  if (!gpu.alive || !gpu.ready || gpu.idle_generation != generation || gpu.running ||
      gpu.restoring || !gpu.evicting.empty()) {
    return;
  }
  // Discard what is clean; a model that must be copied back first keeps the GPU until then
  // (OnEvictDone sets the idle timer again).
  if (!gpu.EvictAll(
          *context_.executor, [&](FunctionId f) { return ReserveBytes(f); },
          [&](FunctionId f) { DropHolder(slot, f); })) {
    return;
  }
  const GpuId gpu_id = gpu.gpu;
  Retire(slot);
  context_.executor->ReleaseGpu(gpu_id);
  Kick();  // work it left to others, with no GPU left, asks for one
}

// --- work ----------------------------------------------------------------------------------------

void FaaSwapEdfPolicy::Kick() {
  if (!edf_.empty() && alive_count_ == 0) {
    // Every GPU is gone (lost, or released): ask for one; with none to be had, the queued
    // requests are answered with the refusal.
    const FunctionId head = edf_.begin()->second;
    Result<GpuId> acquired = ResourceExhausted("the pool may not grow now");
    if (sizer_.MayStart()) {
      acquired =
          AcquireFirstAvailable(*context_.executor, options_.instance_start, ReserveBytes(head));
    }
    if (acquired.ok()) {
      AddGpu(*acquired);
    } else {
      const Status refused = ResourceExhausted(fmt::format(
          "no GPU for the pool: every acquisition was refused ({})", acquired.status().message()));
      while (!edf_.empty()) AnswerQueue(edf_.begin()->second, refused);
      return;
    }
  }
  if (edf_.empty() || free_.empty()) return;
  // The first functions by deadline, and the free GPUs that hold their models: those start
  // them; then the lowest-numbered free GPUs (load packs onto few GPUs) take what is left.
  std::vector<FunctionId> first;
  for (auto it = edf_.begin(); it != edf_.end() && first.size() < kLookAhead; ++it) {
    first.push_back(it->second);
  }
  for (const FunctionId function : first) {
    auto holders = holders_.find(function);
    if (holders == holders_.end()) continue;
    const std::vector<std::size_t> slots = holders->second;
    for (const std::size_t slot : slots) {
      if (free_.contains(slot)) StartWork(slot);
    }
  }
  std::vector<std::size_t> free(free_.begin(), free_.end());
  for (std::size_t i = 0; i < free.size() && i < kLookAhead && !edf_.empty(); ++i) {
    if (free_.contains(free[i])) StartWork(free[i]);
  }
}

TimePoint FaaSwapEdfPolicy::HolderStart(std::size_t slot, FunctionId function) const {
  const PoolGpu& gpu = pool_[slot];
  TimePoint start = context_.executor->Now();
  if (!gpu.ready) start = std::max(start, gpu.ready_at);
  if (gpu.running) start = std::max(start, gpu.running_ends);
  if (gpu.restoring && gpu.restoring_function == function) {
    start = std::max(start, gpu.restore_ends);
  }
  return start;
}

bool FaaSwapEdfPolicy::LeaveToHolder(std::size_t slot, FunctionId function, TimePoint here) const {
  auto holders = holders_.find(function);
  if (holders == holders_.end()) return false;
  const Queue& queue = queues_.at(function);
  const TimePoint deadline = requests_.Get(queue.requests.front()).deadline;
  const Duration exec = estimator_.Estimate(function, 1);
  for (const std::size_t other : holders->second) {
    if (other == slot) continue;
    const TimePoint start = HolderStart(other, function);
    if (start + exec < here && start + exec <= deadline) return true;
  }
  return false;
}

bool FaaSwapEdfPolicy::StartWork(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  if (!gpu.alive || !gpu.ready || gpu.running || edf_.empty()) return false;
  const TimePoint now = context_.executor->Now();
  std::vector<FunctionId> first;
  for (auto it = edf_.begin(); it != edf_.end() && first.size() < kLookAhead; ++it) {
    first.push_back(it->second);
  }
  for (const FunctionId function : first) {
    if (gpu.resident.contains(function)) {
      RunBatch(slot, function, /*pipelined=*/false);
      return true;
    }
    if (gpu.restoring) {
      // One copy at a time; the head of its copy runs pipelined where the executor allows.
      if (gpu.restoring_function == function && context_.executor->pipelines_loading()) {
        RunBatch(slot, function, /*pipelined=*/true);
        return true;
      }
      continue;
    }
    if (gpu.evicting.contains(function) || !context_.executor->Instances(function).CanBind()) {
      continue;
    }
    const std::uint64_t bytes = ReserveBytes(function);
    if (bytes > gpu.capacity) continue;
    const Duration swap = SwapTime(function);
    const Duration exec = estimator_.Estimate(function, 1);
    if (LeaveToHolder(slot, function, now + ColdRun(swap, exec))) continue;
    if (!MakeRoom(slot, bytes)) continue;
    gpu.memory_used += bytes;
    gpu.restoring = true;
    gpu.restoring_function = function;
    gpu.restore_ends = now + swap;
    gpu.idle_generation += 1;
    AddHolder(slot, function);
    context_.executor->Restore(gpu.gpu, function, bytes);
    if (context_.executor->pipelines_loading()) RunBatch(slot, function, /*pipelined=*/true);
    return true;
  }
  return false;
}

void FaaSwapEdfPolicy::RunBatch(std::size_t slot, FunctionId function, bool pipelined) {
  PoolGpu& gpu = pool_[slot];
  const Queue& queue = queues_.at(function);
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  const std::size_t count = std::min(queue.requests.size(), max_batch);
  batch_.assign(queue.requests.begin(),
                queue.requests.begin() + static_cast<std::ptrdiff_t>(count));
  Dequeue(function, count);
  const TimePoint now = context_.executor->Now();
  const Duration exec = estimator_.Estimate(function, static_cast<int>(count));
  gpu.running = true;
  gpu.running_function = function;
  gpu.running_pipelined = pipelined;
  gpu.running_ends = pipelined
                         ? now + ColdRun(std::max(gpu.restore_ends - now, Duration::zero()), exec)
                         : now + exec;
  gpu.running_batch = batch_;
  gpu.idle_generation += 1;
  if (auto it = gpu.resident.find(function); it != gpu.resident.end()) {
    gpu.lru.splice(gpu.lru.end(), gpu.lru, it->second);  // most recently used
  }
  SetFree(slot, false);
  if (pipelined) {
    context_.executor->RunPipelined(gpu.gpu, function, batch_);
  } else {
    context_.executor->Run(gpu.gpu, function, batch_);
  }
}

bool FaaSwapEdfPolicy::MakeRoom(std::size_t slot, std::uint64_t bytes) {
  PoolGpu& gpu = pool_[slot];
  const auto keep = [&](FunctionId f) { return gpu.running && f == gpu.running_function; };
  return gpu.MakeRoom(
      *context_.executor, bytes, keep, [&](FunctionId f) { return ReserveBytes(f); },
      [&](FunctionId f) { DropHolder(slot, f); }, evictable_);
}

void FaaSwapEdfPolicy::EvictModel(std::size_t slot, FunctionId function) {
  // The caller has taken the model out of the LRU list.
  pool_[slot].Evict(*context_.executor, function, ReserveBytes(function));
  DropHolder(slot, function);
}

void FaaSwapEdfPolicy::AddHolder(std::size_t slot, FunctionId function) {
  holders_[function].push_back(slot);
}

void FaaSwapEdfPolicy::DropHolder(std::size_t slot, FunctionId function) {
  auto it = holders_.find(function);
  if (it == holders_.end()) return;
  auto& slots = it->second;
  if (auto s = std::find(slots.begin(), slots.end(), slot); s != slots.end()) slots.erase(s);
  if (slots.empty()) holders_.erase(it);
}

// --- the pool ------------------------------------------------------------------------------------

void FaaSwapEdfPolicy::MaybeGrow(const Request& request) {
  const FunctionId function = request.function;
  if (!context_.executor->Instances(function).CanBind() && alive_count_ > 0) return;
  const TimePoint now = context_.executor->Now();
  const Duration exec = estimator_.Estimate(function, 1);
  const Duration cold = ColdRun(SwapTime(function), exec);
  bool grow = false;
  if (alive_count_ == 0) {
    grow = sizer_.MayStart();
  } else {
    // The best finish on the pool as it is: a holder of the model, else the first GPU to free,
    // after the work queued ahead of it spread over the pool.
    TimePoint best = TimePoint::max();
    if (auto holders = holders_.find(function); holders != holders_.end()) {
      for (const std::size_t slot : holders->second) {
        best = std::min(best, HolderStart(slot, function) + exec);
      }
    }
    TimePoint first_free = TimePoint::max();
    if (!free_.empty()) {
      first_free = now;
    } else {
      for (const PoolGpu& gpu : pool_) {
        if (!gpu.alive) continue;
        first_free = std::min(first_free, gpu.ready ? gpu.running_ends : gpu.ready_at);
      }
      first_free = std::max(first_free, now);
    }
    if (first_free != TimePoint::max()) best = std::min(best, first_free + cold);
    const Duration backlog = queued_work_ / static_cast<std::int64_t>(alive_count_);
    grow = sizer_.ShouldGrow(now, cold, best == TimePoint::max() ? best : best + backlog,
                             request.deadline);
  }
  if (!grow) return;
  const auto acquired =
      AcquireFirstAvailable(*context_.executor, options_.instance_start, ReserveBytes(function));
  if (acquired.ok()) AddGpu(*acquired);
}

void FaaSwapEdfPolicy::AddGpu(GpuId id) {
  const std::size_t slot = pool_.size();
  pool_.emplace_back();
  PoolGpu& gpu = pool_.back();
  gpu.gpu = id;
  gpu.capacity = context_.executor->TypeOf(id).memory_bytes;
  gpu.ready = sizer_.StartsReady();
  gpu.ready_at = context_.executor->Now() + sizer_.startup();
  slot_of_gpu_[id] = slot;
  alive_count_ += 1;
  sizer_.Added(gpu.ready);
  if (gpu.ready) {
    SetFree(slot, true);
    MaybeIdle(slot);  // released if no work comes (OnGpuReady does this for a starting one)
  }
}

void FaaSwapEdfPolicy::Retire(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  gpu.Clear([&](FunctionId f) { DropHolder(slot, f); });
  gpu.alive = false;
  gpu.running = false;
  gpu.running_pipelined = false;
  gpu.running_batch.clear();
  SetFree(slot, false);
  slot_of_gpu_.erase(gpu.gpu);
  alive_count_ -= 1;
  sizer_.Removed(gpu.ready);
}

void FaaSwapEdfPolicy::MaybeIdle(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  // A GPU still starting is not idle: OnGpuReady looks again.
  if (!gpu.alive || !gpu.ready || gpu.running || gpu.restoring) return;
  gpu.idle_generation += 1;
  context_.executor->SetTimer(
      context_.executor->Now() + options_.pool_idle,
      kIdleTag | (static_cast<std::uint64_t>(slot) << 32) | gpu.idle_generation);
}

void FaaSwapEdfPolicy::SetFree(std::size_t slot, bool free) {
  if (free) {
    free_.insert(slot);
  } else {
    free_.erase(slot);
  }
}

}  // namespace gshare
