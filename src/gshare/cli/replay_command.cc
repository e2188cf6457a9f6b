// gshare replay: a trace replayed against a running `gshare serve`, over its HTTP API, as its
// tenants would send it; every answer checked where a reference exists, and the server's GPU usage
// over the replay read from its /metrics (docs/serve.md, "Replaying a trace against a running
// server").
//
//   gshare replay --url http://HOST:PORT --catalog C --trace T [--trace-format F]
//                 (--admin-key-file DATA_DIR/admin.key | --key KEY) [--speedup 1] [--duration D]
//                 [--concurrency 64] [--ready-timeout 5m] [--gpu-type a100-40gb] [--seed 1]
//                 --out DIR
//
// With the admin key, the replay creates each tenant of the replayed functions (or rotates the key
// of one that exists) and deploys each function (creates it, or replaces a different spec); with a
// tenant's key, it deploys that tenant's functions only. Then it waits until every function is
// ready, sends each request at its (scaled) arrival as a KServe v2 JSON inference, with at most
// --concurrency in flight, and writes DIR/summary.json (the layout of gshare sim under the policy
// name "live", plus the replay's own fields) and prints gshare sim's table.
//
// Exit status: 0 when every request got an answer (any status) and no answer was wrong; 1 when
// one did not, or the server refused the set-up; 2 for bad input.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "examples/models/model_layout.h"
#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/replay_driver.h"
#include "gshare/cli/replay_prediction.h"
#include "gshare/cli/replay_server.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/figures.h"
#include "gshare/sim/report.h"
#include "gshare/sim/workload/trace_reader.h"

namespace gshare::cli {
namespace {

using Json = nlohmann::ordered_json;

struct ReplayFlags {
  std::string url;
  std::string catalog;
  std::string trace;
  std::string trace_format = "invocations";
  std::string function;  // azure-llm: the catalog function the arrivals belong to
  std::string gpu_type = "a100-40gb";
  std::uint64_t seed = 1;
  double speedup = 1;
  std::string duration;  // empty: the whole trace
  std::string key;
  std::string admin_key_file;
  int concurrency = 64;
  std::string ready_timeout = "5m";
  std::string out;
};

// The report's name for the server's policy, which the client does not know.
constexpr std::string_view kPolicyName = "live";
// A request unanswered after its function's SLO and run timeout and this margin is given up.
constexpr Duration kAnswerMargin = std::chrono::seconds(10);

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare replay: %s\n", message.c_str());
  return code;
}

Result<std::string> ReadAdminKey(const std::string& path) {
  std::ifstream file(path);
  if (!file) return NotFound(fmt::format("cannot read the admin key file {}", path));
  std::stringstream text;
  text << file.rdbuf();
  std::string key = text.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) {
    key.pop_back();
  }
  if (key.empty() || key.size() > 4096 ||
      !std::all_of(key.begin(), key.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
    return InvalidArgument(
        fmt::format("{} does not hold an admin key (visible ASCII on one line)", path));
  }
  return key;
}

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
Result<ReplayInputs> ReadInputs(const ReplayFlags& flags, std::optional<Duration> horizon) {
  GSHARE_ASSIGN_OR_RETURN(Catalog catalog, LoadCatalog(flags.catalog));
  GSHARE_ASSIGN_OR_RETURN(TraceFormat format, ParseTraceFormat(flags.trace_format));
  const GpuType* gpu = catalog.FindGpuType(flags.gpu_type);
  if (gpu == nullptr) {
    return NotFound(fmt::format("--gpu-type: unknown GPU type '{}'", flags.gpu_type));
  }
  TraceOptions trace_options;
  trace_options.seed = flags.seed;
  trace_options.function = flags.function;
  GSHARE_ASSIGN_OR_RETURN(RawTrace raw, ReadTrace(flags.trace, format, catalog, trace_options));
  ReplayInputs inputs;
  GSHARE_ASSIGN_OR_RETURN(inputs.workload, BuildWorkload(catalog, raw, *gpu));
  inputs.gpu_type = gpu->name;
  Workload& workload = inputs.workload;
  workload.trace_path = flags.trace;
  workload.trace_format = std::string(TraceFormatName(format));

  std::vector<Request> requests;
  for (const Request& r : workload.requests) {
    if (horizon && r.arrival - TimePoint{} >= *horizon) break;
    Request scaled = r;
    scaled.id = requests.size();
    scaled.arrival =
        TimePoint{} + Duration(static_cast<Duration::rep>(
                          static_cast<double>((r.arrival - TimePoint{}).count()) / flags.speedup));
    scaled.deadline = scaled.arrival + (r.deadline - r.arrival);
    requests.push_back(scaled);
    inputs.plan.push_back({scaled.id, scaled.function, scaled.arrival - TimePoint{}});
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
    const std::string& catalog_path, const std::vector<FunctionSpec>& specs) {
  std::set<examples::ModelKind> kinds;
  std::string unchecked;
  for (const FunctionSpec& spec : specs) {
    if (auto kind = examples::ParseModelKind(spec.runtime); kind.ok()) kinds.insert(*kind);
    if (spec.runtime.empty()) unchecked += (unchecked.empty() ? "" : ", ") + spec.name;
  }
  if (!unchecked.empty()) {
    std::fprintf(stderr,
                 "functions without a bundled runtime get a 1x16 FP32 tensor 'input' and their "
                 "answers are not checked: %s\n",
                 unchecked.c_str());
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
    std::fprintf(stderr, "wrote %s (seed %llu)\n", path.c_str(),
                 static_cast<unsigned long long>(examples::kDefaultWeightSeed));
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
Json MakeSummary(const ReplayFlags& flags, const ReplayInputs& inputs, const RunInfo& info,
                 const PolicyReport& report, const ReplayDriver::Counts& counts,
                 const ServerUsage& usage, const std::optional<std::string>& usage_missing) {
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

  summary["url"] = flags.url;
  summary["speedup"] = flags.speedup;
  summary["concurrency"] = flags.concurrency;
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

int RunReplay(const ReplayFlags& flags) {
  auto endpoint = net::ParseHttpUrl(flags.url);
  if (!endpoint.ok()) return Fail(2, endpoint.status().WithContext("--url").ToString());
  std::optional<Duration> horizon;
  if (!flags.duration.empty()) {
    auto duration = ParseDuration(flags.duration);
    if (!duration.ok() || *duration <= Duration::zero() || *duration > std::chrono::hours(24)) {
      return Fail(2, "--duration: a duration in (0, 24h] such as 2m");
    }
    horizon = *duration;
  }
  auto ready_timeout = ParseDuration(flags.ready_timeout);
  if (!ready_timeout.ok() || *ready_timeout < std::chrono::seconds(1) ||
      *ready_timeout > std::chrono::hours(1)) {
    return Fail(2, "--ready-timeout: a duration from 1s to 1h such as 5m");
  }
  if (flags.key.empty() == flags.admin_key_file.empty()) {
    return Fail(2,
                "give one of --admin-key-file (the server's DATA_DIR/admin.key: the replay "
                "creates the tenants and deploys the functions) and --key (a tenant's key: the "
                "replay deploys that tenant's functions)");
  }
  ServerAccess access;
  if (!flags.admin_key_file.empty()) {
    auto key = ReadAdminKey(flags.admin_key_file);
    if (!key.ok()) return Fail(2, key.status().WithContext("--admin-key-file").ToString());
    access.admin_key = std::move(key).value();
  }
  auto inputs = ReadInputs(flags, horizon);
  if (!inputs.ok()) return Fail(2, inputs.status().ToString());
  const Workload& workload = inputs->workload;
  if (!access.admin_key) {
    if (Status s = CheckOneTenant(inputs->specs); !s.ok()) return Fail(2, s.ToString());
    access.tenant_keys[inputs->specs.front().tenant] = flags.key;
  }
  auto checker = MakeChecker(flags.catalog, inputs->specs);
  if (!checker.ok()) return Fail(1, checker.status().ToString());
  std::error_code error;
  std::filesystem::create_directories(flags.out, error);
  if (error) return Fail(1, fmt::format("cannot create {}: {}", flags.out, error.message()));

  ServerApi api(*endpoint);
  if (Status s = SetUpServer(api, access, inputs->specs, *ready_timeout); !s.ok()) {
    return Fail(1, s.ToString());
  }
  std::vector<ReplayTarget> targets;
  for (std::size_t f = 0; f < inputs->specs.size(); ++f) {
    const FunctionSpec& spec = inputs->specs[f];
    ReplayTarget target;
    target.infer_path = fmt::format("/v2/models/{}/infer", PathSegment(spec.name));
    target.authorization = fmt::format("Bearer {}", access.tenant_keys.at(spec.tenant));
    target.checked = examples::ParseModelKind(spec.runtime).ok() || spec.runtime == "echo";
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
    if (!scraped.ok()) return Fail(1, scraped.status().ToString());
    before = std::move(scraped).value();
  } else {
    usage_missing = "not available: the server's /metrics needs the admin key (--admin-key-file)";
    std::fprintf(stderr,
                 "GPU usage is not available with a tenant's key: the server's /metrics needs "
                 "the admin key\n");
  }
  std::fprintf(stderr,
               "replaying %zu requests to %zu functions over %.1f s against %s, at most "
               "%d in flight\n",
               workload.requests.size(), workload.functions.size(),
               SinceEpochSeconds(workload.requests.back().arrival), endpoint->HostPort().c_str(),
               flags.concurrency);
  ReplayDriver driver(*endpoint, std::move(targets), **checker, workload, flags.concurrency);
  driver.Run(inputs->plan);
  ServerUsage usage;
  if (access.admin_key) {
    auto after = ScrapeMetrics(api, *access.admin_key);
    if (after.ok()) {
      usage = UsageBetween(before, *after, workload.functions);
    } else {
      usage_missing = "not available: " + after.status().ToString();
      std::fprintf(stderr, "GPU usage is not available: %s\n", after.status().ToString().c_str());
    }
  }

  // The simulator's prediction of the same requests on the server's node (admin key only: the
  // node describes itself to the admin).
  std::optional<PolicyReport> prediction;
  std::string prediction_note;
  if (access.admin_key) {
    auto node = DescribeNode(api, *access.admin_key);
    auto catalog = LoadCatalog(flags.catalog);
    if (node.ok() && catalog.ok()) {
      auto predicted = PredictReplay(workload, inputs->specs, catalog->gpu_types, *node);
      if (predicted.ok()) {
        prediction = std::move(predicted).value();
      } else {
        prediction_note = predicted.status().ToString();
      }
    } else {
      prediction_note = (node.ok() ? catalog.status() : node.status()).ToString();
    }
    if (!prediction) std::fprintf(stderr, "no prediction: %s\n", prediction_note.c_str());
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
  info.seed = flags.seed;
  info.trace_path = flags.trace;
  info.trace_format = workload.trace_format;
  info.gpu_type = inputs->gpu_type;
  Json summary = MakeSummary(flags, *inputs, info, report, counts, usage, usage_missing);
  if (prediction) {
    summary["prediction"] = Json::parse(SummaryJson(info, workload, {*prediction}))["policies"];
    summary["prediction_definition"] =
        "the simulator on the same requests and the server's node (GET /api/v1/node), with the "
        "catalog's profiles";
  } else {
    summary["prediction"] = nullptr;
    summary["prediction_definition"] = prediction_note;
  }
  const auto path = std::filesystem::path(flags.out) / "summary.json";
  if (Status s = WriteTextFile(path, summary.dump(2) + "\n"); !s.ok()) {
    return Fail(1, s.ToString());
  }

  std::vector<PolicyReport> table = {report};
  if (prediction) table.push_back(*prediction);
  std::fputs(SummaryTable(info, workload, table).c_str(), stdout);
  std::string statuses;
  for (const auto& [status, count] : counts.statuses) {
    statuses += fmt::format("{}{} x{}", statuses.empty() ? "" : ", ", status, count);
  }
  const std::uint64_t total = workload.requests.size();
  std::printf(
      "replay: %llu requests, %llu answered (%s), %llu unanswered, %llu wrong, %llu late "
      "sends\n",
      static_cast<unsigned long long>(total), static_cast<unsigned long long>(counts.answered),
      statuses.empty() ? "none" : statuses.c_str(),
      static_cast<unsigned long long>(counts.unanswered),
      static_cast<unsigned long long>(counts.wrong),
      static_cast<unsigned long long>(counts.late_sends));
  std::printf(
      "latency and SLO are measured at the client; GPU usage %s; peak GPUs, cost and bill "
      "are not known to a client (0 in the table, null in summary.json)\n",
      usage_missing.value_or("from the server's /metrics").c_str());
  std::printf("wrote %s\n", path.c_str());
  if (counts.wrong > 0) return Fail(1, fmt::format("{} wrong answers", counts.wrong));
  if (counts.unanswered > 0) {
    return Fail(1, fmt::format("{} of {} requests got no answer", counts.unanswered, total));
  }
  return 0;
}

}  // namespace

void AddReplayCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Replay a trace against a running gshare serve over its HTTP API");
  cmd->add_option("--url", flags->url, "The server: http://HOST:PORT")->required();
  cmd->add_option("--catalog", flags->catalog, "Function catalog (YAML)")->required();
  cmd->add_option("--trace", flags->trace, "Trace file")->required();
  cmd->add_option("--trace-format", flags->trace_format,
                  "invocations, azure-2019, azure-2021 or azure-llm")
      ->capture_default_str();
  cmd->add_option("--function", flags->function,
                  "azure-llm: the catalog function the arrivals belong to (default: the first)");
  cmd->add_option("--gpu-type", flags->gpu_type,
                  "GPU type the functions' default SLOs are resolved for, as in gshare sim")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the trace formats that draw (azure-2019/2021)")
      ->check(WholeIn(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option("--speedup", flags->speedup, "Replay this many times faster than the trace")
      ->check(FiniteIn(0.01, 1000))
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "Replay the first DURATION of the trace (default: all of it)");
  cmd->add_option("--admin-key-file", flags->admin_key_file,
                  "The server's admin key (DATA_DIR/admin.key): create the tenants, deploy the "
                  "functions, read /metrics");
  cmd->add_option("--key", flags->key,
                  "A tenant's key instead: deploy and replay that tenant's functions only, "
                  "without GPU usage");
  cmd->add_option("--concurrency", flags->concurrency, "Most requests in flight (1 to 4096)")
      ->check(WholeIn(1, 4096))
      ->capture_default_str();
  cmd->add_option("--ready-timeout", flags->ready_timeout,
                  "Give up when a function is not ready after this long (1s to 1h)")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Folder for summary.json")->required();
  cmd->callback([flags, &context] { context.exit_code = RunReplay(*flags); });
}

}  // namespace gshare::cli
