// RestoreBench: the restore engine's throughput in both directions against the best raw copy the
// machine can do, measured in the same run (docs/node.md, "bench restore"). `gshare bench restore`
// is its command line.
//
// For each snapshot size, on GPU 0:
//   raw         host to device: every raw method below, each one unchunked copy of the whole
//               size; "raw" is the method with the best median, so the engine is compared with
//               the best the machine did in this run:
//                 memcpy             Device::TimedRawCopyToDevice: one plain memcpy on an emulated
//                                    GPU (paced when the link is), a pinned cudaMemcpy on CUDA;
//                 memcpy_xS          (unpaced emulated GPUs) memcpy on S threads, S = the engine's
//                                    streams, each copying one contiguous S-th of the bytes; the
//                                    threads are started once per size and kept, as the engine
//                                    keeps its stream threads;
//                 copy_engine_xS     (unpaced emulated GPUs) the same with the emulated copy
//                                    engine's routine (CopyEngineCopy), chosen as a node chooses
//                                    it: by measuring streaming stores and memcpy on S threads
//                                    (copy_calibration.h) when the bench starts;
//                 stream_xS          (CUDA, paced emulated links: where the host cannot reach the
//                                    device memory) S copy streams of the device, created once
//                                    per size, each copying one contiguous S-th of the bytes,
//                                    timed until every stream is synchronized; for S = 2, the
//                                    engine's stream count and twice it.
//   restore     the restore engine copying a snapshot of the same size into the same buffer;
//   d2h raw     device to host, the same methods the other way; where memcpy cannot reach the
//               device memory (CUDA, paced emulated links) "stream" replaces it: one unchunked
//               copy on one copy stream of the device (and stream_xS as above);
//   checkpoint  the restore engine copying the buffer into the snapshot (the buffer is marked
//               written before each run, so the checkpoint always copies; no digests);
//   fast swap   the restore engine checkpointing the same buffer, unchanged but marked written,
//               into a snapshot that knows its chunks' digests: the device digests every chunk,
//               and nothing is copied (a full checkpoint that records the digests runs untimed
//               before each run).
// Host sides are pinned host memory holding the same random bytes, written before timing; every
// path runs once untimed first, so that page faults are not what is measured. Each of the
// `repetitions` (at least kMinRestoreRepetitions) rounds runs every path once, starting at a
// different path each round; the figures are medians, with min, quartiles and max as the spread.
// Times are on the steady clock.
//
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "gshare/common/clock.h"
#include "gshare/common/status.h"
#include "gshare/device/device_registry.h"
#include "gshare/node/gpu_inventory.h"
#include "gshare/node/restore_engine.h"

namespace gshare::measure {

inline constexpr int kMinRestoreRepetitions = 11;

struct RestoreBenchOptions {
  DeviceOptions devices;  // GPU 0 is measured
  std::uint64_t chunk_bytes = 8 * kMiB;
  int streams = 4;    // the engine's copy streams
  int in_flight = 2;  // chunks in flight per stream
  int repetitions = kMinRestoreRepetitions;
};

// Order statistics of one path's rates, in GB/s (10^9 bytes per second).
struct Spread {
  double median = 0;
  double min = 0;
  double q1 = 0;
  double q3 = 0;
  double max = 0;
};

struct DirectionResult {
  std::string raw_method;  // the raw method with the best median
  Spread raw;
  Spread engine;
  std::map<std::string, double> methods;  // every raw method's median GB/s
};

struct SizeResult {
  std::uint64_t size_bytes = 0;
  DirectionResult to_device;  // raw vs restore
  DirectionResult to_host;    // raw vs checkpoint
  // The fast swap of an unchanged image, its size over its time (GB/s as if it had been copied):
  // to compare with to_host.engine, the full checkpoint.
  Spread fast_swap;
};

class RestoreBench {
 public:
  // Opens the GPUs and the engine; InvalidArgument for options out of range.
  static Result<std::unique_ptr<RestoreBench>> Create(const RestoreBenchOptions& options);

  // "emulated: NAME (unpaced, copy engine ...)" and the like.
  const std::string& device_name() const { return device_name_; }
  // What opening the GPUs had to say (a fallback), or empty.
  const std::string& note() const { return inventory_->note(); }

  // Every path at `size_bytes`, `repetitions` rounds.
  Result<SizeResult> Measure(std::uint64_t size_bytes);

 private:
  RestoreBench() = default;

  RestoreBenchOptions options_;
  SteadyClock clock_;
  std::unique_ptr<GpuInventory> inventory_;
  std::unique_ptr<RestoreEngine> engine_;
  std::string device_name_;
};

}  // namespace gshare::measure
