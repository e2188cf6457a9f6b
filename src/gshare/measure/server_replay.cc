#include "gshare/measure/server_replay.h"

#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "examples/models/model_layout.h"
#include "examples/runtime/example_weights.h"
#include "gshare/measure/replay_prediction.h"
#include "gshare/measure/replay_server.h"
#include "gshare/measure/replay_window.h"
#include "gshare/model/catalog.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/sim/figures.h"
#include "gshare/sim/report.h"
#include "gshare/sim/workload/trace_reader.h"

namespace gshare::measure {
namespace {

using Json = nlohmann::ordered_json;

// The report's name for the server's policy, which the client does not know.
constexpr std::string_view kPolicyName = "live";
// A request unanswered after its function's SLO and run timeout and this margin is given up.
constexpr Duration kAnswerMargin = std::chrono::seconds(10);

// A count read from a counter (a double on the wire): an integer when it is whole, as the
// simulator writes counts; null when unknown.
Json CountOrNull(const std::optional<double>& value) {
  if (!value) return nullptr;
  constexpr double kExact = 9007199254740992.0;  // 2^53: doubles are exact integers below it
  if (*value >= 0 && *value <= kExact && *value == std::floor(*value)) {
    return static_cast<std::uint64_t>(*value);
  }
  return *value;
}

Json StatusesJson(const std::map<int, std::uint64_t>& statuses) {
  Json out = Json::object();
  for (const auto& [status, count] : statuses) out[std::to_string(status)] = count;
  return out;
}

// What the replay sends, read from the catalog and the trace.
struct ReplayInputs {
  Workload workload;                 // its requests are the replayed ones, scaled
  std::vector<PlannedRequest> plan;  // the same requests, as the driver sends them
  std::vector<FunctionSpec> specs;   // by FunctionId, as workload.functions
  std::string gpu_type;
};

// Reads the catalog and the trace as gshare node replay does, keeps the first `horizon` of trace
// time (all of it when unset) and divides every arrival by `speedup`. Errors: bad input.
Result<ReplayInputs> ReadInputs(const ServerReplayOptions& options) {
  const std::optional<Duration>& horizon = options.horizon;
  GSHARE_ASSIGN_OR_RETURN(Catalog catalog, LoadCatalog(options.catalog));
  GSHARE_ASSIGN_OR_RETURN(TraceFormat format, ParseTraceFormat(options.trace_format));
  const GpuType* gpu = catalog.FindGpuType(options.gpu_type);
  if (gpu == nullptr) {
    return NotFound(fmt::format("--gpu-type: unknown GPU type '{}'", options.gpu_type));
  }
  TraceOptions trace_options;
  trace_options.seed = options.seed;
  trace_options.function = options.function;
  GSHARE_ASSIGN_OR_RETURN(RawTrace raw, ReadTrace(options.trace, format, catalog, trace_options));
  ReplayInputs inputs;
  GSHARE_ASSIGN_OR_RETURN(inputs.workload, BuildWorkload(catalog, raw, *gpu));
  inputs.gpu_type = gpu->name;
  Workload& workload = inputs.workload;
  workload.trace_path = options.trace;
  workload.trace_format = std::string(TraceFormatName(format));

  std::vector<Request> requests = ReplayWindow(workload.requests, horizon, options.speedup);
  for (const Request& r : requests) {
    inputs.plan.push_back({r.id, r.function, r.arrival - TimePoint{}});
  }
  if (requests.empty()) return InvalidArgument("the trace has no request in the replayed window");
  workload.requests = std::move(requests);

  for (const ResolvedFunction& function : workload.functions) {
    const FunctionSpec* spec = catalog.FindFunction(function.name);
    if (spec == nullptr) {
      return NotFound(fmt::format("function '{}' is not in the catalog", function.name));
    }
    if (!spec->IsLive()) {
      return InvalidArgument(fmt::format(
          "function '{}' has neither a command nor a runtime: a server cannot run it", spec->name));
    }
    inputs.specs.push_back(*spec);
  }
  return inputs;
}

// With a tenant's key, every replayed function must be that tenant's: the tenant of the first.
// InvalidArgument naming the others.
Status CheckOneTenant(const std::vector<FunctionSpec>& specs) {
  const std::string& tenant = specs.front().tenant;
  std::string others;
  for (const FunctionSpec& spec : specs) {
    if (spec.tenant != tenant) {
      others +=
          fmt::format("{}'{}' (tenant '{}')", others.empty() ? "" : ", ", spec.name, spec.tenant);
    }
  }
  if (others.empty()) return Status::Ok();
  return InvalidArgument(fmt::format(
      "--key is one tenant's key ('{}', the tenant of '{}'), but the replay invokes functions of "
      "other tenants: {}; give --admin-key-file, or a catalog of that tenant alone",
      tenant, specs.front().name, others));
}

// The checker of the bundled runtimes' answers. The references need the bundled weights: they
// are written from the default seed where they are missing (the catalog's model_files point
// there too, for a server on this machine).
Result<std::unique_ptr<examples::OutputChecker>> MakeChecker(
    const std::string& catalog_path, const std::vector<FunctionSpec>& specs,
    const std::function<void(const std::string&)>& progress) {
  std::set<examples::ModelKind> kinds;
  std::string unchecked;
  for (const FunctionSpec& spec : specs) {
    if (auto kind = examples::ParseModelKind(spec.runtime); kind.ok()) kinds.insert(*kind);
    if (spec.runtime.empty()) unchecked += (unchecked.empty() ? "" : ", ") + spec.name;
  }
  if (!unchecked.empty()) {
    progress(
        "functions without a bundled runtime get a 1x16 FP32 tensor 'input' and their answers "
        "are not checked: " +
        unchecked);
  }
  const std::filesystem::path weights_dir =
      std::filesystem::path(catalog_path).parent_path() / "weights";
  for (const examples::ModelKind kind : kinds) {
    const auto path = weights_dir / fmt::format("{}.safetensors", examples::ModelKindName(kind));
    if (std::filesystem::exists(path)) continue;
    std::error_code error;
    std::filesystem::create_directories(weights_dir, error);
    GSHARE_RETURN_IF_ERROR(
        examples::WriteExampleWeights(kind, examples::kDefaultWeightSeed, path.string()));
    progress(fmt::format("wrote {} (seed {})", path.string(), examples::kDefaultWeightSeed));
  }
  const std::vector<examples::ModelKind> kind_list(kinds.begin(), kinds.end());
  return examples::OutputChecker::Create(weights_dir.string(), kind_list);
}

// Keys, functions, readiness.
Status SetUpServer(ServerApi& api, ServerAccess& access, const std::vector<FunctionSpec>& specs,
                   Duration ready_timeout) {
  if (access.admin_key) {
    std::set<std::string> tenants;
    for (const FunctionSpec& spec : specs) tenants.insert(spec.tenant);
    GSHARE_RETURN_IF_ERROR(ObtainTenantKeys(api, tenants, access));
  }
  std::vector<const FunctionSpec*> pointers;
  for (const FunctionSpec& spec : specs) {
    GSHARE_RETURN_IF_ERROR(DeployFunction(api, access, spec));
    pointers.push_back(&spec);
  }
  return WaitUntilReady(api, access, pointers, ready_timeout);
}

// summary.json: gshare sim's document for `report`, with what a client cannot know set to null,
// and the replay's own fields.
Json MakeSummary(const ServerReplayOptions& options, const ReplayInputs& inputs,
                 const RunInfo& info, const PolicyReport& report,
                 const ReplayDriver::Counts& counts, const ServerUsage& usage,
                 const std::optional<std::string>& usage_missing) {
  Json summary = Json::parse(SummaryJson(info, inputs.workload, {report}));
  Json& live = summary["policies"][std::string(kPolicyName)];
  // The server's peak, its events and the prices of its GPUs' time are not the client's to know.
  for (const char* field : {"peak_gpus", "cost_usd", "serverless_usd", "events"}) {
    live[field] = nullptr;
  }
  if (!usage.gpu_seconds) live["gpu_seconds"] = live["avg_gpus"] = nullptr;
  if (!usage.vgpu_byte_seconds) live["vgpu_gib_seconds"] = nullptr;
  if (!usage.swaps) live["swaps"] = nullptr;
  if (!usage.swap_bytes) live["swap_bytes"] = nullptr;

  summary["url"] = options.url;
  summary["speedup"] = options.speedup;
  summary["concurrency"] = options.concurrency;
  summary["answered"] = counts.answered;
  summary["unanswered"] = counts.unanswered;
  summary["failed"] = report.failed_requests;
  summary["wrong_outputs"] = counts.wrong;
  summary["unchecked"] = counts.unchecked;
  summary["late_sends"] = counts.late_sends;
  summary["statuses"] = StatusesJson(counts.statuses);
  Json server;
  server["gpu_usage"] = usage_missing.value_or("from the server's /metrics");
  if (!usage_missing) {
    Json outcomes = Json::object();
    for (const auto& [outcome, count] : usage.outcomes) outcomes[outcome] = CountOrNull(count);
    server["requests_by_outcome"] = outcomes;
    server["slo_met"] = CountOrNull(usage.slo_met);
    server["slo_missed"] = CountOrNull(usage.slo_missed);
  }
  summary["server"] = server;
  Json functions = Json::object();
  for (std::size_t f = 0; f < inputs.workload.functions.size(); ++f) {
    const FunctionReport& fr = report.functions[f];
    const ReplayDriver::PerFunction& function_counts = counts.functions[f];
    Json j;
    j["tenant"] = fr.tenant;
    j["requests"] = fr.requests;
    j["statuses"] = StatusesJson(function_counts.statuses);
    j["unanswered"] = function_counts.unanswered;
    j["wrong_outputs"] = function_counts.wrong;
    j["slo_ms"] = fr.slo_ms;
    j["slo_attainment"] = fr.slo_attainment;
    j["latency_ms"] = {{"p50", fr.latency.p50_ms}, {"p99", fr.latency.p99_ms}};
    const ServerUsage::PerFunction none;
    const ServerUsage::PerFunction& used = usage_missing ? none : usage.functions[f];
    j["vgpu_gib_seconds"] = used.vgpu_byte_seconds
                                ? Json(*used.vgpu_byte_seconds / static_cast<double>(kGiB))
                                : Json(nullptr);
    j["swaps"] = CountOrNull(used.swaps);
    j["swap_bytes"] = CountOrNull(used.swap_bytes);
    functions[fr.name] = j;
  }
  summary["functions"] = functions;
  return summary;
}

}  // namespace

struct ServerReplay::Inputs : ReplayInputs {};

ServerReplay::ServerReplay(ServerReplayOptions options) : options_(std::move(options)) {}
ServerReplay::~ServerReplay() = default;

void ServerReplay::Note(const std::string& line) const {
  if (options_.progress) options_.progress(line);
}

Result<std::unique_ptr<ServerReplay>> ServerReplay::Prepare(ServerReplayOptions options) {
  auto replay = std::unique_ptr<ServerReplay>(new ServerReplay(std::move(options)));
  GSHARE_ASSIGN_OR_RETURN(ReplayInputs inputs, ReadInputs(replay->options_));
  replay->inputs_ = std::make_unique<Inputs>(Inputs{std::move(inputs)});
  if (!replay->options_.admin_key) GSHARE_RETURN_IF_ERROR(CheckOneTenant(replay->inputs_->specs));
  return replay;
}

Result<ServerReplayOutcome> ServerReplay::Run() {
  const auto progress = [this](const std::string& line) { Note(line); };
  ReplayInputs& inputs = *inputs_;
  const Workload& workload = inputs.workload;
  ServerAccess access;
  access.admin_key = options_.admin_key;
  if (!access.admin_key) access.tenant_keys[inputs.specs.front().tenant] = options_.tenant_key;
  if (!options_.references.empty()) {
    std::vector<std::string> names;
    for (const FunctionSpec& spec : inputs.specs) names.push_back(spec.name);
    GSHARE_ASSIGN_OR_RETURN(
        ReferenceAnswers references,
        ReferenceAnswers::Load(options_.references, names, options_.reference_tolerance));
    references_ = std::make_unique<ReferenceAnswers>(std::move(references));
    progress(fmt::format("{} of {} functions are checked against the answers in {}",
                         references_->size(), names.size(), options_.references.string()));
  }
  GSHARE_ASSIGN_OR_RETURN(checker_, MakeChecker(options_.catalog, inputs.specs, progress));
  std::error_code error;
  std::filesystem::create_directories(options_.out, error);
  if (error) {
    return IoError(fmt::format("cannot create {}: {}", options_.out.string(), error.message()));
  }

  ServerApi api(options_.endpoint);
  GSHARE_RETURN_IF_ERROR(SetUpServer(api, access, inputs.specs, options_.ready_timeout));
  std::vector<ReplayTarget> targets;
  for (std::size_t f = 0; f < inputs.specs.size(); ++f) {
    const FunctionSpec& spec = inputs.specs[f];
    ReplayTarget target;
    target.infer_path = fmt::format("/v2/models/{}/infer", PathSegment(spec.name));
    target.authorization = fmt::format("Bearer {}", access.tenant_keys.at(spec.tenant));
    target.reference = references_ ? references_->Find(spec.name) : nullptr;
    if (target.reference != nullptr) {
      InferRequest request = target.reference->request;
      request.id.reset();
      GSHARE_ASSIGN_OR_RETURN(target.reference_body, SerializeInferRequest(request));
      if (target.reference->request.inputs.empty() || target.reference_body.size() < 2 ||
          target.reference_body.front() != '{') {
        return InvalidArgument(
            fmt::format("function '{}': its reference request has no inputs", spec.name));
      }
    }
    target.checked = target.reference == nullptr &&
                     (examples::ParseModelKind(spec.runtime).ok() || spec.runtime == "echo");
    target.model = target.checked ? spec.runtime : "echo";
    target.slo = workload.functions[f].slo;
    target.answer_timeout = target.slo + spec.RequestTimeout() + kAnswerMargin;
    targets.push_back(std::move(target));
  }

  // The server's counters just before the first request and just after the last answer.
  std::optional<std::string> usage_missing;  // why the server's usage is not known, when not
  std::vector<metrics::Sample> before;
  if (access.admin_key) {
    auto scraped = ScrapeMetrics(api, *access.admin_key);
    if (!scraped.ok()) return scraped.status();
    before = std::move(scraped).value();
  } else {
    usage_missing = "not available: the server's /metrics needs the admin key (--admin-key-file)";
    progress(
        "GPU usage is not available with a tenant's key: the server's /metrics needs the admin "
        "key");
  }
  progress(fmt::format(
      "replaying {} requests to {} functions over {:.1f} s against {}, at most {} in flight",
      workload.requests.size(), workload.functions.size(),
      SinceEpochSeconds(workload.requests.back().arrival), options_.endpoint.HostPort(),
      options_.concurrency));
  ReplayDriver driver(options_.endpoint, std::move(targets), *checker_, workload,
                      options_.concurrency, references_.get());
  driver.Run(inputs.plan);
  ServerUsage usage;
  if (access.admin_key) {
    auto after = ScrapeMetrics(api, *access.admin_key);
    if (after.ok()) {
      usage = UsageBetween(before, *after, workload.functions);
    } else {
      usage_missing = "not available: " + after.status().ToString();
      progress("GPU usage is not available: " + after.status().ToString());
    }
  }

  // The simulator's prediction of the same requests on the server's node (admin key only: the
  // node describes itself to the admin).
  // The server's own policy first, then each other one asked for.
  std::vector<PolicyReport> predictions;
  std::string prediction_note;
  if (access.admin_key) {
    auto node = DescribeNode(api, *access.admin_key);
    auto catalog = LoadCatalog(options_.catalog);
    if (node.ok() && catalog.ok()) {
      std::vector<std::string> policies = {node->policy};
      for (const std::string& policy : options_.predict_policies) {
        if (std::find(policies.begin(), policies.end(), policy) == policies.end()) {
          policies.push_back(policy);
        }
      }
      for (const std::string& policy : policies) {
        NodeDescription under = *node;
        under.policy = policy;
        auto predicted = PredictReplay(workload, inputs.specs, catalog->gpu_types, under);
        if (predicted.ok()) {
          predictions.push_back(std::move(predicted).value());
        } else {
          prediction_note = predicted.status().ToString();
          break;  // all or none: a table with some of them would read as complete
        }
      }
      if (!prediction_note.empty()) predictions.clear();
    } else {
      prediction_note = (node.ok() ? catalog.status() : node.status()).ToString();
    }
    if (predictions.empty()) progress("no prediction: " + prediction_note);
  } else {
    prediction_note = "needs the admin key (the node describes itself to the admin)";
  }

  // The report: gshare sim's, where a live replay has the value.
  PolicyReport report = driver.Report(std::string(kPolicyName));
  const ReplayDriver::Counts counts = driver.counts();
  report.gpu_seconds = usage.gpu_seconds.value_or(0);
  report.avg_gpus = report.horizon_seconds > 0 ? report.gpu_seconds / report.horizon_seconds : 0;
  report.vgpu_gib_seconds = usage.vgpu_byte_seconds.value_or(0) / static_cast<double>(kGiB);
  report.swaps = static_cast<std::uint64_t>(usage.swaps.value_or(0));
  report.swap_bytes = static_cast<std::uint64_t>(usage.swap_bytes.value_or(0));
  RunInfo info;
  info.seed = options_.seed;
  info.trace_path = options_.trace;
  info.trace_format = workload.trace_format;
  info.gpu_type = inputs.gpu_type;
  info.world = "live";  // a real node, not a simulated world
  Json summary = MakeSummary(options_, inputs, info, report, counts, usage, usage_missing);
  if (!predictions.empty()) {
    summary["prediction"] = Json::parse(SummaryJson(info, workload, predictions))["policies"];
    summary["prediction_definition"] =
        "the simulator on the same requests and the server's node (GET /api/v1/node), with the "
        "catalog's profiles";
  } else {
    summary["prediction"] = nullptr;
    summary["prediction_definition"] = prediction_note;
  }
  const auto path = options_.out / "summary.json";
  GSHARE_RETURN_IF_ERROR(WriteTextFile(path, summary.dump(2) + "\n"));

  ServerReplayOutcome outcome;
  std::vector<PolicyReport> table = {report};
  table.insert(table.end(), predictions.begin(), predictions.end());
  outcome.table = SummaryTable(info, workload, table);
  outcome.counts = counts;
  outcome.requests = workload.requests.size();
  outcome.gpu_usage = usage_missing.value_or("from the server's /metrics");
  outcome.summary_path = path;
  return outcome;
}

}  // namespace gshare::measure
