// MemorySampler: the resident memory of the node and of its function processes, sampled at a
// fixed interval on the node's event loop, and its growth after a warm-up.
//
// A sample reads /proc/self/status and /proc/<pid>/status of every function process (a few small
// files, tens of microseconds each), so it never holds the loop for long. A process that exits
// between being listed and being read is left out of that sample, not an error. The node's own
// memory counts the device memory and snapshots (memfd segments) as shmem; a function process
// counts the segments it maps too, so node + functions counts a mapped slice twice.
//
// Growth after warm-up (docs/live-node.md, "Memory over a 10-minute replay"): with W = `window`
// samples, the baseline is the mean of the last W samples taken at or before the end of the
// warm-up, the final value the mean of the last W samples of the run (fewer when there are not W);
// growth = (final - baseline) / baseline. It is absent when no sample precedes the end of the
// warm-up, none follows it, or the baseline is zero.
//
// Threading: the loop's thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/node/loop_clock.h"

namespace gshare {

struct MemorySample {
  double t_s = 0;  // on the caller's clock (the replay's, for gshare node replay)
  std::uint64_t node_rss_bytes = 0;
  std::uint64_t node_rss_anon_bytes = 0;
  std::uint64_t node_rss_shmem_bytes = 0;
  std::uint64_t functions_rss_bytes = 0;  // summed over the function processes read
  std::uint64_t functions_rss_anon_bytes = 0;
  std::uint64_t functions_rss_shmem_bytes = 0;
  std::size_t processes = 0;  // function processes read
};

// One sample now: this process's memory and the sum over `pids` that could be read. Fails only
// when this process's own status cannot be read.
Result<MemorySample> SampleMemory(double t_s, std::span<const pid_t> pids);

// Growth after warm-up of one quantity of the samples (see the header comment).
std::optional<double> GrowthAfterWarmup(std::span<const MemorySample> samples, double warmup_end_s,
                                        std::size_t window,
                                        const std::function<double(const MemorySample&)>& value);

class MemorySampler {
 public:
  // Samples on `clock`'s loop, every `interval` of its time; a sample's time is seconds of that
  // clock since Start. `pids` lists the function processes to read at that moment.
  MemorySampler(LoopClock& clock, Duration interval, std::function<std::vector<pid_t>()> pids);

  // Takes a sample at once, then one every interval (on a fixed schedule, not drifting) until
  // Stop.
  void Start();
  void Stop();

  Duration interval() const { return interval_; }
  const std::vector<MemorySample>& samples() const { return samples_; }
  // The first failure to read the node's own memory (OK when none); that sample is left out.
  const Status& error() const { return error_; }

 private:
  void Sample();
  void Arm();

  LoopClock& clock_;
  const Duration interval_;
  std::function<std::vector<pid_t>()> pids_;
  LoopTimer timer_;
  TimePoint started_{};
  TimePoint next_{};
  bool running_ = false;
  std::vector<MemorySample> samples_;
  Status error_;
};

}  // namespace gshare
