// FunctionRegistry: the functions a scheduler serves, added and removed while it runs.
//
// A FunctionId is handed out once and never reused; a removed function keeps its entry (its
// spec) so that runs still in flight can finish and be accounted, but it takes no new requests.
// The owner (the simulator, the node) adds a function before any request of it and tells the
// scheduler through Scheduler::OnFunctionAdded / OnFunctionRemoved; policies read the entries.
// Not thread-safe: it lives on the scheduler's event loop.
#pragma once

#include <cstddef>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/request.h"

namespace gshare {

class FunctionRegistry {
 public:
  FunctionRegistry() = default;
  // A registry holding `functions` with ids 0..n-1, all active.
  explicit FunctionRegistry(std::vector<ResolvedFunction> functions)
      : functions_(std::move(functions)), active_(functions_.size(), true) {}

  // Adds `function`; returns its new id.
  FunctionId Add(ResolvedFunction function) {
    functions_.push_back(std::move(function));
    active_.push_back(true);
    return static_cast<FunctionId>(functions_.size() - 1);
  }
  // Marks `id` removed. NotFound for an id never handed out; FailedPrecondition if removed twice.
  Status Remove(FunctionId id);

  // The spec of `id`, removed or not. Precondition: id < size().
  const ResolvedFunction& Get(FunctionId id) const { return functions_[id]; }
  const ResolvedFunction& operator[](FunctionId id) const { return functions_[id]; }
  bool active(FunctionId id) const { return id < active_.size() && active_[id]; }
  // Ids handed out so far (removed ones included): every id is below this.
  std::size_t size() const { return functions_.size(); }

 private:
  std::vector<ResolvedFunction> functions_;
  std::vector<bool> active_;
};

}  // namespace gshare
