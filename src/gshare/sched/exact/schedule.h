// ExactSchedule: a complete schedule of an ExactInstance, its validation and its objective.
//
// Any schedule, from the exact solver, the brute-force enumerator or an online policy run in the
// simulator, is written in this form and scored with ScheduleObjective, so the figures compare
// like with like. Value types; the functions are pure and thread-safe.
//
// The model (docs/scheduling.md has it in full):
// - A residency is one activation of a slice: function f's memory (rounded up to 128 MiB
//   slices) is reserved on GPU g at `restore_start`, the restore copies the model for
//   RestoreTime(f), and the memory is released at `end` (eviction by discard, instantaneous).
// - Each request runs once, without preemption, for the function's execution time, on the GPU of
//   the residency it names, after that residency's restore has finished and before its end.
#pragma once

#include <cstddef>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/sched/exact/instance.h"

namespace gshare::exact {

struct Residency {
  std::size_t function = 0;
  int gpu = 0;                // 0 .. num_gpus - 1
  TimePoint restore_start{};  // memory reserved, copy begins
  TimePoint end{};            // memory released
};

struct Execution {
  std::size_t residency = 0;  // index into ExactSchedule::residencies
  TimePoint start{};
  TimePoint end{};  // start + the function's execution time
};

struct ExactSchedule {
  std::vector<Residency> residencies;
  std::vector<Execution> executions;  // one per request, in request order
};

// Checks every constraint of the model and returns FailedPrecondition naming the first
// violation, its message starting with the constraint's name:
//   "shape"          executions.size() != requests, bad residency index or GPU index, or a
//                    request served by a residency of another function
//   "duration"       end - start differs from the execution time
//   "release"        an execution starts before its request's release
//   "deadline"       an execution ends after its request's deadline
//   "restore-before" an execution starts before its residency's restore has finished, or ends
//                    after the residency's end, or a residency ends before its restore finishes
//   "prefetch"       a restore starts before the earliest release of the requests it serves
//   "gpu-exclusive"  two executions overlap on one GPU (time slicing runs one at a time)
//   "copy-engine"    two restores overlap on one GPU (one host-to-device copy engine per GPU)
//   "single-copy"    two residencies of one function overlap on one GPU
//   "memory"         the slices held on a GPU exceed its memory at some instant
// Intervals are half-open [start, end): touching intervals do not overlap. Times are exact
// nanoseconds; there is no tolerance. InvalidArgument when the instance itself is malformed.
Status ValidateSchedule(const ExactInstance& instance, const ExactSchedule& schedule);

// The objective: active slice-time in GiB-seconds, the sum over residencies of the slice memory
// held (GPU memory rounded up to 128 MiB slices, in GiB) times (end - restore_start) in seconds.
// Defined for any schedule whose residency functions index the instance; it does not validate.
double ScheduleObjective(const ExactInstance& instance, const ExactSchedule& schedule);

// The most GPUs that hold at least one residency at one instant ([restore_start, end), half-open:
// a GPU emptied at t and another filled at t are not both counted at t). GPUs are identical and
// a GPU with no residency holds nothing, so this is also the fewest GPUs the schedule fits on:
// each GPU's busy periods can be moved as a whole to any GPU free for that long. 0 when there
// are no residencies. Not part of the objective.
int PeakGpus(const ExactSchedule& schedule);

// GiB-seconds of `slices` 128 MiB slices held for `held`.
double SliceSeconds(std::uint64_t slices, Duration held);

}  // namespace gshare::exact
