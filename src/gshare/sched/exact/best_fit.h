// ScheduleBestFit: a greedy online baseline for the optimality-gap study, written directly in
// the exact model's terms (schedule.h), so it is scored and validated like every other schedule.
//
// Requests are taken in release order (ties by index) and each is bound at its release, never
// later, to one GPU; nothing is moved afterwards. The greedy knows the instance's restore and
// execution times exactly (as the exact solver does), but not the requests still to come. Each
// GPU runs its requests one at a time in the order they were bound (FIFO), and its copy engine
// restores in that order too. For request r of function f released at a, every GPU g offers one
// placement:
//  - join: g holds a residency of f that is not yet released (its last run ends after a): r runs
//    after g's last bound run and after that residency's restore, and the residency is extended
//    to r's end, provided the memory on g allows the longer residency;
//  - new slice: otherwise (or when the join does not fit in memory) a new residency of f, whose
//    restore starts when g's copy engine is free and any earlier residency of f on g is released,
//    and later still if g's memory is full then (at the first release after which the slice fits
//    until r's run ends); r runs after the restore and after g's last bound run.
// Among the placements that meet r's deadline it takes the one on the GPU with the least free
// memory at a (best fit; ties to the lower GPU index). When none meets the deadline it takes
// the one that ends first (ties to the lower index), and r misses its deadline.
// A residency is released as soon as its last bound request has run (no request queued needs
// it); there is no keep-alive and no waiting to batch.
//
// The schedule keeps every constraint of the model except deadlines (a miss is reported by
// ValidateSchedule). Pure function; thread-safe.
#pragma once

#include "gshare/common/status.h"
#include "gshare/sched/exact/instance.h"
#include "gshare/sched/exact/schedule.h"

namespace gshare::exact {

// Errors: InvalidArgument when the instance is malformed (ValidateInstance) or a function's
// slices do not fit in one GPU's memory.
Result<ExactSchedule> ScheduleBestFit(const ExactInstance& instance);

}  // namespace gshare::exact
