#include "gshare/sched/function_registry.h"

#include <fmt/format.h>

namespace gshare {

Status FunctionRegistry::Remove(FunctionId id) {
  if (id >= functions_.size()) return NotFound(fmt::format("no function {}", id));
  if (!active_[id]) {
    return FailedPrecondition(fmt::format("function '{}' is already removed", functions_[id].name));
  }
  active_[id] = false;
  return Status::Ok();
}

}  // namespace gshare
