#include "gshare/node/process/process_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/capability.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "gshare/fn/control_channel.h"
#include "gshare/net/unix_http.h"
#include "gshare/node/process/instance_environment.h"
#include "gshare/protocol/batching.h"

namespace gshare {
namespace {

// A function's error answer as a status. Only its first 4 KiB are read (on the loop): an error
// is a sentence, and a function may answer anything.
Status FromHttp(int status, const std::string& body) {
  constexpr std::size_t kMaxErrorBytes = 4096;
  std::string message = body.substr(0, kMaxErrorBytes);
  if (body.size() <= kMaxErrorBytes) {
    if (auto parsed = nlohmann::json::parse(body, nullptr, false);
        parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
      message = parsed["error"].get<std::string>();
    }
  } else {
    message += "...";
  }
  message = fmt::format("the function answered {}: {}", status, message);
  if (status == 507) return ResourceExhausted(message);
  if (status == 400) return InvalidArgument(message);
  // The function's own failure on this request (its model raised): 500 to the caller, who may
  // ask again; the process goes on.
  if (status == 500) return Internal(message);
  return Unavailable(message);
}

std::string FunctionName(const InstanceCommand& command) {
  return command.name.empty() ? command.model : command.name;
}

std::string TenantFolder(const InstanceCommand& command) {
  return command.tenant.empty() ? "default" : command.tenant;
}

}  // namespace

namespace {

std::size_t CodecThreads(std::size_t wanted) {
  if (wanted > 0) return wanted;
  const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cores > 1 ? cores - 1 : 1, 1, 4);
}

}  // namespace

ProcessHost::ProcessHost(LoopClock& clock, std::vector<InstanceCommand> commands,
                         RequestSource& requests, ProcessHostOptions options)
    : clock_(clock),
      loop_(clock.loop()),
      requests_(requests),
      options_(std::move(options)),
      run_dir_(options_.run_dir),
      codec_pool_(
          std::make_unique<boost::asio::thread_pool>(CodecThreads(options_.codec_threads))) {
  cleanups_.emplace(codec_pool_->get_executor());
  for (std::size_t f = 0; f < commands.size(); ++f) {
    commands_.emplace(static_cast<FunctionId>(f), std::move(commands[f]));
  }
  // Children start in their working folder: every path handed to them is absolute.
  std::error_code error;
  const auto absolute = std::filesystem::absolute(run_dir_, error);
  if (!error) run_dir_ = absolute.lexically_normal().string();
  auto identities = TenantIdentities::Create({.base_uid = options_.first_uid,
                                              .count = options_.uid_count,
                                              .switch_uid = options_.distinct_uids,
                                              .number_of = options_.tenant_number},
                                             ::geteuid());
  if (identities.ok()) {
    identities_.emplace(std::move(identities).value());
  } else {
    identity_error_ = identities.status();
  }
  if (options_.cgroups) {
    cgroups_ = DecideCgroupsForThisProcess();
  } else {
    cgroups_.reason = "no cgroup for function processes: turned off";
  }
  spdlog::info("{}", cgroups_.reason);
}

ProcessHost::~ProcessHost() {
  *alive_ = false;
  codec_pool_->stop();  // what is queued is dropped; what runs finishes and posts to a dead host
  codec_pool_->join();
  // Every init is told at once to end what is under it; then each ChildProcess waits (bounded)
  // for its init, kills its group and reaps it.
  for (auto& [id, process] : processes_) {
    if (process->child) process->child->SignalGroup(SIGKILL);
  }
  processes_.clear();
}

uid_t ProcessHost::UidOf(const std::string& tenant) {
  if (!identities_) return ::geteuid();
  auto identity = identities_->ForTenant(tenant);
  if (!identity.ok() || !identity->has_value()) return ::geteuid();
  return (*identity)->uid;
}

std::size_t ProcessHost::running() const {
  return static_cast<std::size_t>(
      std::count_if(processes_.begin(), processes_.end(),
                    [](const auto& entry) { return entry.second->child != nullptr; }));
}

std::vector<pid_t> ProcessHost::ready_pids() const {
  std::vector<pid_t> out;
  for (const auto& [id, process] : processes_) {
    if (process->ready && process->child) out.push_back(process->child->program_pid());
  }
  return out;
}

std::vector<pid_t> ProcessHost::pids() const {
  std::vector<pid_t> out;
  for (const auto& [id, process] : processes_) {
    if (process->child) out.push_back(process->child->program_pid());
  }
  return out;
}

std::optional<TimePoint> ProcessHost::SpawnedAt(InstanceId instance) const {
  auto it = processes_.find(instance);
  if (it == processes_.end() || !it->second->child) return std::nullopt;
  return it->second->spawned;
}

std::chrono::milliseconds ProcessHost::DelayAfter(int crashes) const {
  if (crashes <= 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds delay = options_.restart_backoff_initial;
  for (int i = 1; i < crashes && delay < options_.restart_backoff_max; ++i) delay *= 2;
  return std::min(delay, options_.restart_backoff_max);
}

RestartState ProcessHost::FunctionRestarts(FunctionId function) const {
  RestartState state;
  auto it = restarts_.find(function);
  if (it == restarts_.end()) return state;
  state.consecutive_crashes = it->second.consecutive;
  state.last_crash = it->second.last_crash;
  state.last_reason = it->second.last_reason;
  state.next_delay = it->second.consecutive > options_.max_crashes
                         ? options_.restart_backoff_max
                         : DelayAfter(it->second.consecutive);
  state.crash_loop = it->second.consecutive > options_.max_crashes &&
                     clock_.Now() < it->second.last_crash + options_.restart_backoff_max;
  return state;
}

void ProcessHost::CountCrash(FunctionId function, const Process& process,
                             const std::string& reason) {
  Restarts& restarts = restarts_[function];
  const TimePoint now = clock_.Now();
  if (process.ready && now - process.ready_at >= options_.stable_after) restarts.consecutive = 0;
  ++restarts.consecutive;
  restarts.last_crash = now;
  restarts.last_reason = reason;
  if (restarts.consecutive > options_.max_crashes) {
    spdlog::error("function {} is in a crash loop: {} crashes in a row, the last: {}",
                  FunctionName(CommandOf(function)), restarts.consecutive, reason);
  }
}

Status ProcessHost::SpawnNow(Process& process) {
  process.socket_file.Reset();  // an earlier start's socket is not this one's
  process.socket_target.clear();
  const InstanceCommand& command = CommandOf(process.function);
  if (command.argv.empty()) return InvalidArgument("an instance command without a program");
  if (!identities_) return identity_error_;
  // One folder per tenant: two tenants' functions of one name never share a log.
  const std::filesystem::path log = LogPath(run_dir_, command.tenant, FunctionName(command));
  const std::filesystem::path logs = log.parent_path();
  std::error_code error;
  std::filesystem::create_directories(logs, error);
  if (error) return IoError(fmt::format("{}: {}", logs.string(), error.message()));

  GSHARE_ASSIGN_OR_RETURN(const std::optional<ProcessIdentity> identity,
                          identities_->ForTenant(command.tenant));
  // The instance's folder (its socket) belongs to its uid.
  const std::string dir = std::filesystem::path(process.socket_path).parent_path().string();
  std::filesystem::remove_all(dir, error);  // nothing of an earlier run's instance is reused
  if (error) return IoError(fmt::format("{}: {}", dir, error.message()));
  // The instances' parent folder is entered by every tenant's uid (whatever the umask), listed by
  // none of them.
  const std::string instances = std::filesystem::path(dir).parent_path().string();
  std::filesystem::create_directories(instances, error);
  if (error) return IoError(fmt::format("{}: {}", instances, error.message()));
  if (::chmod(instances.c_str(), 0711) != 0) {
    return IoError(fmt::format("chmod {}: {}", instances, std::strerror(errno)));
  }
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(fmt::format("{}: {}", dir, error.message()));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return IoError(fmt::format("chmod {}: {}", dir, std::strerror(errno)));
  }
  if (identity && ::chown(dir.c_str(), identity->uid, identity->gid) != 0) {
    return IoError(fmt::format("chown {}: {}", dir, std::strerror(errno)));
  }

  ProcessSpec spec;
  spec.argv = command.argv;
  const bool control = process.launch.control.valid();
  std::map<std::string, std::string> env = command.env;
  for (const auto& [name, value] : process.launch.environment) env[name] = value;
  spec.env = InstanceEnvironment({.control = control,
                                  .device_base = process.launch.device_base,
                                  .device_reserve_bytes = process.launch.device_reserve_bytes,
                                  .socket_path = process.socket_path},
                                 env);
  spec.working_dir = command.working_dir.empty() ? run_dir_ : command.working_dir;
  spec.log_path = log.string();
  spec.identity = identity;
  process.identity = identity;
  if (identity) {
    auto& spawns = spawns_by_uid_[identity->uid];
    if (!spawns) spawns = std::make_shared<std::atomic<std::uint64_t>>(0);
    spawns->fetch_add(1);
  }
  spec.limits.open_files = options_.open_files;
  if (control) spec.pass_fds = {process.launch.control.get()};
  spec.pid_namespace = options_.pid_namespaces;
  spec.init_program = options_.init_program;
  if (options_.sandbox && command.sandboxed) {
    if (!identity) {
      // As root in its own namespaces a process could write /proc/sys: never without a uid.
      return FailedPrecondition("a sandboxed function needs a uid of its own (the node as root)");
    }
    // Built in a folder of the node's own that the child mounts its root on (in its own mount
    // namespace: here the folder stays empty).
    const std::string root = (std::filesystem::path(run_dir_) / "sandbox").string();
    std::filesystem::create_directories(root, error);
    if (error) return IoError(fmt::format("{}: {}", root, error.message()));
    SandboxSpec sandbox{.root_dir = root,
                        .read_only = command.sandbox_read_only,
                        .writable = {dir},
                        .hidden = options_.sandbox_hidden,
                        .devices = options_.sandbox_devices,
                        .tmp_bytes = options_.sandbox_tmp_bytes};
    sandbox.hidden.push_back(run_dir_);
    if (!options_.init_program.empty()) {
      sandbox.read_only.push_back(
          std::filesystem::path(options_.init_program).parent_path().string());
    }
    // The run folder is not in the sandbox: a function without a folder of its own starts in /tmp.
    if (command.working_dir.empty()) spec.working_dir = "/tmp";
    spec.sandbox = std::move(sandbox);
  }
  if (cgroups_.enabled) {
    auto cgroup = InstanceCgroup::Create(
        cgroups_.parent_dir, fmt::format("gshare-{}-instance-{}", ::getpid(), process.id),
        {.memory_max_bytes = command.memory_max_bytes, .pids_max = options_.pids_max});
    if (!cgroup.ok()) return cgroup.status().WithContext("the instance's cgroup");
    process.cgroup = std::move(cgroup).value();
    spec.cgroup_procs_path = process.cgroup->procs_path();
  }
  GSHARE_ASSIGN_OR_RETURN(process.child, ChildProcess::Spawn(loop_, spec));
  if (identity && !process.child->in_pid_namespace()) outside_namespace_.insert(identity->uid);
  process.launch.control.Reset();  // the child has its own copy
  process.spawned = clock_.Now();
  const InstanceId id = process.id;
  process.child->OnExit([this, id, alive = alive_](int wait_status) {
    if (*alive) Exited(id, wait_status);
  });
  PollReady(id);
  return Status::Ok();
}

void ProcessHost::SetCommand(FunctionId function, InstanceCommand command) {
  commands_[function] = std::move(command);
}

void ProcessHost::RemoveCommand(FunctionId function) {
  const auto it = commands_.find(function);
  if (it == commands_.end()) return;
  const InstanceCommand removed = std::move(it->second);
  commands_.erase(it);
  restarts_.erase(function);
  reported_.erase(function);
  binary_.erase(function);
  // The function's log goes with its last version (an update's new version writes the same one),
  // unless it never ran: then its log says why, for whoever reads the deploy's error.
  if (ever_ready_.erase(function) == 0) return;
  for (const auto& [other, command] : commands_) {
    if (command.tenant == removed.tenant && FunctionName(command) == FunctionName(removed)) return;
  }
  const std::filesystem::path log = LogPath(run_dir_, removed.tenant, FunctionName(removed));
  std::error_code ignored;
  std::filesystem::remove(log, ignored);
  std::filesystem::remove(log.parent_path(), ignored);  // only when empty: the tenant's last
}

std::filesystem::path ProcessHost::LogPath(const std::string& run_dir, const std::string& tenant,
                                           const std::string& function) {
  return std::filesystem::path(run_dir) / "logs" / (tenant.empty() ? "default" : tenant) /
         (function + ".log");
}

const InstanceCommand& ProcessHost::CommandOf(FunctionId function) const {
  static const InstanceCommand* const kNone = new InstanceCommand();
  auto it = commands_.find(function);
  return it == commands_.end() ? *kNone : it->second;
}

Status ProcessHost::Start(InstanceLaunch launch) {
  const InstanceCommand& command = CommandOf(launch.function);
  if (command.argv.empty()) {
    return InvalidArgument(fmt::format("no command for function {}", launch.function));
  }
  std::chrono::milliseconds delay{0};
  if (auto it = restarts_.find(launch.function); it != restarts_.end() && it->second.consecutive) {
    const Restarts& restarts = it->second;
    const auto since =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - restarts.last_crash);
    if (restarts.consecutive > options_.max_crashes) {
      if (since < options_.restart_backoff_max) {
        return Unavailable(fmt::format(
            "function {} is in a crash loop ({} crashes in a row; the last: {}); see its log, "
            "logs/{}/{}.log; it is tried again {} ms after its last crash",
            FunctionName(command), restarts.consecutive, restarts.last_reason,
            TenantFolder(command), FunctionName(command), options_.restart_backoff_max.count()));
      }
    } else {
      delay = std::max(std::chrono::milliseconds(0), DelayAfter(restarts.consecutive) - since);
    }
  }
  auto owned = std::make_unique<Process>();
  Process& process = *owned;
  process.id = launch.instance;
  process.function = launch.function;
  process.tenant = CommandOf(launch.function).tenant;
  process.socket_path =
      (std::filesystem::path(run_dir_) / "instances" / std::to_string(launch.instance) / "socket")
          .string();
  process.launch = std::move(launch);
  const InstanceId id = process.id;
  processes_[id] = std::move(owned);
  if (delay.count() == 0) {
    Status spawned = SpawnNow(process);
    if (!spawned.ok()) processes_.erase(id);  // Start says no: no callback will fire
    return spawned;
  }
  spdlog::info("instance {} of {} starts in {} ms (restart backoff after {} crash(es))", id,
               FunctionName(command), delay.count(), restarts_[process.function].consecutive);
  process.timer = clock_.After(delay, [this, id] {
    auto it = processes_.find(id);
    if (it == processes_.end() || it->second->child || it->second->stopping) return;
    Status spawned = SpawnNow(*it->second);
    if (spawned.ok()) return;
    // Start already said yes: the failure is the instance's end.
    std::unique_ptr<Process> failed = std::move(it->second);
    processes_.erase(it);
    CountCrash(failed->function, *failed, spawned.message());
    spdlog::warn("instance {}: {}", id, spawned.message());
    if (failed->launch.on_exit) failed->launch.on_exit(spawned);
  });
  return Status::Ok();
}

void ProcessHost::Kill(Process& process, Status reason) {
  if (process.stopping || !process.kill_reason.ok() || !process.child) return;
  spdlog::warn("{}", reason.message());
  process.kill_reason = std::move(reason);
  process.timer.Cancel();
  HardStop(process.id);
}

void ProcessHost::HardStop(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end() || !it->second->child) return;
  it->second->child->SignalGroup(SIGKILL);
  // Under an init outside a PID namespace the SIGKILL is the init's hard stop, which its program
  // may keep it from (it may stop the init: they share a uid): after another grace, everything.
  it->second->timer = clock_.After(options_.stop_grace, [this, id] {
    auto found = processes_.find(id);
    if (found != processes_.end() && found->second->child) found->second->child->KillAll();
  });
}

void ProcessHost::PollReady(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end() || it->second->ready || it->second->stopping ||
      !it->second->kill_reason.ok()) {
    return;
  }
  Process& process = *it->second;
  if (clock_.Now() - process.spawned > options_.ready_timeout) {
    return Kill(process,
                DeadlineExceeded(fmt::format("instance {} of {} was not ready within {} ms: killed",
                                             id, FunctionName(CommandOf(process.function)),
                                             options_.ready_timeout.count())));
  }
  if (const Status opened = OpenSocket(process); !opened.ok()) {
    if (opened.code() != StatusCode::kUnavailable) return Kill(process, opened);
    process.timer = clock_.After(options_.ready_poll, [this, id] { PollReady(id); });
    return;
  }
  net::SendUnixHttpRequest(
      loop_, process.socket_target, {"GET", "/v2/health/ready", "", ""}, options_.probe_timeout, {},
      [this, id, alive = alive_](Result<net::HttpResponse> answer) {
        if (!*alive) return;
        auto found = processes_.find(id);
        if (found == processes_.end() || found->second->stopping ||
            !found->second->kill_reason.ok()) {
          return;
        }
        Process& polled = *found->second;
        if (answer.ok() && answer->status == 200) return ReadMetadataThenReady(id);
        // Not there to connect to: the function may have made its socket again (a loader that
        // serves 503 first, say), so the next poll opens and checks the path afresh.
        if (!answer.ok()) ForgetSocket(polled);
        polled.timer = clock_.After(options_.ready_poll, [this, id] { PollReady(id); });
      });
}

void ProcessHost::ForgetSocket(Process& process) {
  // Requests in flight connected already (connect is issued inside SendUnixHttpRequest).
  process.socket_file.Reset();
  process.socket_target.clear();
}

Status ProcessHost::OpenSocket(Process& process) {
  if (process.socket_file.valid()) return Status::Ok();
  // O_PATH | O_NOFOLLOW: a symlink the instance put there opens as itself, and is refused below.
  UniqueFd file(::open(process.socket_path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!file.valid()) {
    if (errno == ENOENT) return Unavailable("its socket is not there yet");
    return IoError(fmt::format("instance {}: its socket: {}", process.id, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) {
    return IoError(fmt::format("instance {}: its socket: {}", process.id, std::strerror(errno)));
  }
  if (!S_ISSOCK(info.st_mode) || (process.identity && info.st_uid != process.identity->uid)) {
    return PermissionDenied(fmt::format(
        "instance {} of {}: its socket path is not a socket of its own (a symlink or another "
        "file): killed",
        process.id, FunctionName(CommandOf(process.function))));
  }
  process.socket_target = fmt::format("/proc/self/fd/{}", file.get());
  process.socket_file = std::move(file);
  return Status::Ok();
}

void ProcessHost::ReadMetadataThenReady(InstanceId id) {
  Process& process = *processes_.at(id);
  if (binary_.contains(process.function)) return ReadTensorsThenReady(id);
  net::SendUnixHttpRequest(
      loop_, process.socket_target, {"GET", "/v2", "", ""}, options_.probe_timeout, {},
      [this, id, alive = alive_](Result<net::HttpResponse> answer) {
        if (!*alive) return;
        auto found = processes_.find(id);
        if (found == processes_.end() || found->second->stopping ||
            !found->second->kill_reason.ok()) {
          return;
        }
        bool binary = false;
        if (answer.ok() && answer->status == 200 && answer->body.size() <= kMaxModelMetadataBytes) {
          const nlohmann::json metadata = nlohmann::json::parse(answer->body, nullptr, false);
          if (metadata.is_object() && metadata.contains("extensions") &&
              metadata["extensions"].is_array()) {
            for (const nlohmann::json& extension : metadata["extensions"]) {
              binary = binary || extension == "binary_tensor_data";
            }
          }
        }
        binary_[found->second->function] = binary;
        ReadTensorsThenReady(id);
      });
}

bool ProcessHost::SpeaksBinary(FunctionId function) const {
  const auto it = binary_.find(function);
  return it != binary_.end() && it->second;
}

void ProcessHost::ReadTensorsThenReady(InstanceId id) {
  Process& process = *processes_.at(id);
  const InstanceCommand& command = CommandOf(process.function);
  if (!command.read_metadata || reported_.contains(process.function)) return Ready(process);
  net::SendUnixHttpRequest(
      loop_, process.socket_target, {"GET", "/v2/models/" + command.model, "", ""},
      options_.probe_timeout, {}, [this, id, alive = alive_](Result<net::HttpResponse> answer) {
        if (!*alive) return;
        auto found = processes_.find(id);
        if (found == processes_.end() || found->second->stopping ||
            !found->second->kill_reason.ok()) {
          return;
        }
        Process& polled = *found->second;
        const InstanceCommand& polled_command = CommandOf(polled.function);
        ModelTensors tensors;
        if (answer.ok() && answer->status == 200) {
          auto parsed = ParseModelMetadataTensors(answer->body, polled_command.batched);
          if (!parsed.ok()) {
            return Kill(polled, FailedPrecondition(fmt::format(
                                    "instance {} of {} reported its model's tensors wrongly at "
                                    "GET /v2/models/{}: {}",
                                    id, FunctionName(polled_command), polled_command.model,
                                    parsed.status().message())));
          }
          tensors = std::move(parsed).value();
        }
        // Another status, or no answer: the function describes nothing (its probes judge it).
        reported_[polled.function] = std::move(tensors);
        Ready(polled);
      });
}

void ProcessHost::Ready(Process& process) {
  process.ready = true;
  ever_ready_.insert(process.function);
  process.ready_at = clock_.Now();
  ScheduleProbe(process.id);
  if (process.launch.on_ready) process.launch.on_ready(process.child->program_pid());
}

std::optional<ModelTensors> ProcessHost::ReportedTensors(FunctionId function) const {
  const auto it = reported_.find(function);
  if (it == reported_.end()) return std::nullopt;
  return it->second;
}

void ProcessHost::ScheduleProbe(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end()) return;
  it->second->timer = clock_.After(options_.health_interval, [this, id] {
    auto found = processes_.find(id);
    if (found == processes_.end() || found->second->stopping || !found->second->kill_reason.ok()) {
      return;
    }
    Process& process = *found->second;
    if (process.in_flight > 0) return ScheduleProbe(id);  // its answers show it is alive
    if (const Status opened = OpenSocket(process);
        !opened.ok() && opened.code() != StatusCode::kUnavailable) {
      return Kill(process, opened);
    }
    const std::uint64_t batches = process.batches;
    net::SendUnixHttpRequest(
        loop_, process.socket_target, {"GET", "/v2/health/ready", "", ""}, options_.probe_timeout,
        {}, [this, id, batches, alive = alive_](Result<net::HttpResponse> answer) {
          if (!*alive) return;
          auto probed = processes_.find(id);
          if (probed == processes_.end() || probed->second->stopping ||
              !probed->second->kill_reason.ok()) {
            return;
          }
          Process& probed_process = *probed->second;
          const bool healthy = answer.ok() && answer->status == 200;
          if (!answer.ok()) ForgetSocket(probed_process);  // opened and checked again next time
          if (healthy) {
            probed_process.probe_failures = 0;
          } else if (probed_process.batches == batches) {  // a batch meanwhile may have delayed it
            ++probed_process.probe_failures;
            const std::string why = answer.ok() ? fmt::format("it answered {}", answer->status)
                                                : answer.status().message();
            spdlog::warn("instance {}: health check failed ({} in a row): {}", id,
                         probed_process.probe_failures, why);
            if (probed_process.probe_failures >= options_.health_failures) {
              return Kill(probed_process,
                          Unavailable(fmt::format(
                              "instance {} of {} failed {} health checks in a row (the last: "
                              "{}): killed",
                              id, FunctionName(CommandOf(probed_process.function)),
                              probed_process.probe_failures, why)));
            }
          }
          ScheduleProbe(id);
        });
  });
}

void ProcessHost::Exited(InstanceId id, int wait_status) {
  auto it = processes_.find(id);
  if (it == processes_.end()) return;
  std::unique_ptr<Process> process = std::move(it->second);
  processes_.erase(it);
  const std::string tenant = process->tenant;
  const std::optional<ProcessIdentity> identity = process->identity;
  process->timer.Cancel();
  const pid_t pid = process->child->pid();
  Status status = Status::Ok();
  if (!process->ready && WIFEXITED(wait_status) &&
      WEXITSTATUS(wait_status) == fn::kExitModelRejected) {
    // Its model did not load, because of what the tenant gave (whether or not the node was
    // stopping it meanwhile): a bad deploy, which the process said why in its log.
    status = InvalidArgument(fmt::format("instance {} of {}: the model did not load", id,
                                         FunctionName(CommandOf(process->function))));
    spdlog::warn("{}", status.message());
    if (!process->stopping) CountCrash(process->function, *process, status.message());
  } else if (!process->stopping) {
    status = process->kill_reason.ok()
                 ? Unavailable(fmt::format("instance {} of {} (pid {}) {}", id,
                                           FunctionName(CommandOf(process->function)), pid,
                                           DescribeWaitStatus(wait_status)))
                 : process->kill_reason;
    spdlog::warn("{}", status.message());
    CountCrash(process->function, *process, status.message());
  } else if (process->ready) {
    restarts_.erase(process->function);  // it ran and stopped cleanly
  }
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(process->socket_path).parent_path(), ignored);
  auto on_exit = std::move(process->launch.on_exit);
  process.reset();  // reaped already; its cgroup goes now
  const bool tenant_has_more =
      std::any_of(processes_.begin(), processes_.end(),
                  [&](const auto& p) { return p.second->tenant == tenant; });
  if (!tenant_has_more && identity) RemoveTenantLeftovers(tenant, *identity);
  if (on_exit) on_exit(status);
}

namespace {

// Kills every process that runs as `uid` (the tenant's own, never the node's): a helper takes
// the uid and signals all it may (kill(-1)), which is exactly that uid's processes. For what
// escaped an instance where the kernel refused it a PID namespace.
void KillEveryProcessOf(uid_t uid) {
  const pid_t helper = ::fork();
  if (helper == 0) {
    if (::syscall(SYS_setresuid, uid, uid, uid) != 0) _exit(1);
    // No capability may survive (SECBIT_NO_SETUID_FIXUP would keep them): kill(-1) with CAP_KILL
    // would signal everything.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &header, none) != 0) _exit(1);
    ::kill(-1, SIGKILL);
    _exit(0);
  }
  if (helper < 0) {
    spdlog::warn("uid {}: cannot fork to end its leftover processes: {}", uid,
                 std::strerror(errno));
    return;
  }
  int status = 0;
  while (::waitpid(helper, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

void ProcessHost::RemoveTenantLeftovers(const std::string& tenant,
                                        const ProcessIdentity& identity) {
  if (identity.uid == 0 || identity.uid == ::geteuid()) return;  // the node's own
  // What escaped an instance outside a PID namespace ends now, on the loop, so that no instance
  // of the tenant starts meanwhile (inside one, nothing escaped).
  if (outside_namespace_.erase(identity.uid) > 0 && options_.kill_uid_leftovers) {
    KillEveryProcessOf(identity.uid);
  }
  // The files on the pool; an instance of the tenant spawned since stops it (its files are new).
  auto& spawns = spawns_by_uid_[identity.uid];
  if (!spawns) spawns = std::make_shared<std::atomic<std::uint64_t>>(0);
  boost::asio::post(*cleanups_, [tenant, uid = identity.uid, spawns, seen = spawns->load(),
                                 folders = options_.tenant_shared_folders] {
    std::size_t removed = 0;
    for (const std::string& folder : folders) {
      std::error_code error;
      for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
           it.increment(error)) {
        if (spawns->load() != seen) return;
        struct stat info {};
        // lstat: a link is judged (and removed) as itself, never followed.
        if (::lstat(it->path().c_str(), &info) != 0 || info.st_uid != uid) continue;
        std::error_code remove_error;
        std::filesystem::remove_all(it->path(), remove_error);
        if (remove_error) {
          spdlog::warn("tenant {}: cannot remove its leftover {}: {}", tenant, it->path().string(),
                       remove_error.message());
        } else {
          ++removed;
        }
      }
    }
    if (removed > 0) {
      spdlog::info("tenant {}: removed {} leftovers of its uid {} from {}", tenant, removed, uid,
                   fmt::join(folders, ", "));
    }
  });
}

void ProcessHost::WaitForCleanups() {
  std::promise<void> done;
  boost::asio::post(*cleanups_, [&done] { done.set_value(); });
  done.get_future().wait();
}

void ProcessHost::Stop(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end() || it->second->stopping) return;
  Process& process = *it->second;
  process.stopping = true;
  process.timer.Cancel();
  if (!process.child) {
    // Still waiting out its restart delay: it never started.
    auto on_exit = std::move(process.launch.on_exit);
    processes_.erase(it);
    boost::asio::post(loop_, [on_exit = std::move(on_exit)] {
      if (on_exit) on_exit(Status::Ok());
    });
    return;
  }
  process.child->SignalGroup(SIGTERM);
  process.timer = clock_.After(options_.stop_grace, [this, id] { HardStop(id); });
}

void ProcessHost::Fail(RequestId request, const Status& status) { requests_.Fail(request, status); }

void ProcessHost::Infer(InstanceId instance, std::span<const RequestId> batch,
                        std::function<void(Status)> done) {
  auto it = processes_.find(instance);
  if (it == processes_.end() || !it->second->child) {
    boost::asio::post(loop_, [done] { done(Unavailable("the instance is gone")); });
    return;
  }
  std::vector<const InferRequest*> inputs;
  for (const RequestId request : batch) {
    const InferRequest* input = requests_.Input(request);
    if (input == nullptr) {
      boost::asio::post(loop_, [done] { done(Internal("a request without its input")); });
      return;
    }
    inputs.push_back(input);
  }
  const bool binary = SpeaksBinary(it->second->function);
  std::optional<EncodedRequest> ahead;
  if (batch.size() == 1) {
    ahead = requests_.TakeEncoded(batch.front());
  } else {
    for (const RequestId request : batch) requests_.DropEncoded(request);
  }
  if (ahead && ahead->binary == binary) {
    ++it->second->in_flight;
    ++it->second->batches;
    ++sent_as_encoded_;
    return Send(instance, {batch.front()}, {ahead->batch_size}, std::move(ahead->body),
                std::move(done));
  }
  std::vector<InferRequest> copies;
  copies.reserve(inputs.size());
  for (const InferRequest* input : inputs) copies.push_back(*input);
  auto stacked = StackBatch(copies);
  copies.clear();
  if (!stacked.ok()) {
    boost::asio::post(loop_, [done, status = stacked.status()] { done(status); });
    return;
  }
  ++it->second->in_flight;
  ++it->second->batches;
  // The body is written on the codec pool, not on the loop, which runs the scheduler and every
  // other tenant's requests: a large tensor delays only its own request.
  std::vector<RequestId> ids(batch.begin(), batch.end());
  boost::asio::post(*codec_pool_, [this, instance, ids = std::move(ids), done, alive = alive_,
                                   binary, request = std::move(stacked->request),
                                   sizes = std::move(stacked->sizes)]() mutable {
    Result<FunctionBody> body = EncodeFunctionRequest(std::move(request), binary);
    boost::asio::post(loop_, [this, instance, ids = std::move(ids), done, alive,
                              body = std::move(body), sizes = std::move(sizes)]() mutable {
      if (!*alive) return;
      Send(instance, std::move(ids), std::move(sizes), std::move(body), std::move(done));
    });
  });
}

void ProcessHost::Send(InstanceId instance, std::vector<RequestId> ids,
                       std::vector<std::int64_t> sizes, Result<FunctionBody> body,
                       std::function<void(Status)> done) {
  auto it = processes_.find(instance);
  if (it == processes_.end()) return done(Unavailable("the instance ended"));
  if (!body.ok()) {
    --it->second->in_flight;
    return done(body.status());
  }
  const std::string target = "/v2/models/" + CommandOf(it->second->function).model + "/infer";
  net::HttpRequest request{"POST", target, std::move(body->body), "application/json"};
  if (body->json_bytes) {
    request.content_type = "application/octet-stream";
    request.headers.push_back(
        {"Inference-Header-Content-Length", std::to_string(*body->json_bytes)});
  }
  if (it->second->socket_target.empty() && !OpenSocket(*it->second).ok()) {
    --it->second->in_flight;
    return done(Unavailable("the instance's socket is not there"));
  }
  net::SendUnixHttpRequest(
      loop_, it->second->socket_target, std::move(request), options_.request_deadline, {},
      [this, instance, ids = std::move(ids), sizes = std::move(sizes), done,
       alive = alive_](Result<net::HttpResponse> answer) mutable {
        if (!*alive) return;
        // Once the instance's end was seen, the executor has given its runs back to the policy:
        // a late answer must not answer them a second time.
        auto found = processes_.find(instance);
        if (found == processes_.end()) return done(Unavailable("the instance ended"));
        --found->second->in_flight;
        if (!answer.ok()) return done(answer.status());
        if (answer->status != 200) return done(FromHttp(answer->status, answer->body));
        std::string json_length(
            net::FindHeader(answer->headers, "Inference-Header-Content-Length"));
        if (ids.size() == 1 && requests_.TakesEncodedAnswers()) {
          // Its source decodes it, off the loop.
          requests_.AnswerEncoded(
              ids.front(),
              FunctionAnswer{std::move(answer->body), std::move(json_length), sizes.front()});
          return done(Status::Ok());
        }
        // Read on the codec pool too; the requests are answered on the loop, unless the instance
        // ended meanwhile (then, as above, not at all).
        boost::asio::post(*codec_pool_, [this, instance, ids = std::move(ids),
                                         sizes = std::move(sizes), done, alive, json_length,
                                         text = std::move(answer->body)]() mutable {
          Result<std::vector<InferResponse>> split = [&]() -> Result<std::vector<InferResponse>> {
            GSHARE_ASSIGN_OR_RETURN(const InferResponse response,
                                    DecodeFunctionAnswer(text, json_length));
            return SplitBatch(response, sizes);
          }();
          text = {};
          boost::asio::post(loop_, [this, instance, ids = std::move(ids), done, alive,
                                    split = std::move(split)]() mutable {
            if (!*alive) return;
            if (!processes_.contains(instance)) return done(Unavailable("the instance ended"));
            if (!split.ok()) return done(split.status());
            for (std::size_t i = 0; i < ids.size(); ++i) {
              (*split)[i].id = std::to_string(ids[i]);
              requests_.Answer(ids[i], std::move((*split)[i]));
            }
            done(Status::Ok());
          });
        });
      });
}

}  // namespace gshare
