// A program the sandbox tests run inside the sandbox: it tries one thing a tenant's code might try
// and says how it went. Exit status 0: refused (or, for the `works` actions, it worked as it
// should); 1: it got through; 2: bad arguments. What happened is printed on stdout.
//
//   read PATH | list PATH | write PATH | connect-tcp PORT | connect-unix PATH | ptrace PID |
//   kill PID | userns | clone-newns | clone3 | mount | bpf | perf | linger | tmp-works | whoami
#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// 0 when `result` is a refusal, 1 when the call got through.
int Refused(const char* what, long result) {
  if (result < 0) {
    std::printf("%s: refused: %s\n", what, std::strerror(errno));
    return 0;
  }
  std::printf("%s: got through\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string action = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (action == "read") return Refused("open for reading", open(arg, O_RDONLY | O_CLOEXEC));
  if (action == "list") {
    DIR* dir = opendir(arg);
    if (dir != nullptr) closedir(dir);
    return Refused("opendir", dir == nullptr ? -1 : 0);
  }
  if (action == "write") {
    return Refused("open for writing", open(arg, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  }
  if (action == "connect-tcp") {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Refused("socket(AF_INET)", fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(arg)));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return Refused("connect to 127.0.0.1",
                   connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address));
  }
  if (action == "connect-unix") {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 2;  // AF_UNIX is allowed: the test expects the socket
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", arg);
    return Refused("connect to a host socket",
                   connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address));
  }
  if (action == "ptrace") {
    return Refused("ptrace attach", ptrace(PTRACE_ATTACH, std::atoi(arg), nullptr, nullptr));
  }
  if (action == "kill") return Refused("kill", kill(std::atoi(arg), SIGKILL));
  if (action == "userns") return Refused("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
  if (action == "clone-newns") {
    const long pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, nullptr, nullptr,
                             nullptr, nullptr);
    if (pid == 0) _exit(0);
    return Refused("clone(CLONE_NEWUSER | CLONE_NEWNS)", pid);
  }
  if (action == "clone3") {
    const long result = syscall(435 /* clone3 */, nullptr, 0);
    if (result < 0 && errno == ENOSYS) {
      std::printf("clone3: ENOSYS\n");
      return 0;
    }
    std::printf("clone3: %s\n", result < 0 ? std::strerror(errno) : "got through");
    return 1;
  }
  if (action == "mount") return Refused("mount tmpfs", mount("none", "/tmp", "tmpfs", 0, nullptr));
  if (action == "bpf") return Refused("bpf", syscall(SYS_bpf, 0, nullptr, 0));
  if (action == "perf") {
    perf_event_attr attributes{};
    attributes.size = sizeof attributes;
    attributes.type = PERF_TYPE_SOFTWARE;
    attributes.config = PERF_COUNT_SW_CPU_CLOCK;
    return Refused("perf_event_open", syscall(SYS_perf_event_open, &attributes, 0, -1, -1, 0));
  }
  if (action == "linger") {
    // A process that leaves its group and would outlive the function: the test looks for it.
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      for (;;) pause();
    }
    std::printf("linger: started\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  if (action == "tmp-works") {
    const int fd = open("/tmp/scratch", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    const bool wrote = fd >= 0 && write(fd, "x", 1) == 1;
    std::printf("/tmp: %s\n", wrote ? "writable" : std::strerror(errno));
    return wrote ? 0 : 1;
  }
  if (action == "whoami") {
    std::printf("uid %d gid %d pid %d\n", static_cast<int>(getuid()), static_cast<int>(getgid()),
                static_cast<int>(getpid()));
    return 0;
  }
  return 2;
}
