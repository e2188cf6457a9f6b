// PolicyOptions: the knobs of the scheduling policies, with their defaults and reasons.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "gshare/common/slice_granularity.h"
#include "gshare/common/units.h"
#include "gshare/model/compute_quantum.h"

namespace gshare {

struct PolicyOptions {
  // keepalive: how long an idle function instance keeps its GPU before it is released.
  // 15 minutes: the keep-alive window of common FaaS platforms and of the gShare paper's
  // keep-alive baseline.
  Duration keep_alive = std::chrono::minutes(15);
  // keepalive, faascache: the autoscaler's concurrency target per instance, as a fraction of what
  // an instance holds at once (one batch of the function's max_batch): Knative's
  // container-concurrency-target-percentage, 70% by default. Instances are added while the
  // requests queued and running exceed the target times the instances there are.
  double concurrency_target = 0.70;
  // Shared pools (faaswap, gshare): how long a GPU with no work in flight stays in the pool before
  // its models are dropped and it is released. The same for every pooled policy, so they differ
  // only in how they place work. One minute: long enough to ride out gaps between bursts, short
  // enough that a pool follows the load.
  Duration pool_idle = std::chrono::minutes(1);
  // Shared pools: GPUs that may be starting at once, as a fraction of the pool (at least one), so
  // a pool under a burst grows by this fraction per instance start.
  double pool_growth_fraction = 0.25;
  // Shared pools (faaswap, gshare): the most GPUs the pool may hold at once; 0 means no limit (the
  // optimality-gap study gives the online policy exactly the exact solver's GPUs). A cluster cap
  // that every policy obeys is the executor's (gshare sim --max-gpus).
  int max_gpus = 0;
  // faascache: the capacity of its cache, the most GPUs its instances hold at once, as GPUs per
  // function deployed (rounded up, at least one GPU); beyond it the GreedyDual victim gives its
  // GPU up. 0: no capacity of its own, so only a refused GPU (a cluster cap, gshare sim
  // --max-gpus) makes it evict, and it behaves as keepalive. `gshare compare` sweeps it.
  double gpus_per_function = 0;
  // Time from asking for a new GPU (a function instance, a pool GPU) until it can take a restore:
  // VM or container start plus CUDA context creation. Not counting the model load, which the
  // simulator charges as a restore over the link.
  Duration instance_start = std::chrono::seconds(2);
  // faaswap: delay that the GPU proxy adds to each request before it reaches the GPU, as a
  // fraction of the function's batch-1 execution latency. gShare (ASPLOS'26) measures about 40%
  // more forwarding delay through such a proxy.
  double proxy_overhead_fraction = 0.40;
  // The GPU's time slice: runs sharing a GPU's compute alternate quanta of this length (kernels are
  // not preempted). gshare predicts a shared run with it; the executor that runs the policy slices
  // with the same (the simulator's, gshare sim --quantum; the live node's arbiters).
  Duration quantum = kDefaultComputeQuantum;
  // Slices are multiples of this: the program's one granularity (SliceGranularity), the same
  // that a live node's vGPU manager enforces.
  SliceGranularity slice_granularity;

  // gshare: the options of the online algorithm (docs/scheduling.md).
  struct GShare {
    bool lazy = true;         // wait for a resident slice while the deadline allows
    bool slack_order = true;  // serve a GPU's waiting functions by deadline (else by arrival)
    bool fast_swap = true;    // evict by discarding (host snapshot valid); else checkpoint first
    // The cacheQueue: requests whose restore does not fit in their SLO are served first, and
    // their function's slices stay cached (never released by the hold).
    bool cache_queue = true;
    // Time slicing: a request that would miss behind a run in flight runs beside it.
    bool timeslice = true;
    // Tenants' shares of memory while it is contended (GSharePolicy): a tenant within its share
    // takes borrowed memory back first, even from a function with requests waiting.
    bool tenant_shares = true;
    // Predictions from a learned high quantile (exec_quantile, e.g. 0.99) of what runs and
    // restores took over their profile (LogStats: streaming log-mean and log-variance per function
    // for runs, over the pool for restores); 0: the earlier predictor, the learned mean of runs and
    // the profile's restore time. Either is then multiplied by (1 + margin), the margin fixed at
    // safety_margin (0: the quantile is the margin). With adapt_margin (the variant
    // gshare-adaptive-margin) the margin starts there and adapts toward target_attainment (grows
    // when recent attainment falls short, shrinks slowly otherwise).
    double exec_quantile = 0.99;
    double safety_margin = 0.0;
    bool adapt_margin = false;
    // Cost-aware release: an idle slice is held for the time that minimises its expected cost over
    // the function's recent gaps and its recent rate (a slice's memory-time against the restore the
    // next request would need, a miss priced at 1 / (1 - target_attainment) restores for a function
    // at risk); else (the variant gshare-fixed-hold) the earlier rule: the longest recent gap, or
    // one restore time, and slices of functions at risk never released by the hold.
    bool cost_aware_hold = true;
    // What an idle slice's time costs the cost-aware hold. kGpu (the default, what the simulator
    // and a node are billed): nothing while its GPU stays up anyway, and a GPU whose only work is
    // idle slices is released after pool_idle (its slices go with it), so the hold keeps a slice
    // until its memory is needed or its GPU goes. kMemoryTime (what `gshare optgap` scores, the
    // exact solver's objective): the slice's memory for as long as it is held.
    enum class HoldPrice { kGpu, kMemoryTime };
    HoldPrice hold_price = HoldPrice::kGpu;
    // Lazy first restore: a function with no slice whose request can wait is restored at its
    // latest start (less one blocking run and the restore's spread), so that the requests arriving
    // meanwhile join it; else (gshare-eager-restore) at once.
    bool lazy_first_restore = true;
    // The pool grows ahead of memory: below max_gpus, a slice of a function at risk (a restore
    // would miss its deadline) that is expected back within protect_horizon (its recent rate at
    // least one per horizon) is not evicted for another slice, which gets a GPU instead, and a GPU
    // holding one is not released when idle. Zero (the default): off; `compare` sweeps {0, 15m}.
    Duration protect_horizon = Duration::zero();
    double target_attainment = 0.99;
    // Load-sized replicas: a function whose recent offered load (its arrival rate, the spread of
    // its gaps and its predicted run) calls for more than one slice gets, ahead of any backlog,
    // as many as a queueing model says keep the requests waiting beyond their slack under half
    // the misses target_attainment allows, each on a GPU of the pool whose recent compute load
    // is under replica_gpu_load (GSharePolicy::SizeReplicas; no GPU is added for one); else
    // (gshare-reactive-replicas) a replica only once a backlog makes requests late.
    bool load_sized_replicas = true;
    double replica_gpu_load = 0.5;
    // A batch no larger than its head request's deadline allows (by the predicted run of the
    // batch), unless the whole batch has more requests predicted in time, counting those behind
    // it; else (gshare-queue-batch) the function's queue up to max_batch, deadlines or not.
    bool batch_to_deadline = true;
  };
  GShare gshare;
};

}  // namespace gshare
