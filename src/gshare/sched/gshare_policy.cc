#include "gshare/sched/gshare_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace gshare {
namespace {

constexpr std::uint64_t kCheckTag = 1ULL << 62;
constexpr std::uint64_t kIdleTag = 2ULL << 62;
constexpr std::uint64_t kReleaseTag = 3ULL << 62;
constexpr std::uint64_t kPayloadMask = (1ULL << 62) - 1;
// Best-fit candidates examined per placement: bounds the work per event.
constexpr int kMaxCandidates = 64;
// The lazy first restore of a function seen once: the least likelihood of a request joining it.
constexpr double kMinJoin = 0.05;
// Load-sized replicas: the weight of a new gap in a function's means (the spread of its gaps),
// the window over which the peak of its burst rate decays (restore times, at least a second: the
// load a restore must be ready for), the window of its burst rate (runs), the gaps seen before
// its load is trusted, the offered load below which one slice is left to the reactive rules,
// and the window over which a GPU's compute load decays.
constexpr double kGapWeight = 1.0 / 256;
constexpr double kRateWindowRestores = 10.0;
constexpr double kMinRateWindowSeconds = 1.0;
constexpr double kBurstRuns = 20.0;
constexpr double kMinBurstWindowSeconds = 1e-3;
constexpr std::uint32_t kGapsToSize = 64;
constexpr double kMinSizedLoad = 0.25;
constexpr double kLoadWindowSeconds = 10.0;
// The replica count: sized again when the load moves by this fraction; the least squared
// coefficient of variation of the gaps it assumes (evenly spaced arrivals still queue a little);
// the most replicas of one function.
constexpr double kResizeFraction = 0.05;
constexpr double kMinGapSpread = 0.1;
constexpr int kMaxReplicas = 4096;
// The hold's look-again: past the moment the rate says a restore is cheaper, by this factor of
// the time until then (the expected costs tie at that moment).
constexpr double kLookAgainPast = 1.05;

std::uint64_t Token(std::uint64_t tag, std::uint64_t high, std::uint32_t low) {
  return tag | (high << 32) | low;
}

// P(wait > slack) with `servers` servers at offered load `load` < servers: Erlang C (by Erlang B's
// recurrence) times an exponential tail whose mean is mean_wait_scale / (servers - load).
double ErlangCWaitBeyond(double load, int servers, double slack, double mean_wait_scale) {
  double erlang_b = 1.0;
  for (int c = 1; c <= servers; ++c) erlang_b = load * erlang_b / (c + load * erlang_b);
  const double utilisation = load / servers;
  const double waits = erlang_b / (1.0 - utilisation * (1.0 - erlang_b));
  return waits * std::exp(-slack * (servers - load) / mean_wait_scale);
}

Duration Scale(Duration d, double factor) {
  return Duration(static_cast<std::int64_t>(static_cast<double>(d.count()) * factor));
}

}  // namespace

GSharePolicy::GSharePolicy(std::string name, const SchedulerContext& context,
                           const PolicyOptions& options)
    : name_(std::move(name)),
      context_(context),
      options_(options),
      knobs_(options.gshare),
      estimator_(context.functions),
      pool_(options),
      margin_(options.gshare.safety_margin) {
  if (knobs_.exec_quantile > 0.0 && knobs_.exec_quantile < 1.0) {
    z_ = NormalQuantile(knobs_.exec_quantile);
  }
  // The functions registered before the policy starts (the simulator's workload): their events
  // come without an OnFunctionAdded.
  for (FunctionId f = 0; f < context.functions->size(); ++f) {
    if (context.functions->contains(f)) functions_.try_emplace(f);
  }
}

void GSharePolicy::OnFunctionAdded(FunctionId function) { functions_.try_emplace(function); }

void GSharePolicy::OnFunctionDrained(FunctionId function) {
  functions_.erase(function);
  std::erase(unplaced_, function);
  estimator_.Forget(function);
}

void GSharePolicy::OnRequestCancelled(RequestId request, const Status& /*status*/) {
  if (!requests_.Holds(request)) return;
  const FunctionId function = requests_.Get(request).function;
  requests_.Erase(request);
  auto it = functions_.find(function);
  if (it == functions_.end()) return;
  std::deque<RequestId>& pending = it->second.pending;
  const bool head = !pending.empty() && pending.front() == request;
  std::erase(pending, request);
  if (head) UpdateKey(function);
}

void GSharePolicy::OnFunctionRemoved(FunctionId function) {
  FailPending(function, NotFound(fmt::format("function '{}' was removed",
                                             (*context_.functions)[function].name)));
  // Idle slices go now; busy ones when their run ends (OnRunDone).
  const std::vector<std::size_t> slots = functions_[function].slots;
  for (std::size_t slot : slots) {
    GpuState& gpu = gpus_[slot];
    auto it = gpu.slices.find(function);
    if (it != gpu.slices.end() && Evictable(gpu, function, it->second)) {
      EvictSlice(slot, function);
      MaybeIdle(slot);
    }
  }
  estimator_.Forget(function);
}

void GSharePolicy::FailPending(FunctionId function, const Status& status) {
  FunctionState& fs = functions_[function];
  for (RequestId r : fs.pending) {
    context_.executor->FailRequest(r, status);
    requests_.Erase(r);
  }
  fs.pending.clear();
  UpdateKey(function);
}

std::uint64_t GSharePolicy::SliceBytes(FunctionId function, std::size_t batch) const {
  const std::uint64_t need =
      (*context_.functions)[function].MemoryForBatch(static_cast<int>(batch));
  return std::min(options_.slice_granularity.RoundUp(need),
                  context_.executor->gpu_types()[0].memory_bytes);
}

Duration GSharePolicy::PredictExec(FunctionId function, std::size_t batch) const {
  const Duration estimate = knobs_.exec_quantile > 0.0
                                ? estimator_.Quantile(function, static_cast<int>(batch), z_)
                                : estimator_.Estimate(function, static_cast<int>(batch));
  return Duration(
      static_cast<std::int64_t>(static_cast<double>(estimate.count()) * (1.0 + margin_)));
}

Duration GSharePolicy::ProfileRestore(FunctionId function) const {
  return context_.executor->gpu_types()[0].RestoreTime(
             (*context_.functions)[function].model_bytes) +
         context_.executor->Instances(function).BindDelay();
}

Duration GSharePolicy::PredictRestore(FunctionId function) const {
  const Duration profile = ProfileRestore(function);
  if (knobs_.exec_quantile <= 0.0) return profile;
  // The measured bandwidth: the mean of what restores took over their profile's time.
  return Scale(profile, restore_ratio_.Quantile(0.0));
}

TimePoint GSharePolicy::KeyOf(const Request& request) const {
  // fifo: by arrival. Otherwise by slack: the latest start (deadline minus predicted execution)
  // orders requests as their slack does, now being common to all. With the cache queue, requests
  // at risk come first (a tier a long time ahead).
  if (!knobs_.slack_order) return request.arrival;
  constexpr Duration kCacheTier = std::chrono::hours(24 * 365);
  TimePoint key = request.deadline - PredictExec(request.function, 1);
  if (knobs_.cache_queue && AtRisk(request.function)) key -= kCacheTier;
  return key;
}

Duration GSharePolicy::QueuedAhead(const GpuState& gpu, FunctionId function, TimePoint key) const {
  // Under deadline (or arrival) order, the functions waiting here with an earlier key run first.
  // Bounded look-ahead: the first kMaxQueuedAhead of them.
  constexpr int kMaxQueuedAhead = 16;
  Duration ahead{};
  int counted = 0;
  for (const auto& [other_key, other] : gpu.waiting) {
    if (other_key >= key || counted++ >= kMaxQueuedAhead) break;
    if (other == function) continue;
    const auto& fs = functions_.at(other);
    const auto max_batch = static_cast<std::size_t>((*context_.functions)[other].max_batch);
    ahead += PredictExec(other, std::min(fs.pending.size(), max_batch));
  }
  return ahead;
}

TimePoint GSharePolicy::PredictFinishOnSlice(const GpuState& gpu, const Slice& slice,
                                             FunctionId function, TimePoint key,
                                             Duration exec) const {
  const TimePoint now = context_.executor->Now();
  TimePoint start = std::max({now, slice.ready_at, gpu.ready_at});
  if (!gpu.runs.empty()) start = std::max(start, gpu.busy_until);
  return start + QueuedAhead(gpu, function, key) + exec;
}

TimePoint GSharePolicy::PredictFinishNewSlice(const GpuState& gpu, FunctionId function,
                                              Duration restore, TimePoint key,
                                              Duration exec) const {
  const TimePoint now = context_.executor->Now();
  TimePoint start = std::max({now, gpu.copy_free_at, gpu.ready_at}) + restore;
  if (!gpu.runs.empty()) start = std::max(start, gpu.busy_until);
  return start + QueuedAhead(gpu, function, key) + exec;
}

bool GSharePolicy::IsRunning(const GpuState& gpu, FunctionId function) {
  for (const auto& run : gpu.runs) {
    if (run.function == function) return true;
  }
  return false;
}

bool GSharePolicy::AtRisk(FunctionId function) const {
  const Duration restore = PredictRestore(function);
  return restore + Scale(restore, margin_) + PredictExec(function, 1) >
         (*context_.functions)[function].slo;
}

double GSharePolicy::ObservedSeconds(FunctionId function) const {
  const FunctionState& fs = functions_.at(function);
  double observed = ToSeconds(context_.executor->Now() - fs.last_arrival);
  for (std::size_t i = 0; i < fs.gap_count; ++i) observed += ToSeconds(fs.gaps[i]);
  return observed;
}

double GSharePolicy::RecentRate(FunctionId function) const {
  const double observed = ObservedSeconds(function);
  return observed > 0.0 ? static_cast<double>(functions_.at(function).gap_count) / observed : 0.0;
}

bool GSharePolicy::Protected(FunctionId function) const {
  // Off at the pool's cap, whether the policy's (max_gpus) or the executor's (a GPU refused):
  // then memory goes least recently used first, and tenants' shares apply.
  if (knobs_.protect_horizon <= Duration::zero() || !knobs_.cache_queue || pool_.AtCap() ||
      gpus_refused_) {
    return false;
  }
  // Called within the horizon, and at a recent rate, with a prior of one arrival more, of at least
  // one per horizon (a function seen once: while it was called less than a horizon ago).
  const FunctionState& fs = functions_.at(function);
  const double horizon = ToSeconds(knobs_.protect_horizon);
  const double open = ToSeconds(context_.executor->Now() - fs.last_arrival);
  if (open >= horizon) return false;
  return ObservedSeconds(function) < horizon * (fs.gap_count + 1) && AtRisk(function);
}

bool GSharePolicy::EndRun(GpuState& gpu, FunctionId function) {
  bool shared = false;
  for (auto it = gpu.runs.begin(); it != gpu.runs.end(); ++it) {
    if (it->function == function) {
      shared = it->shared;
      gpu.runs.erase(it);
      break;
    }
  }
  if (gpu.runs.empty()) gpu.busy_until = context_.executor->Now();
  return shared;
}

bool GSharePolicy::Evictable(const GpuState& gpu, FunctionId function, const Slice& slice) const {
  return slice.ready && !IsRunning(gpu, function) && functions_.at(function).pending.empty();
}

bool GSharePolicy::EvictableFor(const GpuState& gpu, FunctionId function, const Slice& slice,
                                FunctionId asker, std::uint64_t bytes) const {
  const int victim = functions_.at(function).tenant;
  return EvictableAt(gpu, function, slice, asker, bytes,
                     victim < 0 ? 0 : tenant_bytes_[static_cast<std::size_t>(victim)]);
}

bool GSharePolicy::EvictableAt(const GpuState& gpu, FunctionId function, const Slice& slice,
                               FunctionId asker, std::uint64_t bytes,
                               std::uint64_t victim_bytes) const {
  if (Protected(function)) return false;  // the new slice gets a GPU instead
  if (!MemoryContended()) return Evictable(gpu, function, slice);
  const int victim = functions_.at(function).tenant;
  const int tenant = functions_.at(asker).tenant;
  if (victim < 0 || tenant < 0 || victim == tenant) return Evictable(gpu, function, slice);
  const std::uint64_t share = TenantShare(tenant);
  // A tenant that holds nothing is within its share for its first slice, however large.
  const std::uint64_t held = tenant_bytes_[static_cast<std::size_t>(tenant)];
  const bool within = held == 0 || held + bytes <= share;
  const bool borrowing = victim_bytes > share;
  // Borrowed memory is taken back from a slice that is not running, requests waiting or not.
  // Otherwise idle slices go as without shares (a borrower may use memory no one uses now: what a
  // tenant within its share loses so, it takes back when it asks).
  if (within && borrowing) return slice.ready && !IsRunning(gpu, function);
  return Evictable(gpu, function, slice);
}

int GSharePolicy::TenantOf(FunctionId function) {
  FunctionState& fs = functions_[function];
  if (fs.tenant >= 0) return fs.tenant;
  const std::string& name = (*context_.functions)[function].tenant;
  auto [it, added] = tenant_ids_.try_emplace(name, static_cast<int>(tenant_bytes_.size()));
  if (added) tenant_bytes_.push_back(0);
  fs.tenant = it->second;
  return fs.tenant;
}

void GSharePolicy::Charge(FunctionId function, Slice& slice) {
  const auto tenant = static_cast<std::size_t>(TenantOf(function));
  if (tenant_bytes_[tenant] == 0 && slice.bytes > 0) tenants_holding_ += 1;
  tenant_bytes_[tenant] += slice.bytes;
  slice.charged = slice.bytes;
}

void GSharePolicy::Uncharge(FunctionId function, Slice& slice) {
  const auto tenant = static_cast<std::size_t>(TenantOf(function));
  if (slice.charged == 0) return;
  tenant_bytes_[tenant] -= slice.charged;
  slice.charged = 0;
  if (tenant_bytes_[tenant] == 0) tenants_holding_ -= 1;
}

bool GSharePolicy::MemoryContended() const {
  return knobs_.tenant_shares && tenants_holding_ > 0 && (pool_.AtCap() || gpus_refused_);
}

std::uint64_t GSharePolicy::TenantShare(int asker) const {
  const int holding =
      tenants_holding_ + (tenant_bytes_[static_cast<std::size_t>(asker)] == 0 ? 1 : 0);
  return pool_bytes_ / static_cast<std::uint64_t>(std::max(holding, 1));
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
  fs.key = KeyOf(requests_.Get(fs.pending.front()));
  for (std::size_t slot : fs.slots) gpus_[slot].waiting.insert({fs.key, function});
  fs.keyed = true;
}

void GSharePolicy::OnRequest(const Request& request) {
  if (!context_.functions->active(request.function)) {
    context_.executor->FailRequest(request.id, NotFound("the function was removed"));
    return;
  }
  requests_.Add(request);
  FunctionState& fs = functions_[request.function];
  if (fs.seen) {
    if (fs.gap_count == 0) {
      // Its first gap: the pool's prior for a function seen once (JoinLikelihood).
      called_again_ += 1;
      first_gaps_ += ToSeconds(request.arrival - fs.last_arrival);
    }
    LearnGap(request.function, request.arrival - fs.last_arrival);
  } else {
    functions_seen_ += 1;
  }
  fs.seen = true;
  fs.last_arrival = request.arrival;
  fs.pending.push_back(request.id);
  if (fs.pending.size() == 1) UpdateKey(request.function);
  Bind(request.function);
  SizeReplicas(request.function);
}

void GSharePolicy::LearnGap(FunctionId function, Duration gap_duration) {
  FunctionState& fs = functions_[function];
  const double gap = ToSeconds(gap_duration);
  // The spread of the gaps: their mean and that of their squares (the first kGapsToSize alike).
  const double weight = fs.gaps_seen < kGapsToSize ? 1.0 / (fs.gaps_seen + 1) : kGapWeight;
  fs.gap_mean += weight * (gap - fs.gap_mean);
  fs.gap_square += weight * (gap * gap - fs.gap_square);
  if (fs.gaps_seen < kGapsToSize) fs.gaps_seen += 1;
  // The rate over the last kBurstRuns runs (the time in which a queue builds: arrivals decayed by
  // their age), and its peak, decayed over RateWindow.
  const double burst_window =
      std::max(kMinBurstWindowSeconds, kBurstRuns * ToSeconds(estimator_.Estimate(function, 1)));
  fs.burst_rate = fs.burst_rate * std::exp(-gap / burst_window) + 1.0 / burst_window;
  fs.peak_rate = std::max(fs.burst_rate, fs.peak_rate * std::exp(-gap / RateWindow(function)));
  // The last kGapHistory gaps (HoldTime).
  fs.gaps[fs.gap_next] = gap_duration;
  fs.gap_next = static_cast<std::uint8_t>((fs.gap_next + 1) % FunctionState::kGapHistory);
  if (fs.gap_count < FunctionState::kGapHistory) fs.gap_count += 1;
}

int GSharePolicy::ReplicaTarget(FunctionId function) {
  FunctionState& fs = functions_[function];
  if (fs.gaps_seen < kGapsToSize || fs.gap_mean <= 0.0) return 1;
  // The load by the learned mean of a run; the slack by its learned high quantile (the margin
  // guards admission, not the load).
  const double run = ToSeconds(estimator_.Estimate(function, 1));
  const double high = ToSeconds(knobs_.exec_quantile > 0.0 ? estimator_.Quantile(function, 1, z_)
                                                           : estimator_.Estimate(function, 1));
  const double slack = ToSeconds((*context_.functions)[function].slo) - high;
  if (run <= 0.0 || slack <= 0.0) return 1;  // no slice serves it in time anyway
  // The load at the peak rate of its recent bursts (as of this arrival: sized on arrivals only).
  const double load = run * fs.peak_rate;
  if (load < kMinSizedLoad) return 1;
  // Sized again when the load moves by kResizeFraction (the spread and the run move slowly).
  if (std::abs(load - fs.sized_load) <= kResizeFraction * fs.sized_load) return fs.replicas;
  const double spread =
      std::max(kMinGapSpread, fs.gap_square / (fs.gap_mean * fs.gap_mean) - 1.0);  // ca^2, floored
  // Allen-Cunneen: the mean wait beyond zero is (ca^2 + cs^2) / 2 x run / (c - a), cs^2 = 0.
  const double scale = spread / 2.0 * run;
  const double allowed = (1.0 - std::min(knobs_.target_attainment, 0.999)) / 2.0;
  int c = static_cast<int>(std::min<double>(kMaxReplicas, std::floor(load) + 1));
  while (c < kMaxReplicas && ErlangCWaitBeyond(load, c, slack, scale) > allowed) ++c;
  fs.replicas = c;
  fs.sized_load = load;
  return c;
}

double GSharePolicy::RateWindow(FunctionId function) const {
  return std::max(kMinRateWindowSeconds, kRateWindowRestores * ToSeconds(PredictRestore(function)));
}

double GSharePolicy::DecayedLoad(const GpuState& gpu) const {
  const double since = ToSeconds(context_.executor->Now() - gpu.load_at);
  return gpu.load * std::exp(-since / kLoadWindowSeconds);
}

double GSharePolicy::LoadOf(const GpuState& gpu) const {
  const TimePoint now = context_.executor->Now();
  // The runs in flight count for what is predicted of them still.
  const double in_flight =
      gpu.runs.empty() || gpu.busy_until <= now ? 0.0 : ToSeconds(gpu.busy_until - now);
  return DecayedLoad(gpu) + in_flight / kLoadWindowSeconds;
}

void GSharePolicy::SizeReplicas(FunctionId function) {
  if (!knobs_.load_sized_replicas) return;
  // Not while memory is short (the pool at its cap, or a GPU refused): a replica made then could
  // take what other functions, or other tenants, need.
  if (pool_.AtCap() || gpus_refused_) return;
  FunctionState& fs = functions_[function];
  if (fs.slots.empty() || static_cast<int>(fs.slots.size()) >= ReplicaTarget(function) ||
      !CanBind(function)) {
    return;
  }
  // One replica per request: the least loaded ready GPU with room, among at most kMaxCandidates
  // of the best-fit order, whose load is under replica_gpu_load. None: no replica now, and no GPU
  // is added for it (a replica is worth a GPU only if the load lasts until the GPU has started,
  // which the pool's own rule, PoolSizer, judges from the backlog).
  const std::uint64_t bytes = SliceBytes(function);
  std::optional<std::size_t> chosen;
  double least = knobs_.replica_gpu_load;
  int visited = 0;
  for (auto it = by_free_.lower_bound({bytes, 0}); it != by_free_.end() && visited < kMaxCandidates;
       ++it, ++visited) {
    const GpuState& gpu = gpus_[it->second];
    if (!gpu.ready || gpu.slices.contains(function) || !OneRangeHolds(gpu, bytes)) continue;
    if (const double load = LoadOf(gpu); load < least) {
      least = load;
      chosen = it->second;
    }
  }
  if (chosen) StartRestore(*chosen, function);
}

void GSharePolicy::Bind(FunctionId function) {
  TenantOf(function);
  FunctionState& fs = functions_[function];
  // Locality first: a slice of this function on a GPU whose compute is free serves it now.
  for (std::size_t i = 0; i < fs.slots.size() && !fs.pending.empty(); ++i) Dispatch(fs.slots[i]);
  if (fs.pending.empty()) return;

  const Request& head = requests_.Get(fs.pending.front());
  const Request& tail = requests_.Get(fs.pending.back());
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  const Duration exec = PredictExec(function, std::min(fs.pending.size(), max_batch));
  const TimePoint head_key = KeyOf(head);  // once per decision, not per slice
  TimePoint best_existing = TimePoint::max();
  for (std::size_t slot : fs.slots) {
    const GpuState& gpu = gpus_[slot];
    best_existing = std::min(best_existing, PredictFinishOnSlice(gpu, gpu.slices.at(function),
                                                                 function, head_key, exec));
  }
  // The newest request waits behind the function's whole backlog, shared by its slices.
  TimePoint tail_existing = TimePoint::max();
  if (!fs.slots.empty()) {
    const std::size_t batches = (fs.pending.size() + max_batch - 1) / max_batch;
    const std::size_t rounds = (batches + fs.slots.size() - 1) / fs.slots.size();
    tail_existing = best_existing + exec * static_cast<std::int64_t>(rounds - 1);
  }
  const TimePoint now = context_.executor->Now();
  const Duration restore = PredictRestore(function);
  const Duration safety = Scale(restore, margin_);
  // Work-conserving: a restore is deferred only while a slice of the function that is there
  // (busy, or restoring) is predicted to serve the backlog in time; with none, waiting would save
  // no GPU time and only add latency, so the slice is made now.
  if (knobs_.lazy) {
    if (best_existing <= head.deadline && tail_existing <= tail.deadline) {
      // Wait for the slice. Re-check when there is just time left to restore elsewhere.
      const TimePoint check = head.deadline - exec - restore - safety;
      if (check > now) SetCheck(function, check);
      return;
    }
  }
  // The request a new slice is for: the newest when the backlog makes it late (a replica shares
  // the backlog), else the head.
  const bool backlog_late = tail_existing > tail.deadline && fs.pending.size() > 1;
  const Request& target = backlog_late ? tail : head;
  const TimePoint target_existing = backlog_late ? tail_existing : best_existing;
  // Work a new slice does before the target is done: one batch for a request at risk; its share
  // of the backlog, B batches over the k slices there and itself (B for the first slice). The
  // pool grows when one batch would end sooner on a GPU asked for now: more eagerly than a
  // replica is placed, so a GPU may be added for a replica that then goes elsewhere or nowhere;
  // such unused GPUs count against the share of the pool that may be starting (GrowPoolIfShort),
  // and leave after --pool-idle.
  Duration own_work = exec;
  if (backlog_late) {
    const std::size_t batches = (fs.pending.size() + max_batch - 1) / max_batch;
    const std::size_t slices = fs.slots.size() + 1;
    own_work = exec * static_cast<std::int64_t>((batches + slices - 1) / slices);
  }
  // At risk (or binding at once): a new slice where the request finishes in time, best fit.
  Placement placement = FindNewSlice(function, target, own_work);
  // Lazy first restore: a function with no slice whose backlog is one batch is restored at the
  // latest start that still finishes it in time on the chosen GPU, less a guard of one blocking
  // run (work that may take the GPU meanwhile) and the restore's spread: the requests that arrive
  // until then join the batch, and the slice is held no longer than it serves. Where the guard
  // leaves no time, or no request is likely to join, it is restored now.
  if (knobs_.lazy && knobs_.lazy_first_restore && fs.slots.empty() && placement.found &&
      fs.pending.size() <= max_batch) {
    // The restore's spread too: the learned 99th percentile of its time over the mean.
    const Duration spread =
        Scale(restore, restore_ratio_.Quantile(z_) / restore_ratio_.Quantile(0.0) - 1.0);
    const Duration guard = std::max(blocking_run_, exec) + spread;
    // One batch serves the whole backlog: the head's deadline binds.
    const TimePoint latest = head.deadline - (placement.finish - now) - guard;
    // Only by at least one guard (a finish pinned to a busy copy engine or GPU does not move with
    // the start, and re-checks in small steps would otherwise follow), and only where a request
    // may join: a function seen before at its recent rate (the hold's view); one seen once where
    // the pool makes a second call before the restore at least kMinJoin likely (JoinLikelihood;
    // functions each called once defer nothing).
    const bool may_join =
        fs.gap_count > 0 ? RecentRate(function) > 0.0 : JoinLikelihood(latest - now) >= kMinJoin;
    if (latest >= now + guard && may_join) {
      SetCheck(function, latest);
      return;
    }
  }
  if (!placement.found || placement.finish > target.deadline) {
    // A GPU added now (usable at once when instances start instantly) may serve it in time.
    if (GrowPoolIfShort(target, exec, std::min(placement.finish, target_existing))) {
      placement = FindNewSlice(function, target, own_work);
    }
  }
  if (!CanBind(function)) {
    // At its max_instances: it waits for its slices, or for an instance to come free.
    if (fs.slots.empty()) Unplaced(function);
    return;
  }
  if (!placement.found) {
    if (!fs.slots.empty()) return;  // it waits for its slice
    // No GPU can take the slice: a GPU already starting with room takes it, else a new one.
    // (Starting GPUs are nearly empty: among the most free, a bounded number examined.)
    int examined = 0;
    for (auto it = by_free_.rbegin();
         it != by_free_.rend() && it->first >= SliceBytes(function) && examined < kMaxCandidates;
         ++it, ++examined) {
      if (!gpus_[it->second].ready) {
        StartRestore(it->second, function);
        return;
      }
    }
    if (pool_.AtCap()) {
      // Every GPU is full of busy slices: retry when a run or restore ends.
      Unplaced(function);
      return;
    }
    const std::optional<std::size_t> slot = AcquireGpu(function);
    if (!slot) {
      // Refused: wait for memory on the GPUs there are (or for one that is being released to
      // go, which frees the executor's capacity); with none, nothing will free.
      if (pool_.alive() == 0 && retiring_ == 0) {
        FailPending(function, last_refusal_);
      } else {
        Unplaced(function);
      }
      return;
    }
    StartRestore(*slot, function);
    return;
  }
  // A replica only when it beats waiting for an existing slice; the first slice always.
  if (!fs.slots.empty() && placement.finish >= target_existing) return;
  if (placement.needs_eviction && !MakeRoom(placement.slot, SliceBytes(function), function)) {
    if (fs.slots.empty()) Unplaced(function);  // the shares moved: retry when memory frees
    return;
  }
  StartRestore(placement.slot, function);
}

bool GSharePolicy::CanBind(FunctionId function) const {
  InstanceView view = context_.executor->Instances(function);
  const int deferred = functions_.at(function).deferred;
  const int from_idle = std::min(view.idle, deferred);
  view.idle -= from_idle;
  view.bound += deferred;
  return view.CanBind();
}

GSharePolicy::Placement GSharePolicy::FindNewSlice(FunctionId function, const Request& head,
                                                   Duration exec) {
  const std::uint64_t bytes = SliceBytes(function);
  const Duration restore = PredictRestore(function);  // the same on every candidate
  const TimePoint key = KeyOf(head);                  // likewise
  Placement best;
  // Best fit: the alive GPU with the least free memory that holds the slice and meets the
  // deadline; failing that, the earliest finish among those examined.
  int examined = 0;
  for (auto it = by_free_.lower_bound({bytes, 0});
       it != by_free_.end() && examined < kMaxCandidates; ++it) {
    const std::size_t slot = it->second;
    const GpuState& gpu = gpus_[slot];
    if (gpu.slices.contains(function)) continue;
    ++examined;
    if (!OneRangeHolds(gpu, bytes)) continue;
    const TimePoint finish = PredictFinishNewSlice(gpu, function, restore, key, exec);
    if (finish <= head.deadline) return Placement{true, slot, false, finish};
    if (finish < best.finish) best = Placement{true, slot, false, finish};
  }
  // The emptiest GPU too (of those, the one asked for first: a GPU just added, or starting), which
  // best fit examines last: without it a pool of many part-full GPUs never sees its new ones.
  if (!by_free_.empty() && by_free_.rbegin()->first >= bytes) {
    const std::size_t slot = by_free_.lower_bound({by_free_.rbegin()->first, 0})->second;
    const GpuState& gpu = gpus_[slot];
    if (!gpu.slices.contains(function) && OneRangeHolds(gpu, bytes)) {
      const TimePoint finish = PredictFinishNewSlice(gpu, function, restore, key, exec);
      if (finish < best.finish) best = Placement{true, slot, false, finish};
    }
  }
  if (best.found) return best;
  // No GPU has the memory free: one where idle slices can be evicted (least recently used),
  // among the GPUs with the most free memory (a bounded number, to bound the work per event).
  examined = 0;
  for (auto it = by_free_.rbegin(); it != by_free_.rend() && examined < kMaxCandidates; ++it) {
    const auto& [free_bytes, slot] = *it;
    const GpuState& gpu = gpus_[slot];
    ++examined;
    if (gpu.slices.contains(function)) continue;
    std::uint64_t available = free_bytes;
    evictable_.clear();
    for (const auto& [f, slice] : gpu.slices) {
      if (EvictableFor(gpu, f, slice, function, bytes)) {
        available += slice.bytes;
        evictable_.push_back(f);
      }
    }
    if (available < bytes) continue;
    // Where slices hold contiguous ranges, evicting them must also leave one that holds it.
    if (context_.executor->LargestFreeRangeWithout(gpu.gpu, evictable_) < bytes) continue;
    const TimePoint finish = PredictFinishNewSlice(gpu, function, restore, key, exec);
    if (finish < best.finish) best = Placement{true, slot, true, finish};
    if (finish <= head.deadline) break;
  }
  return best;
}

bool GSharePolicy::GrowPoolIfShort(const Request& request, Duration exec, TimePoint best_finish) {
  // Only when the miss comes from work queued on the GPUs there are (starting ones included): a
  // GPU asked for now, where the new slice would do `exec` after its restore, would finish sooner.
  const Duration work = PredictRestore(request.function) + exec;
  if (!pool_.ShouldGrow(context_.executor->Now(), work, best_finish, request.deadline)) {
    return false;
  }
  // GPUs without a slice yet (added for a request that then went elsewhere) are capacity no one
  // uses: they count against the share that may be starting, so the pool cannot run away by
  // adding a GPU per decision. They are the emptiest, at the top of by_free_.
  int unused = 0;
  for (auto it = by_free_.rbegin(); it != by_free_.rend() && gpus_[it->second].slices.empty();
       ++it) {
    if (gpus_[it->second].ready && !pool_.MayStartWith(++unused)) return false;
  }
  return AcquireGpu(request.function).has_value();
}

void GSharePolicy::SetCheck(FunctionId function, TimePoint at) {
  FunctionState& fs = functions_[function];
  fs.check_generation += 1;
  context_.executor->SetTimer(at, Token(kCheckTag, function, fs.check_generation));
}

void GSharePolicy::Unplaced(FunctionId function) {
  FunctionState& fs = functions_[function];
  if (fs.unplaced) return;
  fs.unplaced = true;
  unplaced_.push_back(function);
}

void GSharePolicy::RetryUnplaced() {
  if (unplaced_.empty()) return;
  std::vector<FunctionId> retry;
  retry.swap(unplaced_);
  for (FunctionId f : retry) functions_[f].unplaced = false;
  for (FunctionId f : retry) {
    if (!functions_[f].pending.empty()) Bind(f);
  }
}

std::optional<std::size_t> GSharePolicy::AcquireGpu(FunctionId function) {
  const TimePoint now = context_.executor->Now();
  auto acquired =
      AcquireFirstAvailable(*context_.executor, options_.instance_start, SliceBytes(function));
  if (!acquired.ok()) {
    last_refusal_ = acquired.status();
    gpus_refused_ = true;
    return std::nullopt;
  }
  gpus_refused_ = false;
  const GpuId id = *acquired;
  const std::size_t slot = gpus_.size();
  gpus_.emplace_back();
  GpuState& gpu = gpus_.back();
  gpu.gpu = id;
  gpu.ready = pool_.StartsReady();
  gpu.ready_at = now + pool_.startup();
  gpu.copy_free_at = gpu.ready_at;
  gpu.free_bytes = context_.executor->TypeOf(id).memory_bytes;
  gpu.memory_bytes = gpu.free_bytes;
  pool_bytes_ += gpu.memory_bytes;
  by_free_.insert({gpu.free_bytes, slot});
  slot_of_[id] = slot;
  pool_.Added(gpu.ready);
  if (gpu.ready) MaybeIdle(slot);  // no OnGpuReady follows: its idle timer starts now
  return slot;
}

bool GSharePolicy::MakeRoom(std::size_t slot, std::uint64_t bytes, FunctionId asker) {
  GpuState& gpu = gpus_[slot];
  if (gpu.free_bytes >= bytes) return true;
  // In this order: idle slices of borrowers (with memory contended), the other idle slices least
  // recently used first, then borrowers' slices whose functions have requests waiting (taken
  // back for a tenant within its share).
  const bool shares = MemoryContended();
  const int tenant = TenantOf(asker);
  const std::uint64_t share = shares ? TenantShare(tenant) : 0;
  std::vector<std::tuple<int, TimePoint, FunctionId>> victims;
  for (const auto& [f, slice] : gpu.slices) {
    if (!EvictableFor(gpu, f, slice, asker, bytes)) continue;
    const int owner = functions_.at(f).tenant;
    const bool lent = shares && owner != tenant && Borrowing(owner, share);
    const int order = !functions_.at(f).pending.empty() ? 2 : (lent ? 0 : 1);
    victims.emplace_back(order, slice.last_used, f);
  }
  std::sort(victims.begin(), victims.end());
  // Planned against the shares as they stand, and carried out only when it makes the room: a
  // victim's tenant stops lending once what it would hold is back within its share.
  std::vector<std::uint64_t> planned = tenant_bytes_;
  std::uint64_t free_bytes = gpu.free_bytes;
  std::vector<FunctionId> chosen;
  for (const auto& [order, last_used, f] : victims) {
    if (free_bytes >= bytes) break;
    const Slice& slice = gpu.slices.at(f);
    const auto owner = static_cast<std::size_t>(functions_.at(f).tenant);
    if (!EvictableAt(gpu, f, slice, asker, bytes, planned[owner])) continue;
    chosen.push_back(f);
    free_bytes += slice.bytes;
    planned[owner] -= slice.charged;
  }
  if (free_bytes < bytes) return false;
  for (const FunctionId f : chosen) {
    EvictSlice(slot, f);
    // A slice taken back with requests waiting: they are bound again when memory frees.
    if (!functions_[f].pending.empty() && functions_[f].slots.empty()) Unplaced(f);
  }
  return gpu.free_bytes >= bytes;
}

void GSharePolicy::EvictSlice(std::size_t slot, FunctionId function) {
  GpuState& gpu = gpus_[slot];
  const std::uint64_t slice_bytes = gpu.slices.at(function).bytes;
  const EvictHint hint = knobs_.fast_swap ? EvictHint::kDiscardIfClean : EvictHint::kCheckpoint;
  if (context_.executor->Evict(gpu.gpu, function, hint) == EvictOutcome::kCopying) {
    // Restores on this GPU wait for the copy; the memory counts as free for placement but not
    // for a slice's growth until the copy ends (FinishEviction).
    gpu.evicting.push_back({function, slice_bytes});
    gpu.copying_bytes += slice_bytes;
  }
  Uncharge(function, gpu.slices.at(function));
  gpu.slices.erase(function);
  FunctionState& fs = functions_[function];
  if (fs.keyed) gpu.waiting.erase({fs.key, function});  // a slice taken back with requests
  fs.slots.erase(std::find(fs.slots.begin(), fs.slots.end(), slot));
  // Restores queued after a checkpoint wait for it (OnEvictDone); the policy counts the memory
  // as free from now on.
  SetFree(slot, gpu.free_bytes + slice_bytes);
  UpdateKey(function);
}

void GSharePolicy::StartRestore(std::size_t slot, FunctionId function) {
  GpuState& gpu = gpus_[slot];
  const std::uint64_t bytes = SliceBytes(function);
  if (gpu.free_bytes < bytes && !MakeRoom(slot, bytes, function)) {
    Unplaced(function);  // no room after all: try again when memory frees
    return;
  }
  const TimePoint now = context_.executor->Now();
  Slice slice;
  slice.bytes = bytes;
  slice.ready = false;
  slice.ready_at = std::max({now, gpu.copy_free_at, gpu.ready_at}) + PredictRestore(function);
  slice.last_used = now;
  Charge(function, slice);
  gpu.copy_free_at = slice.ready_at;
  gpu.slices.emplace(function, slice);
  SetFree(slot, gpu.free_bytes - bytes);
  functions_[function].slots.push_back(slot);
  UpdateKey(function);
  gpu.idle_generation += 1;
  // Restores go to the copy engine one at a time, so a slice's memory is reserved when its copy
  // starts, not while it waits for the engine.
  gpu.deferred_restores.push_back(function);
  functions_[function].deferred += 1;
  IssueRestore(slot);
}

void GSharePolicy::IssueRestore(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  while (gpu.ready && gpu.evicting.empty() && !gpu.restoring && !gpu.deferred_restores.empty()) {
    const FunctionId function = gpu.deferred_restores.front();
    const std::uint64_t bytes = gpu.slices.at(function).bytes;
    if (context_.executor->LargestFreeRange(gpu.gpu) < bytes) {
      // The memory is free in total but in pieces (slices in contiguous ranges): evict idle
      // slices until a range holds it; a copy back in flight frees memory first (OnEvictDone);
      // with nothing to evict, the function is placed again when memory frees.
      MakeContiguous(slot, bytes, function);
      if (!gpu.evicting.empty()) return;
      if (context_.executor->LargestFreeRange(gpu.gpu) < bytes) {
        DropSlice(slot, function);
        Unplaced(function);
        continue;
      }
    }
    gpu.deferred_restores.erase(gpu.deferred_restores.begin());
    functions_[function].deferred -= 1;
    gpu.restoring = true;
    gpu.restoring_function = function;
    gpu.restore_issued = context_.executor->Now();
    gpu.restore_profile = ProfileRestore(function);
    // The copy starts now: its end is predicted afresh (the copies before it may have ended
    // sooner or later than predicted), and so is the end of the copies queued behind it.
    Slice& slice = gpu.slices.at(function);
    slice.ready_at = gpu.restore_issued + PredictRestore(function);
    gpu.copy_free_at = slice.ready_at;
    for (const FunctionId queued : gpu.deferred_restores) {
      Slice& next = gpu.slices.at(queued);
      next.ready_at = gpu.copy_free_at + PredictRestore(queued);
      gpu.copy_free_at = next.ready_at;
    }
    context_.executor->Restore(gpu.gpu, function, bytes);
    return;
  }
}

double GSharePolicy::JoinLikelihood(Duration wait) const {
  if (called_again_ == 0 || functions_seen_ == 0) return 0.0;
  const double again = static_cast<double>(called_again_) / static_cast<double>(functions_seen_);
  const double first_gap = first_gaps_ / static_cast<double>(called_again_);
  return first_gap > 0.0 ? again * (1.0 - std::exp(-ToSeconds(wait) / first_gap)) : again;
}

bool GSharePolicy::OneRangeHolds(const GpuState& gpu, std::uint64_t bytes) const {
  return context_.executor->LargestFreeRange(gpu.gpu) >= bytes;
}

void GSharePolicy::MakeContiguous(std::size_t slot, std::uint64_t bytes, FunctionId asker) {
  GpuState& gpu = gpus_[slot];
  std::vector<std::pair<TimePoint, FunctionId>> victims;
  evictable_.clear();
  for (const auto& [f, slice] : gpu.slices) {
    if (f != asker && EvictableFor(gpu, f, slice, asker, bytes)) {
      victims.emplace_back(slice.last_used, f);
      evictable_.push_back(f);
    }
  }
  // Only when evicting them all would leave a range that holds it: else evict nothing.
  if (context_.executor->LargestFreeRangeWithout(gpu.gpu, evictable_) < bytes) return;
  std::sort(victims.begin(), victims.end());  // least recently used first
  for (const auto& [last_used, f] : victims) {
    if (context_.executor->LargestFreeRange(gpu.gpu) >= bytes || !gpu.evicting.empty()) return;
    EvictSlice(slot, f);
    // A slice taken back with requests waiting: they are bound again when memory frees.
    if (!functions_[f].pending.empty() && functions_[f].slots.empty()) Unplaced(f);
  }
}

void GSharePolicy::Dispatch(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  if (!gpu.ready) return;
  if (!gpu.runs.empty()) {
    DispatchShared(slot);
    return;
  }
  // Runs are not preempted: a run started now must not make a more urgent request, whose slice is
  // still restoring, miss a deadline it would meet by waiting for that slice (the GPU then idles
  // until the restore ends, and a shorter run that fits before it may go first).
  const TimePoint now = context_.executor->Now();
  TimePoint must_start_by = TimePoint::max();
  for (const auto& [key, function] : gpu.waiting) {
    Slice& slice = gpu.slices.at(function);
    FunctionState& fs = functions_[function];
    if (!slice.ready) {
      const TimePoint latest =
          requests_.Get(fs.pending.front()).deadline - PredictExec(function, 1);
      if (std::max(now, slice.ready_at) <= latest) {
        must_start_by = std::min(must_start_by, latest);
      }
      continue;
    }
    // Elastic slice: grow it to hold the batch while the GPU has memory free; a batch that
    // cannot get the memory is cut to what fits.
    std::size_t batch = std::min(
        fs.pending.size(), static_cast<std::size_t>((*context_.functions)[function].max_batch));
    const std::uint64_t growable =
        gpu.free_bytes > gpu.copying_bytes ? gpu.free_bytes - gpu.copying_bytes : 0;
    while (batch > 1 && SliceBytes(function, batch) > slice.bytes + growable) --batch;
    if (knobs_.batch_to_deadline) batch = DeadlineBatch(function, now, batch);
    if (knobs_.slack_order && now + PredictExec(function, batch) > must_start_by) continue;
    if (const std::uint64_t need = SliceBytes(function, batch); need > slice.bytes) {
      if (context_.executor->Resize(gpu.gpu, function, need)) {
        SetFree(slot, gpu.free_bytes - (need - slice.bytes));
        slice.bytes = need;
      } else {
        // Refused (no free range holds the grown slice): the batch is what the slice holds.
        while (batch > 1 && SliceBytes(function, batch) > slice.bytes) --batch;
      }
    }
    batch_.clear();
    while (batch_.size() < batch) {
      batch_.push_back(fs.pending.front());
      fs.pending.pop_front();
    }
    gpu.runs.push_back({function, false});
    gpu.busy_until = now + PredictExec(function, batch_.size());
    blocking_run_ = std::max(gpu.busy_until - now, blocking_run_ - blocking_run_ / 64);
    gpu.idle_generation += 1;
    slice.last_used = now;
    const FunctionId chosen = function;  // the loop's iterator dies in UpdateKey
    UpdateKey(chosen);
    context_.executor->Run(gpu.gpu, chosen, batch_);
    return;
  }
}

std::size_t GSharePolicy::DeadlineBatch(FunctionId function, TimePoint now,
                                        std::size_t batch) const {
  const std::deque<RequestId>& pending = functions_.at(function).pending;
  const TimePoint head_deadline = requests_.Get(pending.front()).deadline;
  std::size_t cut = batch;
  while (cut > 1 && now + PredictExec(function, cut) > head_deadline) --cut;
  if (cut == batch || now + PredictExec(function, cut) > head_deadline) return batch;
  // Predicted in time, of the same first n requests either way: the first `b` run now, then
  // batches of up to max_batch one after the other on this slice.
  const auto max_batch = static_cast<std::size_t>((*context_.functions)[function].max_batch);
  const std::size_t n = std::min(pending.size(), batch + max_batch);
  const auto in_time = [&](std::size_t b) {
    std::size_t count = 0;
    TimePoint end = now;
    for (std::size_t start = 0, size = b; start < n; start += size, size = max_batch) {
      size = std::min(size, n - start);
      end += PredictExec(function, size);
      for (std::size_t i = start; i < start + size; ++i) {
        count += requests_.Get(pending[i]).deadline >= end ? 1 : 0;
      }
    }
    return count;
  };
  return in_time(cut) >= in_time(batch) ? cut : batch;
}

void GSharePolicy::DispatchShared(std::size_t slot) {
  // Time slicing (kernels are not preempted): a run started now on a busy GPU waits at most one
  // quantum, then alternates quanta with the run in flight, so it ends within a quantum plus
  // twice its execution; the run in flight is delayed by about its execution.
  GpuState& gpu = gpus_[slot];
  if (!knobs_.timeslice || gpu.runs.size() >= 2) return;
  for (const auto& [key, function] : gpu.waiting) {
    const Slice& slice = gpu.slices.at(function);
    if (!slice.ready || IsRunning(gpu, function)) continue;
    FunctionState& fs = functions_[function];
    const Request& head = requests_.Get(fs.pending.front());
    const std::size_t batch = std::min(
        fs.pending.size(), static_cast<std::size_t>((*context_.functions)[function].max_batch));
    if (SliceBytes(function, batch) > slice.bytes) return;  // no growing while another runs
    const Duration exec = PredictExec(function, batch);
    const TimePoint now = context_.executor->Now();
    // Only the most urgent waiting function is considered: it would miss behind the run in
    // flight, and meets its deadline sharing the compute.
    if (gpu.busy_until + exec <= head.deadline) return;
    if (now + options_.quantum + exec * 2 > head.deadline) return;
    batch_.clear();
    while (batch_.size() < batch) {
      batch_.push_back(fs.pending.front());
      fs.pending.pop_front();
    }
    for (auto& run : gpu.runs) run.shared = true;
    gpu.runs.push_back({function, true});
    gpu.busy_until = std::max(gpu.busy_until + exec, now + options_.quantum + exec * 2);
    gpu.idle_generation += 1;
    gpu.slices.at(function).last_used = now;
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

void GSharePolicy::OnRunDone(GpuId id, FunctionId function, std::span<const RequestId> batch,
                             const RunResult& result) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  const TimePoint now = context_.executor->Now();
  const bool shared = EndRun(gpu, function);
  gpu.load = DecayedLoad(gpu) + ToSeconds(result.elapsed) / kLoadWindowSeconds;
  gpu.load_at = now;
  if (result.status.ok()) {
    // Learn the execution time from runs that had the GPU to themselves.
    if (!shared) estimator_.Observe(function, static_cast<int>(batch.size()), result.elapsed);
    for (RequestId r : batch) {
      Observe(requests_.Get(r), now);
      requests_.Erase(r);
    }
  } else {
    Requeue(batch, result.status);
  }
  // Shrink a slice that grew for the batch back to its size for one request. Its idle time (the
  // hold, LRU) counts from now.
  if (auto it = gpu.slices.find(function); it != gpu.slices.end()) {
    it->second.last_used = now;
    const std::uint64_t base = SliceBytes(function);
    if (it->second.bytes > base) {
      SetFree(slot, gpu.free_bytes + (it->second.bytes - base));
      it->second.bytes = base;
      static_cast<void>(context_.executor->Resize(gpu.gpu, function, base));  // shrinks in place
    }
  }
  if (!context_.functions->active(function)) {
    if (auto it = gpu.slices.find(function);
        it != gpu.slices.end() && Evictable(gpu, function, it->second)) {
      EvictSlice(slot, function);
    }
  }
  Dispatch(slot);
  if (!result.status.ok() && !functions_[function].pending.empty()) Bind(function);
  // With its queue drained, every idle slice of the function starts its hold (not only this one:
  // a replica may have gone idle while requests were still pending).
  if (functions_[function].pending.empty()) {
    const std::vector<std::size_t> slots = functions_[function].slots;
    if (!slots.empty()) {
      const Duration hold = HoldTime(function);  // once for all its slices
      for (std::size_t s : slots) MaybeRelease(s, function, hold);
    }
  }
  MaybeIdle(slot);
  RetryUnplaced();
}

void GSharePolicy::Requeue(std::span<const RequestId> requests, const Status& status) {
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    const FunctionId function = requests_.Get(*it).function;
    if (!context_.functions->active(function)) {
      context_.executor->FailRequest(
          *it,
          NotFound(fmt::format("function '{}' was removed", (*context_.functions)[function].name)));
      requests_.Erase(*it);
    } else if (requests_.Retry(*it)) {
      FunctionState& fs = functions_[function];
      fs.pending.push_front(*it);
      UpdateKey(function);
    } else {
      context_.executor->FailRequest(*it, status);
      requests_.Erase(*it);
    }
  }
}

void GSharePolicy::DropSlice(std::size_t slot, FunctionId function) {
  GpuState& gpu = gpus_[slot];
  FunctionState& fs = functions_[function];
  auto it = gpu.slices.find(function);
  if (it == gpu.slices.end()) return;
  if (fs.keyed) gpu.waiting.erase({fs.key, function});
  const std::uint64_t bytes = it->second.bytes;
  Uncharge(function, it->second);
  gpu.slices.erase(it);
  auto& deferred = gpu.deferred_restores;
  const auto kept = std::remove(deferred.begin(), deferred.end(), function);
  fs.deferred -= static_cast<int>(deferred.end() - kept);
  deferred.erase(kept, deferred.end());
  fs.slots.erase(std::find(fs.slots.begin(), fs.slots.end(), slot));
  if (gpu.alive) SetFree(slot, gpu.free_bytes + bytes);
  UpdateKey(function);
}

void GSharePolicy::MaybeRelease(std::size_t slot, FunctionId function, Duration hold) {
  // An idle slice is held for HoldTime, then released; with the fixed hold, a slice whose restore
  // would break the SLO stays cached until memory or the pool needs it.
  if (!functions_[function].pending.empty()) return;
  auto it = gpus_[slot].slices.find(function);
  if (it == gpus_[slot].slices.end()) return;
  if (!knobs_.cost_aware_hold && knobs_.cache_queue && AtRisk(function)) return;
  // One timer per slice: one that fires no later looks at the hold again then.
  Slice& slice = it->second;
  if (hold == Duration::max()) return;  // no timer: held until needed or its GPU goes
  const TimePoint due = context_.executor->Now() + hold;
  if (slice.release_at <= due) return;
  slice.release_at = due;
  context_.executor->SetTimer(due, Token(kReleaseTag, slot, function));
}

Duration GSharePolicy::HoldTime(FunctionId function) const {
  if (!knobs_.cost_aware_hold) return FixedHoldTime(function);
  // Priced by the GPU: an idle slice costs nothing while its GPU stays up, and nothing keeps
  // its GPU up (an idle GPU goes after pool_idle with its slices): held until its memory is
  // needed (MakeRoom, least recently used first) or its GPU goes.
  if (knobs_.hold_price == PolicyOptions::GShare::HoldPrice::kGpu) return Duration::max();
  // The hold h minimises the expected cost, in seconds of the slice's memory, of holding it idle
  // until the next request or for h, whichever is first, and of the restore that a request after
  // h needs (its memory is held while it copies; for a function at risk the request also misses
  // its deadline, priced at 1 / (1 - target) restores: the misses an attainment of target allows
  // per request). The next arrival is drawn from the recent gaps, given that none has come since
  // the last arrival (a gap shorter than that is out; each other weighs one), and from an
  // exponential at the recent rate (weighing one: the rate prior; the gap still open counts in
  // it, so a function not called for a while is expected less soon). A function seen once is
  // expected never again: released at once. The candidates: zero, each gap, the cap
  // (--pool-idle, looked at again then), and between gaps the minimum of the convex pieces.
  const FunctionState& fs = functions_.at(function);
  const double restore = ToSeconds(PredictRestore(function));
  const double target = std::min(knobs_.target_attainment, 0.999);
  const double restore_cost =
      restore * (knobs_.cache_queue && AtRisk(function) ? 1.0 + 1.0 / (1.0 - target) : 1.0);
  const double cap = ToSeconds(options_.pool_idle);
  const auto k = static_cast<std::size_t>(fs.gap_count);
  const double elapsed = ToSeconds(context_.executor->Now() - fs.last_arrival);
  std::array<double, FunctionState::kGapHistory> residual{};  // of the gaps still possible
  std::size_t n = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const double g = ToSeconds(fs.gaps[i]);
    if (g > elapsed) residual[n++] = g - elapsed;
  }
  // RecentRate, with the span it is over kept for the look-again below.
  const double observed = ObservedSeconds(function);
  const double rate = observed > 0.0 ? static_cast<double>(k) / observed : 0.0;
  const auto expected = [&](double h) {
    double cost = 0.0;
    for (std::size_t i = 0; i < n; ++i) cost += residual[i] <= h ? residual[i] : h + restore_cost;
    const double later = std::exp(-rate * h);
    cost += (rate > 0.0 ? (1.0 - later) / rate : h) + later * restore_cost;
    return cost;
  };
  double best = 0.0;
  double best_cost = expected(0.0);
  const auto consider = [&](double h) {
    if (h <= 0.0 || h > cap) return;
    if (const double c = expected(h); c < best_cost) {
      best = h;
      best_cost = c;
    }
  };
  for (std::size_t i = 0; i < n; ++i) consider(residual[i]);
  // Between two gaps, with m of them still ahead, the cost's slope is m + e^(-rate h) (1 - rate
  // C): where rate C > 1 it is convex there, with its minimum at h = ln((rate C - 1) / m) / rate.
  if (rate > 0.0 && rate * restore_cost > 1.0) {
    for (std::size_t m = 1; m <= n; ++m) {
      consider(std::log((rate * restore_cost - 1.0) / static_cast<double>(m)) / rate);
    }
  }
  consider(cap);
  // The rate falls while no request comes (the open gap counts in it): once the mean gap it
  // implies outgrows the restore (rate C < 1), holding on costs more than a restore. Look again
  // then (a little after, past the tie), when it comes before the hold ends; the cost is
  // minimised afresh from there.
  if (best > 0.0 && rate > 0.0) {
    const double flip = kLookAgainPast * (static_cast<double>(k) * restore_cost - observed);
    if (flip > 0.0 && flip < best) best = flip;
  }
  return FromSeconds(best);
}

Duration GSharePolicy::FixedHoldTime(FunctionId function) const {
  // Ski rental on the real gap: when the function's recent gaps (the longest of the last
  // kGapHistory, about their 90th percentile) are shorter than the pool's idle time, the next
  // request is likely to come within that gap: hold the slice that long (and a little more), and
  // it runs without a restore. Functions called more rarely are held one restore time, at most
  // twice the best slice-time in hindsight.
  const FunctionState& fs = functions_.at(function);
  const Duration restore = PredictRestore(function);
  if (fs.gap_count < FunctionState::kGapHistory) return restore;
  const Duration longest = *std::max_element(fs.gaps.begin(), fs.gaps.end());
  const Duration hold = longest + longest / 8;
  return hold < options_.pool_idle ? std::max(hold, restore) : restore;
}

void GSharePolicy::OnRestoreDone(GpuId id, FunctionId function, const Status& status) {
  const std::size_t slot = slot_of_.at(id);
  gpus_[slot].restoring = false;
  if (!status.ok()) {
    // The slice is gone: bind the function again, a bounded number of times in a row.
    DropSlice(slot, function);
    IssueRestore(slot);
    FunctionState& fs = functions_[function];
    if (++fs.restore_failures >= RequestTable::kMaxAttempts && fs.slots.empty()) {
      fs.restore_failures = 0;
      FailPending(function, status);
    } else if (!fs.pending.empty()) {
      Bind(function);
    }
    Dispatch(slot);  // runs held back for this restore (Dispatch) may start now
    MaybeIdle(slot);
    RetryUnplaced();
    return;
  }
  functions_[function].restore_failures = 0;
  if (const GpuState& gpu = gpus_[slot]; gpu.restore_profile > Duration::zero()) {
    restore_ratio_.Observe(ToSeconds(context_.executor->Now() - gpu.restore_issued) /
                           ToSeconds(gpu.restore_profile));
  }
  IssueRestore(slot);
  if (!context_.functions->active(function)) {
    // Removed while its slice was restoring: the slice goes now.
    gpus_[slot].slices.at(function).ready = true;
    EvictSlice(slot, function);
    Dispatch(slot);  // runs held back for this restore (Dispatch) may start now
    MaybeIdle(slot);
    RetryUnplaced();
    return;
  }
  Slice& slice = gpus_[slot].slices.at(function);
  slice.ready = true;
  slice.ready_at = context_.executor->Now();
  slice.last_used = slice.ready_at;
  Dispatch(slot);
  // A slice ready after its function's queue drained (a replica too late) starts its hold.
  if (functions_[function].pending.empty()) MaybeRelease(slot, function, HoldTime(function));
  MaybeIdle(slot);
  RetryUnplaced();
}

void GSharePolicy::OnGpuReady(GpuId id) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  gpu.ready = true;
  pool_.BecameReady();
  IssueRestore(slot);
  MaybeIdle(slot);
}

void GSharePolicy::OnEvictDone(GpuId id, FunctionId function, const Status&) {
  // A failed copy leaves the host snapshot as it was; either way the memory is free.
  FinishEviction(slot_of_.at(id), function);
  RetryUnplaced();
}

void GSharePolicy::FinishEviction(std::size_t slot, FunctionId function) {
  GpuState& gpu = gpus_[slot];
  auto it = std::find_if(gpu.evicting.begin(), gpu.evicting.end(),
                         [&](const auto& e) { return e.first == function; });
  if (it == gpu.evicting.end()) return;
  gpu.copying_bytes -= it->second;
  gpu.evicting.erase(it);
  if (gpu.retiring) {
    if (gpu.evicting.empty()) {
      gpu.retiring = false;
      retiring_ -= 1;
      slot_of_.erase(gpu.gpu);
      context_.executor->ReleaseGpu(gpu.gpu);
    }
    return;
  }
  IssueRestore(slot);
}

void GSharePolicy::OnInstanceDied(GpuId id, FunctionId function, std::span<const RequestId> lost,
                                  const Status& status) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  EndRun(gpu, function);
  if (gpu.restoring && gpu.restoring_function == function && gpu.slices.contains(function) &&
      !gpu.slices.at(function).ready) {
    gpu.restoring = false;
  }
  FinishEviction(slot, function);  // an eviction in flight was cancelled with it
  if (!gpu.alive) return;
  DropSlice(slot, function);
  Requeue(lost, status);
  IssueRestore(slot);
  Dispatch(slot);
  if (!functions_[function].pending.empty()) Bind(function);
  MaybeIdle(slot);
  RetryUnplaced();
}

void GSharePolicy::OnGpuLost(GpuId id, std::span<const RequestId> lost, const Status& status) {
  const std::size_t slot = slot_of_.at(id);
  GpuState& gpu = gpus_[slot];
  std::vector<FunctionId> affected;
  for (const auto& [f, slice] : gpu.slices) affected.push_back(f);
  std::sort(affected.begin(), affected.end());  // a deterministic order
  if (gpu.alive) {
    for (FunctionId f : affected) DropSlice(slot, f);
    by_free_.erase({gpu.free_bytes, slot});
    gpu.alive = false;
    pool_bytes_ -= gpu.memory_bytes;
    pool_.Removed(gpu.ready);
  }
  gpu.slices.clear();
  for (FunctionId f : gpu.deferred_restores) functions_[f].deferred -= 1;
  gpu.deferred_restores.clear();
  gpu.evicting.clear();
  gpu.copying_bytes = 0;
  if (gpu.retiring) retiring_ -= 1;
  gpu.retiring = false;
  gpu.runs.clear();
  gpu.restoring = false;
  slot_of_.erase(id);
  Requeue(lost, status);
  for (RequestId r : lost) {
    if (requests_.Holds(r)) affected.push_back(requests_.Get(r).function);
  }
  for (FunctionId f : affected) {
    if (!functions_[f].pending.empty()) Bind(f);
  }
  RetryUnplaced();
}

void GSharePolicy::MaybeIdle(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  if (!gpu.alive || !gpu.ready || !gpu.runs.empty() || !gpu.waiting.empty()) return;
  gpu.idle_generation += 1;
  context_.executor->SetTimer(context_.executor->Now() + options_.pool_idle,
                              Token(kIdleTag, slot, gpu.idle_generation));
}

void GSharePolicy::Release(std::size_t slot) {
  GpuState& gpu = gpus_[slot];
  for (auto& [f, slice] : gpu.slices) {
    Uncharge(f, slice);
    if (context_.executor->Evict(gpu.gpu, f, EvictHint::kDiscardIfClean) ==
        EvictOutcome::kCopying) {
      gpu.evicting.push_back({f, slice.bytes});
      gpu.copying_bytes += slice.bytes;
    }
    auto& slots = functions_[f].slots;
    slots.erase(std::find(slots.begin(), slots.end(), slot));
  }
  gpu.slices.clear();
  by_free_.erase({gpu.free_bytes, slot});
  gpu.alive = false;
  pool_bytes_ -= gpu.memory_bytes;
  gpus_refused_ = false;  // the executor has a GPU back
  pool_.Removed(gpu.ready);
  if (!gpu.evicting.empty()) {
    gpu.retiring = true;  // released when the copies end (FinishEviction)
    retiring_ += 1;
    return;
  }
  slot_of_.erase(gpu.gpu);
  context_.executor->ReleaseGpu(gpu.gpu);
}

void GSharePolicy::OnTimer(std::uint64_t token) {
  const std::uint64_t tag = token & ~kPayloadMask;
  const std::uint64_t high = (token & kPayloadMask) >> 32;
  const auto low = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
  if (tag == kCheckTag) {
    const auto function = static_cast<FunctionId>(high);
    auto it = functions_.find(function);
    if (it != functions_.end() && it->second.check_generation == low) Bind(function);
    return;
  }
  const auto slot = static_cast<std::size_t>(high);
  GpuState& gpu = gpus_[slot];
  if (tag == kReleaseTag) {
    const FunctionId function = low;
    if (!gpu.alive) return;
    auto it = gpu.slices.find(function);
    const TimePoint now = context_.executor->Now();
    // A timer superseded (the slice's timer is now due later), or of a slice since released and
    // made again (none due). A live clock fires a timer at its time or a little after.
    if (it == gpu.slices.end() || it->second.release_at > now) return;
    it->second.release_at = TimePoint::max();
    // Busy or wanted: MaybeRelease sets the timer again when its queue drains. A protected slice
    // is looked at again after another hold.
    if (!Evictable(gpu, function, it->second)) return;
    if (Protected(function) && knobs_.cost_aware_hold &&
        knobs_.hold_price == PolicyOptions::GShare::HoldPrice::kMemoryTime) {
      it->second.release_at = now + knobs_.protect_horizon;
      context_.executor->SetTimer(it->second.release_at, token);
      return;
    }
    // The cost-aware hold is reckoned from now, given that no request came meanwhile; the fixed
    // one from the slice's last use.
    const Duration hold = HoldTime(function);
    if (hold == Duration::max()) return;
    const TimePoint due = knobs_.cost_aware_hold ? now + hold : it->second.last_used + hold;
    if (now < due) {
      // Used since the timer was set, or the hold grew: look again when it runs out.
      it->second.release_at = due;
      context_.executor->SetTimer(due, token);
      return;
    }
    EvictSlice(slot, function);
    MaybeIdle(slot);
    RetryUnplaced();  // its memory may be what a waiting function needs
    return;
  }
  if (!gpu.alive || gpu.idle_generation != low || !gpu.runs.empty() || !gpu.waiting.empty() ||
      !gpu.evicting.empty() || gpu.restoring || !gpu.deferred_restores.empty()) {
    return;
  }
  for (const auto& [f, slice] : gpu.slices) {
    if (!slice.ready) return;  // a restore is still in flight
  }
  for (const auto& [f, slice] : gpu.slices) {
    if (Protected(f)) {
      MaybeIdle(slot);  // look again after another pool_idle
      return;
    }
  }
  Release(slot);
  RetryUnplaced();  // the pool is below its cap again
}

}  // namespace gshare
