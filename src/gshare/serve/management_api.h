// ManagementApi: the function and tenant management endpoints of `gshare serve`, as a handler of
// its HttpServer (net/http_server.h) beside the inference Front (front.h). It checks keys and
// bodies, writes the registry (registry.h, through TenantKeys for tenants and keys) and tells the
// Deployer (deployer.h) what changed; it runs nothing itself. docs/serve.md lists the endpoints,
// who may call them and the status of every error.
//
// Keys: every endpoint needs `Authorization: Bearer <key>`. A tenant's key manages that tenant's
// own functions (/api/v1/functions, and Triton's repository extension under /v2/repository); the
// admin key manages tenants, their keys and any tenant's functions (/api/v1/tenants). The admin
// key is no tenant: it is refused on a tenant's endpoints (403), as a tenant's key is on the
// admin's. A tenant sees only its own functions: another tenant's function gets the very bytes an
// unknown name gets.
//
// A change is all or nothing as far as the caller can tell: a function spec is parsed, admitted
// by the deployer and checked against the tenant's GPU memory quota before the registry is
// written, and a deploy that fails after the write is undone in the registry (a create deletes
// the record again, an update restores and redeploys the old spec), so the answer's status says
// whether the change took.
//
// Threading: Handle runs on the server's io threads and never blocks: it routes and checks the
// key there, then queues the request for the ManagementApi's one worker thread, which does the
// registry and deployer work. Requests are therefore handled one at a time, in the order they
// arrived from each caller, and callers take turns (a queue per tenant, and one for the admin,
// served round-robin: one tenant's burst of calls delays another's by at most one call each; an
// admin call on a tenant's namespace is ordered with the admin's other calls, not the tenant's),
// which orders every change (a quota check and its write, a write and its deploy) against every
// other; the server's max_in_flight bounds the queue. A request whose client went
// away before its turn is not carried out (the client may ask again). A deploy (a create, an
// update, a load) never holds the worker while its model loads: the worker writes the registry,
// hands the change to the deployer and goes on with the next request; when the deploy settles,
// its answer (and, for a deploy that failed, the undo of its write) is queued for the worker like
// a request, so one slow load delays no other tenant's call, and the answer still says whether
// the change took. DeployAll runs on the calling thread, ordered with the worker's changes by a
// mutex, with at most kParallelLoads models loading at once. The ManagementApi, its
// registry, keys and deployer must outlive the server whose handler it is; the registry and
// the keys may be shared with other users (the Front authenticates through the same TenantKeys).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gshare/common/fair_queue.h"
#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/net/http_server.h"
#include "gshare/serve/api_keys.h"
#include "gshare/serve/deployer.h"
#include "gshare/serve/model_files.h"
#include "gshare/serve/pool_plan.h"
#include "gshare/serve/registry.h"

namespace gshare::serve {

// The largest request body a management endpoint reads (a function spec, a tenant's name); a
// larger one is answered 413 before it is parsed.
inline constexpr std::size_t kMaxManagementBodyBytes = 1 << 20;
// Models DeployAll loads at once at the server's start.
inline constexpr int kParallelLoads = 4;

struct ManagementApiOptions {
  // The server's data directory: a tenant's model files live in data_dir/models/<tenant>/, against
  // which a spec's relative working_dir and model_files are resolved.
  std::filesystem::path data_dir;
  // The admin key's hash, TenantKeys::secret().Hash(admin key).
  KeyHash admin_key_hash{};
  // A tenant's quota: the sum of gpu_memory over its functions may not exceed it (429). 0: none.
  std::uint64_t tenant_gpu_memory_bytes = 0;
  // Functions a tenant may have (429 beyond). 0: no bound.
  std::size_t tenant_max_functions = 1000;
  // The node's pinned snapshot pool, where a deployed function keeps its warm instance's memory
  // image (the larger of gpu_memory and model_size). Shared fairly (pool_plan.h): each tenant with
  // functions is guaranteed an equal share and may borrow what the shares leave; a deploy within
  // the tenant's share takes its room back from the borrowers, whose most recently changed
  // borrowed functions go cold (Deployer::KeepWarm) until there is room for them again. A create
  // or update that would not be kept warm is refused (429). 0: not planned.
  std::uint64_t snapshot_pool_bytes = 0;
  // The tenants' model files (model_files.h), served at /api/v1/files and
  // /api/v1/tenants/{tenant}/files; must outlive the ManagementApi. Null: those paths are 404.
  ModelFileStore* files = nullptr;
};

// An error of the registry as a management answer: its client errors (a taken name, an unknown
// tenant) as they are, its own failures logged and answered without the database's details.
net::HttpResponse RegistryErrorResponse(const Status& status);

class ManagementApi {
 public:
  // Starts the worker thread. `registry`, `keys` (over the same registry) and `deployer` must
  // outlive the ManagementApi.
  ManagementApi(ManagementApiOptions options, Registry& registry, TenantKeys& keys,
                Deployer& deployer);
  // Answers 503 to the requests still queued and joins the worker.
  ~ManagementApi();
  ManagementApi(const ManagementApi&) = delete;
  ManagementApi& operator=(const ManagementApi&) = delete;

  // Whether this handler serves `target`'s path: /api and /v2/repository and everything under
  // them (the server sends the rest of /v2 to the Front).
  static bool Serves(std::string_view target);
  // Whether a request of `method` to `target` is a file upload, whose body is streamed to disk
  // (up to the file limit) instead of held.
  static bool IsUpload(std::string_view method, std::string_view target);

  // Answers one request through `responder`, now (a routing or key error) or later from the
  // worker thread.
  void Handle(net::ServerRequest request, net::Responder responder) EXCLUDES(queue_mutex_);
  // The header check (HttpServer::HeaderCheck): the answer that refuses `head` for its path, its
  // method, its key, the key's role or its declared body size, or nothing. Handle checks again.
  // An upload (PUT of a file) that passes gets its body sink here (head.body_sink): the body is
  // written to disk as it arrives, never held whole.
  std::optional<net::HttpResponse> CheckHead(net::ServerRequest& head) const;
  // Handle, as an HttpServer::Handler bound to this ManagementApi.
  net::HttpServer::Handler Handler();

  // Deploys every function the registry holds (at server start). A function whose stored spec
  // does not parse or whose deploy fails is logged and skipped; returns how many were deployed,
  // or the registry's error when it cannot be listed.
  Result<std::size_t> DeployAll() EXCLUDES(change_mutex_);

  // Another process changed the registry (`gshare tenant`): queues, for the worker, a reload of
  // the keys (a removed tenant's key is refused, an added one's accepted) and the stop, without
  // drain, of the functions of every tenant that is no longer there (their model folders go too).
  // Any thread; never blocks.
  void RegistryChanged() EXCLUDES(queue_mutex_);
  // How many of those reloads have been carried out, and a wait (at most `timeout`) until `count`
  // have been; false on the timeout.
  std::uint64_t reconciled() const EXCLUDES(queue_mutex_);
  // Requests waiting for the worker (tests).
  std::size_t queued() const EXCLUDES(queue_mutex_);
  bool WaitUntilReconciled(std::uint64_t count, std::chrono::milliseconds timeout)
      EXCLUDES(queue_mutex_);

 private:
  // What a request asks, once routed.
  enum class Operation {
    kListFunctions,
    kCreateFunction,
    kGetFunction,
    kUpdateFunction,
    kDeleteFunction,
    kRepositoryIndex,
    kLoad,
    kUnload,
    kListTenants,
    kAddTenant,
    kGetTenant,
    kRemoveTenant,
    kRotateKey,
    kFunctionLogs,
    kListFiles,
    kGetFile,
    kPutFile,
    kDeleteFile,
  };

  // An endpoint: the operation for each method it takes, and what its path names.
  struct Route {
    std::optional<Operation> get, post, put, remove;  // HEAD goes where GET does
    bool admin_endpoint = false;                      // for the admin key only
    std::string_view tenant;                          // the namespace an admin path names
    std::string_view name;  // the function or the file, where the path names one
  };

  // The endpoint of a path split at '/' (PathSegments), or nothing. The route's views are into the
  // path's text.
  static std::optional<Route> Match(const std::vector<std::string_view>& segments);

  // A request routed and its key checked, or the answer that refuses it.
  struct Admission {
    std::optional<net::HttpResponse> refusal;  // set: answer this and stop
    Operation operation = Operation::kListFunctions;
    std::string tenant;  // the namespace: the caller's own, or the one an admin path names
    std::string name;    // the function, where the path names one
    bool by_admin = false;
    std::size_t lines = 0;  // kFunctionLogs: the lines asked for
  };
  // The checks that need no body, in an order that depends on nothing a caller cannot see: the
  // path, the method, the key, the key's role, the body's size (declared, or read).
  Admission Admit(const net::ServerRequest& request) const;

  // A request routed and authenticated on an io thread, waiting for the worker; or the end of a
  // deploy that settled (`finish` set: its answer, made under the change mutex).
  struct Job {
    Operation operation = Operation::kListFunctions;
    std::string tenant;  // the namespace: the caller's own, or the one an admin path names
    std::string name;    // the function, where the path names one
    bool by_admin = false;
    std::string body;
    net::Responder responder;
    std::function<net::HttpResponse()> finish;
    std::shared_ptr<ModelFileUpload> upload;  // kPutFile: the body, stored as it came
    std::size_t lines = 0;                    // kFunctionLogs: the lines asked for
  };
  // An answer now, or none: the request is answered when its deploy settles.
  using Answer = std::optional<net::HttpResponse>;

  void Work() EXCLUDES(queue_mutex_);
  Answer Execute(const Job& job) REQUIRES(change_mutex_);
  // Queues the end of a settled deploy for the worker (from the deployer's thread).
  void Continue(net::Responder responder, std::function<net::HttpResponse()> finish)
      EXCLUDES(queue_mutex_);
  // The deployer's callback for a change that answers `responder`: `finish(status)` runs on the
  // worker, under the change mutex.
  Deployer::Settled ThenOnWorker(net::Responder responder,
                                 std::function<net::HttpResponse(const Status&)> finish);

  // Function operations in `tenant`'s namespace; `by_admin`: the admin key asks.
  net::HttpResponse ListFunctions(const std::string& tenant) REQUIRES(change_mutex_);
  net::HttpResponse GetFunction(const std::string& tenant, const std::string& name)
      REQUIRES(change_mutex_);
  Answer CreateFunction(const Job& job) REQUIRES(change_mutex_);
  Answer UpdateFunction(const Job& job) REQUIRES(change_mutex_);
  net::HttpResponse DeleteFunction(const std::string& tenant, const std::string& name)
      REQUIRES(change_mutex_);
  // The function's log (`lines` last lines, text/plain), for a function of the namespace or one
  // whose log the node keeps after a failed deploy.
  net::HttpResponse FunctionLogs(const std::string& tenant, const std::string& name,
                                 std::size_t lines) REQUIRES(change_mutex_);
  // Triton's repository extension, for a tenant's key.
  net::HttpResponse RepositoryIndex(const std::string& tenant, std::string_view body)
      REQUIRES(change_mutex_);
  Answer LoadOrUnload(const Job& job, bool load) REQUIRES(change_mutex_);
  // Tenants, for the admin key.
  net::HttpResponse ListTenants() REQUIRES(change_mutex_);
  net::HttpResponse GetTenant(const std::string& tenant) REQUIRES(change_mutex_);
  net::HttpResponse AddTenant(std::string_view body) REQUIRES(change_mutex_);
  net::HttpResponse RemoveTenant(const std::string& tenant) REQUIRES(change_mutex_);
  net::HttpResponse RotateKey(const std::string& tenant) REQUIRES(change_mutex_);
  void RemoveModelFolder(const std::string& tenant) const;
  // The tenant's model files (management_files.cc), on the worker.
  net::HttpResponse ListFiles(const std::string& tenant) REQUIRES(change_mutex_);
  net::HttpResponse GetFile(const std::string& tenant, const std::string& name)
      REQUIRES(change_mutex_);
  net::HttpResponse PutFile(const Job& job) REQUIRES(change_mutex_);
  net::HttpResponse DeleteFile(const std::string& tenant, const std::string& name)
      REQUIRES(change_mutex_);
  // The function of `tenant` whose spec names its file `name` (nothing when none does), or the
  // registry's error.
  Result<std::optional<std::string>> FunctionNaming(const std::string& tenant,
                                                    const std::string& name)
      REQUIRES(change_mutex_);
  // The upload a PUT of `name` in `tenant`'s folder begins (from the header check, or from Handle
  // for a request that came without it), or the answer that refuses it.
  Result<std::shared_ptr<ModelFileUpload>> BeginUpload(const std::string& tenant,
                                                       const std::string& name,
                                                       std::optional<std::uint64_t> declared,
                                                       net::HttpResponse& refusal) const;
  // RegistryChanged's work, on the worker.
  void Reconcile() EXCLUDES(change_mutex_, queue_mutex_);

  // A spec from a request body for `tenant`'s namespace: parsed, its tenant checked, admitted.
  Result<FunctionSpec> AdmitSpec(const std::string& tenant, std::string_view body,
                                 bool by_admin) const;
  // ResourceExhausted when `spec` with the tenant's other functions (all but the one it names)
  // would be more functions than tenant_max_functions, hold more GPU memory than the quota, or
  // take more of the snapshot pool than CheckPoolShare allows; the registry's error, or Internal
  // for a stored spec that does not parse, when the others cannot be counted.
  Status CheckQuota(const FunctionSpec& spec) REQUIRES(change_mutex_);
  Status CheckPoolShare(const FunctionSpec& spec) REQUIRES(change_mutex_);
  // The plan of the snapshot pool for what the registry holds, with `candidate` (a function
  // about to be created or updated: the newest change) in place of its record.
  Result<PoolPlan> PlanPool(const FunctionSpec* candidate) REQUIRES(change_mutex_);
  // Plans the pool for what the registry holds now and tells the deployer which functions changed
  // between warm and cold (errors are logged: the plan stays as it was).
  void Replan() REQUIRES(change_mutex_);
  // Whether the last plan keeps the function warm (true when it was never planned).
  bool KeptWarm(const std::string& tenant, const std::string& name) const REQUIRES(change_mutex_);
  // The specs the registry holds for `tenant`.
  Result<std::vector<FunctionSpec>> StoredSpecs(const std::string& tenant) REQUIRES(change_mutex_);

  const ManagementApiOptions options_;
  Registry& registry_;
  TenantKeys& keys_;
  Deployer& deployer_;

  // Held for every request's work and by DeployAll: one change at a time.
  Mutex change_mutex_;
  // Each tenant's number as this server last saw it (a name with a new number is a new tenant).
  std::map<std::string, std::int64_t> tenant_numbers_ GUARDED_BY(change_mutex_);
  // Whether each deployed function is kept warm, as the deployer was last told (Replan).
  std::map<FunctionKey, bool> kept_warm_ GUARDED_BY(change_mutex_);

  mutable Mutex queue_mutex_;
  CondVar queue_changed_;
  FairQueue<Job> queue_ GUARDED_BY(queue_mutex_);  // per caller, round-robin
  bool stopping_ GUARDED_BY(queue_mutex_) = false;
  bool reconcile_pending_ GUARDED_BY(queue_mutex_) = false;  // RegistryChanged, not yet done
  std::uint64_t reconciled_ GUARDED_BY(queue_mutex_) = 0;
  CondVar reconciled_changed_;
  std::thread worker_;
};

}  // namespace gshare::serve
