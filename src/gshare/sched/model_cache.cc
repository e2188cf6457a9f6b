#include "gshare/sched/model_cache.h"

#include <iterator>

namespace gshare {

bool GpuModelCache::RestoreEnded(FunctionId function, bool ok, std::uint64_t bytes,
                                 int max_failures) {
  restoring = false;
  if (ok) {
    restore_failures = 0;
    lru.push_back(function);
    resident[function] = std::prev(lru.end());
    return false;
  }
  memory_used -= bytes;
  if (failing_function != function) restore_failures = 0;
  failing_function = function;
  if (++restore_failures < max_failures) return false;
  restore_failures = 0;
  return true;
}

void GpuModelCache::Evict(Executor& executor, FunctionId function, std::uint64_t bytes) {
  if (executor.Evict(gpu, function, EvictHint::kDiscardIfClean) == EvictOutcome::kDiscarded) {
    memory_used -= bytes;
  } else {
    evicting[function] = bytes;  // freed by EvictDone
  }
  resident.erase(function);
}

void GpuModelCache::EvictDone(FunctionId function) {
  if (auto e = evicting.find(function); e != evicting.end()) {
    memory_used -= e->second;
    evicting.erase(e);
  }
}

GpuModelCache::Lost GpuModelCache::Forget(FunctionId function, std::uint64_t bytes) {
  if (auto it = resident.find(function); it != resident.end()) {
    lru.erase(it->second);
    resident.erase(it);
    memory_used -= bytes;
    return Lost::kResident;
  }
  if (restoring && restoring_function == function) {
    restoring = false;
    memory_used -= bytes;
    return Lost::kRestoring;
  }
  if (evicting.contains(function)) {
    EvictDone(function);
    return Lost::kCopyingBack;
  }
  return Lost::kNothing;
}

}  // namespace gshare
