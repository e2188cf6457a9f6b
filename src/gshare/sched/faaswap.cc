#include "gshare/sched/faaswap.h"

#include <algorithm>
#include <limits>

namespace gshare {
namespace {

constexpr std::uint64_t kForwardTag = 1ULL << 62;
constexpr std::uint64_t kIdleTag = 2ULL << 62;
constexpr std::uint64_t kPayloadMask = (1ULL << 62) - 1;

}  // namespace

FaaSwapPolicy::FaaSwapPolicy(const SchedulerContext& context, const PolicyOptions& options)
    : context_(context),
      options_(options),
      model_idle_(context.functions->size()),
      model_busy_(context.functions->size()) {}

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
  if (entry.idle) {
    model_idle_[function].insert(slot);
  } else {
    model_busy_[function].insert({entry.busy_key, slot});
  }
}

void FaaSwapPolicy::DropModel(std::size_t slot, FunctionId function) {
  PoolGpu& gpu = pool_[slot];
  auto it = gpu.holder_entries.find(function);
  if (it == gpu.holder_entries.end()) return;
  if (it->second.idle) {
    model_idle_[function].erase(slot);
  } else {
    model_busy_[function].erase({it->second.busy_key, slot});
  }
  gpu.holder_entries.erase(it);
}

void FaaSwapPolicy::RepairModelIndex(FunctionId function) {
  // Each GPU holding the model has one entry, in the idle set or in the busy set under a key no
  // later than its current one (keys only grow while a GPU stays busy). GPU-level changes do not
  // touch these sets; entries are brought up to date here, from the front, until the front of
  // each set is right: then the front is the true minimum.
  auto& busy = model_busy_[function];
  auto& idle = model_idle_[function];
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

Duration FaaSwapPolicy::SwapTime(FunctionId function) const {
  return context_.gpu->RestoreTime((*context_.functions)[function].model_bytes);
}

void FaaSwapPolicy::OnRequest(const Request& request) {
  if (request.id >= requests_.size()) requests_.resize(request.id + 1);
  requests_[request.id] = request;
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
  const Duration exec = (*context_.functions)[request.function].ExecLatency(1);
  const Duration swap = SwapTime(request.function);
  std::size_t best = std::numeric_limits<std::size_t>::max();
  TimePoint best_done = TimePoint::max();
  auto consider = [&](std::size_t slot) {
    const PoolGpu& gpu = pool_[slot];
    const TimePoint start = std::max(now, FreeKey(gpu));
    const TimePoint done =
        start + (HasModel(gpu, request.function) ? Duration::zero() : swap) + exec;
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
  const FunctionId f = request.function;
  if (!model_idle_[f].empty()) consider(*model_idle_[f].begin());
  if (!model_busy_[f].empty()) consider(model_busy_[f].begin()->second);
  // Grow when the best GPU misses the deadline because of the work queued on it: an idle GPU
  // would finish the request sooner.
  const bool contention = now + swap + exec < best_done;
  const bool may_start = starting_ < MaxStartingGpus(alive_.size(), options_.pool_growth_fraction);
  if ((alive_.empty() || (best_done > request.deadline && contention)) && may_start) {
    const GpuId id = context_.executor->AcquireGpu(options_.instance_start);
    const std::size_t slot = pool_.size();
    pool_.emplace_back();
    PoolGpu& gpu = pool_.back();
    gpu.gpu = id;
    gpu.ready = options_.instance_start <= Duration::zero();
    gpu.ready_at = now + options_.instance_start;
    gpu.predicted_free_at = gpu.ready_at;
    alive_.push_back(slot);
    IndexInsert(slot);
    slot_of_gpu_[id] = slot;
    if (!gpu.ready) starting_ += 1;
    if (best == std::numeric_limits<std::size_t>::max()) best = slot;
  }
  return best;
}

void FaaSwapPolicy::Forward(RequestId id) {
  const Request& request = requests_[id];
  const std::size_t slot = Place(request);
  PoolGpu& gpu = pool_[slot];
  const TimePoint now = context_.executor->Now();
  const bool has_model = HasModel(gpu, request.function);
  SetPredictedFree(slot, std::max({now, gpu.predicted_free_at, gpu.ready_at}) +
                             (has_model ? Duration::zero() : SwapTime(request.function)) +
                             (*context_.functions)[request.function].ExecLatency(1));
  gpu.queue.push_back(id);
  gpu.idle_generation += 1;
  Advance(slot);
}

bool FaaSwapPolicy::MakeRoom(std::size_t slot, std::uint64_t bytes, FunctionId keep) {
  PoolGpu& gpu = pool_[slot];
  const std::uint64_t capacity = context_.gpu->memory_bytes;
  auto it = gpu.lru.begin();
  while (gpu.memory_used + bytes > capacity && it != gpu.lru.end()) {
    const FunctionId victim = *it;
    if ((gpu.running && victim == gpu.running_function) || victim == keep) {
      ++it;
      continue;
    }
    context_.executor->Evict(gpu.gpu, victim, EvictMode::kDiscard);
    gpu.memory_used -= ReserveBytes(victim);
    gpu.resident.erase(victim);
    DropModel(slot, victim);
    it = gpu.lru.erase(it);
  }
  return gpu.memory_used + bytes <= capacity;
}

void FaaSwapPolicy::Advance(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  if (!gpu.ready) return;
  // Run the head of the queue when its model is on the GPU.
  if (!gpu.running && !gpu.queue.empty()) {
    const FunctionId function = requests_[gpu.queue.front()].function;
    if (auto it = gpu.resident.find(function); it != gpu.resident.end()) {
      gpu.lru.splice(gpu.lru.end(), gpu.lru, it->second);  // most recently used
      const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
      batch_.clear();
      while (!gpu.queue.empty() && batch_.size() < max_batch &&
             requests_[gpu.queue.front()].function == function) {
        batch_.push_back(gpu.queue.front());
        gpu.queue.pop_front();
      }
      gpu.running = true;
      gpu.running_function = function;
      context_.executor->Run(gpu.gpu, function, batch_);
    }
  }
  // Keep the copy engine busy: restore the first model, among the next few queued requests, that
  // is not on the GPU (a bounded look-ahead keeps the work per event constant).
  if (!gpu.restoring) {
    constexpr std::size_t kLookAhead = 8;
    for (std::size_t i = 0; i < gpu.queue.size() && i < kLookAhead; ++i) {
      const RequestId id = gpu.queue[i];
      const FunctionId function = requests_[id].function;
      if (gpu.resident.contains(function)) continue;
      const std::uint64_t bytes = ReserveBytes(function);
      if (!MakeRoom(slot, bytes, function)) break;  // wait for the running batch to finish
      gpu.memory_used += bytes;
      gpu.restoring = true;
      gpu.restoring_function = function;
      AddModel(slot, function);
      context_.executor->Restore(gpu.gpu, function, bytes);
      break;
    }
  }
}

void FaaSwapPolicy::MaybeIdle(std::size_t slot) {
  PoolGpu& gpu = pool_[slot];
  if (gpu.running || gpu.restoring || !gpu.queue.empty()) return;
  gpu.idle_generation += 1;
  context_.executor->SetTimer(
      context_.executor->Now() + options_.pool_idle,
      kIdleTag | (static_cast<std::uint64_t>(slot) << 32) | gpu.idle_generation);
}

void FaaSwapPolicy::OnGpuReady(GpuId id) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].ready = true;
  starting_ -= 1;
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::OnRestoreDone(GpuId id, FunctionId function) {
  const std::size_t slot = slot_of_gpu_.at(id);
  PoolGpu& gpu = pool_[slot];
  gpu.restoring = false;
  gpu.lru.push_back(function);
  gpu.resident[function] = std::prev(gpu.lru.end());
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::OnRunDone(GpuId id, FunctionId, std::span<const RequestId>) {
  const std::size_t slot = slot_of_gpu_.at(id);
  pool_[slot].running = false;
  Advance(slot);
  MaybeIdle(slot);
}

void FaaSwapPolicy::OnTimer(std::uint64_t token) {
  if ((token & ~kPayloadMask) == kForwardTag) {
    Forward(token & kPayloadMask);
    return;
  }
  const std::size_t slot = static_cast<std::size_t>((token & kPayloadMask) >> 32);
  const auto generation = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  PoolGpu& gpu = pool_[slot];
  if (!gpu.alive || gpu.idle_generation != generation || gpu.running || gpu.restoring ||
      !gpu.queue.empty()) {
    return;
  }
  for (FunctionId function : gpu.lru) {
    DropModel(slot, function);
    context_.executor->Evict(gpu.gpu, function, EvictMode::kDiscard);
  }
  IndexErase(slot);
  gpu.lru.clear();
  gpu.resident.clear();
  gpu.memory_used = 0;
  gpu.alive = false;
  context_.executor->ReleaseGpu(gpu.gpu);
  slot_of_gpu_.erase(gpu.gpu);
  alive_.erase(std::find(alive_.begin(), alive_.end(), slot));
}

}  // namespace gshare
