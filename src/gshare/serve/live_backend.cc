#include "gshare/serve/live_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <system_error>

#include "gshare/node/launch_plan.h"
#include "gshare/node/process/init_protocol.h"
#include "gshare/node/process/process_host.h"
#include "gshare/serve/log_tail.h"
#include "gshare/serve/tenant_message.h"

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

std::uint64_t Nanoseconds(Duration duration) {
  if (duration <= Duration::zero()) return 0;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
}

// A path as a tenant may see it: relative to its model folder, never the node's own layout.
std::string TenantVisiblePath(const std::string& path, const std::filesystem::path& models) {
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(models);
  if (relative.empty() || *relative.begin() == "..") return "(a path outside the model folder)";
  return relative.string();
}

Status CheckReadableFile(const std::string& path, std::string_view function,
                         const std::filesystem::path& models) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::is_regular_file(status) || ::access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(fmt::format("function '{}': model file {} is not a readable file",
                                       function, TenantVisiblePath(path, models)));
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

Result<std::unique_ptr<LiveBackend>> LiveBackend::Create(metrics::GshareMetrics& metrics,
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
  for (const char* folder : {"run", "models"}) {
    std::filesystem::create_directories(options.data_dir / folder, error);
    if (error) {
      return IoError(fmt::format("cannot create {}: {}", (options.data_dir / folder).string(),
                                 error.message()));
    }
    GSHARE_RETURN_IF_ERROR(enterable(options.data_dir / folder));
  }
  options.node.host.run_dir = (options.data_dir / "run").string();
  // No sandbox shows a folder that holds the data directory (its registry, keys, every tenant's
  // files): a bind of one is refused (node/process/sandbox.h).
  options.node.host.sandbox_hidden.push_back(options.data_dir.string());
  // Every instance of the node's process host starts under gshare-init, which lies beside the
  // runtimes' program (a host injected by a test starts none).
  const std::filesystem::path init =
      options.function_program.parent_path() / init_protocol::kProgramName;
  if (!options.parts.host && !std::filesystem::exists(init, error)) {
    return NotFound(fmt::format(
        "{} is missing: gshare, gshare-function and gshare-init are installed side by side",
        init.string()));
  }
  options.node.host.init_program = init.string();
  auto backend = std::unique_ptr<LiveBackend>(new LiveBackend(metrics, std::move(options)));
  LiveBackend& b = *backend;
  b.feed_ = std::make_unique<metrics::MeterFeed>(metrics);
  LiveNodeOptions node = b.options_.node;
  // The server runs for weeks: its accounting is the feed, whose memory is bounded, not a Meter.
  node.executor.meters = {b.feed_.get()};
  node.executor.on_restored = [&b](FunctionId version, Duration took) {
    if (auto it = b.versions_.find(version); it != b.versions_.end() && it->second.series) {
      it->second.series->RestoreFinished(took);
    }
  };
  LiveNodeParts parts = b.options_.parts;
  parts.requests = static_cast<RequestSource*>(&b);
  GSHARE_ASSIGN_OR_RETURN(b.node_, LiveNode::Create(std::move(node), std::move(parts)));
  b.node_->StartLoopThread();
  return backend;
}

LiveBackend::LiveBackend(metrics::GshareMetrics& metrics, LiveBackendOptions options)
    : metrics_(metrics), options_(std::move(options)) {}

LiveBackend::~LiveBackend() { Shutdown(); }

void LiveBackend::Shutdown() {
  std::lock_guard once(shutdown_mutex_);  // a second caller waits for the first, then returns
  if (shut_down_) return;
  shut_down_ = true;
  {
    MutexLock lock(mutex_);
    shutting_down_ = true;
  }
  if (node_ == nullptr) return;
  node_->OnLoop([this] {
    // Requests not started are answered here; those on an instance get their instance's end.
    std::vector<RequestId> waiting;
    for (auto& [id, pending] : pending_) {
      if (!pending.started) waiting.push_back(id);
    }
    for (const RequestId id : waiting) {
      if (!node_->Cancel(id, Unavailable("the server is shutting down"))) {
        Finish(id, Unavailable("the server is shutting down"));
      }
    }
    node_->executor().Shutdown();  // no scheduler or Prepare callback after it
    for (auto& [id, version] : versions_) {
      if (Settled settled = std::move(version.settled)) {
        settled(Unavailable("the server shut down before the function was ready"));
      }
    }
    std::vector<RequestId> left;
    for (auto& [id, pending] : pending_) left.push_back(id);
    for (const RequestId id : left) Finish(id, Unavailable("the server shut down"));
  });
  // The loop stops; the function processes end (SIGTERM, then SIGKILL) as the host goes.
  node_->Shutdown();
}

std::size_t LiveBackend::TenantInFlight(std::string_view tenant) const {
  MutexLock lock(mutex_);
  const auto it = tenant_in_flight_.find(std::string(tenant));
  return it == tenant_in_flight_.end() ? 0 : it->second;
}

std::vector<pid_t> LiveBackend::FunctionPids() {
  // Shared: the loop may still be inside set_value when this thread wakes and returns.
  auto done = std::make_shared<std::promise<std::vector<pid_t>>>();
  auto pids = done->get_future();
  const Status posted = Post([this, done] {
    ProcessHost* host = node_->process_host();
    done->set_value(host != nullptr ? host->pids() : std::vector<pid_t>{});
  });
  if (!posted.ok()) return {};
  return pids.get();
}

void LiveBackend::PublishMetrics() {
  if (node_ != nullptr && feed_ != nullptr) feed_->Publish(node_->clock().Now());
}

Status LiveBackend::violation() const {
  MutexLock lock(mutex_);
  return violation_;
}

LiveBackend::Tables LiveBackend::tables() {
  Tables t;
  {
    MutexLock lock(mutex_);
    t.entries = entries_.size();
  }
  t.feed = feed_->bound();
  auto done = std::make_shared<std::promise<void>>();
  auto read = done->get_future();
  if (Post([this, &t, done] {
        t.versions = versions_.size();
        t.pending = pending_.size();
        t.node = node_->tables();
        done->set_value();
      }).ok()) {
    read.get();
  }
  return t;
}

bool LiveBackend::Ready() const {
  MutexLock lock(mutex_);
  return !shutting_down_;
}

std::vector<ModelStatistics> LiveBackend::Statistics(std::string_view tenant,
                                                     std::optional<std::string_view> name) const {
  MutexLock lock(mutex_);
  std::vector<ModelStatistics> out;
  // entries_ is ordered by (tenant, name): the tenant's models are one range, by name.
  for (auto it = entries_.lower_bound(Key(tenant, name.value_or(""))); it != entries_.end(); ++it) {
    if (it->first.first != tenant || (name && it->first.second != *name)) break;
    out.push_back(it->second.statistics);
    out.back().name = it->first.second;
  }
  return out;
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
  Status refused;
  std::shared_ptr<metrics::FunctionSeries> series;
  Key key(tenant, model);
  const std::uint64_t ticket = next_ticket_.fetch_add(1);
  bool binary = false;
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
      binary = it->second.info.binary_tensors;
      std::size_t& in_flight = tenant_in_flight_[key.first];
      if (options_.tenant_max_in_flight > 0 && in_flight >= options_.tenant_max_in_flight) {
        refused = ResourceExhausted(
            fmt::format("tenant '{}' has {} requests in flight, its quota", key.first, in_flight));
      } else {
        ++in_flight;  // its place, taken before the work of encoding it
      }
    }
  }
  if (refused.ok()) {
    // Admitted: encoded here, on the caller's thread, in the form its function takes, as it is
    // sent alone (the node encodes a batch of several itself, and a request it sends again).
    std::optional<EncodedRequest> encoded;
    const TimePoint encoding_began = clock().Now();
    if (Result<EncodedRequest> ahead = EncodeAlone(request, binary); ahead.ok()) {
      encoded = std::move(ahead).value();
    }  // else the node reports the error when it encodes the request
    const Duration encoding = clock().Now() - encoding_began;
    MutexLock lock(mutex_);
    if (shutting_down_) {
      --tenant_in_flight_[key.first];
      series.reset();  // not counted, as a refusal at the first check is not
      refused = Unavailable("the server is shutting down");
    } else {
      // Posted under the lock: Shutdown posts its own work after setting shutting_down_ under
      // the same lock, so whatever was posted before runs first.
      node_->Post([this, ticket, key, request = std::move(request), encoded = std::move(encoded),
                   encoding, deadline, done = std::move(done), series]() mutable {
        Submit(ticket, std::move(key), std::move(request), std::move(encoded), encoding, deadline,
               std::move(done), std::move(series));
      });
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
  (void)Post([this, ticket] {
    if (pending_.contains(ticket)) node_->Cancel(ticket, Cancelled("the client went away"));
  });
}

void LiveBackend::Submit(std::uint64_t ticket, Key key, InferRequest request,
                         std::optional<EncodedRequest> encoded, Duration encoding,
                         TimePoint deadline, InferCallback done,
                         std::shared_ptr<metrics::FunctionSeries> series) {
  auto current = current_.find(key);
  if (current == current_.end()) {
    {
      MutexLock lock(mutex_);
      --tenant_in_flight_[key.first];
    }
    const Status why = NotFound("no such model");
    if (series) series->RequestFinished(OutcomeOf(why), Duration::zero());
    return done(why);
  }
  const FunctionId version = current->second;
  Version& record = versions_.at(version);
  // The front stamped the deadline on the node's clock when the request arrived: its arrival is
  // the deadline less the function's SLO, and its latest start the deadline itself (a late answer
  // is worth nothing to the client).
  Request live;
  live.id = ticket;
  live.function = version;
  live.deadline = deadline;
  live.arrival = std::min(deadline - node_->functions()[version].slo, node_->clock().Now());
  live.latest_start = deadline;
  Pending& pending = pending_[ticket];
  pending.request = std::move(request);
  pending.encoded = std::move(encoded);
  pending.encoding = encoding;
  pending.done = std::move(done);
  pending.tenant = key.first;
  pending.version = version;
  pending.arrival = live.arrival;
  ++record.in_flight;
  node_->Submit(live);
  if (const Status& violation = node_->executor().violation(); !violation.ok()) {
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
    it->second.started_at = node_->clock().Now();
    const Duration queued = it->second.started_at - it->second.arrival;
    auto version = versions_.find(it->second.version);
    if (version != versions_.end() && version->second.series) {
      version->second.series->RequestStarted(queued);
    }
  }
  return &it->second.request;
}

void LiveBackend::Answer(RequestId request, InferResponse response) {
  Finish(request, InferAnswer(std::move(response)));
}

std::optional<EncodedRequest> LiveBackend::TakeEncoded(RequestId request) {
  auto it = pending_.find(request);
  if (it == pending_.end()) return std::nullopt;
  return std::exchange(it->second.encoded, std::nullopt);
}

void LiveBackend::AnswerEncoded(RequestId request, FunctionAnswer answer) {
  const std::uint64_t bytes = answer.body.size();
  std::optional<Key> key;
  if (auto it = pending_.find(request); it != pending_.end()) {
    if (auto version = versions_.find(it->second.version); version != versions_.end()) {
      key = version->second.key;
    }
  }
  // Decoded by the front where it writes the answer (InferAnswer): not here on the loop. The
  // decoding is timed there, for the statistics' compute_output.
  auto shared = std::make_shared<const FunctionAnswer>(std::move(answer));
  Finish(request, InferAnswer(bytes, [this, shared, key]() -> Result<InferResponse> {
           const TimePoint began = clock().Now();
           Result<InferResponse> decoded = DecodeAnswerAlone(*shared);
           const std::uint64_t took = Nanoseconds(clock().Now() - began);
           if (decoded.ok() && key) {
             MutexLock lock(mutex_);
             if (auto entry = entries_.find(*key); entry != entries_.end()) {
               entry->second.statistics.output_count += 1;
               entry->second.statistics.output_ns += took;
             }
           }
           return decoded;
         }));
}

void LiveBackend::Fail(RequestId request, const Status& status) { Finish(request, status); }

void LiveBackend::Finish(RequestId id, Result<InferAnswer> result) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  const TimePoint now = node_->clock().Now();
  auto version = versions_.find(pending.version);
  {
    MutexLock lock(mutex_);
    --tenant_in_flight_[pending.tenant];
    if (version != versions_.end()) {
      if (auto entry = entries_.find(version->second.key); entry != entries_.end()) {
        ModelStatistics& statistics = entry->second.statistics;
        const std::uint64_t took = Nanoseconds(now - pending.arrival);
        if (result.ok()) {
          statistics.success_count += 1;
          statistics.success_ns += took;
        } else {
          statistics.fail_count += 1;
          statistics.fail_ns += took;
        }
        // Queue and run of the requests answered with a result, as Triton counts them.
        if (result.ok() && pending.started) {
          statistics.queue_count += 1;
          statistics.queue_ns += Nanoseconds(pending.started_at - pending.arrival);
          statistics.infer_count += 1;
          statistics.infer_ns += Nanoseconds(now - pending.started_at);
          statistics.input_count += 1;
          statistics.input_ns += Nanoseconds(pending.encoding);
        }
      }
    }
  }
  if (version != versions_.end() && version->second.series) {
    version->second.series->RequestFinished(OutcomeOf(result.ok() ? Status::Ok() : result.status()),
                                            node_->clock().Now() - pending.arrival);
  }
  if (pending.done) {
    // The node's messages name instances, pids and its paths: the tenant reads them without.
    if (!result.ok()) {
      result = ForTenant(result.status(), options_.data_dir / "models" / pending.tenant);
    }
    pending.done(std::move(result));
  }
  if (version != versions_.end()) {
    --version->second.in_flight;
    MaybeRemove(pending.version);
  }
}

std::string_view SandboxStateName(SandboxState state) {
  switch (state) {
    case SandboxState::kOn:
      return "on";
    case SandboxState::kOff:
      return "off";
    case SandboxState::kUnavailable:
      return "unavailable";
  }
  return "off";
}

Result<FunctionLaunch> LiveBackend::Plan(const FunctionSpec& spec) const {
  if (IsTenantCodeRuntime(spec.runtime) && options_.sandbox == SandboxState::kUnavailable) {
    // Every path to a start comes here (a deploy, the registry's functions at a restart): a
    // tenant's code runs in the sandbox, or, by the admin's explicit --sandbox off, without it.
    return PermissionDenied(fmt::format(
        "function '{}': the {} runtime runs the tenant's code, which runs only in the sandbox, and "
        "the sandbox cannot be made on this node ({}); start the server with --sandbox off to run "
        "it without one",
        spec.name, spec.runtime, options_.sandbox_reason));
  }
  // Whether the node's GPUs can switch it as its spec asks (the checkpoint API needs CUDA GPUs
  // and a driver that has it; the shim on CUDA GPUs, memory that exports).
  const Device* gpu = node_->inventory().devices().front();
  const bool cuda = gpu->info().kind == DeviceKind::kCuda;
  if (cuda && !spec.runtime.empty() && !IsTenantCodeRuntime(spec.runtime)) {
    // The example runtimes keep their models in the function library's emulated device memory.
    return InvalidArgument(fmt::format(
        "function '{}': the {} runtime runs on emulated GPUs only; on this node's CUDA GPUs deploy "
        "a pytorch or python runtime, or a command (a CUDA program)",
        spec.name, spec.runtime));
  }
  if (spec.switch_mechanism != SwitchMechanism::kShim || gpu->info().kind == DeviceKind::kCuda) {
    if (Status supported = SwitchMechanismSupported(spec.switch_mechanism, gpu->info());
        !supported.ok()) {
      return InvalidArgument(fmt::format("function '{}' (switch: {}): {}", spec.name,
                                         SwitchMechanismName(spec.switch_mechanism),
                                         supported.message()));
    }
  }
  // A deployed model stays loaded: one instance is kept in host memory.
  return PlanLaunch(spec, node_->gpu_type(),
                    {.function_program = options_.function_program,
                     .python = options_.python,
                     .model_folder = options_.data_dir / "models" / spec.tenant,
                     .cuda_gpus = cuda,
                     .min_instances = 1});
}

Status LiveBackend::Admit(const FunctionSpec& spec, bool by_admin) const {
  if (!spec.command.empty() && !by_admin) {
    return PermissionDenied(fmt::format(
        "function '{}': a spec with a command runs arbitrary code on the node and is the admin's "
        "only; tenants deploy bundled runtimes (runtime: {})",
        spec.name, fmt::join(kBundledRuntimes, ", ")));
  }
  if (IsTenantCodeRuntime(spec.runtime) && !by_admin &&
      !(::geteuid() == 0 && options_.node.host.distinct_uids)) {
    // TorchScript and a handler are code (TorchScript can open files: aten::from_file), which
    // runs only as a uid of the tenant's own.
    return PermissionDenied(fmt::format(
        "function '{}': the {} runtime runs the tenant's code; this node runs every function as "
        "its own uid, so only the admin may deploy it here",
        spec.name, spec.runtime));
  }
  if (IsTenantCodeRuntime(spec.runtime)) {
    std::error_code error;
    const auto library = options_.function_program.parent_path() / "libgshare-fn.so";
    if (!std::filesystem::exists(library, error)) {
      spdlog::error("function {}/{}: the function library {} is missing", spec.tenant, spec.name,
                    library.string());
      return InvalidArgument(fmt::format(
          "function '{}': runtime '{}' is not installed on this node", spec.name, spec.runtime));
    }
  }
  if (!spec.runtime.empty()) {
    std::error_code error;
    const std::filesystem::path program =
        IsTenantCodeRuntime(spec.runtime)
            ? PythonRuntimeProgram(options_.function_program, spec.runtime)
            : options_.function_program;
    if (!std::filesystem::exists(program, error)) {
      spdlog::error("function {}/{}: the runtime's program {} is missing", spec.tenant, spec.name,
                    program.string());
      return InvalidArgument(fmt::format(
          "function '{}': runtime '{}' is not installed on this node", spec.name, spec.runtime));
    }
  }
  // What this node can hold at all: a function larger than its GPUs, or more warm instances than
  // fit on them, is a bad spec here (400), not a full node (429).
  const GpuType& gpu = node_->gpu_type();
  const std::uint64_t memory = std::max(spec.gpu_memory_bytes, spec.model_bytes);
  if (memory > gpu.memory_bytes) {
    return InvalidArgument(
        fmt::format("function '{}': it needs {} of GPU memory; this node's GPUs have {}", spec.name,
                    FormatBytes(memory), FormatBytes(gpu.memory_bytes)));
  }
  const std::uint64_t per_gpu = memory == 0 ? gpu.memory_bytes : gpu.memory_bytes / memory;
  const std::uint64_t fit = per_gpu * node_->inventory().devices().size();
  for (const int instances : {spec.min_instances, spec.max_instances}) {
    if (instances > 0 && static_cast<std::uint64_t>(instances) > fit) {
      return InvalidArgument(
          fmt::format("function '{}': {} instances do not fit on this node (at most {} of {} each)",
                      spec.name, instances, fit, FormatBytes(memory)));
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
        "function '{}': working_dir is outside the tenant's model folder on the node", spec.name));
  }
  for (const std::string& file : spec.model_files) {
    if (!by_admin && !Inside(file, models)) {
      return PermissionDenied(fmt::format(
          "function '{}': a model file is outside the tenant's model folder on the node; give "
          "paths relative to it",
          spec.name));
    }
    GSHARE_RETURN_IF_ERROR(CheckReadableFile(file, spec.name, models));
  }
  return Plan(spec).status();
}

Status LiveBackend::Post(std::function<void()> work) {
  MutexLock lock(mutex_);
  if (shutting_down_) return Unavailable("the server is shutting down");
  node_->Post(std::move(work));
  return Status::Ok();
}

Status LiveBackend::Deploy(const FunctionSpec& spec, Settled settled) {
  auto launch = Plan(spec);
  if (!launch.ok()) return launch.status();
  auto series = metrics_.AddFunction(spec.name, spec.tenant);
  if (!series.ok()) return series.status();
  const Key key(spec.tenant, spec.name);
  Entry next;
  next.spec = spec;
  next.info.name = spec.name;
  next.info.slo = launch->function.slo;
  next.info.platform = spec.runtime.empty() ? "command" : spec.runtime;
  next.info.max_batch = launch->function.max_batch;
  next.info.inputs = spec.inputs;  // none: the function's own, once it is ready (AddVersion)
  next.info.outputs = spec.outputs;
  next.series = *series;
  std::uint64_t generation = 0;
  bool created = false;
  {
    MutexLock lock(mutex_);
    if (shutting_down_) return Unavailable("the server is shutting down");
    const bool cold = cold_.contains(key);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      created = true;
      next.state = ModelState::kLoading;  // new: not ready until its instance is
      it = entries_.emplace(key, next).first;
    }
    // An update leaves the entry as it is: the old version serves until the new one is ready.
    generation = ++it->second.generation;
    // A function that never served is not left behind when its deploy fails (the management API
    // undoes its record).
    Settled wrapped = [this, key, generation, created,
                       settled = std::move(settled)](Status status) {
      if (!status.ok() && created) {
        MutexLock entries(mutex_);
        if (auto entry = entries_.find(key);
            entry != entries_.end() && entry->second.generation == generation) {
          entries_.erase(entry);
        }
      }
      if (settled) settled(status);
    };
    // Posted under the lock, as Infer's work: it runs before Shutdown's.
    node_->Post([this, key, generation, next = std::move(next), launch = std::move(launch).value(),
                 series = *series, cold, wrapped = std::move(wrapped)]() mutable {
      AddVersion(key, generation, std::move(next), std::move(launch), std::move(series), cold,
                 std::move(wrapped));
    });
  }
  return Status::Ok();
}

void LiveBackend::AddVersion(const Key& key, std::uint64_t generation, Entry next,
                             FunctionLaunch launch, std::shared_ptr<metrics::FunctionSeries> series,
                             bool cold, Settled settled) {
  const FunctionId version = node_->AddFunction(std::move(launch));
  feed_->Bind(version, series);
  versions_[version] = Version{key, std::move(series), std::move(settled), 0, false};
  CountObsolete();
  auto prepared = [this, key, version, generation, next = std::move(next)](Status status) mutable {
    bool current = false;
    bool cold_now = false;  // KeepWarm may have changed it since the deploy
    {
      MutexLock lock(mutex_);
      cold_now = cold_.contains(key);
      auto it = entries_.find(key);
      current = it != entries_.end() && it->second.generation == generation;
      if (current && status.ok()) {
        if (node_->process_host() != nullptr) {
          next.info.binary_tensors = node_->process_host()->SpeaksBinary(version);
        }
        if (next.info.inputs.empty() && next.info.outputs.empty() &&
            node_->process_host() != nullptr) {
          if (auto reported = node_->process_host()->ReportedTensors(version)) {
            next.info.inputs = std::move(reported->inputs);
            next.info.outputs = std::move(reported->outputs);
          }
        }
        // The new version takes the requests from now on.
        next.generation = generation;
        next.state = ModelState::kReady;
        next.statistics = std::move(it->second.statistics);  // the function's, across versions
        it->second = std::move(next);
      } else if (current && it->second.state != ModelState::kReady) {
        it->second.state = ModelState::kUnavailable;  // a new or unloaded function
        it->second.reason = ForTenant(status.message(), options_.data_dir / "models" / key.first);
      }
      settled_.notify_all();
    }
    Settled done = std::move(versions_.at(version).settled);
    if (current && status.ok()) {
      if (auto old = current_.find(key); old != current_.end()) Retire(old->second);
      current_[key] = version;
      node_->executor().SetKeptWarm(version, !cold_now);
    } else {
      Retire(version);  // failed, or superseded, undeployed or unloaded meanwhile
    }
    CountObsolete();
    if (!status.ok()) {
      spdlog::warn("function '{}' of tenant '{}' did not start: {}", key.second, key.first,
                   status.ToString());
    }
    if (done) {
      Status told = current || !status.ok()
                        ? ForTenant(status, options_.data_dir / "models" / key.first)
                        : Status(Cancelled("superseded by a later change"));
      if (!status.ok() && status.code() != StatusCode::kCancelled) {
        // What the function printed as it failed is the tenant's to read: its last line here
        // (a loader's refusal, say), the rest in its log.
        std::string last;
        auto tail = LogTail(ProcessHost::LogPath(options_.node.host.run_dir, key.first, key.second),
                            options_.data_dir / "models" / key.first, 1, 4096);
        if (tail.ok() && !tail->empty() && !tail->back().empty()) {
          last = fmt::format("; it printed: {}", tail->back());
        }
        told = Status(told.code(), fmt::format("{}{} (its log: GET /api/v1/functions/{}/logs)",
                                               told.message(), last, key.second));
      }
      done(std::move(told));
    }
  };
  if (cold || !node_->executor().PreparesAhead(version)) {
    // No room of its own in the snapshot pool, or instances that start on their GPU slice (CUDA
    // GPUs): its first request starts its first instance (and its tensors are the spec's, or
    // none, until then). A cold one keeps no idle instance.
    node_->executor().SetKeptWarm(version, !cold);
    prepared(Status::Ok());
    return;
  }
  node_->executor().Prepare(version, std::move(prepared));
}

void LiveBackend::KeepWarm(std::string_view tenant, std::string_view name, bool warm) {
  const Key key(tenant, name);
  MutexLock lock(mutex_);
  if (warm ? cold_.erase(key) == 0 : !cold_.insert(key).second) return;  // no change
  if (shutting_down_) return;
  // Posted under the lock, as Deploy's work: a deploy taken before it is on the loop first.
  node_->Post([this, key, warm] {
    if (auto it = current_.find(key); it != current_.end()) {
      node_->executor().SetKeptWarm(it->second, warm);
    }
  });
}

Result<ModelStatus> LiveBackend::WaitUntilSettled(std::string_view tenant, std::string_view name,
                                                  std::chrono::milliseconds limit) {
  const Key key(tenant, name);
  const SteadyClock& wall = SteadyClock::Shared();  // a caller's bound, in wall time
  const TimePoint until = wall.Now() + limit;
  MutexLock lock(mutex_);
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
    if (it->second.state != ModelState::kLoading) {
      return ModelStatus{it->second.state, it->second.reason};
    }
    const Duration left = until - wall.Now();
    if (left <= Duration::zero() ||
        settled_.wait_for(mutex_, std::chrono::duration_cast<std::chrono::nanoseconds>(left)) ==
            std::cv_status::timeout) {
      if (entries_.contains(key) && entries_.at(key).state == ModelState::kLoading) {
        return DeadlineExceeded(fmt::format("function '{}' is still loading", name));
      }
    }
  }
}

Status LiveBackend::WaitUntilDrained(std::chrono::milliseconds limit) {
  const SteadyClock& wall = SteadyClock::Shared();  // a caller's bound, in wall time
  const TimePoint until = wall.Now() + limit;
  // The changes posted before this call (an undeploy's retirement) are taken first.
  auto taken = std::make_shared<std::promise<void>>();
  auto barrier = taken->get_future();
  GSHARE_RETURN_IF_ERROR(Post([taken] { taken->set_value(); }));
  barrier.wait();
  MutexLock lock(mutex_);
  while (obsolete_ > 0) {
    const Duration left = until - wall.Now();
    if (left <= Duration::zero()) {
      return DeadlineExceeded(
          fmt::format("{} versions are not current and still on the node", obsolete_));
    }
    settled_.wait_for(mutex_, std::chrono::duration_cast<std::chrono::nanoseconds>(left));
  }
  return Status::Ok();
}

void LiveBackend::CountObsolete() {
  MutexLock lock(mutex_);
  obsolete_ = versions_.size() - current_.size();
  settled_.notify_all();
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
  CountObsolete();
}

void LiveBackend::MaybeRemove(FunctionId version) {
  auto it = versions_.find(version);
  if (it == versions_.end() || !it->second.retired || it->second.in_flight > 0) return;
  if (!node_->functions().active(version)) return;  // removed already, draining
  const Status removed = node_->RemoveFunction(version, [this, version] {
    // Drained: nothing of the version is left on the node.
    feed_->Unbind(version);
    versions_.erase(version);
    CountObsolete();
  });
  if (!removed.ok()) {
    spdlog::error("removing function version {}: {}", version, removed.ToString());
  }
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
  return Post([this, key] {
    if (auto it = current_.find(key); it != current_.end()) Retire(it->second);
  });
}

Result<std::size_t> LiveBackend::StopTenant(std::string_view tenant) {
  // Out of the entries first, so that no load settling meanwhile makes a version current again;
  // put back where the loop's work cannot be posted (shut down), so nothing is lost track of.
  std::vector<Key> keys;
  std::vector<std::pair<Key, Entry>> taken;
  {
    MutexLock lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->first.first == tenant) {
        keys.push_back(it->first);
        taken.emplace_back(it->first, std::move(it->second));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  const Status posted = Post([this, keys, tenant = std::string(tenant)] {
    for (const Key& key : keys) {
      if (auto it = current_.find(key); it != current_.end()) Retire(it->second);
    }
    // Its waiting requests are answered now, not run: the tenant is gone.
    std::vector<RequestId> waiting;
    for (const auto& [id, pending] : pending_) {
      if (pending.tenant == tenant && !pending.started) waiting.push_back(id);
    }
    for (const RequestId id : waiting) {
      node_->Cancel(id, Unavailable("the function's tenant was removed"));
    }
  });
  if (!posted.ok()) {
    MutexLock lock(mutex_);
    for (auto& [key, entry] : taken) entries_.emplace(key, std::move(entry));
    return posted;
  }
  for (const Key& key : keys) (void)metrics_.RemoveFunction(key.second, key.first);
  return keys.size();
}

std::vector<std::string> LiveBackend::Tenants() const {
  MutexLock lock(mutex_);
  std::vector<std::string> tenants;
  for (const auto& [key, entry] : entries_) {
    if (tenants.empty() || tenants.back() != key.first) tenants.push_back(key.first);
  }
  return tenants;
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
  return Post([this, key] {
    if (auto it = current_.find(key); it != current_.end()) Retire(it->second);
  });
}

Status LiveBackend::Load(std::string_view tenant, std::string_view name, Settled settled) {
  FunctionSpec spec;
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(Key(tenant, name));
    if (it == entries_.end()) {
      return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
    }
    if (it->second.state != ModelState::kUnavailable) {  // loaded or loading: nothing to do
      if (shutting_down_) return Unavailable("the server is shutting down");
      node_->Post([settled = std::move(settled)] {
        if (settled) settled(Status::Ok());
      });
      return Status::Ok();
    }
    spec = it->second.spec;
  }
  return Deploy(spec, std::move(settled));
}

Result<ModelStatus> LiveBackend::StatusOf(std::string_view tenant, std::string_view name) const {
  MutexLock lock(mutex_);
  auto it = entries_.find(Key(tenant, name));
  if (it == entries_.end()) {
    return NotFound(fmt::format("function '{}' of tenant '{}' is not deployed", name, tenant));
  }
  return ModelStatus{it->second.state, it->second.reason};
}

void LiveBackend::RemoveLogs(std::string_view tenant) {
  // Its functions' logs lie in one folder: LogPath's for any of its names.
  const std::filesystem::path folder =
      ProcessHost::LogPath(options_.node.host.run_dir, std::string(tenant), "any").parent_path();
  std::error_code error;
  std::filesystem::remove_all(folder, error);
  if (error) spdlog::warn("tenant {}: its logs were not removed: {}", tenant, error.message());
}

Result<std::vector<std::string>> LiveBackend::LogOf(std::string_view tenant, std::string_view name,
                                                    std::size_t lines) const {
  if (tenant.empty() || name.empty() || name.size() > 255 ||
      name.find('/') != std::string_view::npos || name.front() == '.') {
    return NotFound(fmt::format("function '{}' of tenant '{}' has no log", name, tenant));
  }
  const std::string tenant_name(tenant);
  auto tail =
      LogTail(ProcessHost::LogPath(options_.node.host.run_dir, tenant_name, std::string(name)),
              options_.data_dir / "models" / tenant_name, lines);
  if (tail.ok() || tail.status().code() != StatusCode::kNotFound) return tail;
  // No instance wrote yet: an empty log for a deployed function.
  MutexLock lock(mutex_);
  if (entries_.find(Key(tenant, name)) == entries_.end()) {
    return NotFound(fmt::format("function '{}' of tenant '{}' has no log", name, tenant));
  }
  return std::vector<std::string>();
}

}  // namespace gshare::serve
