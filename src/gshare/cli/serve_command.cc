// gshare serve: the platform. A KServe v2 inference front, function and tenant management and
// Prometheus metrics over the live node, with the gShare scheduler between them (docs/serve.md).
//
//   gshare serve [--config C.yaml] [--listen HOST:PORT] [--grpc-listen HOST:PORT|off]
//                [--data-dir DIR]
//                [--admin-key-file F | --admin-key K] [--device auto|emulated|cuda] ...
//
// No flag is needed: it listens on 127.0.0.1:8080 (HTTP) and 127.0.0.1:8081 (gRPC), keeps its state
// in ./gshare-data, and runs on emulated GPUs where the machine has no NVIDIA GPU. The admin key is
// generated at the first start, written to DATA_DIR/admin.key (mode 0600) and printed once. SIGTERM
// or SIGINT: new requests get 503, those in flight finish (for at most --drain), function processes
// stop. Exit status: 0 after a clean shutdown; 2 for bad flags or configuration; 1 when the server
// could not start (the message says why).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/common/units.h"
#include "gshare/device/device_registry.h"
#include "gshare/serve/server.h"

namespace gshare::cli {
namespace {

struct ServeFlags {
  std::string config;
  std::string listen = "127.0.0.1:8080";
  std::string grpc_listen = serve::GrpcBuilt() ? "127.0.0.1:8081" : "off";
  std::string data_dir = "gshare-data";
  std::string admin_key;
  std::string admin_key_file;
  std::string device = "auto";
  int gpus = 2;
  std::string gpu_memory = "16Gi";
  std::string link_bandwidth = "12GB/s";
  std::string slice_granularity = SliceGranularity().ToText();
  std::string policy = "gshare";
  unsigned io_threads = 0;
  std::string max_body = "64Mi";
  std::string max_buffered = "1Gi";
  std::string max_header = "16Ki";
  std::string read_timeout = "30s";
  std::string idle_timeout = "60s";
  std::string write_timeout = "30s";
  std::size_t max_connections = 10'000;
  std::size_t max_in_flight = 1'024;
  std::size_t tenant_max_in_flight = 0;
  std::size_t tenant_max_functions = 1000;
  std::string tenant_gpu_memory = "0";
  std::string python = "python3";
  std::string sandbox = "auto";
  std::string tenant_storage = "20Gi";
  std::string max_file = "4Gi";
  std::string drain = "30s";
  std::string instance_keep = "10m";
  std::string protect_horizon = "0s";
  std::string snapshot_pool = "2Gi";
  std::string uid_ledger = std::string(kDefaultUidLedger);
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare serve: %s\n", message.c_str());
  return code;
}

// The settings of --config: a YAML map whose keys are the long flags' names without "--". A flag
// given on the command line wins over the file. Unknown keys are an error (a typo must not be
// ignored).
Status ApplyConfig(CLI::App& command, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument(fmt::format("--config {}: {}", path, error.what()));
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap())
    return InvalidArgument(fmt::format("--config {}: not a map of settings", path));
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    CLI::Option* option = key == "config" ? nullptr : command.get_option_no_throw("--" + key);
    if (option == nullptr) {
      return InvalidArgument(fmt::format("--config {}: unknown setting '{}'", path, key));
    }
    if (!item.second.IsScalar()) {
      return InvalidArgument(fmt::format("--config {}: '{}' must be a single value", path, key));
    }
    if (option->count() > 0) continue;  // the command line wins
    option->add_result(item.second.as<std::string>());
    try {
      option->run_callback();
    } catch (const CLI::Error& error) {
      return InvalidArgument(fmt::format("--config {}: {}", path, error.what()));
    }
  }
  return Status::Ok();
}

Result<std::pair<std::string, std::uint16_t>> ParseListen(const std::string& text,
                                                          std::string_view flag = "--listen") {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument(fmt::format("{}: HOST:PORT such as 127.0.0.1:8080", flag));
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]:8080
  }
  const std::string port_text = text.substr(colon + 1);
  unsigned long port = 0;
  std::size_t used = 0;
  try {
    port = std::stoul(port_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port_text.size() || port > 65535) {
    return InvalidArgument(fmt::format("{}: the port must be a number from 0 to 65535", flag));
  }
  return std::make_pair(host, static_cast<std::uint16_t>(port));
}

Result<std::chrono::milliseconds> ParseMillis(const std::string& text, const char* flag,
                                              Duration lo, Duration hi) {
  auto value = ParseDuration(text);
  if (!value.ok() || *value < lo || *value > hi) {
    return InvalidArgument(fmt::format("{}: a duration from {} to {} such as 30s", flag,
                                       FormatDuration(lo), FormatDuration(hi)));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*value);
}

Result<std::uint64_t> ParseSize(const std::string& text, const char* flag, std::uint64_t lo,
                                std::uint64_t hi) {
  auto value = ParseBytes(text);
  if (!value.ok() || *value < lo || *value > hi) {
    return InvalidArgument(
        fmt::format("{}: a size from {} to {}", flag, FormatBytes(lo), FormatBytes(hi)));
  }
  return *value;
}

Result<serve::ServerOptions> MakeOptions(const ServeFlags& flags) {
  serve::ServerOptions options;
  options.data_dir = flags.data_dir;
  options.uid_ledger = flags.uid_ledger;
  options.admin_key = flags.admin_key;
  options.admin_key_file = flags.admin_key_file;
  if (!flags.admin_key.empty() && !flags.admin_key_file.empty()) {
    return InvalidArgument("give --admin-key or --admin-key-file, not both");
  }
  GSHARE_ASSIGN_OR_RETURN(auto listen, ParseListen(flags.listen));
  options.http.host = listen.first;
  options.http.port = listen.second;
  options.http.io_threads = flags.io_threads;
  if (flags.grpc_listen != "off") {
    GSHARE_RETURN_IF_ERROR(ParseListen(flags.grpc_listen, "--grpc-listen").status());
    options.grpc_listen = flags.grpc_listen;
  }
  net::HttpServerLimits& limits = options.http.limits;
  GSHARE_ASSIGN_OR_RETURN(limits.body_bytes, ParseSize(flags.max_body, "--max-body", 1024, kGiB));
  GSHARE_ASSIGN_OR_RETURN(options.max_buffered_bytes,
                          ParseSize(flags.max_buffered, "--max-buffered", kMiB, 1024 * kGiB));
  if (options.max_buffered_bytes < limits.body_bytes) {
    return InvalidArgument(fmt::format("--max-buffered {} is less than one body (--max-body {})",
                                       FormatBytes(options.max_buffered_bytes),
                                       FormatBytes(limits.body_bytes)));
  }
  GSHARE_ASSIGN_OR_RETURN(limits.header_bytes,
                          ParseSize(flags.max_header, "--max-header", 1024, kMiB));
  const Duration second = std::chrono::seconds(1);
  const Duration hour = std::chrono::hours(1);
  GSHARE_ASSIGN_OR_RETURN(limits.read_timeout,
                          ParseMillis(flags.read_timeout, "--read-timeout", second, hour));
  GSHARE_ASSIGN_OR_RETURN(limits.idle_timeout,
                          ParseMillis(flags.idle_timeout, "--idle-timeout", second, hour));
  GSHARE_ASSIGN_OR_RETURN(limits.write_timeout,
                          ParseMillis(flags.write_timeout, "--write-timeout", second, hour));
  limits.max_connections = flags.max_connections;
  limits.max_in_flight = flags.max_in_flight;
  GSHARE_ASSIGN_OR_RETURN(options.drain,
                          ParseMillis(flags.drain, "--drain", Duration::zero(), hour));

  GSHARE_ASSIGN_OR_RETURN(const std::uint64_t gpu_memory,
                          ParseSize(flags.gpu_memory, "--gpu-memory", 256 * kMiB, 1024 * kGiB));
  auto granularity = SliceGranularity::Parse(flags.slice_granularity);
  if (!granularity.ok()) return granularity.status().WithContext("--slice-granularity");
  if (gpu_memory < granularity->bytes()) {
    return InvalidArgument(
        fmt::format("--gpu-memory {} is less than one slice (--slice-granularity {})",
                    FormatBytes(gpu_memory), FormatBytes(granularity->bytes())));
  }
  LiveNodeOptions& node = options.backend.node;
  GSHARE_ASSIGN_OR_RETURN(
      node.devices, MakeDeviceOptions(flags.device, fmt::format("{}x{}", flags.gpus, gpu_memory),
                                      flags.link_bandwidth));
  if (node.devices.emulated.front().link_bytes_per_second <= 0) {
    return InvalidArgument(
        "--link-bandwidth: the live node needs a paced link (12GB/s, say), which the scheduler "
        "can plan with");
  }
  node.policy_options.slice_granularity = *granularity;
  GSHARE_ASSIGN_OR_RETURN(
      node.snapshot_pool_bytes,
      ParseSize(flags.snapshot_pool, "--snapshot-pool", 64 * kMiB, 1024 * kGiB));
  node.policy = flags.policy;
  GSHARE_ASSIGN_OR_RETURN(node.policy_options.gshare.protect_horizon,
                          ParseMillis(flags.protect_horizon, "--protect-horizon", Duration::zero(),
                                      std::chrono::hours(24)));
  GSHARE_ASSIGN_OR_RETURN(
      node.executor.instance_keep,
      ParseMillis(flags.instance_keep, "--instance-keep", second, std::chrono::hours(24 * 7)));

  options.backend.tenant_max_in_flight = flags.tenant_max_in_flight;
  options.tenant_max_functions = flags.tenant_max_functions;
  if (flags.tenant_gpu_memory != "0") {
    GSHARE_ASSIGN_OR_RETURN(
        options.tenant_gpu_memory_bytes,
        ParseSize(flags.tenant_gpu_memory, "--tenant-gpu-memory", kMiB, 1024 * 1024 * kGiB));
  }
  if (flags.tenant_storage != "0") {
    GSHARE_ASSIGN_OR_RETURN(
        options.tenant_storage_bytes,
        ParseSize(flags.tenant_storage, "--tenant-storage", kMiB, 1024 * 1024 * kGiB));
  } else {
    options.tenant_storage_bytes = 0;
  }
  GSHARE_ASSIGN_OR_RETURN(options.max_file_bytes,
                          ParseSize(flags.max_file, "--max-file", kMiB, 1024 * kGiB));
  GSHARE_ASSIGN_OR_RETURN(const std::filesystem::path folder, ProgramFolder());
  options.backend.function_program = folder / "gshare-function";
  node.executor.cuda_shim_library =
      (folder / kCudaShimLibrary).string();  // CUDA GPUs' shim functions
  // Resolved now: the node starts programs with execve, which does not search PATH.
  auto python = FindProgram(flags.python);
  if (!python.ok()) return InvalidArgument("--python: " + python.status().message());
  // Absolute: the child changes into its working folder before it executes the interpreter.
  std::error_code absolute_error;
  options.backend.python = std::filesystem::absolute(*python, absolute_error).string();
  if (absolute_error) return InvalidArgument("--python: " + absolute_error.message());
  options.sandbox = flags.sandbox == "off" ? serve::SandboxMode::kOff : serve::SandboxMode::kAuto;
  return options;
}

// `flags` are the ones bound to `command`'s options: ApplyConfig sets them.
int RunServe(CLI::App& command, const ServeFlags& flags) {
  if (!flags.config.empty()) {
    if (const Status applied = ApplyConfig(command, flags.config); !applied.ok()) {
      return Fail(2, applied.message());
    }
  }
  auto options = MakeOptions(flags);
  if (!options.ok()) return Fail(2, options.status().message());
  auto server = serve::Server::Start(std::move(options).value());
  if (!server.ok()) return Fail(1, server.status().ToString());
  serve::Server& s = **server;
  if (s.admin_key().generated) {
    // On a terminal only: a service's output goes to a journal that others may read.
    if (::isatty(STDOUT_FILENO) == 1) {
      std::printf("admin key (shown once; kept in %s/admin.key, mode 0600):\n%s\n",
                  flags.data_dir.c_str(), s.admin_key().key.c_str());
    } else {
      std::printf("admin key generated: %s/admin.key (mode 0600)\n", flags.data_dir.c_str());
    }
  }
  const GpuType& gpu = s.gpu_type();
  if (!s.node().inventory().note().empty()) spdlog::info("{}", s.node().inventory().note());
  spdlog::info(
      "gshare serve: {} emulated GPUs with {} for slices each, {} policy, {} functions "
      "deployed from {}",
      s.node().inventory().devices().size(), FormatBytes(gpu.memory_bytes), flags.policy,
      s.deployed_at_start(), flags.data_dir);
  std::printf("listening on http://%s:%u\n",
              flags.listen.substr(0, flags.listen.rfind(':')).c_str(),
              static_cast<unsigned>(s.port()));
  if (s.grpc_port() != 0) {
    std::printf("gRPC listening on %s:%d\n",
                flags.grpc_listen.substr(0, flags.grpc_listen.rfind(':')).c_str(), s.grpc_port());
  }
  std::fflush(stdout);

  boost::asio::signal_set signals(s.io_context(), SIGINT, SIGTERM);
  signals.async_wait([&s](const boost::system::error_code& error, int signal) {
    if (error) return;
    spdlog::info("signal {}: draining requests in flight, then stopping", signal);
    s.BeginShutdown();
  });
  s.Wait();
  spdlog::info("gshare serve: stopped");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve functions over HTTP (KServe v2 inference, function and tenant management, "
      "Prometheus /metrics) on the live node");
  cmd->add_option("--config", flags->config,
                  "YAML map of these settings by long name (listen: 127.0.0.1:8080); the command "
                  "line wins");
  cmd->add_option("--listen", flags->listen, "HOST:PORT to listen on")->capture_default_str();
  cmd->add_option("--grpc-listen", flags->grpc_listen,
                  "HOST:PORT of the KServe v2 gRPC service; off: none")
      ->capture_default_str();
  cmd->add_option("--data-dir", flags->data_dir, "Registry (gshare.db), keys, model files, logs")
      ->capture_default_str();
  cmd->add_option("--admin-key-file", flags->admin_key_file,
                  "Read the admin key from this file (mode 0600); default: DATA_DIR/admin.key, "
                  "generated at the first start");
  cmd->add_option("--admin-key", flags->admin_key,
                  "The admin key itself (tests; it shows in the process list)");
  cmd->add_option("--device", flags->device, "auto, emulated or cuda")->capture_default_str();
  cmd->add_option("--gpus", flags->gpus, "Emulated GPUs")
      ->check(WholeIn(1, 64))
      ->capture_default_str();
  cmd->add_option("--gpu-memory", flags->gpu_memory, "Memory of each emulated GPU")
      ->capture_default_str();
  cmd->add_option("--link-bandwidth", flags->link_bandwidth, "Host-to-GPU link of each GPU")
      ->capture_default_str();
  cmd->add_option("--slice-granularity", flags->slice_granularity,
                  "vGPU slices are multiples of this (a multiple of 2Mi)")
      ->capture_default_str();
  cmd->add_option("--policy", flags->policy, "Scheduling policy")->capture_default_str();
  cmd->add_option("--snapshot-pool", flags->snapshot_pool,
                  "Pinned host memory for the functions' snapshots")
      ->capture_default_str();
  cmd->add_option("--io-threads", flags->io_threads, "HTTP threads (0: one per core)")
      ->check(WholeIn(0, 256))
      ->capture_default_str();
  cmd->add_option("--max-body", flags->max_body, "Largest request body (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-header", flags->max_header, "Largest request header (431 beyond)")
      ->capture_default_str();
  cmd->add_option("--read-timeout", flags->read_timeout, "Time for a request to arrive")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", flags->idle_timeout, "Keep-alive idle time")
      ->capture_default_str();
  cmd->add_option("--write-timeout", flags->write_timeout, "Time for a client to read an answer")
      ->capture_default_str();
  cmd->add_option("--max-connections", flags->max_connections, "Open connections (503 beyond)")
      ->check(WholeIn(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--max-buffered", flags->max_buffered,
                  "Bytes of inference bodies held at once, shared fairly between tenants (429 "
                  "beyond a tenant's share)")
      ->capture_default_str();
  cmd->add_option("--max-in-flight", flags->max_in_flight,
                  "Inference requests in flight, shared fairly between tenants (429 beyond a "
                  "tenant's share)")
      ->check(WholeIn(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--tenant-max-in-flight", flags->tenant_max_in_flight,
                  "Unanswered requests per tenant (429 beyond; 0: no quota)")
      ->check(WholeIn(0, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--tenant-max-functions", flags->tenant_max_functions,
                  "Functions per tenant (429 beyond; 0: no bound)")
      ->check(WholeIn(0, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--tenant-gpu-memory", flags->tenant_gpu_memory,
                  "Sum of a tenant's functions' gpu_memory (429 beyond; 0: no quota)")
      ->capture_default_str();
  cmd->add_option("--python", flags->python,
                  "Interpreter of the pytorch runtime (with PyTorch; looked up on PATH)")
      ->capture_default_str();
  cmd->add_option(
         "--sandbox", flags->sandbox,
         "Tenants' functions in a sandbox of namespaces and seccomp (auto: where it can be "
         "made, else tenants' code runtimes are refused; off: never, the admin's choice)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  cmd->add_option("--tenant-storage", flags->tenant_storage,
                  "Disk a tenant's model files may take (429 beyond; 0: no quota)")
      ->capture_default_str();
  cmd->add_option("--max-file", flags->max_file,
                  "Largest model file a tenant may upload (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--drain", flags->drain, "On SIGTERM, time for requests in flight to finish")
      ->capture_default_str();
  cmd->add_option("--instance-keep", flags->instance_keep,
                  "Idle instances beyond a function's warm one stay this long")
      ->capture_default_str();
  cmd->add_option("--protect-horizon", flags->protect_horizon,
                  "gshare: a slice of a function at risk (a restore would miss its SLO) that is "
                  "expected back within this time is not evicted for another, which gets a GPU "
                  "while the node has one free; 0s: off")
      ->capture_default_str();
  cmd->add_option("--uid-ledger", flags->uid_ledger,
                  "As root: the host's record of each server's range of tenant uids (this data "
                  "directory claims a free one)")
      ->capture_default_str();
  cmd->callback([flags, cmd, &context] { context.exit_code = RunServe(*cmd, *flags); });
}

}  // namespace gshare::cli
