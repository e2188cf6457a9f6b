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
// measure/server_replay.h says what it does; this prints gshare sim's table of it and the counts.
//
// Exit status: 0 when every request got an answer (any status) and no answer was wrong; 1 when
// one did not, or the server refused the set-up; 2 for bad input.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/measure/server_replay.h"
#include "gshare/sched/policy_registry.h"

namespace gshare::cli {
namespace {

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
  std::string references;
  std::vector<std::string> predict;
  double tolerance = 1e-4;
};

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
  measure::ServerReplayOptions options;
  options.endpoint = *endpoint;
  options.url = flags.url;
  options.catalog = flags.catalog;
  options.trace = flags.trace;
  options.trace_format = flags.trace_format;
  options.function = flags.function;
  options.gpu_type = flags.gpu_type;
  options.seed = flags.seed;
  options.speedup = flags.speedup;
  options.horizon = horizon;
  options.concurrency = flags.concurrency;
  options.ready_timeout = *ready_timeout;
  options.out = flags.out;
  options.references = flags.references;
  for (const std::string& policy : flags.predict) {
    const auto& known = PolicyNames();
    if (std::find(known.begin(), known.end(), policy) == known.end()) {
      return Fail(2, fmt::format("--predict: unknown policy '{}' (known: {})", policy,
                                 fmt::join(known, ", ")));
    }
  }
  options.predict_policies = flags.predict;
  options.reference_tolerance = flags.tolerance;
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (!flags.admin_key_file.empty()) {
    auto key = ReadAdminKey(flags.admin_key_file);
    if (!key.ok()) return Fail(2, key.status().WithContext("--admin-key-file").ToString());
    options.admin_key = std::move(key).value();
  } else {
    options.tenant_key = flags.key;
  }
  auto replay = measure::ServerReplay::Prepare(std::move(options));
  if (!replay.ok()) return Fail(2, replay.status().ToString());
  auto outcome = (*replay)->Run();
  if (!outcome.ok()) return Fail(1, outcome.status().ToString());
  const measure::ReplayDriver::Counts& counts = outcome->counts;
  std::fputs(outcome->table.c_str(), stdout);
  std::string statuses;
  for (const auto& [status, count] : counts.statuses) {
    statuses += fmt::format("{}{} x{}", statuses.empty() ? "" : ", ", status, count);
  }
  const std::uint64_t total = outcome->requests;
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
      outcome->gpu_usage.c_str());
  std::printf("wrote %s\n", outcome->summary_path.c_str());
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
  cmd->add_option("--references", flags->references,
                  "Folder of NAME.request.json and NAME.response.json: what each function NAME "
                  "is sent and must answer (a tenant's own model, run alone elsewhere)");
  cmd->add_option("--tolerance", flags->tolerance,
                  "Largest difference from a reference answer, relative to its largest value")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--predict", flags->predict,
                  "With the admin key: also predict the same requests on the server's node under "
                  "this policy (repeatable; the server's own policy is always predicted)")
      ->delimiter(',');
  cmd->add_option("--out", flags->out, "Folder for summary.json")->required();
  cmd->callback([flags, &context] { context.exit_code = RunReplay(*flags); });
}

}  // namespace gshare::cli
