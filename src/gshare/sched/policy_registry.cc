#include "gshare/sched/policy_registry.h"

#include <fmt/format.h>

#include "gshare/sched/faaswap.h"
#include "gshare/sched/faaswap_edf.h"
#include "gshare/sched/gshare_policy.h"
#include "gshare/sched/keepalive.h"

namespace gshare {

const std::vector<std::string_view>& PolicyNames() {
  static const std::vector<std::string_view> names = {"keepalive",
                                                      "faascache",
                                                      "faaswap",
                                                      "faaswap-fifo",
                                                      "gshare",
                                                      "fifo",
                                                      "gshare-no-lazy",
                                                      "gshare-no-fast-swap",
                                                      "gshare-no-cache-queue",
                                                      "gshare-no-timeslice",
                                                      "gshare-adaptive-margin",
                                                      "gshare-mean-margin",
                                                      "gshare-fixed-hold",
                                                      "gshare-eager-restore",
                                                      "gshare-reactive-replicas",
                                                      "gshare-queue-batch"};
  return names;
}

Result<std::unique_ptr<Scheduler>> MakePolicy(std::string_view name,
                                              const SchedulerContext& context,
                                              const PolicyOptions& options) {
  if (context.functions == nullptr || context.executor == nullptr) {
    return InvalidArgument("MakePolicy: the scheduler context is incomplete");
  }
  if (name == "keepalive") {
    return std::unique_ptr<Scheduler>(std::make_unique<KeepAlivePolicy>(context, options));
  }
  if (name == "faascache") {
    return std::unique_ptr<Scheduler>(
        std::make_unique<KeepAlivePolicy>(context, options, /*greedy_dual=*/true));
  }
  if (name == "faaswap") {
    return std::unique_ptr<Scheduler>(std::make_unique<FaaSwapEdfPolicy>(context, options));
  }
  if (name == "faaswap-fifo") {
    return std::unique_ptr<Scheduler>(std::make_unique<FaaSwapPolicy>(context, options));
  }
  if (name == "gshare" || name == "fifo" || name == "gshare-no-lazy" ||
      name == "gshare-no-fast-swap" || name == "gshare-no-cache-queue" ||
      name == "gshare-no-timeslice" || name == "gshare-adaptive-margin" ||
      name == "gshare-mean-margin" || name == "gshare-fixed-hold" ||
      name == "gshare-eager-restore" || name == "gshare-reactive-replicas" ||
      name == "gshare-queue-batch") {
    PolicyOptions variant = options;
    if (name == "fifo") {
      variant.gshare.lazy = false;
      variant.gshare.slack_order = false;
    } else if (name == "gshare-no-lazy") {
      variant.gshare.lazy = false;
    } else if (name == "gshare-no-fast-swap") {
      variant.gshare.fast_swap = false;
    } else if (name == "gshare-no-cache-queue") {
      variant.gshare.cache_queue = false;
    } else if (name == "gshare-no-timeslice") {
      variant.gshare.timeslice = false;
    } else if (name == "gshare-adaptive-margin") {
      variant.gshare.adapt_margin = true;
    } else if (name == "gshare-mean-margin") {
      // The earlier predictor: the learned mean x (1 + margin).
      variant.gshare.exec_quantile = 0.0;
    } else if (name == "gshare-fixed-hold") {
      variant.gshare.cost_aware_hold = false;
    } else if (name == "gshare-eager-restore") {
      variant.gshare.lazy_first_restore = false;
    } else if (name == "gshare-reactive-replicas") {
      variant.gshare.load_sized_replicas = false;
    } else if (name == "gshare-queue-batch") {
      variant.gshare.batch_to_deadline = false;
    }
    return std::unique_ptr<Scheduler>(
        std::make_unique<GSharePolicy>(std::string(name), context, variant));
  }
  return NotFound(
      fmt::format("unknown policy '{}' (known: {})", name, fmt::join(PolicyNames(), ", ")));
}

}  // namespace gshare
