// gshare-init: the first process of every function instance (ChildProcess runs the function's
// program under it; init_protocol.h has the command line).
//
//   gshare-init --report-fd=N -- PROGRAM [ARG...]
//
// It forks PROGRAM in a process group of its own and then only waits:
//  - it reaps every process that ends under it: it is a child subreaper (PR_SET_CHILD_SUBREAPER),
//    so whatever PROGRAM starts and leaves behind becomes its child, and in a PID namespace of
//    its own it is the namespace's init anyway; no zombie stays for the function's life;
//  - it passes SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR2 on to PROGRAM's group (and to PROGRAM
//    where it left it);
//  - when PROGRAM ends, or on init_protocol::kHardStopSignal, it ends everything left under it
//    with SIGKILL: in a PID namespace every process there (kill(-1)); outside one, its children,
//    round after round, as each killed one's own children come to it, until it has none (a
//    process that left its group or session with setsid included);
//  - then it ends as PROGRAM did: its exit status, or its signal (outside a PID namespace; the
//    init of one cannot be ended by its own signal, and exits with 128 + the signal).
// It is small and single-threaded, links nothing of the node, and keeps no descriptor of the
// node's: the ones passed to PROGRAM are closed in it once PROGRAM is started.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/node/process/init_protocol.h"

namespace {

namespace protocol = gshare::init_protocol;

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2};

[[noreturn]] void Fail(int report_fd, int step, const char* what) {
  const int report[2] = {step, errno};
  std::fprintf(stderr, "gshare-init: %s: %s\n", what, std::strerror(errno));
  if (report_fd >= 0) {
    [[maybe_unused]] const ssize_t written = write(report_fd, report, sizeof(report));
  }
  _exit(127);
}

void Ignore(int) {}

// The pids of this process's children, from /proc (the kernel's list of them where it has one,
// else every process's parent).
std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  const pid_t self = getpid();
  const std::string listed = "/proc/self/task/" + std::to_string(self) + "/children";
  if (FILE* file = std::fopen(listed.c_str(), "re")) {
    long pid = 0;
    while (std::fscanf(file, "%ld", &pid) == 1) out.push_back(static_cast<pid_t>(pid));
    std::fclose(file);
    return out;
  }
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    const std::string stat = "/proc/" + std::string(entry->d_name) + "/stat";
    FILE* file = std::fopen(stat.c_str(), "re");
    if (file == nullptr) continue;
    char line[512] = {};
    const bool read = std::fgets(line, sizeof line, file) != nullptr;
    std::fclose(file);
    // "pid (comm) state ppid ...": the name may hold spaces and parentheses, so after the last ')'.
    const char* close = read ? std::strrchr(line, ')') : nullptr;
    char state = 0;
    long parent = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %ld", &state, &parent) == 2 &&
        parent == self) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return out;
}

// Ends everything under this process and reaps it; records the program's status when it is
// reaped here.
void EndAll(bool in_namespace, pid_t program, int& program_status, bool& program_done) {
  for (;;) {
    if (in_namespace) {
      kill(-1, SIGKILL);  // every process of the namespace but its init
    } else {
      for (const pid_t child : Children()) kill(child, SIGKILL);
      if (!program_done) {  // not reaped yet, so its pid names it still (/proc may not list it)
        kill(-program, SIGKILL);
        kill(program, SIGKILL);
      }
    }
    int status = 0;
    const pid_t reaped = waitpid(-1, &status, 0);
    if (reaped < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: nothing is left
    }
    if (reaped == program && !program_done) {
      program_status = status;
      program_done = true;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int report_fd = -1;
  int first = 1;
  if (first < argc && std::string_view(argv[first]).starts_with(protocol::kReportFlag)) {
    report_fd = std::atoi(argv[first] + protocol::kReportFlag.size());
    ++first;
  }
  if (report_fd >= 0) fcntl(report_fd, F_SETFD, FD_CLOEXEC);  // PROGRAM's exec closes it
  if (first >= argc || std::string_view(argv[first]) != "--" || first + 1 >= argc) {
    errno = EINVAL;
    Fail(report_fd, protocol::kStepArguments,
         "usage: gshare-init [--report-fd=N] -- PROGRAM [ARG...]");
  }
  char** program_argv = argv + first + 1;
  const bool in_namespace = getpid() == 1;
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

  // Handlers (that do nothing) so that the signals reach the init of a PID namespace; blocked,
  // so that they are taken one at a time by sigwaitinfo.
  sigset_t waited;
  sigemptyset(&waited);
  struct sigaction ignore {};
  ignore.sa_handler = Ignore;
  sigemptyset(&ignore.sa_mask);
  for (const int signal : kForwarded) sigaddset(&waited, signal);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, protocol::kHardStopSignal);
  for (int signal = 1; signal < NSIG; ++signal) {
    if (sigismember(&waited, signal) == 1) sigaction(signal, &ignore, nullptr);
  }
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &waited, &previous);

  // The program starts only once this process holds no copy of the report pipe: the node reads
  // it to its end, and a program that stopped its init before the init closed its copy would
  // hold the node there. The child waits for the end of `go`, which the init closes after it.
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) Fail(report_fd, protocol::kStepFork, "pipe2");
  const pid_t self = getpid();
  const pid_t program = fork();
  if (program < 0) Fail(report_fd, protocol::kStepFork, "fork");
  if (program == 0) {
    close(go[1]);
    char ignored = 0;
    while (read(go[0], &ignored, 1) < 0 && errno == EINTR) {
    }
    close(go[0]);
    setpgid(0, 0);
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    for (int signal = 1; signal < NSIG; ++signal) {
      if (sigismember(&waited, signal) == 1) sigaction(signal, &fallback, nullptr);
    }
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    // The program does not outlive its init (an init ended by a SIGKILL takes it along).
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != self) _exit(127);
    execv(program_argv[0], program_argv);
    Fail(report_fd, protocol::kStepExec, program_argv[0]);
  }
  setpgid(program, program);  // here too, so a signal to the group never races the child
  // No descriptor but the standard ones stays in the init: the report pipe closes when PROGRAM
  // has exec'd, and the descriptors passed to PROGRAM are its alone. `go` closes last.
  if (report_fd >= 0) close(report_fd);
  close(go[0]);
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != go[1]) close(fd);
  }
  if (syscall(SYS_close_range, 1024u, ~0u, 0u) != 0) {
    // an old kernel: whatever lies above 1024 stays (the node passes descriptors from 3 on)
  }
  close(go[1]);

  int program_status = 0;
  bool program_done = false;
  while (!program_done) {
    siginfo_t info{};
    const int signal = sigwaitinfo(&waited, &info);
    if (signal < 0) continue;  // EINTR
    if (signal == SIGCHLD) {
      int status = 0;
      pid_t reaped;
      while ((reaped = waitpid(-1, &status, WNOHANG)) > 0) {
        if (reaped == program) {
          program_status = status;
          program_done = true;
        }
      }
    } else if (signal == protocol::kHardStopSignal) {
      break;
    } else {
      kill(-program, signal);
      if (getpgid(program) != program) kill(program, signal);
    }
  }
  EndAll(in_namespace, program, program_status, program_done);

  if (WIFSIGNALED(program_status)) {
    const int signal = WTERMSIG(program_status);
    if (!in_namespace) {
      struct sigaction fallback {};
      fallback.sa_handler = SIG_DFL;
      sigemptyset(&fallback.sa_mask);
      sigaction(signal, &fallback, nullptr);
      sigset_t just;
      sigemptyset(&just);
      sigaddset(&just, signal);
      sigprocmask(SIG_UNBLOCK, &just, nullptr);
      kill(self, signal);
    }
    return 128 + signal;
  }
  return WIFEXITED(program_status) ? WEXITSTATUS(program_status) : 1;
}
