#include "gshare/measure/replay_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "gshare/model/catalog.h"

namespace gshare::measure {
namespace {

using Json = nlohmann::ordered_json;
using net::ClientResponse;

// The deadline of one call (tenants, functions, readiness, metrics).
constexpr std::chrono::milliseconds kControlTimeout{30'000};

// The function object's spec, read back to the canonical YAML of this build; nullopt when it
// has none or it does not parse (a spec to replace).
std::optional<std::string> CanonicalSpecOf(const Json& function, const std::string& tenant) {
  if (!function.is_object() || !function.contains("spec") || !function["spec"].is_string()) {
    return std::nullopt;
  }
  auto spec = ParseFunctionEntry(function["spec"].get<std::string>(), "the server's spec", tenant);
  if (!spec.ok()) return std::nullopt;
  return FunctionSpecToYaml(*spec);
}

// The state and reason of a function as the admin API describes it ("" without the admin key).
std::string DescribeState(ServerApi& api, const ServerAccess& access, const FunctionSpec& spec,
                          bool* unavailable) {
  *unavailable = false;
  if (!access.admin_key) return "";
  auto found = api.Call("GET", access.FunctionPath(spec), *access.admin_key);
  if (!found.ok() || found->status != 200) return "";
  const Json function = Json::parse(found->body, nullptr, /*allow_exceptions=*/false);
  if (!function.is_object() || !function.contains("state") || !function["state"].is_string()) {
    return "";
  }
  const std::string state = function["state"].get<std::string>();
  std::string reason;
  if (function.contains("reason") && function["reason"].is_string()) {
    reason = function["reason"].get<std::string>();
  }
  *unavailable = state == "UNAVAILABLE";
  return reason.empty() ? state : fmt::format("{}: {}", state, reason);
}

// The increase of a counter (summed over the series that match) between two scrapes; a series
// missing from a scrape counts as 0 there (a function deployed by the replay). nullopt when
// neither scrape has it, or it went down (the server restarted).
std::optional<double> Increase(const std::vector<metrics::Sample>& before,
                               const std::vector<metrics::Sample>& after, std::string_view name,
                               std::span<const metrics::LabelMatch> match = {}) {
  const auto first = metrics::SumSamples(before, name, match);
  const auto last = metrics::SumSamples(after, name, match);
  if (!first && !last) return std::nullopt;
  const double increase = last.value_or(0) - first.value_or(0);
  if (increase < 0) return std::nullopt;
  return increase;
}

}  // namespace

std::string PathSegment(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", byte);
    }
  }
  return out;
}

std::string ErrorOf(const ClientResponse& response) {
  const Json body = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("error") && body["error"].is_string()) {
    return body["error"].get<std::string>();
  }
  return response.body.substr(0, 200);
}

ServerApi::ServerApi(net::HttpEndpoint endpoint)
    : client_(std::move(endpoint), {.timeout = kControlTimeout, .limits = {}}) {}

Result<ClientResponse> ServerApi::Call(std::string method, std::string target, std::string_view key,
                                       std::string body, std::string content_type) {
  net::ClientRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  request.content_type = std::move(content_type);
  request.headers = {{"Authorization", fmt::format("Bearer {}", key)}};
  auto response = client_.Send(request);
  if (!response.ok()) {
    return response.status().WithContext(fmt::format("{} {}", request.method, request.target));
  }
  return response;
}

Status ServerApi::Refused(std::string_view what, const ClientResponse& response) {
  return FailedPrecondition(
      fmt::format("{}: the server answered {}: {}", what, response.status, ErrorOf(response)));
}

std::string ServerAccess::FunctionPath(const FunctionSpec& spec) const {
  if (admin_key) {
    return fmt::format("/api/v1/tenants/{}/functions/{}", PathSegment(spec.tenant),
                       PathSegment(spec.name));
  }
  return fmt::format("/api/v1/functions/{}", PathSegment(spec.name));
}

std::string ServerAccess::FunctionsPath(const FunctionSpec& spec) const {
  if (admin_key) return fmt::format("/api/v1/tenants/{}/functions", PathSegment(spec.tenant));
  return "/api/v1/functions";
}

const std::string& ServerAccess::ManagementKey(const FunctionSpec& spec) const {
  return admin_key ? *admin_key : tenant_keys.at(spec.tenant);
}

Status ObtainTenantKeys(ServerApi& api, const std::set<std::string>& tenants,
                        ServerAccess& access) {
  for (const std::string& tenant : tenants) {
    const std::string what = fmt::format("creating tenant '{}'", tenant);
    GSHARE_ASSIGN_OR_RETURN(ClientResponse created,
                            api.Call("POST", "/api/v1/tenants", *access.admin_key,
                                     Json{{"name", tenant}}.dump(), "application/json"));
    ClientResponse keyed = created;
    if (created.status == 409) {
      GSHARE_ASSIGN_OR_RETURN(
          keyed, api.Call("POST", fmt::format("/api/v1/tenants/{}/keys", PathSegment(tenant)),
                          *access.admin_key));
      if (keyed.status != 200) {
        return ServerApi::Refused(fmt::format("rotating the key of tenant '{}'", tenant), keyed);
      }
      std::fprintf(stderr,
                   "tenant '%s' exists: its key was rotated for the replay, and its old key no "
                   "longer works (the replay needs the server to itself)\n",
                   tenant.c_str());
    } else if (created.status != 201) {
      return ServerApi::Refused(what, created);
    }
    const Json body = Json::parse(keyed.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("key") || !body["key"].is_string()) {
      return FailedPrecondition(
          fmt::format("{}: the answer carries no key: {}", what, keyed.body.substr(0, 200)));
    }
    access.tenant_keys[tenant] = body["key"].get<std::string>();
  }
  return Status::Ok();
}

Status DeployFunction(ServerApi& api, const ServerAccess& access, const FunctionSpec& spec) {
  const std::string key = access.ManagementKey(spec);
  const std::string yaml = FunctionSpecToYaml(spec);
  const std::string path = access.FunctionPath(spec);
  GSHARE_ASSIGN_OR_RETURN(ClientResponse found, api.Call("GET", path, key));
  if (found.status == 404) {
    GSHARE_ASSIGN_OR_RETURN(ClientResponse created, api.Call("POST", access.FunctionsPath(spec),
                                                             key, yaml, "application/yaml"));
    if (created.status == 201) {
      std::fprintf(stderr, "deployed function '%s' of tenant '%s'\n", spec.name.c_str(),
                   spec.tenant.c_str());
      return Status::Ok();
    }
    if (created.status != 409) {
      return ServerApi::Refused(fmt::format("creating function '{}'", spec.name), created);
    }
    // Created meanwhile by someone else: compare it as any existing one.
    GSHARE_ASSIGN_OR_RETURN(found, api.Call("GET", path, key));
  }
  if (found.status != 200) {
    return ServerApi::Refused(fmt::format("looking up function '{}'", spec.name), found);
  }
  const Json function = Json::parse(found.body, nullptr, /*allow_exceptions=*/false);
  if (CanonicalSpecOf(function, spec.tenant) == yaml) return Status::Ok();
  GSHARE_ASSIGN_OR_RETURN(ClientResponse replaced,
                          api.Call("PUT", path, key, yaml, "application/yaml"));
  if (replaced.status != 200) {
    return ServerApi::Refused(fmt::format("replacing the spec of function '{}'", spec.name),
                              replaced);
  }
  std::fprintf(stderr, "replaced the spec of function '%s' of tenant '%s' with the catalog's\n",
               spec.name.c_str(), spec.tenant.c_str());
  return Status::Ok();
}

Status WaitUntilReady(ServerApi& api, const ServerAccess& access,
                      const std::vector<const FunctionSpec*>& specs, Duration timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  std::vector<const FunctionSpec*> pending = specs;
  auto poll = std::chrono::milliseconds(50);
  for (;;) {
    std::vector<const FunctionSpec*> still;
    for (const FunctionSpec* spec : pending) {
      GSHARE_ASSIGN_OR_RETURN(
          ClientResponse ready,
          api.Call("GET", fmt::format("/v2/models/{}/ready", PathSegment(spec->name)),
                   access.tenant_keys.at(spec->tenant)));
      if (ready.status == 200) continue;
      if (ready.status != 503) {
        return ServerApi::Refused(fmt::format("asking whether function '{}' is ready", spec->name),
                                  ready);
      }
      bool unavailable = false;
      const std::string state = DescribeState(api, access, *spec, &unavailable);
      if (unavailable) {
        return FailedPrecondition(
            fmt::format("function '{}' cannot be served: {}", spec->name, state));
      }
      still.push_back(spec);
    }
    pending = std::move(still);
    if (pending.empty()) return Status::Ok();
    if (std::chrono::steady_clock::now() >= give_up) {
      std::string names;
      for (const FunctionSpec* spec : pending) {
        bool unavailable = false;
        const std::string state = DescribeState(api, access, *spec, &unavailable);
        names += fmt::format("{}'{}'{}", names.empty() ? "" : ", ", spec->name,
                             state.empty() ? "" : " (" + state + ")");
      }
      return DeadlineExceeded(fmt::format("functions not ready after --ready-timeout {}: {}",
                                          FormatDuration(timeout), names));
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(1000));
  }
}

Result<std::vector<metrics::Sample>> ScrapeMetrics(ServerApi& api, const std::string& admin_key) {
  GSHARE_ASSIGN_OR_RETURN(ClientResponse answer, api.Call("GET", "/metrics", admin_key));
  if (answer.status != 200) return ServerApi::Refused("reading /metrics", answer);
  auto samples = metrics::ParsePrometheusText(answer.body);
  if (!samples.ok()) return samples.status().WithContext("reading /metrics");
  return samples;
}

ServerUsage UsageBetween(const std::vector<metrics::Sample>& before,
                         const std::vector<metrics::Sample>& after,
                         const std::vector<ResolvedFunction>& functions) {
  ServerUsage usage;
  usage.gpu_seconds = Increase(before, after, "gshare_gpu_seconds_total");
  auto add = [](std::optional<double>& total, const std::optional<double>& part) {
    if (part) total = total.value_or(0) + *part;
  };
  for (const ResolvedFunction& function : functions) {
    const metrics::LabelMatch match[] = {{"function", function.name}, {"tenant", function.tenant}};
    ServerUsage::PerFunction f;
    f.vgpu_byte_seconds = Increase(before, after, "gshare_vgpu_byte_seconds_total", match);
    f.swaps = Increase(before, after, "gshare_swaps_total", match);
    f.swap_bytes = Increase(before, after, "gshare_swap_bytes_total", match);
    add(usage.vgpu_byte_seconds, f.vgpu_byte_seconds);
    add(usage.swaps, f.swaps);
    add(usage.swap_bytes, f.swap_bytes);
    for (const std::string_view outcome :
         {"ok", "error", "deadline_exceeded", "rejected", "cancelled"}) {
      const metrics::LabelMatch with_outcome[] = {
          {"function", function.name}, {"tenant", function.tenant}, {"outcome", outcome}};
      if (auto n = Increase(before, after, "gshare_requests_total", with_outcome)) {
        usage.outcomes[std::string(outcome)] += *n;
      }
    }
    const metrics::LabelMatch met[] = {
        {"function", function.name}, {"tenant", function.tenant}, {"result", "met"}};
    const metrics::LabelMatch missed[] = {
        {"function", function.name}, {"tenant", function.tenant}, {"result", "missed"}};
    add(usage.slo_met, Increase(before, after, "gshare_slo_requests_total", met));
    add(usage.slo_missed, Increase(before, after, "gshare_slo_requests_total", missed));
    usage.functions.push_back(f);
  }
  if (!usage.gpu_seconds) {
    std::fprintf(stderr,
                 "gshare_gpu_seconds_total is missing from /metrics or went down (a restart?): "
                 "GPU-seconds are not reported\n");
  }
  return usage;
}

}  // namespace gshare::measure
