// LiveBackend: what `gshare serve` runs its requests on. The front's inference requests go to the
// gShare scheduler (the same policy code as the simulator's) through the live executor, onto the
// node's emulated GPUs and into the function processes (docs/serve.md, "The request path"); the
// management API deploys functions into it (Deployer).
//
// Functions. A deployed function is a version in the scheduler's FunctionRegistry: its spec,
// resolved for the node's GPUs, with at least one instance kept warm in host memory (a deployed
// model stays loaded, so a request pays a restore, not a process start). Deploy adds a version
// and prepares its first instance (LiveExecutor::Prepare): the function is LOADING until that
// instance is checkpointed, then READY; a failed start makes it UNAVAILABLE with the reason, and
// Load tries again. An update adds a new version and retires the old one; Unload and Undeploy
// retire the current one. A retired version takes no new request and leaves the registry (and
// its instances stop) once its requests in flight are answered, so an update lets them finish on
// the old spec and a delete drains them.
//
// Requests. Each request's deadline is its arrival plus the function's SLO. One that has not
// started by then is answered DeadlineExceeded (504) and never runs (LiveExecutor::Withdraw); one
// that started finishes and counts as a miss. Cancel withdraws a request that has not started
// (its client went away). A tenant with `tenant_max_in_flight` requests unanswered gets
// ResourceExhausted (429).
//
// Threading: the node's event loop runs on a thread of the backend's own from Create to Shutdown;
// the executor, the scheduler and the function processes live on it. Every public method may be
// called from any thread; they post to the loop, and Deploy, Undeploy, Load and Unload wait for
// the loop to take the change (never for a model to load). Answers are given on the loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "gshare/common/clock.h"
#include "gshare/common/mutex.h"
#include "gshare/metrics/gshare_metrics.h"
#include "gshare/model/gpu_type.h"
#include "gshare/node/live_executor.h"
#include "gshare/node/node_agent.h"
#include "gshare/node/process/process_host.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/scheduler.h"
#include "gshare/serve/deployer.h"
#include "gshare/serve/front.h"

namespace gshare::serve {

struct LiveBackendOptions {
  std::string policy = "gshare";
  // The policy's knobs; slice_granularity must be the node's (NodeAgentOptions).
  PolicyOptions policy_options;
  // Tenants' model files are under data_dir/models/<tenant>/; function logs and sockets under
  // data_dir/run/; the bundled runtimes' default weights in data_dir/runtimes/ (written from the
  // fixed seed when missing).
  std::filesystem::path data_dir;
  // The bundled runtimes' program (gshare-function), beside the server's binary.
  std::filesystem::path function_program;
  // Unanswered requests a tenant may have at once; 0: no bound.
  std::size_t tenant_max_in_flight = 0;
  // How long an idle instance beyond a function's warm ones stays in host memory.
  Duration instance_keep = std::chrono::minutes(10);
  ProcessHostOptions host;  // run_dir is set to data_dir/run
};

class LiveBackend final : public InferenceBackend, public Deployer, private RequestSource {
 public:
  // `node`, `metrics` and `front_clock` (the Front's, for deadlines) must outlive the backend.
  static Result<std::unique_ptr<LiveBackend>> Create(NodeAgent& node, const GpuType& gpu_type,
                                                     metrics::GshareMetrics& metrics,
                                                     const Clock& front_clock,
                                                     LiveBackendOptions options);
  ~LiveBackend() override;

  // Stops taking requests (Unavailable), answers those not yet started with Unavailable, stops
  // every function process and the loop. Requests in flight on an instance are answered with the
  // error their instance's end gives. Idempotent; blocks until done.
  void Shutdown();
  // Blocks until the function is no longer LOADING (or `limit` passed) and returns its status.
  // For tests and tools in the server's process; clients poll /v2/models/{name}/ready.
  Result<ModelStatus> WaitUntilSettled(std::string_view tenant, std::string_view name,
                                       std::chrono::milliseconds limit) EXCLUDES(mutex_);
  // The pids of the function processes running now (tests; memory sampling).
  std::vector<pid_t> FunctionPids();
  // Brings the accounting counters up to now (before a /metrics exposition).
  void PublishMetrics();
  // The first scheduler contract violation, or OK (a bug; the server logs it).
  Status violation() const;

  // InferenceBackend.
  bool Ready() const override;
  std::optional<ModelInfo> FindModel(std::string_view tenant, std::string_view name) const override;
  std::uint64_t Infer(std::string_view tenant, std::string_view model, InferRequest request,
                      TimePoint deadline, InferCallback done) override;
  void Cancel(std::uint64_t ticket) override;

  // Deployer.
  Status Admit(const FunctionSpec& spec, bool by_admin) const override;
  Status Deploy(const FunctionSpec& spec) override;
  Status Undeploy(std::string_view tenant, std::string_view name) override;
  Status Load(std::string_view tenant, std::string_view name) override;
  Status Unload(std::string_view tenant, std::string_view name) override;
  Result<ModelStatus> StatusOf(std::string_view tenant, std::string_view name) const override;

 private:
  using Key = std::pair<std::string, std::string>;  // tenant, name
  // A deployed function as the io threads see it.
  struct Entry {
    FunctionSpec spec;
    ModelInfo info;
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<metrics::FunctionSeries> series;
    // Counts the changes (deploys, unloads): a version's readiness counts only for the change
    // that made it.
    std::uint64_t generation = 0;
  };
  // A version of a function in the scheduler's registry (loop only).
  struct Version {
    Key key;
    int in_flight = 0;
    bool retired = false;
  };
  // A request handed to the scheduler (loop only); its RequestId is its ticket.
  struct Pending {
    InferRequest request;
    InferCallback done;
    std::string tenant;
    FunctionId version = 0;
    std::shared_ptr<metrics::FunctionSeries> series;
    std::chrono::steady_clock::time_point received;
    bool started = false;
    std::unique_ptr<boost::asio::steady_timer> deadline;
  };
  // What a version runs: resolved for the node and its process command.
  struct Prepared {
    ResolvedFunction resolved;
    InstanceCommand command;
    Duration timeout{};
  };

  LiveBackend(NodeAgent& node, const GpuType& gpu_type, metrics::GshareMetrics& metrics,
              const Clock& front_clock, LiveBackendOptions options);

  Result<Prepared> PrepareSpec(const FunctionSpec& spec) const;
  // Runs `work` on the loop and waits for it; Unavailable once shut down.
  Status OnLoop(std::function<Status()> work);
  // Loop: adds a version of `key` and prepares it; once ready (and still the latest change,
  // `generation`), it becomes the entry `next` and takes the requests, and the old version is
  // retired. `outcome` is set either way.
  void AddVersion(const Key& key, std::uint64_t generation, Entry next, Prepared prepared,
                  std::shared_ptr<metrics::FunctionSeries> series,
                  std::shared_ptr<std::promise<Status>> outcome);
  void Retire(FunctionId version);
  void MaybeRemove(FunctionId version);
  void Submit(std::uint64_t ticket, Key key, InferRequest request, Duration slack,
              std::chrono::steady_clock::time_point received, InferCallback done,
              std::shared_ptr<metrics::FunctionSeries> series);
  void Finish(RequestId id, Result<InferResponse> result);

  // RequestSource (the process host, on the loop).
  const InferRequest* Input(RequestId request) override;
  void Answer(RequestId request, InferResponse response) override;
  void Fail(RequestId request, const Status& status) override;

  NodeAgent& node_;
  const GpuType gpu_type_;
  metrics::GshareMetrics& metrics_;
  const Clock& front_clock_;
  const LiveBackendOptions options_;
  std::unique_ptr<metrics::MeterFeed> feed_;

  // Loop only.
  FunctionRegistry functions_;
  std::unique_ptr<ProcessHost> host_;
  std::unique_ptr<LiveExecutor> executor_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<Key, FunctionId> current_;
  std::unordered_map<FunctionId, Version> versions_;
  std::unordered_map<FunctionId, std::shared_ptr<metrics::FunctionSeries>> series_by_version_;
  std::unordered_map<RequestId, Pending> pending_;
  // The outcomes Deploy waits for, by the version being prepared.
  std::unordered_map<FunctionId, std::shared_ptr<std::promise<Status>>> preparing_;
  bool loop_stopped_ = false;

  std::atomic<std::uint64_t> next_ticket_{1};
  mutable Mutex mutex_;
  std::map<Key, Entry> entries_ GUARDED_BY(mutex_);
  std::condition_variable_any settled_;  // an entry left LOADING
  std::map<std::string, std::size_t> tenant_in_flight_ GUARDED_BY(mutex_);
  bool shutting_down_ GUARDED_BY(mutex_) = false;
  Status violation_ GUARDED_BY(mutex_);

  std::mutex shutdown_mutex_;  // orders Shutdown calls
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread loop_thread_;
};

}  // namespace gshare::serve
