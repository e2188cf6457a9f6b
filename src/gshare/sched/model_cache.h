// GpuModelCache: the whole models one GPU of a swap pool holds (faaswap and faaswap-fifo), and
// the memory they take.
//
// A model is resident (in least-recently-used order), restoring (at most one at a time), or
// copying back (evicted while dirty; its memory is freed when the copy ends). Each model reserves
// a fixed number of bytes, given by the caller. Eviction goes through the executor: a clean model
// is discarded at once, a dirty one is copied back and freed by EvictDone. MakeRoom evicts least
// recently used models until a new one fits, in total and, where the executor's slices hold
// contiguous ranges, in one free range (Executor::LargestFreeRange); it evicts nothing when that
// cannot succeed.
//
// The policies embed it in their per-GPU state and own it; the executor is borrowed per call.
// Threading: the scheduler's event loop only.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "gshare/sched/executor.h"

namespace gshare {

struct GpuModelCache {
  GpuId gpu = 0;
  std::uint64_t capacity = 0;     // memory of its GPU type
  std::uint64_t memory_used = 0;  // resident, restoring and copying back
  bool restoring = false;
  FunctionId restoring_function = 0;
  std::list<FunctionId> lru;  // resident models, least recently used first
  std::unordered_map<FunctionId, std::list<FunctionId>::iterator> resident;
  std::unordered_map<FunctionId, std::uint64_t> evicting;  // copying back: bytes
  int restore_failures = 0;  // failed restores of failing_function in a row
  FunctionId failing_function = 0;

  // The restore of `function`, which reserves `bytes`, ended. On success its model is resident,
  // the most recently used; on failure its memory is free, and the result says whether that was
  // the `max_failures`-th failure in a row of `function` here (the count then starts over).
  bool RestoreEnded(FunctionId function, bool ok, std::uint64_t bytes, int max_failures);

  // Evicts `function`, which the caller has taken out of `lru` and which reserves `bytes`.
  void Evict(Executor& executor, FunctionId function, std::uint64_t bytes);

  // The copy back of `function` ended: its memory is free.
  void EvictDone(FunctionId function);

  // What the cache held of `function`, whose instance died: it is forgotten, and its memory
  // (`bytes`, or what is copying back) is free.
  enum class Lost { kNothing, kResident, kRestoring, kCopyingBack };
  Lost Forget(FunctionId function, std::uint64_t bytes);

  // Evicts least recently used models, except those `keep(f)` holds on to, until `bytes` fit in
  // total and in one free range; `bytes_of(f)` is what a model reserves and `on_evict(f)` hears of
  // each model evicted. Evicts nothing, and returns false, when evicting every model not kept would
  // not make room. `scratch` is the caller's, to spare an allocation per call.
  template <typename Keep, typename BytesOf, typename OnEvict>
  bool MakeRoom(Executor& executor, std::uint64_t bytes, Keep keep, BytesOf bytes_of,
                OnEvict on_evict, std::vector<FunctionId>& scratch);

  // Evicts every resident model, least recently used first; `on_evict(f)` hears of each. Whether
  // none is left copying back (then the GPU holds nothing).
  template <typename BytesOf, typename OnEvict>
  bool EvictAll(Executor& executor, BytesOf bytes_of, OnEvict on_evict) {
    while (!lru.empty()) {
      const FunctionId function = lru.front();
      lru.pop_front();
      Evict(executor, function, bytes_of(function));
      on_evict(function);
    }
    return evicting.empty();
  }

  // Forgets everything (its GPU left the pool or was lost); `on_drop(f)` hears of each model
  // resident or restoring.
  template <typename OnDrop>
  void Clear(OnDrop on_drop) {
    for (FunctionId function : lru) on_drop(function);
    if (restoring) on_drop(restoring_function);
    lru.clear();
    resident.clear();
    evicting.clear();
    memory_used = 0;
    restoring = false;
  }

  // Whether `bytes` fit now, in total and in one free range.
  bool HasRoom(const Executor& executor, std::uint64_t bytes) const {
    return memory_used + bytes <= capacity && executor.LargestFreeRange(gpu) >= bytes;
  }
};

template <typename Keep, typename BytesOf, typename OnEvict>
bool GpuModelCache::MakeRoom(Executor& executor, std::uint64_t bytes, Keep keep, BytesOf bytes_of,
                             OnEvict on_evict, std::vector<FunctionId>& scratch) {
  std::uint64_t evictable = 0;
  scratch.clear();
  for (FunctionId f : lru) {
    if (keep(f)) continue;
    evictable += bytes_of(f);
    scratch.push_back(f);
  }
  if (memory_used + bytes > capacity + evictable) return false;
  if (executor.LargestFreeRangeWithout(gpu, scratch) < bytes) return false;
  auto it = lru.begin();
  while (!HasRoom(executor, bytes) && it != lru.end()) {
    const FunctionId victim = *it;
    if (keep(victim)) {
      ++it;
      continue;
    }
    it = lru.erase(it);
    Evict(executor, victim, bytes_of(victim));
    on_evict(victim);
  }
  return HasRoom(executor, bytes);
}

}  // namespace gshare
