// LineChild: a program a test starts and talks to a line at a time, through a pipe to its
// standard input and one from its standard output (its standard error stays the test's).
//
// Ownership: the LineChild owns the process; destroying it kills (SIGKILL) and reaps one still
// running. Threading: one thread at a time. Header-only, for tests.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace gshare::testing {

struct LineChildOptions {
  std::vector<std::string> argv;  // argv[0] is the program's path (no PATH lookup)
  std::vector<std::string> env;   // its whole environment, "NAME=value" each
  int pass_fd = -1;               // when >= 0: the child's fd `pass_as` (inheritable there only)
  int pass_as = 3;
  int uid =
      -1;  // when >= 0: setgroups({}), setgid and setuid to it before exec (exit 121 if refused)
};

class LineChild {
 public:
  // nullptr when the pipes cannot be made or fork fails. A program that cannot be executed exits
  // 127.
  static std::unique_ptr<LineChild> Start(LineChildOptions options) {
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0) return nullptr;
    if (::pipe2(from_child, O_CLOEXEC) != 0) {
      ::close(to_child[0]);
      ::close(to_child[1]);
      return nullptr;
    }
    // Everything the child needs is made before fork: after it, only async-signal-safe calls.
    std::vector<char*> argv, envp;
    for (std::string& arg : options.argv) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (std::string& entry : options.env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      if (options.pass_fd >= 0) ::dup2(options.pass_fd, options.pass_as);  // clears close-on-exec
      if (options.uid >= 0) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(options.uid)) != 0 ||
            ::setuid(static_cast<uid_t>(options.uid)) != 0) {
          ::_exit(121);
        }
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (pid < 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      return nullptr;
    }
    std::unique_ptr<LineChild> child(new LineChild);
    child->pid_ = pid;
    child->in_ = ::fdopen(to_child[1], "w");
    child->out_ = ::fdopen(from_child[0], "r");
    return child;
  }

  ~LineChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (in_ != nullptr) std::fclose(in_);
    if (out_ != nullptr) std::fclose(out_);
  }
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;

  void Send(const std::string& line) {
    std::fprintf(in_, "%s\n", line.c_str());
    std::fflush(in_);
  }
  // The next line, without its newline; what there is (maybe nothing) at the end of the output.
  std::string ReadLine() {
    std::string line;
    for (int c; (c = std::fgetc(out_)) != EOF && c != '\n';) line.push_back(static_cast<char>(c));
    return line;
  }
  std::string Ask(const std::string& line) {
    Send(line);
    return ReadLine();
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Says "quit" and returns the exit's wait status.
  int Quit() {
    Send("quit");
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  LineChild() = default;
  pid_t pid_ = -1;
  std::FILE* in_ = nullptr;
  std::FILE* out_ = nullptr;
};

}  // namespace gshare::testing
