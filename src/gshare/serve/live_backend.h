// LiveBackend: what `gshare serve` runs its requests on. The front's inference requests go to the
// gShare scheduler (the same policy code as the simulator's) on the live node (node/live_node.h,
// which the backend composes and owns, with itself as the node's request source), onto the node's
// emulated GPUs and into the function processes (docs/serve.md, "The request path"); the
// management API deploys functions into it (Deployer).
//
// Functions. A deployed function is a version on the node: its spec, planned for the node's GPUs
// (PlanLaunch), with at least one instance kept warm in host memory (a deployed model stays
// loaded, so a request pays a restore, not a process start). Deploy adds a version and prepares
// its first instance (LiveExecutor::Prepare): the function is LOADING until that instance is
// checkpointed, then READY; a failed start makes it UNAVAILABLE with the reason, and Load tries
// again. An update adds a new version and retires the old one; Unload and Undeploy retire the
// current one. A retired version takes no new request and leaves the node once its requests in
// flight are answered (an update lets them finish on the old spec, a delete drains them); once the
// node reports it drained, its one record here (Version) goes too.
//
// Requests. Each request's deadline is its arrival plus the function's SLO, on the node's clock
// (the Front reads the same clock: clock()); it is also its latest start, so one that has not
// started by then is answered DeadlineExceeded (504) and never runs; one that started finishes
// and counts as a miss. Cancel withdraws a request that has not started (its client went away).
// A tenant with `tenant_max_in_flight` requests unanswered gets ResourceExhausted (429).
//
// Threading: the node's event loop runs on the node's own thread from Create to Shutdown; the
// executor, the scheduler and the function processes live on it. Every public method may be
// called from any thread; they post to the loop and never wait for a model to load. Answers and
// deploys' `settled` callbacks are given on the loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "gshare/common/mutex.h"
#include "gshare/metrics/gshare_metrics.h"
#include "gshare/model/gpu_type.h"
#include "gshare/node/live_node.h"
#include "gshare/serve/deployer.h"
#include "gshare/serve/front.h"

namespace gshare::serve {

// The sandbox of tenants' functions (node/process/sandbox.h): on (node.host.sandbox), off (the
// admin's choice: --sandbox off), or unavailable (--sandbox auto where it cannot be made: tenants'
// code runtimes are refused, and the other runtimes run as their tenant's uid only).
enum class SandboxState { kOn, kOff, kUnavailable };
std::string_view SandboxStateName(SandboxState state);

struct LiveBackendOptions {
  // Tenants' model files are under data_dir/models/<tenant>/; function logs and sockets under
  // data_dir/run/ (the node's host.run_dir).
  std::filesystem::path data_dir;
  // The bundled runtimes' program (gshare-function), beside the server's binary.
  std::filesystem::path function_program;
  // The interpreter of the Python runtimes (runtime: pytorch), with PyTorch installed.
  std::string python = "python3";
  SandboxState sandbox = SandboxState::kOff;
  std::string sandbox_reason;  // why it is unavailable
  // Unanswered requests a tenant may have at once; 0: no bound.
  std::size_t tenant_max_in_flight = 0;
  // The node; its host's run_dir, its executor's meters and drained hook are the backend's.
  LiveNodeOptions node;
  LiveNodeParts parts;  // tests: a manual clock, an in-process host; `requests` is the backend
};

class LiveBackend final : public InferenceBackend, public Deployer, private RequestSource {
 public:
  // `metrics` must outlive the backend.
  static Result<std::unique_ptr<LiveBackend>> Create(metrics::GshareMetrics& metrics,
                                                     LiveBackendOptions options);
  ~LiveBackend() override;

  // The node's clock: the Front stamps deadlines with it.
  const Clock& clock() const { return node_->clock(); }
  const GpuType& gpu_type() const { return node_->gpu_type(); }
  const LiveNode& node() const { return *node_; }

  // Stops taking requests (Unavailable), answers those not yet started with Unavailable, settles
  // the deploys in progress with Unavailable, stops every function process and the loop.
  // Requests in flight on an instance are answered with the error their instance's end gives.
  // Idempotent; blocks until done.
  void Shutdown();
  // Blocks until the function is no longer LOADING (or `limit` passed) and returns its status.
  // For tests and tools in the server's process; clients poll /v2/models/{name}/ready.
  Result<ModelStatus> WaitUntilSettled(std::string_view tenant, std::string_view name,
                                       std::chrono::milliseconds limit) EXCLUDES(mutex_);
  // Blocks until every version on the node is a function's current one (every other has settled,
  // retired and drained), or `limit` passed (DeadlineExceeded). For tests and tools in the
  // server's process.
  Status WaitUntilDrained(std::chrono::milliseconds limit) EXCLUDES(mutex_);
  // The pids of the function processes running now (tests; memory sampling).
  std::vector<pid_t> FunctionPids();
  // `tenant`'s requests taken and not yet answered (what tenant_max_in_flight bounds).
  std::size_t TenantInFlight(std::string_view tenant) const EXCLUDES(mutex_);
  // Brings the accounting counters up to now (before a /metrics exposition).
  void PublishMetrics();
  // The first scheduler contract violation, or OK (a bug; the server logs it).
  Status violation() const;
  // The backend's and the node's per-function records (tests: they come back to their size).
  struct Tables {
    std::size_t entries = 0;   // deployed functions, as the io threads see them
    std::size_t versions = 0;  // versions on the node, draining ones included
    std::size_t pending = 0;   // requests not answered
    std::size_t feed = 0;      // functions the metrics feed is bound to
    LiveNode::Tables node;
  };
  Tables tables();

  // InferenceBackend.
  bool Ready() const override;
  std::optional<ModelInfo> FindModel(std::string_view tenant, std::string_view name) const override;
  std::vector<ModelStatistics> Statistics(std::string_view tenant,
                                          std::optional<std::string_view> name) const override;
  std::uint64_t Infer(std::string_view tenant, std::string_view model, InferRequest request,
                      TimePoint deadline, InferCallback done) override;
  void Cancel(std::uint64_t ticket) override;

  // Deployer.
  Status Admit(const FunctionSpec& spec, bool by_admin) const override;
  Status Deploy(const FunctionSpec& spec, Settled settled) override;
  Status Undeploy(std::string_view tenant, std::string_view name) override;
  Result<std::size_t> StopTenant(std::string_view tenant) override;
  void KeepWarm(std::string_view tenant, std::string_view name, bool warm) override
      EXCLUDES(mutex_);
  std::vector<std::string> Tenants() const override;
  Status Load(std::string_view tenant, std::string_view name, Settled settled) override;
  Status Unload(std::string_view tenant, std::string_view name) override;
  Result<ModelStatus> StatusOf(std::string_view tenant, std::string_view name) const override;
  Result<std::vector<std::string>> LogOf(std::string_view tenant, std::string_view name,
                                         std::size_t lines) const override;
  void RemoveLogs(std::string_view tenant) override;

 private:
  using Key = std::pair<std::string, std::string>;  // tenant, name
  // A deployed function as the io threads see it.
  struct Entry {
    FunctionSpec spec;
    ModelInfo info;
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<metrics::FunctionSeries> series;
    ModelStatistics statistics;  // of every version, since the function was deployed
    // Counts the changes (deploys, unloads): a version's readiness counts only for the change
    // that made it.
    std::uint64_t generation = 0;
  };
  // One record per version of a function on the node (loop only), from its deploy until the
  // node reports it drained.
  struct Version {
    Key key;
    std::shared_ptr<metrics::FunctionSeries> series;
    Settled settled;  // the deploy's, until its first instance is ready (or it failed)
    int in_flight = 0;
    bool retired = false;
  };
  // A request handed to the scheduler (loop only); its RequestId is its ticket.
  struct Pending {
    InferRequest request;
    // The request in its function's form, encoded on the thread that took it (TakeEncoded), and
    // how long that took (compute_input in the statistics).
    std::optional<EncodedRequest> encoded;
    Duration encoding{};
    InferCallback done;
    std::string tenant;
    FunctionId version = 0;
    TimePoint arrival{};
    bool started = false;
    TimePoint started_at{};
  };

  LiveBackend(metrics::GshareMetrics& metrics, LiveBackendOptions options);

  // The launch of `spec` on this node.
  Result<FunctionLaunch> Plan(const FunctionSpec& spec) const;
  // Posts `work` to the loop, under the lock (so that it runs before Shutdown's own work);
  // Unavailable once shut down.
  Status Post(std::function<void()> work) EXCLUDES(mutex_);
  // Loop: adds a version of `key` and prepares it (a cold one is ready at once, without an
  // instance: KeepWarm); once ready (and still the latest change,
  // `generation`), it becomes the entry `next` and takes the requests, and the old version is
  // retired. `settled` is called either way.
  void AddVersion(const Key& key, std::uint64_t generation, Entry next, FunctionLaunch launch,
                  std::shared_ptr<metrics::FunctionSeries> series, bool cold, Settled settled);
  void Retire(FunctionId version);
  // Loop: publishes obsolete_ after a change of the versions.
  void CountObsolete() EXCLUDES(mutex_);
  void MaybeRemove(FunctionId version);
  void Submit(std::uint64_t ticket, Key key, InferRequest request,
              std::optional<EncodedRequest> encoded, Duration encoding, TimePoint deadline,
              InferCallback done, std::shared_ptr<metrics::FunctionSeries> series);
  void Finish(RequestId id, Result<InferAnswer> result);

  // RequestSource (the process host, on the loop). Requests are encoded ahead for their function
  // on the thread that called Infer, and answers to a request alone are handed to the front
  // undecoded: the loop does no codec work for a request sent alone. Such an answer counts its
  // decoding in the statistics when it is taken, so it must be taken (or dropped) before the
  // backend is destroyed (the server stops its io threads and parse pool first).
  const InferRequest* Input(RequestId request) override;
  void Answer(RequestId request, InferResponse response) override;
  void Fail(RequestId request, const Status& status) override;
  std::optional<EncodedRequest> TakeEncoded(RequestId request) override;
  void DropEncoded(RequestId request) override { (void)TakeEncoded(request); }
  bool TakesEncodedAnswers() const override { return true; }
  void AnswerEncoded(RequestId request, FunctionAnswer answer) override;

  metrics::GshareMetrics& metrics_;
  const LiveBackendOptions options_;
  std::unique_ptr<metrics::MeterFeed> feed_;
  std::unique_ptr<LiveNode> node_;

  // Loop only.
  std::map<Key, FunctionId> current_;
  std::unordered_map<FunctionId, Version> versions_;
  std::unordered_map<RequestId, Pending> pending_;

  std::atomic<std::uint64_t> next_ticket_{1};
  mutable Mutex mutex_;
  std::map<Key, Entry> entries_ GUARDED_BY(mutex_);
  std::set<Key> cold_ GUARDED_BY(mutex_);  // KeepWarm(false), deployed or not
  std::condition_variable_any settled_;    // an entry left LOADING, or a version drained
  // Versions on the node that are not a function's current one (loading, retired, draining).
  std::size_t obsolete_ GUARDED_BY(mutex_) = 0;
  std::map<std::string, std::size_t> tenant_in_flight_ GUARDED_BY(mutex_);
  bool shutting_down_ GUARDED_BY(mutex_) = false;
  Status violation_ GUARDED_BY(mutex_);

  std::mutex shutdown_mutex_;  // orders Shutdown calls
  bool shut_down_ = false;     // under shutdown_mutex_
};

}  // namespace gshare::serve
