// What gshare replay asks of a running gshare serve through its HTTP API (docs/serve.md,
// "Replaying a trace against a running server"): a key of each tenant, the catalog's functions
// deployed, their readiness, and the server's counters over the replay.
//
// Every call is synchronous, on the one kept-alive connection of a ServerApi, which is not
// thread-safe (the replay's main thread uses it). Errors: the client's (Unavailable,
// DeadlineExceeded, InvalidArgument; net/http_client.h) with the call named; FailedPrecondition
// when the server answers another status than the step expects, with the status and the server's
// error message; DeadlineExceeded when functions are not ready in time.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/metrics/prometheus_text.h"
#include "gshare/model/function_spec.h"
#include "gshare/net/http_client.h"

namespace gshare::measure {

// `text` as one path segment: every byte outside RFC 3986's unreserved set percent-encoded.
std::string PathSegment(std::string_view text);

// The `error` of an answer's JSON body, or the body's start when it has none.
std::string ErrorOf(const net::ClientResponse& response);

class ServerApi {
 public:
  explicit ServerApi(net::HttpEndpoint endpoint);

  // `method target` with `Authorization: Bearer key`; any status is a result.
  Result<net::ClientResponse> Call(std::string method, std::string target, std::string_view key,
                                   std::string body = "", std::string content_type = "");

  // FailedPrecondition naming `what` and the server's answer.
  static Status Refused(std::string_view what, const net::ClientResponse& response);

 private:
  net::HttpClient client_;
};

// The keys the replay holds: the admin's (it manages every tenant's functions) or none (a
// tenant's key manages that tenant's functions), and a key of each replayed tenant.
struct ServerAccess {
  std::optional<std::string> admin_key;
  std::map<std::string, std::string> tenant_keys;  // by tenant

  std::string FunctionPath(const FunctionSpec& spec) const;   // one function
  std::string FunctionsPath(const FunctionSpec& spec) const;  // where functions are created
  const std::string& ManagementKey(const FunctionSpec& spec) const;
};

// Creates each tenant (admin key), or rotates the key of one that exists, and keeps the keys in
// `access`. A rotation is said on stderr: the tenant's old key stops working.
Status ObtainTenantKeys(ServerApi& api, const std::set<std::string>& tenants, ServerAccess& access);

// Creates the function from `spec`, or replaces the server's spec where it differs from `spec`
// (both read back to canonical YAML); says what it changed on stderr.
Status DeployFunction(ServerApi& api, const ServerAccess& access, const FunctionSpec& spec);

// Polls each function's readiness until all are ready or `timeout` has passed. An answer other
// than 200 and 503, or (admin key) a function in state UNAVAILABLE, ends the wait at once.
Status WaitUntilReady(ServerApi& api, const ServerAccess& access,
                      const std::vector<const FunctionSpec*>& specs, Duration timeout);

// The server's /metrics, parsed (the admin key's).
Result<std::vector<metrics::Sample>> ScrapeMetrics(ServerApi& api, const std::string& admin_key);

// The increase of the server's counters between two scrapes: the GPU-seconds of the whole server,
// the rest summed over the replayed functions' series. A figure is nullopt when neither scrape
// has it, or when it went down (the server restarted).
struct ServerUsage {
  std::optional<double> gpu_seconds;
  std::optional<double> vgpu_byte_seconds;
  std::optional<double> swaps;
  std::optional<double> swap_bytes;
  struct PerFunction {
    std::optional<double> vgpu_byte_seconds;
    std::optional<double> swaps;
    std::optional<double> swap_bytes;
  };
  std::vector<PerFunction> functions;         // in the order of `functions` below
  std::map<std::string, double> outcomes;     // gshare_requests_total, by outcome
  std::optional<double> slo_met, slo_missed;  // gshare_slo_requests_total
};
ServerUsage UsageBetween(const std::vector<metrics::Sample>& before,
                         const std::vector<metrics::Sample>& after,
                         const std::vector<ResolvedFunction>& functions);

}  // namespace gshare::measure
