#include "gshare/serve/live_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <system_error>

#include "examples/models/model_layout.h"
#include "examples/runtime/example_weights.h"
#include "gshare/model/catalog.h"
#include "gshare/sched/policy_registry.h"

namespace gshare::serve {
namespace {

using metrics::RequestOutcome;

// Whether `path`, made absolute and normal, lies inside `folder`.
bool Inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  std::error_code error;
  const auto real = std::filesystem::weakly_canonical(path, error);
  if (error) return false;
  const auto base = std::filesystem::weakly_canonical(folder, error);
  if (error) return false;
  auto [base_end, ignored] = std::mismatch(base.begin(), base.end(), real.begin(), real.end());
  return base_end == base.end() && real != base;
}

Status CheckReadableFile(const std::string& path, std::string_view function) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::is_regular_file(status) || ::access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(fmt::format(
        "function '{}': model file {} is not a readable file on the node", function, path));
  }
  return Status::Ok();
}

RequestOutcome OutcomeOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return RequestOutcome::kOk;
    case StatusCode::kDeadlineExceeded:
      return RequestOutcome::kDeadlineExceeded;
    case StatusCode::kCancelled:
      return RequestOutcome::kCancelled;
    case StatusCode::kResourceExhausted:
      return RequestOutcome::kRejected;
    default:
      return RequestOutcome::kError;
  }
}

}  // namespace

Result<std::unique_ptr<LiveBackend>> LiveBackend::Create(NodeAgent& node, const GpuType& gpu_type,
                                                         metrics::GshareMetrics& metrics,
                                                         const Clock& front_clock,
                                                         LiveBackendOptions options) {
  if (options.data_dir.empty()) return InvalidArgument("the live backend needs a data directory");
  std::error_code error;
  // Function processes run as their tenants' uids where the server is root: they enter (not list)
  // the data directory to reach their folders under run/ and their model files; the registry and
  // the secrets in it are the server's alone (mode 0600).
  const bool tenants_enter = ::geteuid() == 0;
  const auto enterable = [&](const std::filesystem::path& folder) -> Status {
    if (tenants_enter && ::chmod(folder.c_str(), 0711) != 0) {
      return IoError(fmt::format("chmod {}: {}", folder.string(), std::strerror(errno)));
    }
    return Status::Ok();
  };
  if (tenants_enter) {
    for (auto parent = options.data_dir.parent_path();; parent = parent.parent_path()) {
      struct stat info {};
      if (::stat(parent.c_str(), &info) != 0) {
        return IoError(fmt::format("stat {}: {}", parent.string(), std::strerror(errno)));
      }
      if ((info.st_mode & S_IXOTH) == 0) {
        return FailedPrecondition(fmt::format(
            "function processes run as their tenants' uids and must enter {}, but {} is closed "
            "to them (mode {:o}): `chmod o+x {}`, or choose a data directory elsewhere",
            options.data_dir.string(), parent.string(), info.st_mode & 07777, parent.string()));
      }
      if (parent == parent.parent_path()) break;
    }
  }
  GSHARE_RETURN_IF_ERROR(enterable(options.data_dir));
  for (const char* folder : {"run", "models", "runtimes"}) {
    std::filesystem::create_directories(options.data_dir / folder, error);
    if (error) {
      return IoError(fmt::format("cannot create {}: {}", (options.data_dir / folder).string(),
                                 error.message()));
    }
    GSHARE_RETURN_IF_ERROR(enterable(options.data_dir / folder));
  }
  // The bundled runtimes' weights, from the fixed seed, where missing.
  for (const auto kind : {examples::ModelKind::kMlp, examples::ModelKind::kCnn}) {
    const auto path = options.data_dir / "runtimes" /
                      fmt::format("{}.safetensors", examples::ModelKindName(kind));
    if (std::filesystem::exists(path, error)) continue;
    GSHARE_RETURN_IF_ERROR(
        examples::WriteExampleWeights(kind, examples::kDefaultWeightSeed, path.string()));
    spdlog::info("wrote {} (seed {})", path.string(), examples::kDefaultWeightSeed);
    if (::chmod(path.c_str(), 0644) != 0) {  // public weights, read by every tenant's runtime
      return IoError(fmt::format("chmod {}: {}", path.string(), std::strerror(errno)));
    }
  }
  options.host.run_dir = (options.data_dir / "run").string();
  auto backend = std::unique_ptr<LiveBackend>(
      new LiveBackend(node, gpu_type, metrics, front_clock, std::move(options)));
  LiveBackend& b = *backend;
  b.feed_ = std::make_unique<metrics::MeterFeed>(metrics);
  b.host_ = std::make_unique<ProcessHost>(node.loop(), std::vector<InstanceCommand>{},
                                          static_cast<RequestSource&>(b), b.options_.host);
  LiveExecutorOptions executor_options;
  executor_options.gpu_type = gpu_type;
  executor_options.instance_keep = b.options_.instance_keep;
  executor_options.feed = b.feed_.get();
  executor_options.keep_meters = false;  // the server runs for weeks: the feed's memory is bounded
  executor_options.on_restored = [&b](FunctionId version, Duration took) {
    if (auto it = b.series_by_version_.find(version); it != b.series_by_version_.end()) {
      it->second->RestoreFinished(took);
    }
  };
  b.executor_ =
      std::make_unique<LiveExecutor>(node.resources(), b.functions_, *b.host_, executor_options);
  auto policy =
      MakePolicy(b.options_.policy, {&b.functions_, b.executor_.get()}, b.options_.policy_options);
  if (!policy.ok()) return policy.status();
  b.scheduler_ = std::move(policy).value();
  b.executor_->set_scheduler(b.scheduler_.get());
  b.work_ =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          node.loop().get_executor());
  b.loop_thread_ = std::thread([&node] { node.loop().run(); });
  return backend;
}

LiveBackend::LiveBackend(NodeAgent& node, const GpuType& gpu_type, metrics::GshareMetrics& metrics,
                         const Clock& front_clock, LiveBackendOptions options)
    : node_(node),
      gpu_type_(gpu_type),
      metrics_(metrics),
      front_clock_(front_clock),
      options_(std::move(options)) {}

LiveBackend::~LiveBackend() { Shutdown(); }

void LiveBackend::Shutdown() {
  std::lock_guard once(shutdown_mutex_);  // a second caller waits for the first, then returns
  {
    MutexLock lock(mutex_);
    shutting_down_ = true;
  }
  if (!loop_thread_.joinable()) return;
  std::promise<void> stopped;
  boost::asio::post(node_.loop(), [this, &stopped] {
    // Requests not started are answered here; those on an instance get their instance's end.
    std::vector<RequestId> waiting;
    for (auto& [id, pending] : pending_) {
      if (!pending.started) waiting.push_back(id);
    }
    for (const RequestId id : waiting) {
      if (!executor_->Withdraw(id, Unavailable("the server is shutting down"))) {
        Finish(id, Unavailable("the server is shutting down"));
      }
    }
    executor_->Shutdown();  // no Prepare callback after it
    for (auto& [version, outcome] : preparing_) {
      outcome->set_value(Unavailable("the server shut down before the function was ready"));
    }
    preparing_.clear();
    std::vector<RequestId> left;
    for (auto& [id, pending] : pending_) left.push_back(id);
    for (const RequestId id : left) Finish(id, Unavailable("the server shut down"));
    stopped.set_value();
  });
  stopped.get_future().wait();
  // The function processes end (SIGTERM, then SIGKILL) as the host is destroyed, on this thread
  // once the loop has stopped.
  work_.reset();
  node_.loop().stop();
  loop_thread_.join();
  scheduler_.reset();
  executor_.reset();
  host_.reset();
  loop_stopped_ = true;
}

std::vector<pid_t> LiveBackend::FunctionPids() {
  std::vector<pid_t> pids;
  (void)OnLoop([&]() {
    pids = host_->pids();
    return Status::Ok();
  });
  return pids;
}

void LiveBackend::PublishMetrics() {
  if (executor_ != nullptr && feed_ != nullptr) feed_->Publish(executor_->Now());
}

Status LiveBackend::violation() const {
  MutexLock lock(mutex_);
  return violation_;
}

bool LiveBackend::Ready() const {
  MutexLock lock(mutex_);
  return !shutting_down_;
}

std::optional<ModelInfo> LiveBackend::FindModel(std::string_view tenant,
                                                std::string_view name) const {
  MutexLock lock(mutex_);
  auto it = entries_.find(Key(tenant, name));
  if (it == entries_.end()) return std::nullopt;
  ModelInfo info = it->second.info;
  info.ready = it->second.state == ModelState::kReady;
  return info;
}

std::uint64_t LiveBackend::Infer(std::string_view tenant, std::string_view model,
                                 InferRequest request, TimePoint deadline, InferCallback done) {
  const auto received = std::chrono::steady_clock::now();
  const Duration slack = deadline - front_clock_.Now();
  Status refused;
  std::shared_ptr<metrics::FunctionSeries> series;
  Key key(tenant, model);
  const std::uint64_t ticket = next_ticket_.fetch_add(1);
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(key);
    if (shutting_down_) {
      refused = Unavailable("the server is shutting down");
    } else if (it == entries_.end()) {
      refused = NotFound("no such model");
    } else if (it->second.state != ModelState::kReady) {
      refused = Unavailable(fmt::format("model '{}' is not ready", model));
    } else {
      series = it->second.series;
      std::size_t& in_flight = tenant_in_flight_[key.first];
      if (options_.tenant_max_in_flight > 0 && in_flight >= options_.tenant_max_in_flight) {
        refused = ResourceExhausted(
            fmt::format("tenant '{}' has {} requests in flight, its quota", key.first, in_flight));
      } else {
        ++in_flight;
        // Posted under the lock: Shutdown posts its own work after setting shutting_down_ under
        // the same lock, so whatever was posted before runs first.
        boost::asio::post(node_.loop(), [this, ticket, key, request = std::move(request), slack,
                                         received, done = std::move(done), series]() mutable {
          Submit(ticket, std::move(key), std::move(request), slack, received, std::move(done),
                 std::move(series));
        });
      }
    }
  }
  if (!refused.ok()) {
    if (series) series->RequestFinished(OutcomeOf(refused), Duration::zero());
    done(refused);
    return 0;
  }
  return ticket;
}

void LiveBackend::Cancel(std::uint64_t ticket) {
  MutexLock lock(mutex_);
  if (shutting_down_) return;
  boost::asio::post(node_.loop(), [this, ticket] {
    if (executor_ == nullptr || !pending_.contains(ticket)) return;
    executor_->Withdraw(ticket, Cancelled("the client went away"));
  });
}

void LiveBackend::Submit(std::uint64_t ticket, Key key, InferRequest request, Duration slack,
                         std::chrono::steady_clock::time_point received, InferCallback done,
                         std::shared_ptr<metrics::FunctionSeries> series) {
  const auto release_tenant = [this, &key] {
    MutexLock lock(mutex_);
    --tenant_in_flight_[key.first];
  };
  auto current = current_.find(key);
  if (executor_ == nullptr || current == current_.end()) {
    release_tenant();
    Status why = executor_ == nullptr ? Unavailable("the server is shutting down")
                                      : NotFound("no such model");
    if (series) series->RequestFinished(OutcomeOf(why), Duration::zero());
    return done(why);
  }
  const FunctionId version = current->second;
  const TimePoint now = executor_->Now();
  const auto waited =
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - received);
  Request live;
  live.id = ticket;
  live.function = version;
  live.arrival = now - waited;
  live.deadline = live.arrival + slack;
  Pending& pending = pending_[ticket];
  pending.request = std::move(request);
  pending.done = std::move(done);
  pending.tenant = key.first;
  pending.version = version;
  pending.series = std::move(series);
  pending.received = received;
  ++versions_.at(version).in_flight;
  // Not started by its deadline: answered 504 and never run.
  pending.deadline = std::make_unique<boost::asio::steady_timer>(
      node_.loop(), std::max(Duration::zero(), live.deadline - now));
  pending.deadline->async_wait([this, ticket, slack](const boost::system::error_code& error) {
    if (error || executor_ == nullptr) return;
    auto it = pending_.find(ticket);
    if (it == pending_.end() || it->second.started) return;
    executor_->Withdraw(ticket, DeadlineExceeded(fmt::format(
                                    "the request could not start within its SLO ({:.0f} ms)",
                                    ToSeconds(slack) * 1000)));
  });
  executor_->Submit(live);
  if (const Status& violation = executor_->violation(); !violation.ok()) {
    MutexLock lock(mutex_);
    if (violation_.ok()) {
      violation_ = violation;
      spdlog::error("scheduler contract violation: {}", violation.ToString());
    }
  }
}

const InferRequest* LiveBackend::Input(RequestId request) {
  auto it = pending_.find(request);
  if (it == pending_.end()) return nullptr;
  if (!it->second.started) {
    it->second.started = true;
    if (it->second.series) {
      it->second.series->RequestStarted(std::chrono::duration_cast<Duration>(
          std::chrono::steady_clock::now() - it->second.received));
    }
  }
  return &it->second.request;
}

void LiveBackend::Answer(RequestId request, InferResponse response) {
  Finish(request, std::move(response));
}

void LiveBackend::Fail(RequestId request, const Status& status) { Finish(request, status); }

void LiveBackend::Finish(RequestId id, Result<InferResponse> result) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  if (pending.deadline) pending.deadline->cancel();
  {
    MutexLock lock(mutex_);
    --tenant_in_flight_[pending.tenant];
  }
  if (pending.series) {
    pending.series->RequestFinished(
        OutcomeOf(result.ok() ? Status::Ok() : result.status()),
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - pending.received));
  }
  if (pending.done) pending.done(std::move(result));
  if (auto version = versions_.find(pending.version); version != versions_.end()) {
    --version->second.in_flight;
    MaybeRemove(pending.version);
  }
}

Result<LiveBackend::Prepared> LiveBackend::PrepareSpec(const FunctionSpec& spec) const {
  Prepared prepared;
  auto resolved = ResolveFunction(spec, gpu_type_, BuiltinGpuTypes());
  if (!resolved.ok()) return resolved.status().WithContext(fmt::format("function '{}'", spec.name));
  prepared.resolved = std::move(resolved).value();
  // A deployed model stays loaded: one instance is kept in host memory.
  prepared.resolved.min_instances = std::max(1, prepared.resolved.min_instances);
  if (prepared.resolved.MemoryForBatch(1) > gpu_type_.memory_bytes) {
    return InvalidArgument(
        fmt::format("function '{}': gpu_memory {} is more than a GPU of this "
                    "node has ({})",
                    spec.name, FormatBytes(prepared.resolved.gpu_memory_bytes),
                    FormatBytes(gpu_type_.memory_bytes)));
  }
  InstanceCommand& command = prepared.command;
  if (!spec.command.empty()) {
    command.argv = spec.command;
    command.model = spec.model.empty() ? spec.name : spec.model;
  } else if (!spec.runtime.empty()) {
    command.argv = {options_.function_program.string(), "--model", spec.runtime};
    if (spec.runtime != "echo") {
      command.argv.push_back("--weights");
      command.argv.push_back(
          spec.model_files.empty()
              ? (options_.data_dir / "runtimes" / (spec.runtime + ".safetensors")).string()
              : spec.model_files.front());
    }
    command.model = spec.runtime;
  } else {
    return InvalidArgument(fmt::format(
        "function '{}' has neither runtime nor command: it can be simulated, not served",
        spec.name));
  }
  command.env = spec.env;
  command.working_dir = spec.working_dir;
  command.name = spec.name;
  command.tenant = spec.tenant;
  command.memory_max_bytes = spec.host_memory_bytes;
  prepared.timeout = spec.RequestTimeout();
  return prepared;
}

Status LiveBackend::Admit(const FunctionSpec& spec, bool by_admin) const {
  if (!spec.command.empty() && !by_admin) {
    return PermissionDenied(fmt::format(
        "function '{}': a spec with a command runs arbitrary code on the node and is the admin's "
        "only; tenants deploy bundled runtimes (runtime: {})",
        spec.name, fmt::join(kBundledRuntimes, ", ")));
  }
  if (!spec.runtime.empty()) {
    std::error_code error;
    if (!std::filesystem::exists(options_.function_program, error)) {
      return InvalidArgument(
          fmt::format("function '{}': runtime '{}' is not installed on this node ({} is missing)",
                      spec.name, spec.runtime, options_.function_program.string()));
    }
  }
  const auto models = options_.data_dir / "models" / spec.tenant;
  if (!by_admin && !spec.env.empty()) {
    return PermissionDenied(fmt::format(
        "function '{}': environment variables are the admin's only (LD_PRELOAD and its kind "
        "would run code of the tenant's choosing in the runtime)",
        spec.name));
  }
  if (!by_admin && !spec.working_dir.empty() && !Inside(spec.working_dir, models)) {
    return PermissionDenied(fmt::format(
        "function '{}': working_dir {} is outside the tenant's model folder on the node", spec.name,
        spec.working_dir));
  }
  for (const std::string& file : spec.model_files) {
    if (!by_admin && !Inside(file, models)) {
      return PermissionDenied(fmt::format(
          "function '{}': model file {} is outside the tenant's model folder on the node; give "
          "paths relative to it",
          spec.name, file));
    }
    GSHARE_RETURN_IF_ERROR(CheckReadableFile(file, spec.name));
  }
  return PrepareSpec(spec).status();
}

Status LiveBackend::OnLoop(std::function<Status()> work) {
  // Shared: the loop may still be inside set_value when this thread wakes and returns.
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  {
    // Posted under the lock, so that it runs before Shutdown's work (see Infer).
    MutexLock lock(mutex_);
    if (shutting_down_) return Unavailable("the server is shutting down");
    boost::asio::post(node_.loop(), [&work, done] { done->set_value(work()); });
  }
  return result.get();
}

Status LiveBackend::Deploy(const FunctionSpec& spec) {
  auto prepared = PrepareSpec(spec);
  if (!prepared.ok()) return prepared.status();
  auto series = metrics_.AddFunction(spec.name, spec.tenant);
  if (!series.ok()) return series.status();
  const Key key(spec.tenant, spec.name);
  Entry next;
  next.spec = spec;
  next.info.name = spec.name;
  next.info.slo = prepared->resolved.slo;
  next.info.platform = spec.runtime.empty() ? "command" : spec.runtime;
  next.series = *series;
  std::uint64_t generation = 0;
  bool created = false;
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      created = true;
      next.state = ModelState::kLoading;  // new: not ready until its instance is
      it = entries_.emplace(key, next).first;
    }
    // An update leaves the entry as it is: the old version serves until the new one is ready.
    generation = ++it->second.generation;
  }
  auto outcome = std::make_shared<std::promise<Status>>();
  auto settled = outcome->get_future();
  const Status posted = OnLoop([&]() {
    AddVersion(key, generation, std::move(next), std::move(prepared).value(), *series, outcome);
    return Status::Ok();
  });
  if (!posted.ok()) return posted;
  // The model loads (bounded by the host's readiness timeout); a management request waits for it
  // so that its answer says whether the change took.
  const auto limit = options_.host.ready_timeout + std::chrono::seconds(30);
  if (settled.wait_for(limit) != std::future_status::ready) {
    return DeadlineExceeded(fmt::format(
        "function '{}' is still loading after {} s; it serves once its instance is ready",
        spec.name, std::chrono::duration_cast<std::chrono::seconds>(limit).count()));
  }
  const Status status = settled.get();
  if (!status.ok() && created) {
    // A function that never served is not left behind (the management API undoes its record).
    MutexLock lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end() && it->second.generation == generation) {
      entries_.erase(it);
    }
  }
  return status;
}

void LiveBackend::AddVersion(const Key& key, std::uint64_t generation, Entry next,
                             Prepared prepared, std::shared_ptr<metrics::FunctionSeries> series,
                             std::shared_ptr<std::promise<Status>> outcome) {
  const FunctionId version = functions_.Add(prepared.resolved);
  host_->SetCommand(version, std::move(prepared.command));
  executor_->SetRunTimeout(version, prepared.timeout);
  series_by_version_[version] = series;
  feed_->Bind(version, std::move(series));
  versions_[version] = Version{key, 0, false};
  scheduler_->OnFunctionAdded(version);
  preparing_[version] = outcome;
  executor_->Prepare(version, [this, key, version, generation, next = std::move(next),
                               outcome](Status status) mutable {
    preparing_.erase(version);
    bool current = false;
    {
      MutexLock lock(mutex_);
      auto it = entries_.find(key);
      current = it != entries_.end() && it->second.generation == generation;
      if (current && status.ok()) {
        // The new version takes the requests from now on.
        next.generation = generation;
        next.state = ModelState::kReady;
        it->second = std::move(next);
      } else if (current && it->second.state != ModelState::kReady) {
        it->second.state = ModelState::kUnavailable;  // a new or unloaded function
        it->second.reason = status.message();
      }
      settled_.notify_all();
    }
    if (current && status.ok()) {
      if (auto old = current_.find(key); old != current_.end()) Retire(old->second);
      current_[key] = version;
    } else {
      Retire(version);  // failed, or superseded, undeployed or unloaded meanwhile
    }
    if (!status.ok()) {
      spdlog::warn("function '{}' of tenant '{}' did not start: {}", key.second, key.first,
                   status.ToString());
    }
    outcome->set_value(current || !status.ok() ? status
                                               : Status(Cancelled("superseded by a later change")));
  });
}

Result<ModelStatus> LiveBackend::WaitUntilSettled(std::string_view tenant, std::string_view name,
                                                  std::chrono::milliseconds limit) {
  const Key key(tenant, name);
  const auto until = std::chrono::steady_clock::now() + limit;
  MutexLock lock(mutex_);
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
    if (it->second.state != ModelState::kLoading) {
      return ModelStatus{it->second.state, it->second.reason};
    }
    if (settled_.wait_until(mutex_, until) == std::cv_status::timeout) {
      return DeadlineExceeded(fmt::format("function '{}' is still loading", name));
    }
  }
}

void LiveBackend::Retire(FunctionId version) {
  auto it = versions_.find(version);
  if (it == versions_.end() || it->second.retired) return;
  it->second.retired = true;
  if (auto current = current_.find(it->second.key);
      current != current_.end() && current->second == version) {
    current_.erase(current);
  }
  MaybeRemove(version);
}

void LiveBackend::MaybeRemove(FunctionId version) {
  auto it = versions_.find(version);
  if (it == versions_.end() || !it->second.retired || it->second.in_flight > 0) return;
  versions_.erase(it);
  if (const Status removed = functions_.Remove(version); !removed.ok()) {
    spdlog::error("removing function version {}: {}", version, removed.ToString());
    return;
  }
  scheduler_->OnFunctionRemoved(version);
  executor_->FunctionRemoved(version);
  feed_->Unbind(version);
  series_by_version_.erase(version);
}

Status LiveBackend::Undeploy(std::string_view tenant, std::string_view name) {
  const Key key(tenant, name);
  {
    MutexLock lock(mutex_);
    if (entries_.erase(key) == 0) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
  }
  (void)metrics_.RemoveFunction(name, tenant);
  return OnLoop([&]() {
    if (auto it = current_.find(key); it != current_.end()) Retire(it->second);
    return Status::Ok();
  });
}

Status LiveBackend::Unload(std::string_view tenant, std::string_view name) {
  const Key key(tenant, name);
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
    it->second.state = ModelState::kUnavailable;
    it->second.reason = "unloaded";
    ++it->second.generation;  // a load in progress does not make it ready
  }
  return OnLoop([&]() {
    if (auto it = current_.find(key); it != current_.end()) Retire(it->second);
    return Status::Ok();
  });
}

Status LiveBackend::Load(std::string_view tenant, std::string_view name) {
  FunctionSpec spec;
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(Key(tenant, name));
    if (it == entries_.end()) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
    if (it->second.state != ModelState::kUnavailable) return Status::Ok();  // loaded or loading
    spec = it->second.spec;
  }
  return Deploy(spec);
}

Result<ModelStatus> LiveBackend::StatusOf(std::string_view tenant, std::string_view name) const {
  MutexLock lock(mutex_);
  auto it = entries_.find(Key(tenant, name));
  if (it == entries_.end()) {
    return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
  }
  return ModelStatus{it->second.state, it->second.reason};
}

}  // namespace gshare::serve
