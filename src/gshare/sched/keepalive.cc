#include "gshare/sched/keepalive.h"

#include <algorithm>

namespace gshare {
namespace {

// A timer token carries the instance and the idle period it was set for.
std::uint64_t MakeToken(std::uint32_t instance, std::uint32_t generation) {
  return (static_cast<std::uint64_t>(instance) << 32) | generation;
}

}  // namespace

KeepAlivePolicy::KeepAlivePolicy(const SchedulerContext& context, const PolicyOptions& options)
    : context_(context), options_(options), functions_(context.functions->size()) {}

void KeepAlivePolicy::OnRequest(const Request& request) {
  FunctionState& state = functions_[request.function];
  state.queue.push_back(request.id);
  Dispatch(request.function);
  // Scale out when requests wait and a new instance would serve the newest sooner than the
  // instances there are (ready or starting) can.
  if (!state.queue.empty() && ColdStartIsFaster(request.function)) {
    const GpuId gpu = context_.executor->AcquireGpu(options_.instance_start);
    const auto id = static_cast<std::uint32_t>(instances_.size());
    instances_.push_back(Instance{request.function, gpu, State::kStarting, 0});
    instance_of_gpu_[gpu] = id;
    state.starting += 1;
    state.starting_ready.push_back(context_.executor->Now() + ColdStart(request.function));
    if (options_.instance_start <= Duration::zero()) OnGpuReady(gpu);
  }
}

bool KeepAlivePolicy::ColdStartIsFaster(FunctionId function) const {
  const FunctionState& state = functions_[function];
  const std::size_t servers = static_cast<std::size_t>(state.ready + state.starting);
  if (servers == 0) return true;
  const ResolvedFunction& spec = (*context_.functions)[function];
  const TimePoint now = context_.executor->Now();
  // The instances there are (ready now, or starting and ready soon) serve the queue in rounds;
  // the newest request finishes after the last round. A new instance would finish it after a
  // cold start and one run.
  const TimePoint first_free = state.ready > 0 ? now : state.starting_ready.front();
  const auto max_batch = static_cast<std::size_t>(spec.max_batch);
  const auto batches = (state.queue.size() + max_batch - 1) / max_batch;
  const auto rounds = static_cast<std::int64_t>((batches + servers - 1) / servers);
  const Duration run = spec.ExecLatency(spec.max_batch);
  return first_free + run * rounds > now + ColdStart(function) + run;
}

Duration KeepAlivePolicy::ColdStart(FunctionId function) const {
  const ResolvedFunction& spec = (*context_.functions)[function];
  return options_.instance_start + context_.gpu->RestoreTime(spec.model_bytes);
}

void KeepAlivePolicy::OnGpuReady(GpuId gpu) {
  Instance& instance = instances_[instance_of_gpu_.at(gpu)];
  instance.state = State::kLoading;
  // The instance owns the whole GPU: it reserves all of its memory.
  context_.executor->Restore(gpu, instance.function, context_.gpu->memory_bytes);
}

void KeepAlivePolicy::OnRestoreDone(GpuId gpu, FunctionId function) {
  const std::uint32_t id = instance_of_gpu_.at(gpu);
  functions_[function].starting -= 1;
  functions_[function].starting_ready.pop_front();
  functions_[function].ready += 1;
  BecomeIdle(id);
  Dispatch(function);
}

void KeepAlivePolicy::OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId>) {
  BecomeIdle(instance_of_gpu_.at(gpu));
  Dispatch(function);
}

void KeepAlivePolicy::BecomeIdle(std::uint32_t id) {
  Instance& instance = instances_[id];
  instance.state = State::kIdle;
  instance.idle_generation += 1;
  functions_[instance.function].idle.push_back(id);
  context_.executor->SetTimer(context_.executor->Now() + options_.keep_alive,
                              MakeToken(id, instance.idle_generation));
}

void KeepAlivePolicy::Dispatch(FunctionId function) {
  FunctionState& state = functions_[function];
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  while (!state.queue.empty() && !state.idle.empty()) {
    const std::uint32_t id = state.idle.back();  // most recently used: lets the others expire
    state.idle.pop_back();
    Instance& instance = instances_[id];
    instance.state = State::kBusy;
    instance.idle_generation += 1;  // cancels its keep-alive timer
    batch_.clear();
    while (!state.queue.empty() && batch_.size() < max_batch) {
      batch_.push_back(state.queue.front());
      state.queue.pop_front();
    }
    context_.executor->Run(instance.gpu, function, batch_);
  }
}

void KeepAlivePolicy::OnTimer(std::uint64_t token) {
  const auto id = static_cast<std::uint32_t>(token >> 32);
  const auto generation = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  Instance& instance = instances_[id];
  if (instance.state != State::kIdle || instance.idle_generation != generation) return;
  auto& idle = functions_[instance.function].idle;
  idle.erase(std::find(idle.begin(), idle.end(), id));
  instance.state = State::kGone;
  functions_[instance.function].ready -= 1;
  context_.executor->Evict(instance.gpu, instance.function, EvictMode::kDiscard);
  context_.executor->ReleaseGpu(instance.gpu);
  instance_of_gpu_.erase(instance.gpu);
}

}  // namespace gshare
