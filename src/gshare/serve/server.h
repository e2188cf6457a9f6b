// Server: `gshare serve` composed: the data directory (registry, server secret, admin key), the
// live node, the live backend, the KServe v2 front, the management API and /metrics, behind one
// HTTP server. The command line is a thin shell over it, and tests start it in-process on a free
// port.
//
// Routes: /metrics to the metrics and /api/v1/node to the node's description (the admin key only:
// the metrics' labels name every tenant's functions); /v2/repository/... and /api/v1/... to the
// management API (management_api.h); everything else to the front (front.h). Each route's path,
// method and key are checked once the header is in, before its body is read (CheckHead), and
// again with the body.
//
// gRPC: where grpc_listen is set, the KServe v2 gRPC service (grpc/grpc_server.h) listens there
// too, over the same front and handlers.
//
// Registry changes by another process (`gshare tenant add`, `remove`): a RegistryWatcher polls
// the registry every kRegistryPollInterval, and the management API reloads the keys and stops
// the functions of a removed tenant (ManagementApi::RegistryChanged).
//
// Shutdown: BeginShutdown (any thread, a signal handler's included) stops accepting, answers 503
// to new requests, lets the requests in flight finish for at most `drain`; Wait then stops the
// backend (function processes end) and returns.
//
// Threading: Start, Wait and the destructor are called from one thread, never an io thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "gshare/metrics/gshare_metrics.h"
#include "gshare/net/http_server.h"
#include "gshare/node/process/uid_ranges.h"
#include "gshare/serve/api_keys.h"
#include "gshare/serve/front.h"
#include "gshare/serve/live_backend.h"
#include "gshare/serve/management_api.h"
#include "gshare/serve/registry.h"
#include "gshare/serve/registry_watcher.h"

namespace gshare::serve {

// --sandbox: auto makes the sandbox where it can (root with namespaces) and refuses tenants' code
// runtimes elsewhere; off runs every function without it (warned at the start, reported by
// GET /api/v1/node).
enum class SandboxMode { kAuto, kOff };

struct ServerOptions {
  std::filesystem::path data_dir = "gshare-data";
  // The admin key: given (tests), else read from admin_key_file, else DATA_DIR/admin.key
  // (generated at the first start).
  std::string admin_key;
  std::filesystem::path admin_key_file;
  net::HttpServerOptions http;
  // The backend and its node (GPUs, policy, price and restore cost that describe the GPUs); its
  // data_dir is data_dir.
  LiveBackendOptions backend;
  // The host's record of which uids each server gives its tenants (node/process/uid_ranges.h):
  // a server running as root claims a range there for its data directory.
  std::filesystem::path uid_ledger = std::string(kDefaultUidLedger);
  SandboxMode sandbox = SandboxMode::kAuto;
  // Where large inference bodies are parsed (threads 0: the cores less one).
  ParsePoolOptions parse_pool;
  // How often the registry is polled for changes by another process.
  std::chrono::milliseconds registry_poll = kRegistryPollInterval;
  // Bytes of inference bodies held at once (from their header to their answer), shared fairly
  // between tenants: a request beyond its tenant's share and what it may borrow gets 429.
  std::uint64_t max_buffered_bytes = 1ULL << 30;
  // Functions a tenant may have; 0: no bound.
  std::size_t tenant_max_functions = 1000;
  // Per-tenant quota on the sum of its functions' gpu_memory; 0: none.
  std::uint64_t tenant_gpu_memory_bytes = 0;
  // Disk a tenant's model files may take (0: no bound), and the largest one (model_files.h).
  std::uint64_t tenant_storage_bytes = 20ULL << 30;
  std::uint64_t max_file_bytes = 4ULL << 30;
  std::chrono::milliseconds drain{30'000};
  // HOST:PORT of the KServe v2 gRPC service (port 0: any free one); empty: none. A build without
  // gRPC refuses a non-empty one.
  std::string grpc_listen;
};

class GrpcServer;

// Whether this build serves gRPC (GSHARE_WITH_GRPC).
bool GrpcBuilt();

class Server {
 public:
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const { return http_->port(); }
  // The gRPC service's port; 0 without one.
  int grpc_port() const;
  // The admin key, and whether this start generated it (then print it once).
  const AdminKey& admin_key() const { return admin_key_; }
  // How many functions of the registry were deployed at the start.
  std::size_t deployed_at_start() const { return deployed_at_start_; }
  const GpuType& gpu_type() const { return backend_->gpu_type(); }
  const LiveNode& node() const { return backend_->node(); }
  LiveBackend& backend() { return *backend_; }
  ManagementApi& management() { return *management_; }
  // The first uid of this server's tenants' range (their function processes run as it plus the
  // tenant's number), claimed in the uid ledger; 0 when the server does not switch uids.
  uid_t tenant_first_uid() const { return tenant_first_uid_; }
  // The HTTP server's loop, for a signal_set whose handler calls BeginShutdown.
  boost::asio::io_context& io_context() { return http_->io_context(); }

  void BeginShutdown();
  // Blocks until the HTTP server has drained and the backend has stopped.
  void Wait();

 private:
  Server() = default;
  void Handle(net::ServerRequest request, net::Responder responder);
  std::optional<net::HttpResponse> CheckHead(net::ServerRequest& head);
  void HandleMetrics(const net::ServerRequest& request, const net::Responder& responder);
  void HandleNode(const net::ServerRequest& request, const net::Responder& responder);
  // Nothing for a GET or HEAD with the admin key; otherwise the refusal (405, 401, or 403 with
  // `why` for a tenant's key).
  std::optional<net::HttpResponse> AdminOnly(const net::ServerRequest& request,
                                             std::string_view why) const;

  ServerOptions options_;
  AdminKey admin_key_;
  KeyHash admin_hash_{};
  std::size_t deployed_at_start_ = 0;
  uid_t tenant_first_uid_ = 0;
  // Destroyed in reverse order: the HTTP server first (no handler runs after it), then the API
  // and the front, the backend (its node: loop thread and processes), the keys and the registry.
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<TenantKeys> keys_;
  std::unique_ptr<metrics::GshareMetrics> metrics_;
  std::unique_ptr<LiveBackend> backend_;
  std::unique_ptr<Front> front_;
  // Goes before the Front and the backend, whose code its jobs run (Wait stops it first).
  std::unique_ptr<ParsePool> parse_pool_;
  std::unique_ptr<ModelFileStore> files_;  // outlives the API, whose uploads refer to it
  std::unique_ptr<ManagementApi> management_;
  std::unique_ptr<RegistryWatcher> watcher_;
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  bool waited_ = false;
};

}  // namespace gshare::serve
