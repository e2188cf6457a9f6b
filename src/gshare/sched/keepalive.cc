#include "gshare/sched/keepalive.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gshare {
namespace {

// Knative's stable window: the autoscaler's concurrency average follows the load this fast.
constexpr double kStableWindowSeconds = 60.0;
// Instances started per decision at most: bounds the work per event.
constexpr int kMaxScaleOutPerEvent = 64;

// A timer token carries the instance and the idle period it was set for.
std::uint64_t MakeToken(std::uint32_t instance, std::uint32_t generation) {
  return (static_cast<std::uint64_t>(instance) << 32) | generation;
}

}  // namespace

KeepAlivePolicy::KeepAlivePolicy(const SchedulerContext& context, const PolicyOptions& options,
                                 bool greedy_dual)
    : context_(context),
      options_(options),
      greedy_dual_(greedy_dual),
      estimator_(context.functions) {
  // The functions registered before the policy starts: their events come without an
  // OnFunctionAdded.
  for (FunctionId f = 0; f < context.functions->size(); ++f) {
    if (context.functions->contains(f)) functions_.try_emplace(f);
  }
}

void KeepAlivePolicy::OnFunctionAdded(FunctionId function) { functions_.try_emplace(function); }

void KeepAlivePolicy::OnFunctionDrained(FunctionId function) {
  functions_.erase(function);
  std::erase(starved_, function);
  estimator_.Forget(function);
}

void KeepAlivePolicy::OnRequestCancelled(RequestId request, const Status& /*status*/) {
  if (!requests_.Holds(request)) return;
  const FunctionId function = requests_.Get(request).function;
  requests_.Erase(request);
  if (auto it = functions_.find(function); it != functions_.end()) {
    std::erase(it->second.queue, request);
  }
}

void KeepAlivePolicy::OnFunctionRemoved(FunctionId function) {
  FailQueue(function, NotFound(fmt::format("function '{}' was removed",
                                           (*context_.functions)[function].name)));
  // Idle instances go now; busy and starting ones when they next fall idle.
  auto idle = functions_[function].idle;
  for (std::uint32_t id : idle) GiveBack(id);
  estimator_.Forget(function);
}

void KeepAlivePolicy::OnRequest(const Request& request) {
  if (!context_.functions->active(request.function)) {
    context_.executor->FailRequest(request.id, NotFound("the function was removed"));
    return;
  }
  requests_.Add(request);
  FunctionState& state = functions_[request.function];
  state.queue.push_back(request.id);
  state.frequency += 1;
  Dispatch(request.function);
  Autoscale(request.function);
}

void KeepAlivePolicy::SampleConcurrency(FunctionId function) {
  // A time average of the concurrency, exponentially weighted over the stable window.
  FunctionState& state = functions_[function];
  const TimePoint now = context_.executor->Now();
  const double dt = ToSeconds(now - state.sampled_at);
  const double weight = std::exp(-dt / kStableWindowSeconds);
  state.average_concurrency =
      state.concurrency + (state.average_concurrency - state.concurrency) * weight;
  state.sampled_at = now;
  // Requests that wait for the first instance to start are not load the instances see: counting
  // them would size the function for its cold start's backlog.
  state.concurrency = (state.ready > 0 ? static_cast<int>(state.queue.size()) : 0) + state.running;
}

void KeepAlivePolicy::Autoscale(FunctionId function) {
  SampleConcurrency(function);
  for (int i = 0; i < kMaxScaleOutPerEvent && ShouldScaleOut(function); ++i) {
    if (!ScaleOut(function)) break;
  }
}

int KeepAlivePolicy::BatchCap(FunctionId function) const {
  return estimator_.LargestBatchWithin(function, (*context_.functions)[function].slo);
}

bool KeepAlivePolicy::ShouldScaleOut(FunctionId function) const {
  const FunctionState& state = functions_.at(function);
  const ResolvedFunction& spec = (*context_.functions)[function];
  const int servers = state.ready + state.starting;
  if (spec.max_instances > 0 && servers >= spec.max_instances) return false;
  if (state.starved) return false;  // retried when a GPU is given back
  if (servers == 0) return !state.queue.empty();
  // The concurrency target: Knative's desired instances.
  const int batch_cap = BatchCap(function);
  const double per_instance = options_.concurrency_target * batch_cap;
  if (state.average_concurrency > per_instance * servers) return true;
  if (state.queue.empty()) return false;
  // The SLO: the instances there are (ready now, or starting and ready soon) serve the queue in
  // rounds; the newest request finishes after the last round.
  // The first instance free: an idle one now, else the earliest predicted end of a busy run or
  // the earliest start (a run predicted to have ended already ends now).
  const TimePoint now = context_.executor->Now();
  TimePoint first_free = TimePoint::max();
  if (!state.idle.empty()) {
    first_free = now;
  } else {
    if (!state.busy_ends.empty()) first_free = std::max(now, *state.busy_ends.begin());
    if (!state.starting_ready.empty()) {
      first_free = std::min(first_free, state.starting_ready.front());
    }
    if (first_free == TimePoint::max()) return false;  // no instance will serve: none to wait for
  }
  const auto cap = static_cast<std::size_t>(batch_cap);
  const auto batches = (state.queue.size() + cap - 1) / cap;
  const auto rounds = static_cast<std::int64_t>((batches + servers - 1) / servers);
  const Duration run = estimator_.Estimate(function, batch_cap);
  const Request& newest = requests_.Get(state.queue.back());
  const TimePoint finish = first_free + run * rounds;
  // Only when it misses, and an instance started now would serve it sooner.
  return finish > newest.deadline && now + ColdStart(function) + run < finish;
}

bool KeepAlivePolicy::ScaleOut(FunctionId function) {
  FunctionState& state = functions_[function];
  const ResolvedFunction& spec = (*context_.functions)[function];
  if (!context_.executor->Instances(function).CanBind()) {
    Starve(function);  // an instance is still bound (copying its state back)
    return false;
  }
  const auto acquire = [&]() -> Result<GpuId> {
    if (AtCapacity()) {
      return ResourceExhausted(
          fmt::format("faascache holds the {} GPUs of its capacity", Capacity()));
    }
    return AcquireFirstAvailable(*context_.executor, options_.instance_start,
                                 spec.MemoryForBatch(spec.max_batch));
  };
  auto gpu = acquire();
  if (!gpu.ok() && greedy_dual_ && EvictForGpu(function)) gpu = acquire();
  if (!gpu.ok()) {
    if (state.ready + state.starting == 0 && instance_of_gpu_.empty()) {
      // No instance anywhere will give a GPU back: nothing to wait for.
      FailQueue(function, gpu.status());
    } else {
      Starve(function);
    }
    return false;
  }
  const std::uint32_t id = next_instance_++;
  instances_.emplace(id, Instance{function, *gpu, State::kStarting, 0});
  instance_of_gpu_[*gpu] = id;
  state.starting += 1;
  state.starting_ready.push_back(context_.executor->Now() + ColdStart(function));
  if (options_.instance_start <= Duration::zero()) OnGpuReady(*gpu);
  return true;
}

std::size_t KeepAlivePolicy::Capacity() const {
  const double gpus =
      std::ceil(options_.gpus_per_function * static_cast<double>(context_.functions->held()));
  return std::max<std::size_t>(1, static_cast<std::size_t>(gpus));
}

bool KeepAlivePolicy::AtCapacity() const {
  return greedy_dual_ && options_.gpus_per_function > 0 && instance_of_gpu_.size() >= Capacity();
}

bool KeepAlivePolicy::EvictForGpu(FunctionId function) {
  for (auto it = by_priority_.begin(); it != by_priority_.end(); ++it) {
    const std::uint32_t victim = it->second;
    // Not the function's own, nor one whose function has requests waiting for it.
    const FunctionId owner = instances_[victim].function;
    if (owner == function || !functions_[owner].queue.empty()) continue;
    clock_ = it->first;
    GiveBack(victim);  // out of the index too
    return true;
  }
  return false;
}

Duration KeepAlivePolicy::ColdStart(FunctionId function) const {
  const ResolvedFunction& spec = (*context_.functions)[function];
  return options_.instance_start + context_.executor->Instances(function).BindDelay() +
         context_.executor->gpu_types()[0].RestoreTime(spec.model_bytes);
}

void KeepAlivePolicy::OnGpuReady(GpuId gpu) {
  const std::uint32_t id = instance_of_gpu_.at(gpu);
  Instance& instance = instances_[id];
  if (!context_.functions->active(instance.function) ||
      !context_.executor->Instances(instance.function).CanBind()) {
    // Removed, or every instance the function may have is bound (one may still be copying its
    // state back): give the GPU back and scale out again when an instance comes free.
    const FunctionId function = instance.function;
    FunctionState& state = functions_[function];
    state.starting -= 1;
    state.starting_ready.pop_front();
    GiveBack(id);
    if (context_.functions->active(function)) Starve(function);
    return;
  }
  instance.state = State::kLoading;
  // The instance owns the whole GPU: it reserves all of its memory.
  context_.executor->Restore(gpu, instance.function, context_.executor->TypeOf(gpu).memory_bytes);
}

void KeepAlivePolicy::OnRestoreDone(GpuId gpu, FunctionId function, const Status& status) {
  const std::uint32_t id = instance_of_gpu_.at(gpu);
  FunctionState& state = functions_[function];
  state.starting -= 1;
  state.starting_ready.pop_front();
  if (!status.ok()) {
    // The load failed: the slice is gone; give the GPU back and try again, a bounded number of
    // times while no instance of the function is ready.
    GiveBack(id);
    state.restore_failures += 1;
    if (state.ready == 0 && state.restore_failures >= RequestTable::kMaxAttempts) {
      FailQueue(function, status);
    } else if (!state.queue.empty()) {
      Autoscale(function);
    }
    return;
  }
  state.restore_failures = 0;
  state.ready += 1;
  BecomeIdle(id);
  Dispatch(function);
  if (greedy_dual_) RetryStarved();
}

void KeepAlivePolicy::Answered(std::span<const RequestId> batch) {
  for (RequestId r : batch) requests_.Erase(r);
}

void KeepAlivePolicy::OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId> batch,
                                const RunResult& result) {
  const std::uint32_t id = instance_of_gpu_.at(gpu);
  functions_[function].running -= instances_[id].batch;
  instances_[id].batch = 0;
  EndBusy(id);
  if (result.status.ok()) {
    estimator_.Observe(function, static_cast<int>(batch.size()), result.elapsed);
    Answered(batch);
  } else {
    Requeue(function, batch, result.status);
  }
  BecomeIdle(id);
  Dispatch(function);
  if (context_.functions->active(function)) Autoscale(function);
  // faascache: a function waiting for a GPU may take an idle instance's now (by eviction).
  if (greedy_dual_) RetryStarved();
}

void KeepAlivePolicy::EndBusy(std::uint32_t id) {
  Instance& instance = instances_[id];
  auto& ends = functions_[instance.function].busy_ends;
  if (auto it = ends.find(instance.busy_until); it != ends.end()) ends.erase(it);
}

void KeepAlivePolicy::Requeue(FunctionId function, std::span<const RequestId> requests,
                              const Status& status) {
  FunctionState& state = functions_[function];
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    if (context_.functions->active(function) && requests_.Retry(*it)) {
      state.queue.push_front(*it);
    } else {
      context_.executor->FailRequest(*it, status);
      requests_.Erase(*it);
    }
  }
}

void KeepAlivePolicy::FailQueue(FunctionId function, const Status& status) {
  FunctionState& state = functions_[function];
  for (RequestId r : state.queue) {
    context_.executor->FailRequest(r, status);
    requests_.Erase(r);
  }
  state.queue.clear();
}

void KeepAlivePolicy::BecomeIdle(std::uint32_t id) {
  Instance& instance = instances_[id];
  instance.state = State::kIdle;  // resident: a restore or a run just ended
  if (!context_.functions->active(instance.function)) {
    functions_[instance.function].ready -= 1;
    GiveBack(id);
    return;
  }
  instance.idle_generation += 1;
  FunctionState& state = functions_[instance.function];
  state.idle.push_back(id);
  if (greedy_dual_) {
    const ResolvedFunction& spec = (*context_.functions)[instance.function];
    const double cost = ToSeconds(ColdStart(instance.function));
    const double size =
        std::max(static_cast<double>(spec.MemoryForBatch(spec.max_batch)) / kGiB, 1e-3);
    instance.priority = clock_ + static_cast<double>(state.frequency) * cost / size;
    by_priority_.insert({instance.priority, id});
  }
  context_.executor->SetTimer(context_.executor->Now() + options_.keep_alive,
                              MakeToken(id, instance.idle_generation));
}

void KeepAlivePolicy::Dispatch(FunctionId function) {
  FunctionState& state = functions_[function];
  const auto max_batch = static_cast<std::size_t>(BatchCap(function));
  while (!state.queue.empty() && !state.idle.empty()) {
    const std::uint32_t id = state.idle.back();  // most recently used: lets the others expire
    RemoveIdle(id);
    Instance& instance = instances_[id];
    instance.state = State::kBusy;
    instance.idle_generation += 1;  // cancels its keep-alive timer
    batch_.clear();
    while (!state.queue.empty() && batch_.size() < max_batch) {
      batch_.push_back(state.queue.front());
      state.queue.pop_front();
    }
    instance.batch = static_cast<int>(batch_.size());
    state.running += instance.batch;
    instance.busy_until = context_.executor->Now() + estimator_.Estimate(function, instance.batch);
    state.busy_ends.insert(instance.busy_until);
    context_.executor->Run(instance.gpu, function, batch_);
  }
}

void KeepAlivePolicy::GiveBack(std::uint32_t id) {
  // Removes the instance's slice (if resident) and gives its GPU back.
  Instance& instance = instances_[id];
  const auto& idle = functions_[instance.function].idle;
  if (std::find(idle.begin(), idle.end(), id) != idle.end()) {
    RemoveIdle(id);
    functions_[instance.function].ready -= 1;
  }
  const bool resident = instance.state == State::kIdle || instance.state == State::kBusy;
  instance.idle_generation += 1;
  if (resident && context_.executor->Evict(instance.gpu, instance.function,
                                           EvictHint::kDiscardIfClean) == EvictOutcome::kCopying) {
    instance.state = State::kEvicting;  // OnEvictDone gives the GPU back
    return;
  }
  context_.executor->ReleaseGpu(instance.gpu);
  Forget(id);
}

void KeepAlivePolicy::RemoveIdle(std::uint32_t id) {
  Instance& instance = instances_[id];
  auto& idle = functions_[instance.function].idle;
  idle.erase(std::find(idle.begin(), idle.end(), id));
  if (greedy_dual_) by_priority_.erase({instance.priority, id});
}

void KeepAlivePolicy::Forget(std::uint32_t id) {
  instance_of_gpu_.erase(instances_.at(id).gpu);
  instances_.erase(id);
  RetryStarved();
}

void KeepAlivePolicy::Starve(FunctionId function) {
  FunctionState& state = functions_[function];
  if (state.starved) return;
  state.starved = true;
  starved_.push_back(function);
}

void KeepAlivePolicy::RetryStarved() {
  if (starved_.empty()) return;
  std::vector<FunctionId> retry;
  retry.swap(starved_);
  for (FunctionId f : retry) functions_[f].starved = false;
  for (FunctionId f : retry) {
    if (!functions_[f].queue.empty()) Autoscale(f);
  }
}

void KeepAlivePolicy::OnEvictDone(GpuId gpu, FunctionId, const Status&) {
  // The copy back ended (a failed copy leaves the host snapshot as it was): the GPU is empty.
  auto it = instance_of_gpu_.find(gpu);
  if (it == instance_of_gpu_.end()) return;
  const std::uint32_t id = it->second;
  context_.executor->ReleaseGpu(gpu);
  Forget(id);
}

void KeepAlivePolicy::Detach(std::uint32_t id) {
  // The instance is gone with its slice: take it out of its function's counts.
  Instance& instance = instances_[id];
  FunctionState& state = functions_[instance.function];
  switch (instance.state) {
    case State::kStarting:
    case State::kLoading:
      state.starting -= 1;
      state.starting_ready.pop_front();
      break;
    case State::kIdle:
      RemoveIdle(id);
      state.ready -= 1;
      break;
    case State::kBusy:
      state.ready -= 1;
      state.running -= instance.batch;
      instance.batch = 0;
      EndBusy(id);
      break;
    case State::kEvicting:
      break;
  }
  instance_of_gpu_.erase(instance.gpu);
  instances_.erase(id);
}

void KeepAlivePolicy::OnInstanceDied(GpuId gpu, FunctionId function,
                                     std::span<const RequestId> lost, const Status& status) {
  Detach(instance_of_gpu_.at(gpu));
  // The GPU is still held, now empty (an eviction in flight was cancelled too): give it back.
  context_.executor->ReleaseGpu(gpu);
  Recover(function, lost, status);
}

void KeepAlivePolicy::OnGpuLost(GpuId gpu, std::span<const RequestId> lost, const Status& status) {
  const std::uint32_t id = instance_of_gpu_.at(gpu);
  const FunctionId function = instances_[id].function;
  Detach(id);
  Recover(function, lost, status);
}

void KeepAlivePolicy::Recover(FunctionId function, std::span<const RequestId> lost,
                              const Status& status) {
  Requeue(function, lost, status);
  Dispatch(function);
  Autoscale(function);
  RetryStarved();
}

void KeepAlivePolicy::OnTimer(std::uint64_t token) {
  const auto id = static_cast<std::uint32_t>(token >> 32);
  const auto generation = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  auto it = instances_.find(id);
  if (it == instances_.end() || it->second.state != State::kIdle ||
      it->second.idle_generation != generation) {
    return;
  }
  GiveBack(id);
}

}  // namespace gshare
