#include "gshare/sched/faaswap.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace gshare {
namespace {

constexpr std::uint64_t kForwardTag = 1ULL << 62;
constexpr std::uint64_t kIdleTag = 2ULL << 62;
constexpr std::uint64_t kPayloadMask = (1ULL << 62) - 1;
constexpr std::size_t kNoSlot = std::numeric_limits<std::size_t>::max();

}  // namespace

FaaSwapPolicy::FaaSwapPolicy(const SchedulerContext& context, const PolicyOptions& options)
    : context_(context), options_(options), estimator_(context.functions), sizer_(options) {}

void FaaSwapPolicy::OnFunctionAdded(FunctionId /*function*/) {}

void FaaSwapPolicy::OnFunctionDrained(FunctionId function) {
  models_.erase(function);
  estimator_.Forget(function);
}

std::size_t FaaSwapPolicy::FunctionsHeld() const {
  // The functions it keeps anything for: a model index, learned execution times.
  std::size_t held = models_.size();
  for (FunctionId f = 0; f < context_.functions->size(); ++f) {
    if (!models_.contains(f) && estimator_.Knows(f)) ++held;
  }
  return held;
}

void FaaSwapPolicy::OnRequestCancelled(RequestId request, const Status& /*status*/) {
  if (!requests_.Holds(request)) return;
  const FunctionId function = requests_.Get(request).function;
  requests_.Erase(request);
  for (std::size_t slot : alive_) {
    PoolGpu& gpu = pool_[slot];
    auto it = std::find(gpu.queue.begin(), gpu.queue.end(), request);
    if (it == gpu.queue.end()) continue;
    gpu.queue.erase(it);
    Unqueued(gpu, function);
    Advance(slot);  // it may have been the head
    MaybeIdle(slot);
    return;
  }
}

void FaaSwapPolicy::OnFunctionRemoved(FunctionId function) {
  // Its queued requests are answered now; its models leave as memory is needed.
  const Status removed =
      NotFound(fmt::format("function '{}' was removed", (*context_.functions)[function].name));
  for (std::size_t slot : alive_) {
    PoolGpu& gpu = pool_[slot];
    AnswerQueued(slot, function, removed);
    // Its model leaves now unless a run of it is in flight (then LRU takes it later).
    if (auto it = gpu.resident.find(function);
        it != gpu.resident.end() && !(gpu.running && gpu.running_function == function)) {
      gpu.lru.erase(it->second);
      EvictModel(slot, function);
    }
    Advance(slot);
    MaybeIdle(slot);
  }
  estimator_.Forget(function);
  RetryBlocked();
}

void FaaSwapPolicy::AnswerQueued(std::size_t slot, FunctionId function, const Status& status) {
  PoolGpu& gpu = pool_[slot];
  std::deque<RequestId> keep;
  for (RequestId id : gpu.queue) {
    if (requests_.Get(id).function == function) {
      Answer(id, status);
    } else {
      keep.push_back(id);
    }
  }
  gpu.queue.swap(keep);
  gpu.queued.erase(function);
}

void FaaSwapPolicy::EvictModel(std::size_t slot, FunctionId function) {
  // The caller has taken the model out of the LRU list.
  pool_[slot].Evict(*context_.executor, function, ReserveBytes(function));
  DropModel(slot, function);
}

void FaaSwapPolicy::Answer(RequestId id, const Status& status) {
  if (!status.ok()) context_.executor->FailRequest(id, status);
  requests_.Erase(id);
}

void FaaSwapPolicy::IndexInsert(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  gpu.indexed_key = FreeKey(gpu);
  gpu.indexed_idle = false;
  by_free_time_.insert({gpu.indexed_key, slot});
}

void FaaSwapPolicy::IndexErase(std::size_t slot) {
  const PoolGpu& gpu = pool_[slot];
  if (gpu.indexed_idle) {
    idle_slots_.erase(slot);
  } else {
    by_free_time_.erase({gpu.indexed_key, slot});
  }
}

void FaaSwapPolicy::Promote(TimePoint now) {
  while (!by_free_time_.empty() && by_free_time_.begin()->first <= now) {
    const std::size_t slot = by_free_time_.begin()->second;
    IndexErase(slot);
    pool_[slot].indexed_idle = true;
    idle_slots_.insert(slot);
  }
}

void FaaSwapPolicy::AddModel(std::size_t slot, FunctionId function) {
  PoolGpu& gpu = pool_[slot];
  HolderEntry& entry = gpu.holder_entries[function];
  entry.idle = gpu.indexed_idle;
  entry.busy_key = gpu.indexed_key;
  ModelIndex& index = models_[function];
  if (entry.idle) {
    index.idle.insert(slot);
  } else {
    index.busy.insert({entry.busy_key, slot});
  }
}

void FaaSwapPolicy::DropModel(std::size_t slot, FunctionId function) {
  PoolGpu& gpu = pool_[slot];
  auto it = gpu.holder_entries.find(function);
  if (it == gpu.holder_entries.end()) return;
  auto index = models_.find(function);
  if (index != models_.end()) {
    if (it->second.idle) {
      index->second.idle.erase(slot);
    } else {
      index->second.busy.erase({it->second.busy_key, slot});
    }
    if (index->second.idle.empty() && index->second.busy.empty()) models_.erase(index);
  }
  gpu.holder_entries.erase(it);
}

void FaaSwapPolicy::RepairModelIndex(FunctionId function) {
  // Each GPU holding the model has one entry, in the idle set or in the busy set under a key no
  // later than its current one (keys only grow while a GPU stays busy). GPU-level changes do not
  // touch these sets; entries are brought up to date here, from the front, until the front of
  // each set is right: then the front is the true minimum.
  auto found = models_.find(function);
  if (found == models_.end()) return;  // no GPU holds its model
  auto& busy = found->second.busy;
  auto& idle = found->second.idle;
  while (!busy.empty()) {
    const auto [key, slot] = *busy.begin();
    PoolGpu& gpu = pool_[slot];
    if (!gpu.indexed_idle && key == gpu.indexed_key) break;  // up to date
    busy.erase(busy.begin());
    HolderEntry& entry = gpu.holder_entries.at(function);
    if (gpu.indexed_idle) {
      entry.idle = true;
      idle.insert(slot);
    } else {
      entry.busy_key = gpu.indexed_key;
      busy.insert({entry.busy_key, slot});
    }
  }
  while (!idle.empty()) {
    const std::size_t slot = *idle.begin();
    PoolGpu& gpu = pool_[slot];
    if (gpu.indexed_idle) break;  // up to date
    idle.erase(idle.begin());
    HolderEntry& entry = gpu.holder_entries.at(function);
    entry.idle = false;
    entry.busy_key = gpu.indexed_key;
    busy.insert({entry.busy_key, slot});  // at or after the busy front, which stays right
  }
}

void FaaSwapPolicy::SetPredictedFree(std::size_t slot, TimePoint predicted_free_at) {
  IndexErase(slot);
  pool_[slot].predicted_free_at = predicted_free_at;
  IndexInsert(slot);
}

std::uint64_t FaaSwapPolicy::ReserveBytes(FunctionId function) const {
  // A fixed reservation, sized for the largest batch: no elastic slices.
  const ResolvedFunction& spec = (*context_.functions)[function];
  return spec.MemoryForBatch(spec.max_batch);
}

Duration FaaSwapPolicy::SwapTime(const PoolGpu& gpu, FunctionId function,
                                 Duration bind_delay) const {
  return context_.executor->TypeOf(gpu.gpu).RestoreTime(
             (*context_.functions)[function].model_bytes) +
         bind_delay;
}

void FaaSwapPolicy::OnRequest(const Request& request) {
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

bool FaaSwapPolicy::HasModel(const PoolGpu& gpu, FunctionId function) const {
  return gpu.resident.contains(function) || (gpu.restoring && gpu.restoring_function == function);
}

TimePoint FaaSwapPolicy::FreeKey(const PoolGpu& gpu) {
  return std::max(gpu.predicted_free_at, gpu.ready_at);
}

std::size_t FaaSwapPolicy::Place(const Request& request) {
  const TimePoint now = context_.executor->Now();
  const Duration exec = estimator_.Estimate(request.function, 1);
  const GpuType& default_type = context_.executor->gpu_types()[0];
  const InstanceView instances = context_.executor->Instances(request.function);
  const Duration bind_delay = instances.BindDelay();
  const Duration swap =
      default_type.RestoreTime((*context_.functions)[request.function].model_bytes) + bind_delay;
  // A function at its max_instances can only go where its model is held.
  const bool can_bind = instances.CanBind();
  std::size_t best = kNoSlot;
  TimePoint best_done = TimePoint::max();
  auto consider = [&](std::size_t slot) {
    const PoolGpu& gpu = pool_[slot];
    const bool has_model = HasModel(gpu, request.function);
    if (!has_model && (!can_bind || gpu.capacity < ReserveBytes(request.function))) return;
    const TimePoint start = std::max(now, FreeKey(gpu));
    const TimePoint done =
        start + (has_model ? exec : ColdRun(SwapTime(gpu, request.function, bind_delay), exec));
    if (done < best_done || (done == best_done && slot < best)) {
      best_done = done;
      best = slot;
    }
  };
  // The earliest finish is on a GPU free now (the lowest-numbered: load packs onto few GPUs) or
  // the one that frees first, with or without the model: any other GPU starts later.
  Promote(now);
  RepairModelIndex(request.function);
  if (!idle_slots_.empty()) consider(*idle_slots_.begin());
  if (!by_free_time_.empty()) consider(by_free_time_.begin()->second);
  if (auto index = models_.find(request.function); index != models_.end()) {
    if (!index->second.idle.empty()) consider(*index->second.idle.begin());
    if (!index->second.busy.empty()) consider(index->second.busy.begin()->second);
  }
  // Grow when the best GPU (starting ones included) misses the deadline because of the work
  // queued on it, and a GPU asked for now would finish the request sooner (PoolSizer).
  const bool grow = alive_.empty()
                        ? sizer_.MayStart()
                        : sizer_.ShouldGrow(now, ColdRun(swap, exec), best_done, request.deadline);
  if (grow && can_bind) {
    const auto acquired = AcquireFirstAvailable(*context_.executor, options_.instance_start,
                                                ReserveBytes(request.function));
    if (!acquired.ok()) return best;  // no growth; kNoSlot when the pool is empty
    const GpuId id = *acquired;
    const std::size_t slot = pool_.size();
    pool_.emplace_back();
    PoolGpu& gpu = pool_.back();
    gpu.gpu = id;
    gpu.capacity = context_.executor->TypeOf(id).memory_bytes;
    gpu.ready = sizer_.StartsReady();
    gpu.ready_at = now + sizer_.startup();
    gpu.predicted_free_at = gpu.ready_at;
    alive_.push_back(slot);
    IndexInsert(slot);
    slot_of_gpu_[id] = slot;
    sizer_.Added(gpu.ready);
    if (best == kNoSlot) best = slot;
  }
  if (best == kNoSlot && !alive_.empty() && !can_bind) {
    // Every instance is bound where the model is not held: wait on the GPU that frees first.
    Promote(now);
    if (!idle_slots_.empty()) {
      best = *idle_slots_.begin();
    } else if (!by_free_time_.empty()) {
      best = by_free_time_.begin()->second;
    }
  }
  return best;
}

void FaaSwapPolicy::Forward(RequestId id) {
  const Request& request = requests_.Get(id);
  if (!context_.functions->active(request.function)) {
    return Answer(id, NotFound(fmt::format("function '{}' was removed",
                                           (*context_.functions)[request.function].name)));
  }
  const std::size_t slot = Place(request);
  if (slot == kNoSlot) {
    return Answer(id, ResourceExhausted("no GPU for the pool: every acquisition was refused"));
  }
  PoolGpu& gpu = pool_[slot];
  const TimePoint now = context_.executor->Now();
  const bool has_model = HasModel(gpu, request.function);
  const Duration exec = estimator_.Estimate(request.function, 1);
  SetPredictedFree(
      slot,
      std::max({now, gpu.predicted_free_at, gpu.ready_at}) +
          (has_model ? exec
                     : ColdRun(SwapTime(gpu, request.function,
                                        context_.executor->Instances(request.function).BindDelay()),
                               exec)));
  gpu.queue.push_back(id);
  gpu.queued[request.function] += 1;
  gpu.idle_generation += 1;
  Advance(slot);
}

void FaaSwapPolicy::TakeBatch(PoolGpu& gpu, FunctionId function) {
  // Consecutive requests of one function at the queue head form a batch, up to its max_batch.
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  batch_.clear();
  while (!gpu.queue.empty() && batch_.size() < max_batch &&
         requests_.Get(gpu.queue.front()).function == function) {
    batch_.push_back(gpu.queue.front());
    gpu.queue.pop_front();
    Unqueued(gpu, function);
  }
}

Duration FaaSwapPolicy::ColdRun(Duration swap, Duration exec) const {
  // With pipelined loading, a cold run overlaps its model's copy (Executor::RunPipelined).
  if (!context_.executor->pipelines_loading()) return swap + exec;
  return std::max(swap, exec) + std::min(swap, exec) / Executor::kPipelineGroups;
}

void FaaSwapPolicy::Unqueued(PoolGpu& gpu, FunctionId function) {
  auto it = gpu.queued.find(function);
  if (--it->second == 0) gpu.queued.erase(it);
}

bool FaaSwapPolicy::MakeRoom(std::size_t slot, std::uint64_t bytes, bool for_head) {
  PoolGpu& gpu = pool_[slot];
  // Never the running model; for a prefetch, never a model that a queued request needs.
  const auto keep = [&](FunctionId f) {
    return (gpu.running && f == gpu.running_function) || (!for_head && gpu.queued.contains(f));
  };
  bool evicted = false;
  const bool room = gpu.MakeRoom(
      *context_.executor, bytes, keep, [&](FunctionId f) { return ReserveBytes(f); },
      [&](FunctionId f) {
        DropModel(slot, f);
        evicted = true;
      },
      evictable_);
  if (!evicted) return room;
  // The GPUs retried may take the memory just freed (this one included): look again.
  RetryBlocked();
  return pool_[slot].HasRoom(*context_.executor, bytes);
}

void FaaSwapPolicy::Advance(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  if (!gpu.ready) return;
  if (!gpu.running && !gpu.queue.empty() && Relocate(slot)) return;
  // Run the head of the queue when its model is on the GPU.
  if (!gpu.running && !gpu.queue.empty()) {
    const FunctionId function = requests_.Get(gpu.queue.front()).function;
    if (auto it = gpu.resident.find(function); it != gpu.resident.end()) {
      gpu.lru.splice(gpu.lru.end(), gpu.lru, it->second);  // most recently used
      TakeBatch(gpu, function);
      gpu.running = true;
      gpu.running_function = function;
      context_.executor->Run(gpu.gpu, function, batch_);
    }
  }
  // Keep the copy engine busy: restore the first model, among the next few queued requests, that
  // is not on the GPU (a bounded look-ahead keeps the work per event constant). The head's model
  // may evict any model but the running one; a prefetch evicts only models no queued request
  // needs, so prefetching never takes a model away from a request placed here for it.
  if (!gpu.restoring) {
    constexpr std::size_t kLookAhead = 8;
    for (std::size_t i = 0; i < gpu.queue.size() && i < kLookAhead; ++i) {
      const RequestId id = gpu.queue[i];
      const FunctionId function = requests_.Get(id).function;
      if (gpu.resident.contains(function) || gpu.evicting.contains(function)) continue;
      if (!context_.executor->Instances(function).CanBind()) continue;
      const std::uint64_t bytes = ReserveBytes(function);
      // Wait for the running batch to finish, or for queued models to be used.
      if (!MakeRoom(slot, bytes, /*for_head=*/i == 0)) break;
      gpu.memory_used += bytes;
      gpu.restoring = true;
      gpu.restoring_function = function;
      AddModel(slot, function);
      context_.executor->Restore(gpu.gpu, function, bytes);
      break;
    }
  }
  // Pipelined loading: while the head's model is being copied in and the GPU computes nothing,
  // the head's batch starts now, its layers running as they arrive.
  if (!gpu.running && gpu.restoring && !gpu.queue.empty() &&
      context_.executor->pipelines_loading()) {
    const FunctionId function = requests_.Get(gpu.queue.front()).function;
    if (function == gpu.restoring_function) {
      TakeBatch(gpu, function);
      gpu.running = true;
      gpu.running_function = function;
      gpu.running_pipelined = true;
      context_.executor->RunPipelined(gpu.gpu, function, batch_);
    }
  }
}

bool FaaSwapPolicy::Relocate(std::size_t slot) {
  // The head's model is not here and cannot come (its function is at max_instances, every
  // instance bound elsewhere): its requests go where the model is held, or wait for an instance.
  PoolGpu& gpu = pool_[slot];
  const FunctionId function = requests_.Get(gpu.queue.front()).function;
  if (HasModel(gpu, function) || context_.executor->Instances(function).CanBind()) return false;
  RepairModelIndex(function);
  if (!models_.contains(function)) {
    if (std::find(blocked_.begin(), blocked_.end(), slot) == blocked_.end()) {
      blocked_.push_back(slot);  // advanced again when an instance comes free
    }
    return true;
  }
  std::vector<RequestId> moved;
  std::deque<RequestId> keep;
  for (RequestId r : gpu.queue) {
    (requests_.Get(r).function == function ? moved.push_back(r) : keep.push_back(r));
  }
  gpu.queue.swap(keep);
  gpu.queued.erase(function);
  for (RequestId r : moved) Forward(r);
  Advance(slot);
  return true;
}

void FaaSwapPolicy::RetryBlocked() {
  if (blocked_.empty()) return;
  std::vector<std::size_t> retry;
  retry.swap(blocked_);
  for (std::size_t slot : retry) {
    if (pool_[slot].alive) Advance(slot);
  }
}

void FaaSwapPolicy::MaybeIdle(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  // A GPU still starting is not idle: OnGpuReady looks again.
  if (!gpu.alive || !gpu.ready || gpu.running || gpu.restoring || !gpu.queue.empty()) return;
  gpu.idle_generation += 1;
  context_.executor->SetTimer(
      context_.executor->Now() + options_.pool_idle,
      kIdleTag | (static_cast<std::uint64_t>(slot) << 32) | gpu.idle_generation);
}

void FaaSwapPolicy::OnGpuReady(GpuId id) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].ready = true;
  sizer_.BecameReady();
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::OnRestoreDone(GpuId id, FunctionId function, const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  const bool give_up = pool_[slot].RestoreEnded(function, status.ok(), ReserveBytes(function),
                                                RequestTable::kMaxAttempts);
  if (!status.ok()) {
    // The slice is gone. Try again; after kMaxAttempts failures in a row, answer the function's
    // requests queued here with the failure.
    DropModel(slot, function);
    if (give_up) AnswerQueued(slot, function, status);
  }
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::OnRunDone(GpuId id, FunctionId function, std::span<const RequestId> batch,
                              const RunResult& result) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].running = false;
  const bool pipelined = std::exchange(pool_[slot].running_pipelined, false);
  if (result.status.ok()) {
    // A pipelined run's time includes waiting for its model: it says nothing of its execution.
    if (!pipelined) estimator_.Observe(function, static_cast<int>(batch.size()), result.elapsed);
    for (RequestId r : batch) requests_.Erase(r);
  } else {
    Requeue(slot, batch, result.status);
  }
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::Requeue(std::size_t slot, std::span<const RequestId> requests,
                            const Status& status) {
  PoolGpu& gpu = pool_[slot];
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    const FunctionId function = requests_.Get(*it).function;
    if (!context_.functions->active(function)) {
      Answer(*it, NotFound(fmt::format("function '{}' was removed",
                                       (*context_.functions)[function].name)));
    } else if (requests_.Retry(*it)) {
      gpu.queue.push_front(*it);
      gpu.queued[function] += 1;
    } else {
      Answer(*it, status);
    }
  }
}

void FaaSwapPolicy::Unload(std::size_t slot, FunctionId function) {
  // The function's slice on the GPU is gone (its instance died).
  PoolGpu& gpu = pool_[slot];
  const GpuModelCache::Lost lost = gpu.Forget(function, ReserveBytes(function));
  if (lost == GpuModelCache::Lost::kResident || lost == GpuModelCache::Lost::kRestoring) {
    DropModel(slot, function);
  }
  if (gpu.running && gpu.running_function == function) {
    gpu.running = false;
    gpu.running_pipelined = false;
  }
}

void FaaSwapPolicy::OnInstanceDied(GpuId id, FunctionId function, std::span<const RequestId> lost,
                                   const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  Unload(slot, function);
  Requeue(slot, lost, status);
  Advance(slot);
  MaybeIdle(slot);
  RetryBlocked();
}

void FaaSwapPolicy::OnEvictDone(GpuId id, FunctionId function, const Status&) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].EvictDone(function);
  Advance(slot);
  MaybeIdle(slot);
  RetryBlocked();
}

void FaaSwapPolicy::Retire(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  gpu.Clear([&](FunctionId f) { DropModel(slot, f); });
  IndexErase(slot);
  gpu.alive = false;
  gpu.running = false;
  gpu.running_pipelined = false;
  slot_of_gpu_.erase(gpu.gpu);
  alive_.erase(std::find(alive_.begin(), alive_.end(), slot));
  sizer_.Removed(gpu.ready);
}

void FaaSwapPolicy::OnGpuLost(GpuId id, std::span<const RequestId> lost, const Status& status) {
  const std::size_t slot = slot_of_gpu_.at(id);
  PoolGpu& gpu = pool_[slot];
  std::deque<RequestId> queued;
  queued.swap(gpu.queue);
  gpu.queued.clear();
  Retire(slot);
  // The lost runs cost an attempt; the queue was never tried: both are placed again.
  std::vector<RequestId> again;
  for (RequestId r : lost) {
    if (requests_.Retry(r)) {
      again.push_back(r);
    } else {
      Answer(r, status);
    }
  }
  again.insert(again.end(), queued.begin(), queued.end());
  for (RequestId r : again) Forward(r);
  RetryBlocked();
}

void FaaSwapPolicy::OnTimer(std::uint64_t token) {
  if ((token & ~kPayloadMask) == kForwardTag) {
    Forward(token & kPayloadMask);
    return;
  }
  const std::size_t slot = static_cast<std::size_t>((token & kPayloadMask) >> 32);
  const auto generation = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  PoolGpu& gpu = pool_[slot];
  if (!gpu.alive || !gpu.ready || gpu.idle_generation != generation || gpu.running ||
      gpu.restoring || !gpu.queue.empty() || !gpu.evicting.empty()) {
    return;
  }
  // Discard what is clean; a model that must be copied back first keeps the GPU until then
  // (OnEvictDone sets the idle timer again).
  if (!gpu.EvictAll(
          *context_.executor, [&](FunctionId f) { return ReserveBytes(f); },
          [&](FunctionId f) { DropModel(slot, f); })) {
    return;
  }
  const GpuId gpu_id = gpu.gpu;
  Retire(slot);
  context_.executor->ReleaseGpu(gpu_id);
  RetryBlocked();
}

}  // namespace gshare
