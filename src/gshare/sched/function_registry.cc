#include "gshare/sched/function_registry.h"

#include <fmt/format.h>

namespace gshare {

FunctionRegistry::FunctionRegistry(std::vector<ResolvedFunction> functions) {
  entries_.reserve(functions.size());
  for (ResolvedFunction& function : functions) Add(std::move(function));
}

FunctionId FunctionRegistry::Add(ResolvedFunction function) {
  const FunctionId id = next_id_++;
  entries_.emplace(id, Entry{std::move(function), true});
  return id;
}

Status FunctionRegistry::Remove(FunctionId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound(fmt::format("no function {}", id));
  if (!it->second.active) {
    return FailedPrecondition(
        fmt::format("function '{}' is already removed", it->second.function.name));
  }
  it->second.active = false;
  return Status::Ok();
}

Status FunctionRegistry::Forget(FunctionId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound(fmt::format("no function {}", id));
  if (it->second.active) {
    return FailedPrecondition(fmt::format("function '{}' is active: remove it before forgetting it",
                                          it->second.function.name));
  }
  entries_.erase(it);
  return Status::Ok();
}

}  // namespace gshare
