// The knob grid of `gshare compare`: which PolicyOptions a policy's sweep varies, over which
// values, and how a `--knob POLICY.KNOB=V1,V2,...` flag replaces a knob's values.
//
// Default grids (values as a user types them; the first knob is the outer loop):
//   keepalive                  keep_alive {10s, 1m, 5m, 15m} x concurrency_target {0.7, 1, 2, 4}
//   faascache                  keep_alive {10s, 1m, 15m} x concurrency_target {1, 4}
//                              x gpus_per_function {1, 2, 4, 8} (its cache's capacity: without
//                              one it is keepalive)
//   faaswap, faaswap-fifo      pool_idle {5s, 10s, 1m} x proxy_overhead {0, 0.2, 0.4}
//   gshare and its variants    safety_margin {0.4, 0.8, 1.2} x pool_idle {5s, 1m}
//                              x protect_horizon {0s, 15m}
//   (fifo and the gshare-no-* and gshare-adaptive-margin variants: the same algorithm, so the same
//   knobs, and ablations compare at equal SLO on the same footing)
// The idle times reach below the points each policy chose on the 500-function workloads with an
// earlier grid; the cheapest points there are still at the shortest idle times
// (docs/evaluation.md), so shorter ones may be cheaper still: --knob sweeps them.
// A policy outside this table has no default knobs: it runs once, at the defaults, and --knob
// may sweep any knob of it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sched/policy_options.h"

namespace gshare {

enum class Knob {
  kKeepAlive,
  kConcurrencyTarget,
  kPoolIdle,
  kProxyOverhead,
  kSafetyMargin,
  kGpusPerFunction,
  kProtectHorizon
};

// The PolicyOptions field each knob sets:
//   keep_alive          keep_alive                 a duration ("15m")
//   concurrency_target  concurrency_target         a number in [0.05, 10]
//   pool_idle           pool_idle                  a duration
//   proxy_overhead      proxy_overhead_fraction    a number in [0, 100]
//   safety_margin       gshare.safety_margin       a number in [0, 10]
//   gpus_per_function   gpus_per_function          a number in [0, 1000] (faascache)
//   protect_horizon     gshare.protect_horizon     a duration ("0s": off)
// (the bounds of the matching `gshare sim` flags).
std::string_view KnobName(Knob knob);

// One knob and the values a sweep gives it, as typed.
struct KnobAxis {
  Knob knob;
  std::vector<std::string> values;
  bool overridden = false;  // set by a --knob flag (a second flag for it is an error)
};

// A policy's sweep: its knobs, the outer loop first. No axes: one run at the defaults.
struct PolicyGrid {
  std::string policy;
  std::vector<KnobAxis> axes;
};

// One point of a grid: a value (as typed) for each of its knobs, in axis order.
using KnobSetting = std::vector<std::pair<Knob, std::string>>;

// Limits on a grid, so that a typo cannot ask for a sweep that never ends.
inline constexpr std::size_t kMaxKnobValues = 32;      // values of one knob
inline constexpr std::size_t kMaxGridSettings = 1024;  // settings of one policy

// The default grid of `policy` (the table above).
PolicyGrid DefaultGrid(std::string_view policy);

// The knobs --knob may set for `policy`: those of its default grid, or every knob for a policy
// without one.
std::vector<Knob> KnobsOf(std::string_view policy);

// Every setting of `grid`: the product of its axes, the first axis outermost; one empty setting
// when it has no axes.
std::vector<KnobSetting> GridSettings(const PolicyGrid& grid);

// Sets `knob` in `options` to the value `text` names. InvalidArgument naming the value when it is
// not a duration (keep_alive, pool_idle) or a finite number within the knob's bounds.
Status SetKnob(Knob knob, std::string_view text, PolicyOptions& options);

// Sets every knob of `setting` in `options`; the first error of SetKnob.
Status ApplySetting(const KnobSetting& setting, PolicyOptions& options);

// Parses `flag`, "POLICY.KNOB=V1,V2,...", and makes V1, V2, ... the values of KNOB in the grid of
// POLICY among `grids` (a knob the grid lacks becomes its innermost axis). Errors: NotFound for a
// policy PolicyNames does not know; InvalidArgument for a malformed flag, a policy not among
// `grids`, a knob the policy does not read (KnobsOf), a bad value, a value listed twice (also as
// "1m" and "60s"), more than kMaxKnobValues values, a knob given twice, or a grid of more than
// kMaxGridSettings settings. On error `grids` is unchanged.
Status OverrideKnob(std::string_view flag, std::vector<PolicyGrid>& grids);

}  // namespace gshare
