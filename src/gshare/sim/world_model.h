// WorldModel: how far the simulated world departs from the ideal one that the policies plan for.
//
// The ideal world (WorldModel{}, `--ideal`) restores at exactly the profile's speed, whatever else
// is copying, with no noise, and tells the policies each function's true execution profile. The
// fair world (WorldModel::Fair(), the default of `gshare sim` and `gshare compare`) is what a
// policy meets on real machines:
//  - GPUs live in host nodes of `gpus_per_node`; every copy on a node (restores and checkpoints,
//    both directions) shares the node's host-memory bandwidth equally, each also bounded by its
//    GPU's link (a fluid model: a copy's speed changes whenever a copy on its node starts or ends);
//  - each restore and checkpoint takes its profile time times a noise factor drawn for it;
//  - each function's profile, as the policies see it, is off from the truth by a factor drawn per
//    function (uniform in [1 - prior_error, 1 + prior_error]); the policies learn the truth only
//    from the runs that end, as a live node does;
//  - with `fragmentation`, a slice occupies a contiguous range of its GPU's memory, placed first
//    fit; growing in place needs the range after it free, else the slice moves to a free range
//    that holds it (a copy on the GPU's memory at move_bytes_per_second, which delays its next
//    run), else the growth is refused; a restore that no free range holds fails
//    (ResourceExhausted). Policies see the largest free range, now and were some slices evicted
//    (Executor::LargestFreeRange, LargestFreeRangeWithout).
// Every draw comes from `seed`, so a run stays reproducible.
#pragma once

#include <cstdint>
#include <string>

#include "gshare/sim/workload/exec_noise.h"

namespace gshare {

struct WorldModel {
  int gpus_per_node = 0;             // 0: no host nodes, so no shared host bandwidth
  double host_bytes_per_second = 0;  // a node's host-memory bandwidth; 0: unlimited
  ExecNoise restore_noise;           // per restore and checkpoint; none: exact profile times
  double prior_error = 0;            // in [0, 0.9]; 0: the policies see the true profiles
  bool fragmentation = false;        // slices in contiguous ranges
  // A slice's move within a GPU's memory: a device-to-device copy reads and writes every byte;
  // 500 GB/s is about a third of an A100's 1.5 TB/s HBM bandwidth (an assumption).
  double move_bytes_per_second = 500e9;
  std::uint64_t seed = 1;  // of every draw above

  // The defaults of `gshare sim` and `gshare compare`: 8 GPUs per node, 50 GB/s of host
  // bandwidth, lognormal:0.1 restore noise, priors off by up to 30%, fragmentation.
  static WorldModel Fair();

  // Whether copies on a node contend (a node size and a host bandwidth are both set).
  bool contended() const { return gpus_per_node > 0 && host_bytes_per_second > 0; }
  bool ideal() const {
    return !contended() && restore_noise.none() && prior_error == 0 && !fragmentation;
  }

  // "ideal", or the departures, e.g. "gpus-per-node=8,host-bandwidth=50GB/s,
  // restore-noise=lognormal:0.1,prior-error=0.3,fragmentation" (the seed is the run's, reported
  // apart).
  std::string Describe() const;
};

}  // namespace gshare
