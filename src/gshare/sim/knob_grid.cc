#include "gshare/sim/knob_grid.h"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <variant>

#include "gshare/common/units.h"
#include "gshare/sched/policy_registry.h"

namespace gshare {
namespace {

constexpr Knob kAllKnobs[] = {
    Knob::kKeepAlive,    Knob::kConcurrencyTarget, Knob::kPoolIdle,      Knob::kProxyOverhead,
    Knob::kSafetyMargin, Knob::kGpusPerFunction,   Knob::kProtectHorizon};

bool IsDurationKnob(Knob knob) {
  return knob == Knob::kKeepAlive || knob == Knob::kPoolIdle || knob == Knob::kProtectHorizon;
}

// The bounds of a number knob: those of the matching `gshare sim` flag.
std::pair<double, double> Bounds(Knob knob) {
  switch (knob) {
    case Knob::kConcurrencyTarget:
      return {0.05, 10};
    case Knob::kProxyOverhead:
      return {0, 100};
    case Knob::kSafetyMargin:
      return {0, 10};
    case Knob::kGpusPerFunction:
      return {0, 1000};
    case Knob::kKeepAlive:
    case Knob::kPoolIdle:
    case Knob::kProtectHorizon:
      break;
  }
  return {0, 0};
}

// gshare and the variants that run its algorithm with one switch changed.
bool IsGShareFamily(std::string_view policy) {
  return policy == "gshare" || policy == "fifo" || policy.starts_with("gshare-");
}

// The value `text` names for `knob`: a Duration or a number.
Result<std::variant<Duration, double>> ParseValue(Knob knob, std::string_view text) {
  if (IsDurationKnob(knob)) {
    GSHARE_ASSIGN_OR_RETURN(Duration d, ParseDuration(text));
    return std::variant<Duration, double>(d);
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value)) {
    return InvalidArgument(fmt::format("'{}' is not a finite number", text));
  }
  const auto [lo, hi] = Bounds(knob);
  if (value < lo || value > hi) {
    return InvalidArgument(fmt::format("'{}' is outside [{}, {}]", text, lo, hi));
  }
  return std::variant<Duration, double>(value);
}

Result<Knob> FindKnob(std::string_view name) {
  for (const Knob knob : kAllKnobs) {
    if (KnobName(knob) == name) return knob;
  }
  return InvalidArgument(fmt::format("unknown knob '{}'", name));
}

std::string KnobList(const std::vector<Knob>& knobs) {
  std::string out;
  for (const Knob knob : knobs) out += (out.empty() ? "" : ", ") + std::string(KnobName(knob));
  return out;
}

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    parts.emplace_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

std::size_t SettingCount(const PolicyGrid& grid) {
  std::size_t n = 1;
  for (const KnobAxis& axis : grid.axes) n *= axis.values.size();
  return n;
}

}  // namespace

std::string_view KnobName(Knob knob) {
  switch (knob) {
    case Knob::kKeepAlive:
      return "keep_alive";
    case Knob::kConcurrencyTarget:
      return "concurrency_target";
    case Knob::kPoolIdle:
      return "pool_idle";
    case Knob::kProxyOverhead:
      return "proxy_overhead";
    case Knob::kSafetyMargin:
      return "safety_margin";
    case Knob::kGpusPerFunction:
      return "gpus_per_function";
    case Knob::kProtectHorizon:
      return "protect_horizon";
  }
  return "?";
}

PolicyGrid DefaultGrid(std::string_view policy) {
  PolicyGrid grid;
  grid.policy = std::string(policy);
  if (policy == "faascache") {
    // GreedyDual keep-alive under its cache's capacity; without one it is keepalive.
    grid.axes = {{Knob::kKeepAlive, {"10s", "1m", "15m"}},
                 {Knob::kConcurrencyTarget, {"1.0", "4.0"}},
                 {Knob::kGpusPerFunction, {"1", "2", "4", "8"}}};
  } else if (policy == "keepalive") {
    // Targets above 1 let an instance's queue grow past one batch before another starts: the
    // cheap end of the curve, where attainment falls.
    grid.axes = {{Knob::kKeepAlive, {"10s", "1m", "5m", "15m"}},
                 {Knob::kConcurrencyTarget, {"0.7", "1.0", "2.0", "4.0"}}};
  } else if (policy == "faaswap" || policy == "faaswap-fifo") {
    grid.axes = {{Knob::kPoolIdle, {"5s", "10s", "1m"}},
                 {Knob::kProxyOverhead, {"0", "0.2", "0.4"}}};
  } else if (IsGShareFamily(policy)) {
    grid.axes = {{Knob::kSafetyMargin, {"0", "0.4", "0.8", "1.2"}},
                 {Knob::kPoolIdle, {"5s", "1m"}},
                 {Knob::kProtectHorizon, {"0s", "15m"}}};
  }
  return grid;
}

std::vector<Knob> KnobsOf(std::string_view policy) {
  const PolicyGrid grid = DefaultGrid(policy);
  if (grid.axes.empty()) return {std::begin(kAllKnobs), std::end(kAllKnobs)};
  std::vector<Knob> knobs;
  for (const KnobAxis& axis : grid.axes) knobs.push_back(axis.knob);
  return knobs;
}

std::vector<KnobSetting> GridSettings(const PolicyGrid& grid) {
  std::vector<KnobSetting> settings = {{}};
  for (const KnobAxis& axis : grid.axes) {
    std::vector<KnobSetting> next;
    next.reserve(settings.size() * axis.values.size());
    for (const KnobSetting& outer : settings) {
      for (const std::string& value : axis.values) {
        KnobSetting setting = outer;
        setting.emplace_back(axis.knob, value);
        next.push_back(std::move(setting));
      }
    }
    settings = std::move(next);
  }
  return settings;
}

Status SetKnob(Knob knob, std::string_view text, PolicyOptions& options) {
  auto parsed = ParseValue(knob, text);
  if (!parsed.ok()) return parsed.status().WithContext(KnobName(knob));
  switch (knob) {
    case Knob::kKeepAlive:
      options.keep_alive = std::get<Duration>(*parsed);
      break;
    case Knob::kPoolIdle:
      options.pool_idle = std::get<Duration>(*parsed);
      break;
    case Knob::kConcurrencyTarget:
      options.concurrency_target = std::get<double>(*parsed);
      break;
    case Knob::kProxyOverhead:
      options.proxy_overhead_fraction = std::get<double>(*parsed);
      break;
    case Knob::kSafetyMargin:
      options.gshare.safety_margin = std::get<double>(*parsed);
      break;
    case Knob::kGpusPerFunction:
      options.gpus_per_function = std::get<double>(*parsed);
      break;
    case Knob::kProtectHorizon:
      options.gshare.protect_horizon = std::get<Duration>(*parsed);
      break;
  }
  return Status::Ok();
}

Status ApplySetting(const KnobSetting& setting, PolicyOptions& options) {
  for (const auto& [knob, value] : setting) GSHARE_RETURN_IF_ERROR(SetKnob(knob, value, options));
  return Status::Ok();
}

Status OverrideKnob(std::string_view flag, std::vector<PolicyGrid>& grids) {
  const auto malformed = [&] {
    return InvalidArgument(fmt::format(
        "'{}': expected POLICY.KNOB=V1,V2,... (e.g. keepalive.keep_alive=1m,15m)", flag));
  };
  const std::size_t equals = flag.find('=');
  if (equals == std::string_view::npos) return malformed();
  const std::string_view name = flag.substr(0, equals);
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size()) return malformed();
  const std::string_view policy = name.substr(0, dot);
  const std::string_view knob_name = name.substr(dot + 1);

  const auto& known = PolicyNames();
  if (std::find(known.begin(), known.end(), policy) == known.end()) {
    return NotFound(fmt::format("unknown policy '{}' (known: {})", policy, fmt::join(known, ", ")));
  }
  const auto grid = std::find_if(grids.begin(), grids.end(),
                                 [&](const PolicyGrid& g) { return g.policy == policy; });
  if (grid == grids.end()) {
    return InvalidArgument(
        fmt::format("'{}': policy '{}' is not among those compared (--policy)", flag, policy));
  }
  const std::vector<Knob> allowed = KnobsOf(policy);
  auto knob = FindKnob(knob_name);
  if (!knob.ok() || std::find(allowed.begin(), allowed.end(), *knob) == allowed.end()) {
    return InvalidArgument(fmt::format("'{}': unknown knob '{}' for {} (its knobs: {})", flag,
                                       knob_name, policy, KnobList(allowed)));
  }

  std::vector<std::string> values = SplitCommas(flag.substr(equals + 1));
  if (values.size() > kMaxKnobValues) {
    return InvalidArgument(fmt::format("'{}': {} values, more than the {} a knob may take", flag,
                                       values.size(), kMaxKnobValues));
  }
  std::vector<std::variant<Duration, double>> parsed;
  for (const std::string& value : values) {
    auto v = ParseValue(*knob, value);
    if (!v.ok()) return v.status().WithContext(fmt::format("{}.{}", policy, knob_name));
    if (std::find(parsed.begin(), parsed.end(), *v) != parsed.end()) {
      return InvalidArgument(fmt::format(
          "'{}': the value '{}' is listed twice (or as another spelling)", flag, value));
    }
    parsed.push_back(*v);
  }

  PolicyGrid updated = *grid;
  auto axis = std::find_if(updated.axes.begin(), updated.axes.end(),
                           [&](const KnobAxis& a) { return a.knob == *knob; });
  if (axis == updated.axes.end()) {
    updated.axes.push_back(KnobAxis{*knob, {}});
    axis = updated.axes.end() - 1;
  }
  if (axis->overridden) {
    return InvalidArgument(fmt::format("'{}': {}.{} is given twice", flag, policy, knob_name));
  }
  axis->values = std::move(values);
  axis->overridden = true;
  if (SettingCount(updated) > kMaxGridSettings) {
    return InvalidArgument(fmt::format("'{}': the grid of {} would have {} settings, more than {}",
                                       flag, policy, SettingCount(updated), kMaxGridSettings));
  }
  *grid = std::move(updated);
  return Status::Ok();
}

}  // namespace gshare
