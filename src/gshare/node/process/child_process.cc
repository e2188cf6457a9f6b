#include "gshare/node/process/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "gshare/node/process/init_protocol.h"
#include "gshare/node/process/sandbox.h"

namespace gshare {

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return fmt::format("killed by signal {}", WTERMSIG(wait_status));
  return "ended";
}

namespace {

// A descriptor closed when it goes out of scope.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd() { Reset(); }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The step of the child's setup that failed, written with errno to the status pipe.
enum ChildStep : int {
  kStepProcessGroup = 1,
  kStepStdin,
  kStepStdout,
  kStepStderr,
  kStepWorkingDir,
  kStepLimits,
  kStepCgroup,
  kStepSetGroups,
  kStepSetGid,
  kStepSetUid,
  kStepPrctl,
  kStepPassFds,
  kStepCloseFds,
  kStepParentGone,
  kStepConfine,
  kStepExec,
};

const char* StepName(int step) {
  switch (step) {
    case kStepProcessGroup:
      return "setpgid";
    case kStepStdin:
      return "redirecting stdin";
    case kStepStdout:
      return "redirecting stdout";
    case kStepStderr:
      return "redirecting stderr";
    case kStepWorkingDir:
      return "chdir";
    case kStepCgroup:
      return "joining the cgroup";
    case kStepLimits:
      return "setrlimit";
    case kStepSetGroups:
      return "setgroups";
    case kStepSetGid:
      return "setgid";
    case kStepSetUid:
      return "setuid";
    case kStepPrctl:
      return "prctl";
    case kStepPassFds:
      return "passing descriptors";
    case kStepCloseFds:
      return "closing the node's descriptors";
    case kStepParentGone:
      return "checking that the node is still there";
    case kStepExec:
    case init_protocol::kStepExec:
      return "execve";
    case init_protocol::kStepFork:
      return "fork (in gshare-init)";
    case init_protocol::kStepArguments:
      return "gshare-init's arguments";
    case kStepConfine:
      return "the sandbox's seccomp filter";
    default: {
      const char* sandbox = SandboxPlan::StepName(step);
      return sandbox != nullptr ? sandbox : "unknown step";
    }
  }
}

// Only async-signal-safe calls from here to exec: the node has threads.
[[noreturn]] void Fail(int pipe_fd, int step) {
  int report[2] = {step, errno};
  [[maybe_unused]] ssize_t written = write(pipe_fd, report, sizeof(report));
  _exit(127);
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(boost::asio::io_context& io,
                                                          const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgument("process spec has no program (argv is empty)");
  }
  // Everything the child needs is prepared here, before fork.
  // Under an init: gshare-init --report-fd=N -- argv..., N written in the child (where the status
  // pipe's number is known) into room kept here.
  const bool under_init = !spec.init_program.empty();
  std::string report_flag = std::string(init_protocol::kReportFlag) + std::string(10, '\0');
  std::vector<char*> argv;
  if (under_init) {
    argv.push_back(const_cast<char*>(spec.init_program.c_str()));
    argv.push_back(report_flag.data());
    argv.push_back(const_cast<char*>("--"));
  }
  for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  char* const report_digits = report_flag.data() + init_protocol::kReportFlag.size();
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      return InvalidArgument(fmt::format("environment variable name '{}' is invalid", name));
    }
    env_strings.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  OwnedFd log(spec.log_path.empty()
                  ? open("/dev/null", O_WRONLY | O_CLOEXEC)
                  : open(spec.log_path.c_str(),
                         O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (log.get() < 0) {
    return IoError(fmt::format("opening log {}: {}", spec.log_path, std::strerror(errno)));
  }
  OwnedFd null_in(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null_in.get() < 0) return IoError(fmt::format("/dev/null: {}", std::strerror(errno)));
  OwnedFd cgroup_procs(spec.cgroup_procs_path.empty()
                           ? -1
                           : open(spec.cgroup_procs_path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!spec.cgroup_procs_path.empty() && cgroup_procs.get() < 0) {
    return IoError(fmt::format("opening {}: {}", spec.cgroup_procs_path, std::strerror(errno)));
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return IoError(fmt::format("pipe2: {}", std::strerror(errno)));
  }
  OwnedFd status_read(pipe_fds[0]);
  OwnedFd status_write(pipe_fds[1]);
  // The node's lifeline for a child in a PID namespace of its own, where getppid() says 0: the
  // child holds the read end, the node the write end until the child has exec'd, so a hang-up
  // before then means the node is gone.
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return IoError(fmt::format("pipe2: {}", std::strerror(errno)));
  }
  OwnedFd lifeline_read(pipe_fds[0]);
  OwnedFd lifeline_write(pipe_fds[1]);
  const rlimit no_core{0, 0};
  const rlimit open_files{static_cast<rlim_t>(spec.limits.open_files),
                          static_cast<rlim_t>(spec.limits.open_files)};
  const char* working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  const std::optional<ProcessIdentity> identity = spec.identity;
  for (const int fd : spec.pass_fds) {
    if (fd < 0) return InvalidArgument("process spec passes an invalid descriptor");
  }
  const std::vector<int> pass_fds = spec.pass_fds;
  const int first_free = 3 + static_cast<int>(pass_fds.size());
  std::vector<int> moved(pass_fds.size(), -1);  // filled in the child (no allocation there)
  const pid_t parent = getpid();
  rlimit node_files{};
  getrlimit(RLIMIT_NOFILE, &node_files);
  const int descriptor_bound = static_cast<int>(std::min<rlim_t>(
      node_files.rlim_cur == RLIM_INFINITY ? 1 << 20 : node_files.rlim_cur, 1 << 20));

  std::optional<SandboxPlan> sandbox;
  if (spec.sandbox) {
    auto plan = SandboxPlan::Prepare(*spec.sandbox);
    if (!plan.ok()) return plan.status().WithContext("the sandbox");
    sandbox.emplace(std::move(plan).value());
  }

  // In a PID namespace of its own (clone with CLONE_NEWPID, as fork does otherwise) the child is
  // the namespace's init: when it ends, the kernel kills whatever it left there, a process that
  // left its group (setsid) included. Where the kernel refuses one (no CAP_SYS_ADMIN), a plain
  // fork. The raw clone leaves the C library thinking the child has the node's threads, so the
  // child calls only plain system calls (setuid and its kind through syscall(), not the library's
  // wrappers, which would signal threads that do not exist there).
  bool in_namespace = false;
  pid_t pid = -1;
  if (sandbox) {
    // The sandbox's namespaces, or no process: never a sandboxed function without them.
    pid = static_cast<pid_t>(
        syscall(SYS_clone, kSandboxNamespaces | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid < 0) {
      return FailedPrecondition(
          fmt::format("the sandbox's namespaces: clone: {}", std::strerror(errno)));
    }
    in_namespace = true;
  } else if (spec.pid_namespace) {
    pid = static_cast<pid_t>(
        syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    in_namespace = pid >= 0;
    if (pid < 0 && errno != EPERM && errno != EINVAL && errno != ENOSPC && errno != EUSERS) {
      return IoError(fmt::format("clone: {}", std::strerror(errno)));
    }
  }
  if (!in_namespace) pid = fork();
  if (pid < 0) return IoError(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    close(lifeline_write.get());
    // The status pipe moves above the descriptors' targets so that passing them cannot close it.
    const int report = fcntl(status_write.get(), F_DUPFD_CLOEXEC, first_free);
    if (report < 0) Fail(status_write.get(), kStepPassFds);
    if (setpgid(0, 0) != 0) Fail(report, kStepProcessGroup);
    if (dup2(null_in.get(), STDIN_FILENO) < 0) Fail(report, kStepStdin);
    if (dup2(log.get(), STDOUT_FILENO) < 0) Fail(report, kStepStdout);
    if (dup2(log.get(), STDERR_FILENO) < 0) Fail(report, kStepStderr);
    if (setrlimit(RLIMIT_CORE, &no_core) != 0 || setrlimit(RLIMIT_NOFILE, &open_files) != 0) {
      Fail(report, kStepLimits);
    }
    // "0" moves the writer itself; done before dropping privileges.
    if (cgroup_procs.get() >= 0 && write(cgroup_procs.get(), "0", 1) != 1) {
      Fail(report, kStepCgroup);
    }
    if (sandbox) {
      int step = 0;
      const int error = sandbox->Enter(&step);
      if (error != 0) {
        errno = error;
        Fail(report, step);
      }
    }
    if (identity) {
      if (syscall(SYS_setgroups, 0, nullptr) != 0) Fail(report, kStepSetGroups);
      if (syscall(SYS_setgid, identity->gid) != 0) Fail(report, kStepSetGid);
      if (syscall(SYS_setuid, identity->uid) != 0) Fail(report, kStepSetUid);
    }
    // With the function's own rights: a folder its uid may not enter is refused.
    if (working_dir != nullptr && chdir(working_dir) != 0) Fail(report, kStepWorkingDir);
    // After setuid: a credential change clears the parent-death signal. A node that died before
    // this line sends none: the parent changed, so the child ends here.
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(report, kStepPrctl);
    }
    if (in_namespace) {
      // ppoll through syscall(): a library function called first here would be bound lazily.
      pollfd lifeline{lifeline_read.get(), POLLIN, 0};
      const timespec now{0, 0};
      if (syscall(SYS_ppoll, &lifeline, 1, &now, nullptr, 0) != 0) {
        errno = ESRCH;
        Fail(report, kStepParentGone);
      }
    } else if (getppid() != parent) {
      errno = ESRCH;
      Fail(report, kStepParentGone);
    }
    // The passed descriptors: first out of the way of their targets (above every target), then
    // onto 3, 4, ... (dup2 clears close-on-exec there).
    for (std::size_t i = 0; i < pass_fds.size(); ++i) {
      moved[i] = fcntl(pass_fds[i], F_DUPFD_CLOEXEC, first_free);
      if (moved[i] < 0) Fail(report, kStepPassFds);
    }
    for (std::size_t i = 0; i < pass_fds.size(); ++i) {
      if (dup2(moved[i], 3 + static_cast<int>(i)) < 0) Fail(report, kStepPassFds);
    }
    // Every other descriptor above stderr is closed at exec (the status pipe is already
    // O_CLOEXEC, so an exec failure can still be reported). Where close_range is missing (kernels
    // before 5.11, some seccomp profiles), each descriptor up to the node's limit is marked.
    if (syscall(SYS_close_range, static_cast<unsigned>(first_free), ~0u,
                4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
      for (int fd = first_free; fd < descriptor_bound; ++fd) {
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 && errno != EBADF) Fail(report, kStepCloseFds);
      }
    }
    if (under_init) {
      // The init keeps the status pipe across its exec and is told its number.
      if (fcntl(report, F_SETFD, 0) != 0) Fail(report, kStepPassFds);
      char digits[12];
      int count = 0;
      for (int n = report; count == 0 || n > 0; n /= 10)
        digits[count++] = static_cast<char>('0' + n % 10);
      for (int i = 0; i < count; ++i) report_digits[i] = digits[count - 1 - i];
    }
    if (sandbox) {
      const int error = sandbox->Confine();  // the last step: the filter refuses what came before
      if (error != 0) {
        errno = error;
        Fail(report, kStepConfine);
      }
    }
    execve(argv[0], argv.data(), envp.data());
    Fail(report, kStepExec);
  }

  setpgid(pid, pid);  // also in the parent, so a signal to the group never races the child
  status_write.Reset();
  lifeline_read.Reset();
  int report[2] = {0, 0};
  ssize_t got;
  do {
    got = read(status_read.get(), report, sizeof(report));
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    int wait_status = 0;
    waitpid(pid, &wait_status, 0);
    const int error = report[1];
    const bool init_failed = report[0] == kStepExec && under_init;  // the init's own exec
    std::string message =
        fmt::format("starting {}: {} failed: {}", init_failed ? spec.init_program : spec.argv[0],
                    StepName(report[0]), std::strerror(error));
    if ((report[0] == kStepExec || report[0] == init_protocol::kStepExec) && error == ENOENT) {
      return NotFound(message);
    }
    return IoError(message);
  }
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int error = errno;
    kill(-pid, SIGKILL);
    int wait_status = 0;
    waitpid(pid, &wait_status, 0);
    return IoError(fmt::format("pidfd_open({}): {}", pid, std::strerror(error)));
  }
  lifeline_write.Reset();
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(io, pid, pidfd));
  child->in_pid_namespace_ = in_namespace;
  child->under_init_ = under_init;
  child->Watch();
  return child;
}

ChildProcess::ChildProcess(boost::asio::io_context& io, pid_t pid, int pidfd)
    : io_(io), pid_(pid), pidfd_(io, pidfd) {}

ChildProcess::~ChildProcess() {
  *alive_ = false;
  if (!exit_status_ && under_init_ && !in_pid_namespace_) {
    // The init ends what is under it, then itself; a SIGKILL after a bound, should it not (a
    // program of its uid may have stopped it).
    kill(pid_, SIGCONT);
    kill(pid_, init_protocol::kHardStopSignal);
    pollfd ended{pidfd_.native_handle(), POLLIN, 0};
    poll(&ended, 1, 2000);
  }
  if (!exit_status_) {
    KillAll();
    int wait_status = 0;
    while (waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
    }
  }
  boost::system::error_code ignored;
  pidfd_.close(ignored);
}

pid_t ChildProcess::program_pid() const {
  if (!under_init_ || exit_status_) return pid_;
  if (program_pid_ > 0) return program_pid_;
  // The init forks the program first, and the kernel lists children in the order they came.
  std::FILE* children =
      std::fopen(fmt::format("/proc/{}/task/{}/children", pid_, pid_).c_str(), "re");
  if (children == nullptr) return pid_;
  long first = 0;
  if (std::fscanf(children, "%ld", &first) == 1 && first > 0) {
    program_pid_ = static_cast<pid_t>(first);
  }
  std::fclose(children);
  return program_pid_ > 0 ? program_pid_ : pid_;
}

void ChildProcess::KillAll() {
  if (exit_status_) return;
  pollfd ended{pidfd_.native_handle(), POLLIN, 0};
  const bool init_alive = poll(&ended, 1, 0) == 0;
  if (under_init_ && init_alive) {
    // Only a group led by the init's child still: a pid that ended may name another by now.
    const pid_t program = program_pid();
    std::FILE* stat =
        program != pid_ ? std::fopen(fmt::format("/proc/{}/stat", program).c_str(), "re") : nullptr;
    char line[512] = {};
    const bool read = stat != nullptr && std::fgets(line, sizeof line, stat) != nullptr;
    if (stat != nullptr) std::fclose(stat);
    const char* close = read ? std::strrchr(line, ')') : nullptr;
    char state = 0;
    long parent = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %ld", &state, &parent) == 2 &&
        parent == pid_) {
      kill(-program, SIGKILL);
    }
  }
  kill(-pid_, SIGKILL);
}

void ChildProcess::SignalGroup(int signal) {
  if (exit_status_) return;
  if (signal == SIGKILL && under_init_ && !in_pid_namespace_) {
    kill(pid_, SIGCONT);
    kill(pid_, init_protocol::kHardStopSignal);
    return;
  }
  kill(-pid_, signal);
}

void ChildProcess::Watch() {
  pidfd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [this, alive = alive_](boost::system::error_code ec) {
                      if (!*alive || ec) return;
                      Reap();
                    });
}

void ChildProcess::Reap() {
  // The pidfd is readable: the child has exited. Whatever it left in its group goes with it, killed
  // while the unreaped leader still holds the group's id, so the id cannot name another group.
  kill(-pid_, SIGKILL);
  int wait_status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &wait_status, WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == 0) return Watch();  // not reapable yet: wait again
  exit_status_ = reaped == pid_ ? wait_status : 0;
  if (on_exit_) on_exit_(*exit_status_);
}

void ChildProcess::OnExit(ExitCallback callback) {
  on_exit_ = std::move(callback);
  if (exit_status_) {
    boost::asio::post(io_, [this, alive = alive_] {
      if (*alive && on_exit_) on_exit_(*exit_status_);
    });
  }
}

Status ProbeSandbox(const std::string& root_dir) {
  boost::asio::io_context io;
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.working_dir = "/tmp";
  if (::geteuid() == 0) spec.identity = ProcessIdentity{65534, 65534};  // nobody
  spec.sandbox = SandboxSpec{.root_dir = root_dir};
  auto child = ChildProcess::Spawn(io, spec);
  if (!child.ok()) return child.status();
  std::optional<int> ended;
  (*child)->OnExit([&ended](int wait_status) { ended = wait_status; });
  while (!ended && io.run_one() > 0) {
  }
  if (!ended) return Internal("the sandbox probe's exit was never seen");
  if (!WIFEXITED(*ended) || WEXITSTATUS(*ended) != 0) {
    return Internal(fmt::format("/bin/true in the sandbox {}", DescribeWaitStatus(*ended)));
  }
  return Status::Ok();
}

}  // namespace gshare
