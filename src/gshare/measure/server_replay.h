// ServerReplay: a trace replayed against a running `gshare serve`, over its HTTP API, as its
// tenants would send it; every answer checked where a reference exists, and the server's GPU usage
// over the replay read from its /metrics (docs/serve.md, "Replaying a trace against a running
// server"). `gshare replay` is its command line.
//
// With the admin key, the replay creates each tenant of the replayed functions (or rotates the key
// of one that exists) and deploys each function (creates it, or replaces a different spec); with a
// tenant's key, it deploys that tenant's functions only. Then it waits until every function is
// ready, sends each request at its (scaled) arrival as a KServe v2 JSON inference, with at most
// `concurrency` in flight, and writes OUT/summary.json (the layout of gshare sim under the policy
// name "live", plus the replay's own fields). With the admin key it also predicts the same
// requests on the server's node with the simulator (GET /api/v1/node).
//
// Thread safety: one thread; Run blocks until every request is answered or given up (after its
// function's SLO, run timeout and ten seconds more).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "examples/runtime/output_checker.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/measure/replay_driver.h"
#include "gshare/net/http_client.h"
#include "gshare/sim/workload/workload.h"

namespace gshare::measure {

struct ServerReplayOptions {
  net::HttpEndpoint endpoint;
  std::string url;  // as the operator gave it, for the report
  std::string catalog;
  std::string trace;
  std::string trace_format = "invocations";
  std::string function;  // azure-llm: the catalog function the arrivals belong to
  std::string gpu_type = "a100-40gb";
  std::uint64_t seed = 1;
  double speedup = 1;
  std::optional<Duration> horizon;       // the first `horizon` of trace time; unset: all of it
  std::optional<std::string> admin_key;  // or:
  std::string tenant_key;                // one tenant's key: its functions only, no GPU usage
  int concurrency = 64;
  Duration ready_timeout = std::chrono::minutes(5);
  std::filesystem::path out;
  // Files of requests and answers for functions without a bundled reference (a tenant's own
  // models): reference_answers.h. Empty: none.
  std::filesystem::path references;
  double reference_tolerance = 1e-4;
  // Policies the simulator predicts the same requests on the same node under, besides the
  // server's own (admin key only); each a registered policy name.
  std::vector<std::string> predict_policies;
  std::function<void(const std::string&)> progress;  // notes for the operator (may be empty)
};

struct ServerReplayOutcome {
  std::string table;  // gshare sim's table: the replay, and the prediction when there is one
  ReplayDriver::Counts counts;
  std::uint64_t requests = 0;
  std::string gpu_usage;  // "from the server's /metrics", or why it is not available
  std::filesystem::path summary_path;
};

class ServerReplay {
 public:
  // Reads the catalog and the trace; an error is bad input (the replay did not start).
  static Result<std::unique_ptr<ServerReplay>> Prepare(ServerReplayOptions options);
  ~ServerReplay();

  // Sets the server up, replays, writes the summary. Errors: the server refused the set-up or its
  // counters, or the summary cannot be written. Wrong and unanswered requests are in the counts.
  Result<ServerReplayOutcome> Run();

 private:
  struct Inputs;
  explicit ServerReplay(ServerReplayOptions options);
  void Note(const std::string& line) const;

  ServerReplayOptions options_;
  std::unique_ptr<Inputs> inputs_;
  std::unique_ptr<examples::OutputChecker> checker_;
  std::unique_ptr<ReferenceAnswers> references_;
};

}  // namespace gshare::measure
