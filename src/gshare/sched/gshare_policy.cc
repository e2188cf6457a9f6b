#include "gshare/sched/gshare_policy.h"

#include <algorithm>
#include <limits>

namespace gshare {
namespace {

constexpr std::uint64_t kCheckTag = 1ULL << 62;
constexpr std::uint64_t kIdleTag = 2ULL << 62;
constexpr std::uint64_t kPayloadMask = (1ULL << 62) - 1;
// Best-fit candidates examined per placement: bounds the work per event.
constexpr int kMaxCandidates = 64;

std::uint64_t Token(std::uint64_t tag, std::uint64_t high, std::uint32_t low) {
  return tag | (high << 32) | low;
}

}  // namespace

GSharePolicy::GSharePolicy(std::string name, const SchedulerContext& context,
                           const PolicyOptions& options)
    : name_(std::move(name)),
      context_(context),
      options_(options),
      knobs_(options.gshare),
      functions_(context.functions->size()),
      margin_(options.gshare.initial_margin),
      is_unplaced_(context.functions->size(), false) {
  if (knobs_.slice_granularity_bytes == 0) knobs_.slice_granularity_bytes = 128ull << 20;
}

std::uint64_t GSharePolicy::SliceBytes(FunctionId function) const {
  const std::uint64_t g = knobs_.slice_granularity_bytes;
  const std::uint64_t need = (*context_.functions)[function].gpu_memory_bytes;
  return std::min((need + g - 1) / g * g, context_.gpu->memory_bytes);
}

Duration GSharePolicy::PredictExec(FunctionId function, std::size_t batch) const {
  const Duration profile = (*context_.functions)[function].ExecLatency(static_cast<int>(batch));
  const double scale = functions_[function].observed_ratio * (1.0 + margin_);
  return Duration(static_cast<std::int64_t>(static_cast<double>(profile.count()) * scale));
}

Duration GSharePolicy::PredictRestore(FunctionId function) const {
  return context_.gpu->restore_overhead +
         TransferTime((*context_.functions)[function].model_bytes, context_.gpu->h2d_bytes_per_second);
}

TimePoint GSharePolicy::KeyOf(const Request& request) const {
  return knobs_.slack_order ? request.deadline : request.arrival;
}

TimePoint GSharePolicy::PredictFinishOnSlice(const GpuState& gpu, const Slice& slice,
                                             Duration exec) const {
  const TimePoint now = context_.executor->Now();
  TimePoint start = std::max({now, slice.ready_at, gpu.ready_at});
  if (gpu.running) start = std::max(start, gpu.busy_until);
  return start + exec;
}

TimePoint GSharePolicy::PredictFinishNewSlice(const GpuState& gpu, FunctionId function,
                                              Duration exec) const {
  const TimePoint now = context_.executor->Now();
  TimePoint start = std::max({now, gpu.copy_free_at, gpu.ready_at}) + PredictRestore(function);
  if (gpu.running) start = std::max(start, gpu.busy_until);
  return start + exec;
}

bool GSharePolicy::Evictable(const GpuState& gpu, FunctionId function, const Slice& slice) const {
  return slice.ready && !slice.evicting && !(gpu.running && gpu.running_function == function) &&
         functions_[function].pending.empty();
}

void GSharePolicy::SetFree(std::size_t slot, std::uint64_t free_bytes) {
  GpuState& gpu = gpus_[slot];
  by_free_.erase({gpu.free_bytes, slot});
  gpu.free_bytes = free_bytes;
  by_free_.insert({gpu.free_bytes, slot});
}

void GSharePolicy::UpdateKey(FunctionId function) {
  FunctionState& fs = functions_[function];
  if (fs.keyed) {
    for (std::size_t slot : fs.slots) gpus_[slot].waiting.erase({fs.key, function});
    fs.keyed = false;
  }
  if (fs.pending.empty() || fs.slots.empty()) return;
  fs.key = KeyOf(requests_[fs.pending.front()]);
  for (std::size_t slot : fs.slots) gpus_[slot].waiting.insert({fs.key, function});
  fs.keyed = true;
}

void GSharePolicy::OnRequest(const Request& request) {
  if (request.id >= requests_.size()) requests_.resize(request.id + 1);
  requests_[request.id] = request;
  FunctionState& fs = functions_[request.function];
  fs.pending.push_back(request.id);
  if (fs.pending.size() == 1) UpdateKey(request.function);
  Bind(request.function);
}

void GSharePolicy::Bind(FunctionId function) {
  FunctionState& fs = functions_[function];
  // Locality first: a slice of this function on a GPU whose compute is free serves it now.
  for (std::size_t i = 0; i < fs.slots.size() && !fs.pending.empty(); ++i) Dispatch(fs.slots[i]);
  if (fs.pending.empty()) return;

  const Request& head = requests_[fs.pending.front()];
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  const Duration exec = PredictExec(function, std::min(fs.pending.size(), max_batch));
  TimePoint best_existing = TimePoint::max();
  for (std::size_t slot : fs.slots) {
    const GpuState& gpu = gpus_[slot];
    best_existing = std::min(best_existing, PredictFinishOnSlice(gpu, gpu.slices.at(function), exec));
  }
  const TimePoint now = context_.executor->Now();
  if (knobs_.lazy && best_existing <= head.deadline) {
    // Lazy: wait for the slice. Re-check when there is just time left to restore elsewhere.
    const TimePoint check = head.deadline - exec - PredictRestore(function);
    if (check > now) {
      fs.check_generation += 1;
      context_.executor->SetTimer(check, Token(kCheckTag, function, fs.check_generation));
    }
    return;
  }
  // At risk (or binding at once): a new slice where the request finishes in time, best fit.
  const Placement placement = FindNewSlice(function, head);
  if (!placement.found) {
    if (!fs.slots.empty()) {
      GrowPoolIfShort(head, best_existing);  // it waits for its slice; more capacity is on the way for the next
      return;
    }
    // No GPU can take the slice: a GPU already starting with room takes it, else a new one.
    for (std::size_t slot = gpus_.size(); slot-- > 0;) {
      const GpuState& gpu = gpus_[slot];
      if (gpu.alive && !gpu.ready && gpu.free_bytes >= SliceBytes(function)) {
        StartRestore(slot, function);
        return;
      }
    }
    if (AtGpuLimit()) {
      // Every GPU is full of busy slices: retry when a run or restore ends.
      if (!is_unplaced_[function]) {
        is_unplaced_[function] = true;
        unplaced_.push_back(function);
      }
      return;
    }
    StartRestore(AcquireGpu(), function);
    return;
  }
  if (placement.finish > head.deadline) {
    GrowPoolIfShort(head, std::min(placement.finish, best_existing));
  }
  // A replica only when it beats waiting for an existing slice; the first slice always.
  if (!fs.slots.empty() && placement.finish >= best_existing) return;
  if (placement.needs_eviction && !MakeRoom(placement.slot, SliceBytes(function))) return;
  StartRestore(placement.slot, function);
}

GSharePolicy::Placement GSharePolicy::FindNewSlice(FunctionId function, const Request& head) {
  const std::uint64_t bytes = SliceBytes(function);
  const Duration exec = PredictExec(function, 1);
  Placement best;
  // Best fit: the alive GPU with the least free memory that holds the slice and meets the
  // deadline; failing that, the earliest finish among those examined.
  int examined = 0;
  for (auto it = by_free_.lower_bound({bytes, 0}); it != by_free_.end() && examined < kMaxCandidates;
       ++it) {
    const std::size_t slot = it->second;
    const GpuState& gpu = gpus_[slot];
    if (gpu.slices.contains(function)) continue;
    ++examined;
    const TimePoint finish = PredictFinishNewSlice(gpu, function, exec);
    if (finish <= head.deadline) return Placement{true, slot, false, finish};
    if (finish < best.finish) best = Placement{true, slot, false, finish};
  }
  if (best.found) return best;
  // No GPU has the memory free: one where idle slices can be evicted (least recently used).
  for (const auto& [free_bytes, slot] : by_free_) {
    const GpuState& gpu = gpus_[slot];
    if (gpu.slices.contains(function)) continue;
    std::uint64_t available = free_bytes;
    for (const auto& [f, slice] : gpu.slices) {
      if (Evictable(gpu, f, slice)) available += slice.bytes;
    }
    if (available < bytes) continue;
    const TimePoint finish = PredictFinishNewSlice(gpu, function, exec);
    if (finish < best.finish) best = Placement{true, slot, true, finish};
    if (finish <= head.deadline) break;
  }
  return best;
}

void GSharePolicy::GrowPoolIfShort(const Request& request, TimePoint best_finish) {
  // Only when the miss comes from work queued on the GPUs: an idle GPU would finish sooner.
  const TimePoint now = context_.executor->Now();
  const TimePoint idle_finish =
      now + PredictRestore(request.function) + PredictExec(request.function, 1);
  if (starting_ == 0 && idle_finish < best_finish && !AtGpuLimit()) AcquireGpu();
}

bool GSharePolicy::AtGpuLimit() const {
  return options_.max_gpus > 0 && alive_ >= static_cast<std::size_t>(options_.max_gpus);
}

void GSharePolicy::RetryUnplaced() {
  if (unplaced_.empty()) return;
  std::vector<FunctionId> retry;
  retry.swap(unplaced_);
  for (FunctionId f : retry) is_unplaced_[f] = false;
  for (FunctionId f : retry) Bind(f);
}

std::size_t GSharePolicy::AcquireGpu() {
  const TimePoint now = context_.executor->Now();
  const GpuId id = context_.executor->AcquireGpu(options_.instance_start);
  const std::size_t slot = gpus_.size();
  gpus_.emplace_back();
  GpuState& gpu = gpus_.back();
  gpu.gpu = id;
  gpu.ready = options_.instance_start <= Duration::zero();
  gpu.ready_at = now + std::max(options_.instance_start, Duration::zero());
  gpu.copy_free_at = gpu.ready_at;
  gpu.free_bytes = context_.gpu->memory_bytes;
  by_free_.insert({gpu.free_bytes, slot});
  slot_of_[id] = slot;
  alive_ += 1;
  if (!gpu.ready) starting_ += 1;
  return slot;
}

bool GSharePolicy::MakeRoom(std::size_t slot, std::uint64_t bytes) {
  GpuState& gpu = gpus_[slot];
  if (gpu.free_bytes >= bytes) return true;
  std::vector<std::pair<TimePoint, FunctionId>> victims;
  for (const auto& [f, slice] : gpu.slices) {
    if (Evictable(gpu, f, slice)) victims.emplace_back(slice.last_used, f);
  }
  std::sort(victims.begin(), victims.end());
  std::uint64_t free_bytes = gpu.free_bytes;
  for (const auto& [last_used, f] : victims) {
    if (free_bytes >= bytes) break;
    const std::uint64_t slice_bytes = gpu.slices.at(f).bytes;
    const EvictMode mode = knobs_.fast_swap ? EvictMode::kDiscard : EvictMode::kCheckpoint;
    context_.executor->Evict(gpu.gpu, f, mode);
    if (mode == EvictMode::kCheckpoint) gpu.evictions_in_flight += 1;
    gpu.slices.erase(f);
    auto& slots = functions_[f].slots;
    slots.erase(std::find(slots.begin(), slots.end(), slot));
    free_bytes += slice_bytes;
  }
  SetFree(slot, free_bytes);
  return free_bytes >= bytes;
}

void GSharePolicy::StartRestore(std::size_t slot, FunctionId function) {
  GpuState& gpu = gpus_[slot];
  const std::uint64_t bytes = SliceBytes(function);
  if (gpu.free_bytes < bytes && !MakeRoom(slot, bytes)) return;  // caller checked; stay safe
  const TimePoint now = context_.executor->Now();
  Slice slice;
  slice.bytes = bytes;
  slice.ready = false;
  slice.ready_at = std::max({now, gpu.copy_free_at, gpu.ready_at}) + PredictRestore(function);
  slice.last_used = now;
  gpu.copy_free_at = slice.ready_at;
  gpu.slices.emplace(function, slice);
  SetFree(slot, gpu.free_bytes - bytes);
  functions_[function].slots.push_back(slot);
  UpdateKey(function);
  gpu.idle_generation += 1;
  if (gpu.ready && gpu.evictions_in_flight == 0) {
    context_.executor->Restore(gpu.gpu, function, bytes);
  } else {
    gpu.deferred_restores.push_back(function);
  }
}

void GSharePolicy::Dispatch(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  if (!gpu.ready || gpu.running) return;
  for (const auto& [key, function] : gpu.waiting) {
    Slice& slice = gpu.slices.at(function);
    if (!slice.ready) continue;
    FunctionState& fs = functions_[function];
    const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
    batch_.clear();
    while (!fs.pending.empty() && batch_.size() < max_batch) {
      batch_.push_back(fs.pending.front());
      fs.pending.pop_front();
    }
    const TimePoint now = context_.executor->Now();
    gpu.running = true;
    gpu.running_function = function;
    gpu.run_started = now;
    gpu.busy_until = now + PredictExec(function, batch_.size());
    gpu.idle_generation += 1;
    slice.last_used = now;
    const FunctionId chosen = function;  // the loop's iterator dies in UpdateKey
    UpdateKey(chosen);
    context_.executor->Run(gpu.gpu, chosen, batch_);
    return;
  }
}

void GSharePolicy::Observe(const Request& request, TimePoint completion) {
  const double met = completion <= request.deadline ? 1.0 : 0.0;
  recent_attainment_ = 0.995 * recent_attainment_ + 0.005 * met;
  if (!knobs_.adapt_margin) return;
  if (recent_attainment_ < knobs_.target_attainment) {
    margin_ = std::min(2.0, margin_ * 1.02 + 0.001);
  } else {
    margin_ = std::max(0.0, margin_ * 0.9995);
  }
}

void GSharePolicy::OnRunDone(GpuId id, FunctionId function, std::span<const RequestId> batch) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  const TimePoint now = context_.executor->Now();
  gpu.running = false;
  gpu.busy_until = now;
  // Learn the execution time: one run at a time per GPU, so the wall time is the run's own.
  const Duration profile = (*context_.functions)[function].ExecLatency(static_cast<int>(batch.size()));
  if (profile > Duration::zero()) {
    const double ratio = ToSeconds(now - gpu.run_started) / ToSeconds(profile);
    FunctionState& fs = functions_[function];
    fs.observed_ratio = 0.8 * fs.observed_ratio + 0.2 * ratio;
  }
  for (RequestId r : batch) Observe(requests_[r], now);
  Dispatch(slot);
  MaybeIdle(slot);
  RetryUnplaced();
}

void GSharePolicy::OnRestoreDone(GpuId id, FunctionId function) {
  const std::size_t slot = slot_of_.at(id);
  Slice& slice = gpus_[slot].slices.at(function);
  slice.ready = true;
  slice.ready_at = context_.executor->Now();
  Dispatch(slot);
  MaybeIdle(slot);
  RetryUnplaced();
}

void GSharePolicy::OnGpuReady(GpuId id) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  gpu.ready = true;
  starting_ -= 1;
  for (FunctionId f : gpu.deferred_restores) {
    context_.executor->Restore(gpu.gpu, f, gpu.slices.at(f).bytes);
  }
  gpu.deferred_restores.clear();
  MaybeIdle(slot);
}

void GSharePolicy::OnEvictDone(GpuId id, FunctionId) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  if (--gpu.evictions_in_flight > 0 || !gpu.ready) return;
  for (FunctionId f : gpu.deferred_restores) {
    context_.executor->Restore(gpu.gpu, f, gpu.slices.at(f).bytes);
  }
  gpu.deferred_restores.clear();
}

void GSharePolicy::MaybeIdle(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  if (!gpu.alive || !gpu.ready || gpu.running || !gpu.waiting.empty()) return;
  gpu.idle_generation += 1;
  context_.executor->SetTimer(context_.executor->Now() + options_.pool_idle,
                              Token(kIdleTag, slot, gpu.idle_generation));
}

void GSharePolicy::Release(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  for (const auto& [f, slice] : gpu.slices) {
    context_.executor->Evict(gpu.gpu, f, EvictMode::kDiscard);
    auto& slots = functions_[f].slots;
    slots.erase(std::find(slots.begin(), slots.end(), slot));
  }
  gpu.slices.clear();
  by_free_.erase({gpu.free_bytes, slot});
  gpu.alive = false;
  alive_ -= 1;
  slot_of_.erase(gpu.gpu);
  context_.executor->ReleaseGpu(gpu.gpu);
}

void GSharePolicy::OnTimer(std::uint64_t token) {
  const std::uint64_t tag = token & ~kPayloadMask;
  const std::uint64_t high = (token & kPayloadMask) >> 32;
  const auto low = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  if (tag == kCheckTag) {
    const auto function = static_cast<FunctionId>(high);
    if (functions_[function].check_generation == low) Bind(function);
    return;
  }
  const auto slot = static_cast<std::size_t>(high);
  GpuState& gpu = gpus_[slot];
  if (!gpu.alive || gpu.idle_generation != low || gpu.running || !gpu.waiting.empty() ||
      gpu.evictions_in_flight > 0 || !gpu.deferred_restores.empty()) {
    return;
  }
  for (const auto& [f, slice] : gpu.slices) {
    if (!slice.ready) return;  // a restore is still in flight
  }
  Release(slot);
}

}  // namespace gshare
