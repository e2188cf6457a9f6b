#include "gshare/sched/policy_registry.h"

#include <fmt/format.h>

#include "gshare/sched/faaswap.h"
#include "gshare/sched/keepalive.h"

namespace gshare {

const std::vector<std::string_view>& PolicyNames() {
  static const std::vector<std::string_view> names = {"keepalive", "faaswap"};
  return names;
}

Result<std::unique_ptr<Scheduler>> MakePolicy(std::string_view name,
                                              const SchedulerContext& context,
                                              const PolicyOptions& options) {
  if (context.functions == nullptr || context.gpu == nullptr || context.executor == nullptr) {
    return InvalidArgument("MakePolicy: the scheduler context is incomplete");
  }
  if (name == "keepalive") {
    return std::unique_ptr<Scheduler>(std::make_unique<KeepAlivePolicy>(context, options));
  }
  if (name == "faaswap") {
    return std::unique_ptr<Scheduler>(std::make_unique<FaaSwapPolicy>(context, options));
  }
  return NotFound(
      fmt::format("unknown policy '{}' (known: {})", name, fmt::join(PolicyNames(), ", ")));
}

}  // namespace gshare
