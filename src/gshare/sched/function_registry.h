// FunctionRegistry: the functions a scheduler serves, added and removed while it runs.
//
// A FunctionId is handed out once and never reused. A function's life: Add (the owner tells the
// scheduler, Scheduler::OnFunctionAdded, before any request of it), Remove (it takes no new
// request; its entry stays, so that what is in flight can finish and be accounted; the owner
// tells the scheduler, OnFunctionRemoved, and the executor), then, once the executor reports that
// nothing of it is left on the node (Scheduler::OnFunctionDrained), Forget frees its entry: a
// node that deploys and deletes functions for weeks holds only the live ones.
// Not thread-safe: it lives on the scheduler's event loop.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/request.h"

namespace gshare {

class FunctionRegistry {
 public:
  FunctionRegistry() = default;
  // A registry holding `functions` with ids 0..n-1, all active.
  explicit FunctionRegistry(std::vector<ResolvedFunction> functions);

  // Adds `function`; returns its new id.
  FunctionId Add(ResolvedFunction function);
  // Marks `id` removed. NotFound for an id it does not hold; FailedPrecondition if removed twice.
  Status Remove(FunctionId id);
  // Frees the entry of a removed function. NotFound for an id it does not hold;
  // FailedPrecondition for an active one.
  Status Forget(FunctionId id);

  // Whether the registry holds `id` (added and not forgotten), removed or not.
  bool contains(FunctionId id) const { return entries_.contains(id); }
  // The spec of `id`, removed or not. Precondition: contains(id).
  const ResolvedFunction& Get(FunctionId id) const { return entries_.at(id).function; }
  const ResolvedFunction& operator[](FunctionId id) const { return Get(id); }
  bool active(FunctionId id) const {
    auto it = entries_.find(id);
    return it != entries_.end() && it->second.active;
  }
  // Every id handed out so far is below this (forgotten ones included).
  std::size_t size() const { return next_id_; }
  // Entries held now: the active functions and the removed ones not yet forgotten.
  std::size_t held() const { return entries_.size(); }

 private:
  struct Entry {
    ResolvedFunction function;
    bool active = true;
  };
  std::unordered_map<FunctionId, Entry> entries_;
  FunctionId next_id_ = 0;
};

}  // namespace gshare
