// Hand-made instances shared by the exact solver's tests. Round figures so that every objective
// can be computed by hand: a 1 GB/s link and a 1 ms restore overhead, so a function with
// 4,000,000 model bytes restores in 5 ms.
#pragma once

#include <chrono>
#include <vector>

#include "gshare/sched/exact/instance.h"

namespace gshare::exact::fixtures {

using std::chrono::milliseconds;

inline TimePoint AtMs(double ms) { return TimePoint(FromMilliseconds(ms)); }

// A function of `slices` 128 MiB slices that restores in 5 ms and runs for `exec_ms`.
inline ExactFunction RoundFunction(const char* name, std::uint64_t slices, double exec_ms) {
  return ExactFunction{name, 4'000'000, slices * kSliceBytes, FromMilliseconds(exec_ms)};
}

inline ExactInstance RoundInstance(int num_gpus, std::uint64_t memory_bytes = 40 * kGiB) {
  ExactInstance instance;
  instance.gpu = ExactGpu{memory_bytes, 1e9, milliseconds(1)};
  instance.num_gpus = num_gpus;
  return instance;
}

inline ExactRequest RequestAt(std::size_t function, double release_ms, double deadline_ms) {
  return ExactRequest{function, AtMs(release_ms), AtMs(deadline_ms)};
}

// GiB-seconds of `slices` slices held for `ms` milliseconds.
inline double SliceMs(double slices, double ms) { return slices * 0.125 * ms * 1e-3; }

}  // namespace gshare::exact::fixtures
