#include "gshare/node/process/process_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gshare/fn/control_channel.h"
#include "gshare/net/unix_http.h"
#include "gshare/protocol/batching.h"
#include "gshare/protocol/kserve_json.h"

namespace gshare {
namespace {

constexpr int kChildControlFd = 3;

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

Status FromHttp(int status, const std::string& body) {
  std::string message = body;
  if (auto parsed = nlohmann::json::parse(body, nullptr, false);
      parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
    message = parsed["error"].get<std::string>();
  }
  message = fmt::format("the function answered {}: {}", status, message);
  if (status == 507) return ResourceExhausted(message);
  if (status == 400) return InvalidArgument(message);
  return Unavailable(message);
}

std::string ExitText(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return fmt::format("killed by signal {}", WTERMSIG(wait_status));
  return "ended";
}

}  // namespace

ProcessHost::ProcessHost(boost::asio::io_context& loop, std::vector<InstanceCommand> commands,
                         RequestSource& requests, ProcessHostOptions options)
    : loop_(loop),
      commands_(std::move(commands)),
      requests_(requests),
      options_(std::move(options)),
      run_dir_(options_.run_dir) {
  // Children start in their working folder: every path handed to them is absolute.
  std::error_code error;
  const auto absolute = std::filesystem::absolute(run_dir_, error);
  if (!error) run_dir_ = absolute.lexically_normal().string();
}

ProcessHost::~ProcessHost() {
  for (auto& [id, process] : processes_) {
    if (process->pid > 0) {
      ::kill(-process->pid, SIGKILL);
      ::kill(process->pid, SIGKILL);
      ::waitpid(process->pid, nullptr, 0);
    }
  }
}

uid_t ProcessHost::UidOf(const std::string& tenant) {
  if (::geteuid() != 0 || !options_.distinct_uids) return ::geteuid();
  auto [it, added] = tenant_uids_.try_emplace(
      tenant, options_.first_uid + static_cast<uid_t>(tenant_uids_.size()));
  return it->second;
}

Result<pid_t> ProcessHost::Spawn(const InstanceCommand& command, InstanceLaunch& launch,
                                 const std::string& socket_path) {
  if (command.argv.empty()) return InvalidArgument("an instance command without a program");
  const std::filesystem::path logs = std::filesystem::path(run_dir_) / "logs";
  std::error_code error;
  std::filesystem::create_directories(logs, error);
  const std::string log_path =
      (logs / ((command.name.empty() ? command.model : command.name) + ".log")).string();
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log < 0) return IoError(fmt::format("{}: {}", log_path, std::strerror(errno)));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) {
    ::close(log);
    return IoError(fmt::format("/dev/null: {}", std::strerror(errno)));
  }

  const uid_t uid = UidOf(command.tenant);
  const bool switch_uid = uid != ::geteuid();
  // The instance's folder (its socket) belongs to its uid.
  const std::string dir = std::filesystem::path(socket_path).parent_path().string();
  std::filesystem::create_directories(dir, error);
  ::chmod(dir.c_str(), 0700);
  if (switch_uid && ::chown(dir.c_str(), uid, uid) != 0) {
    ::close(log);
    ::close(null);
    return IoError(fmt::format("chown {}: {}", dir, std::strerror(errno)));
  }

  std::vector<std::string> env_text = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      fmt::format("{}={}", fn::kControlFdEnv, kChildControlFd),
      fmt::format("{}={:#x}", fn::kDeviceBaseEnv, launch.device_base),
      fmt::format("{}={}", fn::kDeviceReserveEnv, launch.device_reserve_bytes),
      "GSHARE_SOCKET=" + socket_path,
      "OPENBLAS_NUM_THREADS=1"};
  for (const auto& [name, value] : command.env) env_text.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_text) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_text = command.argv;
  std::vector<char*> argv;
  for (auto& arg : argv_text) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string working_dir = command.working_dir.empty() ? run_dir_ : command.working_dir;
  const int control = launch.control.get();

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    ::close(null);
    return Unavailable(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until execve.
    ::setsid();
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::dup2(control, kChildControlFd);  // dup2 clears close-on-exec
    // Nothing else of the node's crosses: not its sockets to other functions (which would keep
    // their connections open, and reach them), not its event loop's descriptors.
    ::syscall(SYS_close_range, kChildControlFd + 1, ~0U, 0);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (::chdir(working_dir.c_str()) != 0) ::_exit(126);
    if (switch_uid) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(125);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(log);
  ::close(null);
  return pid;
}

Status ProcessHost::Start(InstanceLaunch launch) {
  if (launch.function >= commands_.size()) {
    return InvalidArgument(fmt::format("no command for function {}", launch.function));
  }
  const InstanceCommand& command = commands_[launch.function];
  auto process = std::make_unique<Process>();
  process->id = launch.instance;
  process->function = launch.function;
  process->socket_path =
      (std::filesystem::path(run_dir_) / "instances" / std::to_string(launch.instance) / "socket")
          .string();
  auto pid = Spawn(command, launch, process->socket_path);
  if (!pid.ok()) return pid.status();
  launch.control.Reset();  // the child has its own copy
  process->pid = *pid;
  process->started = std::chrono::steady_clock::now();
  process->on_ready = std::move(launch.on_ready);
  process->on_exit = std::move(launch.on_exit);
  const int pidfd = PidfdOpen(*pid);
  if (pidfd < 0) {
    ::kill(-*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
    return Unavailable(fmt::format("pidfd_open: {}", std::strerror(errno)));
  }
  process->exit_watch = std::make_unique<boost::asio::posix::stream_descriptor>(loop_, pidfd);
  const InstanceId id = launch.instance;
  process->exit_watch->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                                  [this, id](const boost::system::error_code& error) {
                                    if (!error) Exited(id);
                                  });
  process->timer = std::make_unique<boost::asio::steady_timer>(loop_);
  processes_[id] = std::move(process);
  PollReady(id);
  return Status::Ok();
}

void ProcessHost::PollReady(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end() || it->second->ready || it->second->stopping) return;
  Process& process = *it->second;
  if (std::chrono::steady_clock::now() - process.started > options_.ready_timeout) {
    spdlog::warn("instance {} was not ready within {} ms: stopping it", id,
                 options_.ready_timeout.count());
    return Stop(id);
  }
  net::SendUnixHttpRequest(
      loop_, process.socket_path, {"GET", "/v2/health/ready", "", ""}, std::chrono::seconds(5), {},
      [this, id](Result<net::HttpResponse> answer) {
        auto found = processes_.find(id);
        if (found == processes_.end() || found->second->stopping) return;
        if (answer.ok() && answer->status == 200) {
          found->second->ready = true;
          if (found->second->on_ready) found->second->on_ready();
          return;
        }
        found->second->timer->expires_after(options_.ready_poll);
        found->second->timer->async_wait([this, id](const boost::system::error_code& error) {
          if (!error) PollReady(id);
        });
      });
}

void ProcessHost::Exited(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end()) return;
  std::unique_ptr<Process> process = std::move(it->second);
  processes_.erase(it);
  int wait_status = 0;
  ::waitpid(process->pid, &wait_status, 0);
  process->timer->cancel();
  const Status status = process->stopping
                            ? Status::Ok()
                            : Unavailable(fmt::format("instance {} (pid {}) {}", id, process->pid,
                                                      ExitText(wait_status)));
  if (!process->stopping) spdlog::warn("{}", status.message());
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(process->socket_path).parent_path(), ignored);
  if (process->on_exit) process->on_exit(status);
}

void ProcessHost::Stop(InstanceId id) {
  auto it = processes_.find(id);
  if (it == processes_.end() || it->second->stopping) return;
  Process& process = *it->second;
  process.stopping = true;
  ::kill(-process.pid, SIGTERM);
  ::kill(process.pid, SIGTERM);  // before its setsid, the group does not exist yet
  process.timer->cancel();
  process.timer->expires_after(options_.stop_grace);
  const pid_t pid = process.pid;
  process.timer->async_wait([this, id, pid](const boost::system::error_code& error) {
    if (!error && processes_.contains(id)) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  });
}

void ProcessHost::Fail(RequestId request, const Status& status) { requests_.Fail(request, status); }

void ProcessHost::Infer(InstanceId instance, std::span<const RequestId> batch,
                        std::function<void(Status)> done) {
  auto it = processes_.find(instance);
  if (it == processes_.end()) {
    boost::asio::post(loop_, [done] { done(Unavailable("the instance is gone")); });
    return;
  }
  std::vector<InferRequest> inputs;
  for (const RequestId request : batch) {
    const InferRequest* input = requests_.Input(request);
    if (input == nullptr) {
      boost::asio::post(loop_, [done] { done(Internal("a request without its input")); });
      return;
    }
    inputs.push_back(*input);
    inputs.back().id.reset();
  }
  auto stacked = StackBatch(inputs);
  Result<std::string> body = stacked.ok() ? SerializeInferRequest(stacked->request)
                                          : Result<std::string>(stacked.status());
  if (!body.ok()) {
    boost::asio::post(loop_, [done, status = body.status()] { done(status); });
    return;
  }
  const std::string target = "/v2/models/" + commands_[it->second->function].model + "/infer";
  std::vector<RequestId> ids(batch.begin(), batch.end());
  std::vector<std::int64_t> sizes = stacked->sizes;
  net::SendUnixHttpRequest(loop_, it->second->socket_path,
                           {"POST", target, std::move(body).value(), "application/json"},
                           options_.request_deadline, {},
                           [this, instance, ids, sizes, done](Result<net::HttpResponse> answer) {
                             // Once the instance's end was seen, the executor has given its runs
                             // back to the policy: a late answer must not answer them a second
                             // time.
                             if (!processes_.contains(instance))
                               return done(Unavailable("the instance ended"));
                             if (!answer.ok()) return done(answer.status());
                             if (answer->status != 200)
                               return done(FromHttp(answer->status, answer->body));
                             auto response = ParseInferResponse(answer->body);
                             if (!response.ok()) return done(response.status());
                             auto split = SplitBatch(*response, sizes);
                             if (!split.ok()) return done(split.status());
                             for (std::size_t i = 0; i < ids.size(); ++i) {
                               (*split)[i].id = std::to_string(ids[i]);
                               requests_.Answer(ids[i], std::move((*split)[i]));
                             }
                             done(Status::Ok());
                           });
}

}  // namespace gshare
