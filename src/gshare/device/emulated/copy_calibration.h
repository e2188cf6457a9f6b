// CopyCalibration: the emulated copy engine's routine and thread count, chosen by measurement.
//
// Whether non-temporal stores or the C library's memcpy copy large blocks faster, and on how
// many threads, depends on the machine (docs/node.md, "Emulated GPUs": memcpy on four threads
// was often the best raw copy on one 2-vCPU virtual machine, streaming stores on two or four on
// another). CalibrateCopies measures every routine (copy_engine.h) on every thread count asked
// for, each thread copying its contiguous part of one host buffer into another in pieces of a
// snapshot chunk, as the restore engine does (both buffers faulted in first, one untimed round),
// and picks the pair with the best median rate; a larger thread count must beat a smaller one by
// 5% to be chosen (threads the machine cannot run at once only add noise). Where the copy engine
// has no streaming routine (no AVX2), memcpy alone is measured. A node does this once at start
// (LiveNode, `calibrate_copies`) and applies it: the routine for the whole process
// (SetCopyRoutine), the thread count as the restore engine's streams per emulated GPU.
//
// Times are on the steady clock; threads are started once per thread count and wait at a barrier
// between rounds, so that starting them is never timed. Thread safety: one call at a time per
// process is sensible (concurrent calls measure each other's load), though nothing breaks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/device/emulated/copy_engine.h"

namespace gshare {

struct CopyCalibrationOptions {
  // Copied per round, split over the threads; 0: twice the last-level cache (so that the copy
  // runs from and to memory, as a large restore does, not from the cache), from 32 to 256 MiB,
  // and 256 MiB where the cache's size is unknown. Both buffers are this size.
  std::uint64_t bytes = 0;
  int rounds = 3;  // timed rounds per trial (the median is kept)
  std::vector<int> threads = {1, 2, 4};
  std::uint64_t piece_bytes = 8 * kMiB;  // each copy call: the restore engine's chunk
};

struct CopyCalibration {
  struct Trial {
    CopyRoutine routine = CopyRoutine::kStreaming;
    int threads = 1;
    double gbps = 0;  // median rate, 10^9 bytes per second
  };
  std::vector<Trial> trials;
  Trial best;

  // "streaming on 4 threads, 19.5 GB/s (memcpy 17.3 GB/s on 4, ...)".
  std::string Summary() const;
};

// Measures; InvalidArgument for a size (other than 0) under 1 MiB, rounds or a thread count outside
// 1 to 64, or no thread count; Internal when a buffer or thread cannot be had. Changes no setting.
Result<CopyCalibration> CalibrateCopies(const CopyCalibrationOptions& options = {});

}  // namespace gshare
