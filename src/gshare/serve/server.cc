#include "gshare/serve/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "gshare/node/process/child_process.h"
#include "gshare/serve/data_dir.h"
#include "gshare/serve/http_util.h"
#if GSHARE_WITH_GRPC
#include "gshare/serve/grpc/grpc_server.h"
#else
namespace gshare::serve {
// A build without gRPC: never started (Start refuses a grpc_listen).
class GrpcServer {
 public:
  int port() const { return 0; }
  void BeginShutdown(std::chrono::milliseconds) {}
  void Wait() {}
};
}  // namespace gshare::serve
#endif

namespace gshare::serve {

namespace {

// Descriptors the server keeps for itself beyond its clients' connections: the registry, logs,
// function processes' sockets and pipes, the GPUs.
constexpr std::uint64_t kReservedDescriptors = 256;
// Requests in flight beyond the inference ones: management, health, metrics.
constexpr std::size_t kUntenantedInFlight = 256;

// Raises the soft limit on open files as far as connections need (to the hard limit at most),
// and clamps max_connections, with a warning, where even the hard limit is too low: a connection
// past the limit would otherwise wait unanswered for a descriptor.
void FitConnectionsToFileLimit(net::HttpServerLimits& limits) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  const std::uint64_t wanted = limits.max_connections + kReservedDescriptors;
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < wanted) {
    rlimit raised = files;
    raised.rlim_cur =
        files.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, files.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
  }
  if (files.rlim_cur == RLIM_INFINITY || files.rlim_cur >= wanted) return;
  const std::uint64_t fit =
      files.rlim_cur > kReservedDescriptors + 1 ? files.rlim_cur - kReservedDescriptors : 1;
  spdlog::warn(
      "--max-connections {} is above what the limit on open files ({}) allows; serving "
      "at most {} connections (raise `ulimit -n` for more)",
      limits.max_connections, static_cast<std::uint64_t>(files.rlim_cur), fit);
  limits.max_connections = fit;
}

// --sandbox: the backend's sandbox state, the node's host told to use it when it is on.
void ChooseSandbox(ServerOptions& options) {
  LiveBackendOptions& backend = options.backend;
  if (options.sandbox == SandboxMode::kOff) {
    spdlog::warn(
        "--sandbox off: tenants' functions run without the sandbox (namespaces, seccomp), "
        "contained only by their own uid");
    backend.sandbox = SandboxState::kOff;
    return;
  }
  Status probe = Status::Ok();
  if (::geteuid() != 0) {
    probe = FailedPrecondition("the server does not run as root");
  } else if (!options.backend.node.host.distinct_uids) {
    probe = FailedPrecondition("tenants do not have uids of their own");
  } else {
    const std::filesystem::path root = options.data_dir / "run" / "sandbox";
    std::error_code error;
    std::filesystem::create_directories(root, error);
    probe = error ? IoError(fmt::format("{}: {}", root.string(), error.message()))
                  : ProbeSandbox(root.string());
  }
  if (probe.ok()) {
    backend.sandbox = SandboxState::kOn;
    backend.node.host.sandbox = true;
    return;
  }
  backend.sandbox = SandboxState::kUnavailable;
  backend.sandbox_reason = probe.message();
  spdlog::warn(
      "the sandbox cannot be made here ({}): tenants' pytorch and python functions are refused; "
      "the bundled runtimes run as their tenant's uid only",
      backend.sandbox_reason);
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  auto server = std::unique_ptr<Server>(new Server());
  Server& s = *server;
  // Whatever the server creates is its own (the registry, its journal, logs) unless it says
  // otherwise: the data directory may be entered by tenants' uids (live_backend.h).
  ::umask(077);
  {
    // Absolute: function processes start in their own folders and read files named under it.
    std::error_code error;
    options.data_dir = std::filesystem::absolute(options.data_dir, error);
    if (error) return IoError(fmt::format("--data-dir: {}", error.message()));
  }
  GSHARE_RETURN_IF_ERROR(EnsureDataDir(options.data_dir));
  GSHARE_ASSIGN_OR_RETURN(s.registry_, Registry::Open(options.data_dir));
  // The registry's version before the keys and functions are read from it: a change by another
  // process from here on (during a long start, say) is seen by the watcher's first poll.
  GSHARE_ASSIGN_OR_RETURN(const std::int64_t registry_version, s.registry_->DataVersion());
  if (::chmod(s.registry_->path().c_str(), 0600) != 0) {
    return IoError(fmt::format("chmod {}: {}", s.registry_->path().string(), std::strerror(errno)));
  }
  GSHARE_ASSIGN_OR_RETURN(ServerSecret secret, ServerSecret::LoadOrCreate(options.data_dir));
  if (!options.admin_key.empty()) {
    if (options.admin_key.size() < 16 || options.admin_key.size() > kMaxApiKeyBytes) {
      return InvalidArgument(
          fmt::format("the admin key must have 16 to {} characters", kMaxApiKeyBytes));
    }
    s.admin_key_ = AdminKey{options.admin_key, false};
  } else {
    GSHARE_ASSIGN_OR_RETURN(s.admin_key_,
                            LoadOrCreateAdminKey(options.data_dir, options.admin_key_file));
  }
  s.admin_hash_ = secret.Hash(s.admin_key_.key);
  GSHARE_ASSIGN_OR_RETURN(s.keys_, TenantKeys::Open(*s.registry_, std::move(secret)));
  GSHARE_ASSIGN_OR_RETURN(s.metrics_, metrics::GshareMetrics::Create());

  options.backend.node.policy_options.instance_start = Duration::zero();  // the GPUs are there
  options.backend.data_dir = options.data_dir;
  // A tenant's function processes run as first_uid + its registry number, the same in every run,
  // so that files it was given stay its own.
  options.backend.node.host.tenant_number =
      [registry = s.registry_.get()](const std::string& tenant) -> Result<std::uint32_t> {
    GSHARE_ASSIGN_OR_RETURN(const TenantRecord record, registry->GetTenant(tenant));
    if (record.number < 0 || record.number > std::numeric_limits<std::uint32_t>::max()) {
      return OutOfRange(fmt::format("tenant '{}' has number {}", tenant, record.number));
    }
    return static_cast<std::uint32_t>(record.number);
  };
  // As root, tenants run as uids of a range this data directory holds on the host, which no other
  // server here gives out.
  if (::geteuid() == 0 && options.backend.node.host.distinct_uids) {
    // Canonical: another spelling of the same folder (a symlink, a trailing slash) is the same
    // owner.
    std::error_code canonical_error;
    const std::filesystem::path owner =
        std::filesystem::weakly_canonical(options.data_dir, canonical_error);
    auto range = ClaimUidRange(options.uid_ledger,
                               canonical_error ? options.data_dir.string() : owner.string());
    if (!range.ok()) {
      return Status(range.status().code(),
                    fmt::format("the tenants' uid range (--uid-ledger {}): {}",
                                options.uid_ledger.string(), range.status().message()));
    }
    options.backend.node.host.first_uid = range->first;
    options.backend.node.host.uid_count = range->count;
    // The host's ledger makes the range this server's alone (a private one proves nothing).
    options.backend.node.host.kill_uid_leftovers =
        options.uid_ledger == std::filesystem::path(kDefaultUidLedger);
    s.tenant_first_uid_ = range->first;
  }
  ChooseSandbox(options);
  GSHARE_ASSIGN_OR_RETURN(s.backend_, LiveBackend::Create(*s.metrics_, options.backend));
  // The front stamps deadlines on the node's clock: one clock from a request's arrival to its run.
  s.parse_pool_ = std::make_unique<ParsePool>(options.parse_pool);
  // --max-in-flight is shared fairly between tenants by the front; the HTTP server's own bound,
  // which counts every request, is the hard one above it (FairShare: at most twice its capacity
  // is ever held), with room for the management API and health checks.
  FrontOptions front;
  // An inference body's JSON may be as large as any body the HTTP server takes.
  front.parse_limits.max_text_bytes = options.http.limits.body_bytes;
  front.max_in_flight = options.http.limits.max_in_flight;
  front.max_buffered_bytes = options.max_buffered_bytes;
  front.on_inference_answer = [metrics = s.metrics_.get()](std::string_view protocol, int status) {
    metrics->InferenceAnswered(protocol, status);
  };
  options.http.limits.max_in_flight = 2 * front.max_in_flight + kUntenantedInFlight;
  s.front_ = std::make_unique<Front>(front, *s.keys_, *s.backend_, s.backend_->clock(),
                                     s.parse_pool_.get());
  ModelFileStoreOptions files;
  files.data_dir = options.data_dir;
  files.tenant_storage_bytes = options.tenant_storage_bytes;
  files.max_file_bytes = options.max_file_bytes;
  if (s.tenant_first_uid_ != 0) {
    // A tenant's functions run as first_uid + its number, in the group of that number too.
    files.reader_group = [registry = s.registry_.get(), first = s.tenant_first_uid_,
                          count = options.backend.node.host.uid_count](
                             const std::string& tenant) -> Result<std::optional<gid_t>> {
      GSHARE_ASSIGN_OR_RETURN(const TenantRecord record, registry->GetTenant(tenant));
      if (record.number < 0 || record.number >= static_cast<std::int64_t>(count)) {
        return OutOfRange(fmt::format("tenant '{}' has number {}, outside the uid range of {}",
                                      tenant, record.number, count));
      }
      return std::optional<gid_t>(static_cast<gid_t>(first + record.number));
    };
  }
  GSHARE_ASSIGN_OR_RETURN(s.files_, ModelFileStore::Open(std::move(files)));
  options.http.limits.streamed_body_bytes = options.max_file_bytes;
  ManagementApiOptions management;
  management.files = s.files_.get();
  management.data_dir = options.data_dir;
  management.admin_key_hash = s.admin_hash_;
  management.tenant_gpu_memory_bytes = options.tenant_gpu_memory_bytes;
  management.tenant_max_functions = options.tenant_max_functions;
  management.snapshot_pool_bytes = options.backend.node.snapshot_pool_bytes;
  s.management_ = std::make_unique<ManagementApi>(management, *s.registry_, *s.keys_, *s.backend_);
  GSHARE_ASSIGN_OR_RETURN(s.deployed_at_start_, s.management_->DeployAll());
  s.watcher_ = std::make_unique<RegistryWatcher>(
      *s.registry_, options.registry_poll,
      [management = s.management_.get()] { management->RegistryChanged(); }, registry_version);
  FitConnectionsToFileLimit(options.http.limits);
  s.options_ = std::move(options);
  GSHARE_ASSIGN_OR_RETURN(s.http_,
                          net::HttpServer::Start(
                              s.options_.http,
                              [&s](net::ServerRequest request, net::Responder responder) {
                                s.Handle(std::move(request), std::move(responder));
                              },
                              [&s](net::ServerRequest& head) { return s.CheckHead(head); }));
  if (!s.options_.grpc_listen.empty()) {
#if GSHARE_WITH_GRPC
    GrpcServerOptions grpc;
    grpc.listen = s.options_.grpc_listen;
    grpc.parse_limits = front.parse_limits;
    GSHARE_ASSIGN_OR_RETURN(
        s.grpc_, GrpcServer::Start(std::move(grpc), *s.front_,
                                   [&s](net::ServerRequest request, net::Responder responder) {
                                     s.Handle(std::move(request), std::move(responder));
                                   }));
#else
    return FailedPrecondition("this gshare is built without gRPC (GSHARE_WITH_GRPC=OFF)");
#endif
  }
  return server;
}

bool GrpcBuilt() {
#if GSHARE_WITH_GRPC
  return true;
#else
  return false;
#endif
}

int Server::grpc_port() const { return grpc_ ? grpc_->port() : 0; }

Server::~Server() {
  // Also after a start that failed half-way: the pool stops before the backend shuts down.
  if (!waited_) {
    BeginShutdown();
    Wait();
  }
}

void Server::BeginShutdown() {
  if (http_ != nullptr) http_->BeginShutdown(options_.drain);
  if (grpc_ != nullptr) grpc_->BeginShutdown(options_.drain);
}

void Server::Wait() {
  if (waited_) return;
  waited_ = true;
  if (http_ != nullptr) http_->Wait();
  if (grpc_ != nullptr) grpc_->Wait();
  // No parse hands a request to the backend once it has shut down: the jobs still queued are
  // answered 503, the one running finishes first.
  // The pool stops (its queued parses answered 503) but stays: the backend's answers, which may
  // come until it has shut down, hand large ones to it and are then written where they are.
  if (parse_pool_ != nullptr) parse_pool_->Stop();
  if (backend_ != nullptr) backend_->Shutdown();
}

namespace {

constexpr std::string_view kNodeAdminOnly =
    "the node's description is served to the admin key only";
constexpr std::string_view kMetricsAdminOnly =
    "/metrics names every tenant's functions: it is served to the admin key only";

}  // namespace

std::optional<net::HttpResponse> Server::CheckHead(net::ServerRequest& head) {
  const std::string_view path = std::string_view(head.target).substr(0, head.target.find('?'));
  // Only an upload streams (to --max-file); every other body is held, to --max-body, which is
  // refused here, before any share of the buffers is taken for it.
  if (!ManagementApi::IsUpload(head.method, head.target) && head.declared_length &&
      *head.declared_length > options_.http.limits.body_bytes) {
    return net::JsonErrorResponse(
        413, fmt::format("a body of {} bytes is larger than the limit of {} (--max-body)",
                         *head.declared_length, options_.http.limits.body_bytes));
  }
  if (path == "/metrics") return AdminOnly(head, kMetricsAdminOnly);
  if (path == "/api/v1/node") return AdminOnly(head, kNodeAdminOnly);
  if (ManagementApi::Serves(head.target)) return management_->CheckHead(head);
  return front_->CheckHead(head);
}

void Server::Handle(net::ServerRequest request, net::Responder responder) {
  const std::string_view path =
      std::string_view(request.target).substr(0, request.target.find('?'));
  if (path == "/metrics") return HandleMetrics(request, responder);
  if (path == "/api/v1/node") return HandleNode(request, responder);
  if (ManagementApi::Serves(request.target)) {
    return management_->Handle(std::move(request), std::move(responder));
  }
  front_->Handle(std::move(request), std::move(responder));
}

std::optional<net::HttpResponse> Server::AdminOnly(const net::ServerRequest& request,
                                                   std::string_view why) const {
  if (request.method != "GET" && request.method != "HEAD") return MethodNotAllowed("GET, HEAD");
  if (request.authorization.empty()) {
    return Unauthorized("the admin key is required: Authorization: Bearer <key>", "Bearer");
  }
  const std::optional<std::string_view> key = BearerToken(request.authorization);
  if (key && keys_->Matches(*key, admin_hash_)) return std::nullopt;
  if (key && keys_->Authenticate(*key)) return net::JsonErrorResponse(403, std::string(why));
  return Unauthorized("the API key is not valid", "Bearer error=\"invalid_token\"");
}

void Server::HandleNode(const net::ServerRequest& request, const net::Responder& responder) {
  if (auto refusal = AdminOnly(request, kNodeAdminOnly)) return responder.Respond(*refusal);
  const GpuType& gpu = gpu_type();
  const LiveNodeOptions& node = options_.backend.node;
  responder.Respond(
      JsonResponse(200, {{"policy", node.policy},
                         {"sandbox", SandboxStateName(options_.backend.sandbox)},
                         {"sandbox_reason", options_.backend.sandbox_reason},
                         {"gpus", backend_->node().inventory().devices().size()},
                         {"slice_granularity_bytes", node.policy_options.slice_granularity.bytes()},
                         {"gpu_type",
                          {{"name", gpu.name},
                           {"memory_bytes", gpu.memory_bytes},
                           {"h2d_bytes_per_second", gpu.h2d_bytes_per_second},
                           {"restore_overhead_seconds", ToSeconds(gpu.restore_overhead)},
                           {"price_per_hour_usd", gpu.price_per_hour_usd}}}}));
}

void Server::HandleMetrics(const net::ServerRequest& request, const net::Responder& responder) {
  if (auto refusal = AdminOnly(request, kMetricsAdminOnly)) return responder.Respond(*refusal);
  backend_->PublishMetrics();
  responder.Respond({200, metrics_->Expose(), std::string(metrics::Registry::kContentType)});
}

}  // namespace gshare::serve
