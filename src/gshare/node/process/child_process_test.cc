#include "gshare/node/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace gshare {
namespace {

class ChildProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gshare-process-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    log_ = dir_ + "/function.log";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ProcessSpec Shell(const std::string& script) {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.log_path = log_;
    return spec;
  }

  // Runs the loop until the child exits; the bound only guards against a hang.
  int WaitForExit(ChildProcess& child) {
    std::optional<int> status;
    child.OnExit([&](int s) { status = s; });
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    io_.restart();
    while (!status && std::chrono::steady_clock::now() < guard) {
      io_.run_one_for(std::chrono::seconds(1));
    }
    EXPECT_TRUE(status.has_value()) << "child did not exit";
    return status.value_or(-1);
  }

  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  boost::asio::io_context io_;
  std::string dir_;
  std::string log_;
};

TEST_F(ChildProcessTest, ExitStatusAndLogsAppended) {
  { std::ofstream(log_) << "earlier\n"; }
  auto child = ChildProcess::Spawn(io_, Shell("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_TRUE((*child)->exited());
  EXPECT_EQ(Log(), "earlier\nout\nerr\n");
}

TEST_F(ChildProcessTest, SetupFailuresAreReported) {
  ProcessSpec missing = Shell("true");
  missing.argv = {dir_ + "/no-such-program"};
  auto not_found = ChildProcess::Spawn(io_, missing);
  ASSERT_FALSE(not_found.ok());
  EXPECT_EQ(not_found.status().code(), StatusCode::kNotFound);
  EXPECT_NE(not_found.status().message().find("execve"), std::string::npos);

  ProcessSpec bad_dir = Shell("true");
  bad_dir.working_dir = dir_ + "/no-such-dir";
  auto no_dir = ChildProcess::Spawn(io_, bad_dir);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("chdir"), std::string::npos);

  EXPECT_FALSE(ChildProcess::Spawn(io_, ProcessSpec{}).ok());
}

TEST_F(ChildProcessTest, WorkingDirEnvironmentAndLimits) {
  ProcessSpec spec = Shell("pwd; echo \"$GREETING\"; ulimit -c; ulimit -n");
  spec.working_dir = dir_;
  spec.env.emplace_back("GREETING", "hello");
  spec.limits.open_files = 77;
  auto child = ChildProcess::Spawn(io_, spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(Log(), dir_ + "\nhello\n0\n77\n");
}

TEST_F(ChildProcessTest, OwnProcessGroupAndSignalToTheGroup) {
  // The shell starts a grandchild in the background: the group signal must reach it too.
  auto child = ChildProcess::Spawn(io_, Shell("sleep 1000 & echo $!; wait"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const pid_t pid = (*child)->pid();
  EXPECT_EQ(getpgid(pid), pid);
  (*child)->SignalGroup(SIGTERM);
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST_F(ChildProcessTest, PassedDescriptorsGetTheirNumbersAndNoOtherCrosses) {
  // Descriptors of the node without close-on-exec (as a library might leave them) stay behind.
  int leaked[2];
  ASSERT_EQ(pipe(leaked), 0);
  int passed[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, passed), 0);
  ProcessSpec spec = Shell("ls /proc/$$/fd; test -S /proc/$$/fd/3 && echo socket");
  spec.pass_fds = {passed[1]};
  auto child = ChildProcess::Spawn(io_, spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(Log(), "0\n1\n2\n3\nsocket\n");
  for (const int fd : {leaked[0], leaked[1], passed[0], passed[1]}) close(fd);
}

TEST_F(ChildProcessTest, TheWorkingFolderIsEnteredWithTheFunctionsRights) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch uid";
  const std::string closed = dir_ + "/root-only";
  ASSERT_EQ(mkdir(closed.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  ProcessSpec spec = Shell("pwd");
  spec.identity = ProcessIdentity{70123, 70123};
  spec.working_dir = closed;
  auto child = ChildProcess::Spawn(io_, spec);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("chdir failed"), std::string::npos)
      << child.status().ToString();
}

TEST_F(ChildProcessTest, DestructorKillsTheGroup) {
  pid_t pid = 0;
  {
    auto child = ChildProcess::Spawn(io_, Shell("exec sleep 1000"));
    ASSERT_TRUE(child.ok());
    pid = (*child)->pid();
    EXPECT_EQ(kill(pid, 0), 0);
  }
  // Reaped by the destructor: the pid no longer names our child.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(ChildProcessTest, SwitchesToTheGivenIdentityWhenRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch uid";
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);  // the function's uid may enter, not list
  ProcessSpec spec = Shell("id -u; id -g; id -G");
  spec.identity = ProcessIdentity{70123, 70123};
  auto child = ChildProcess::Spawn(io_, spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Log(), "70123\n70123\n70123\n");  // no supplementary groups kept
}

// A child that starts a process outside its group (setsid), which tells its pid through the
// passed pipe and keeps the pipe's write end open for as long as it lives. Returns the pipe's
// read end once that process has written (nothing when it did not within the guard).
struct Leftover {
  int read_fd = -1;
  pid_t pid = 0;  // as the leftover saw it: the host's pid only outside a PID namespace
};
std::optional<Leftover> SpawnWithLeftover(ProcessSpec& spec, boost::asio::io_context& io,
                                          std::unique_ptr<ChildProcess>& child) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  spec.argv = {"/bin/sh", "-c",
               "setsid sh -c 'echo $$ >&3; exec sleep 86400' </dev/null & exec sleep 86400"};
  spec.pass_fds = {fds[1]};
  auto spawned = ChildProcess::Spawn(io, spec);
  close(fds[1]);
  if (!spawned.ok()) {
    ADD_FAILURE() << spawned.status().ToString();
    close(fds[0]);
    return std::nullopt;
  }
  child = std::move(spawned).value();
  pollfd readable{fds[0], POLLIN, 0};
  char text[32] = {};
  if (poll(&readable, 1, 60'000) != 1 || read(fds[0], text, sizeof text - 1) <= 0) {
    close(fds[0]);
    return std::nullopt;
  }
  return Leftover{fds[0], static_cast<pid_t>(std::atoi(text))};
}

// Whether every holder of the pipe's write end is gone (the read end hangs up), now.
bool HungUp(int read_fd) {
  pollfd end{read_fd, POLLIN, 0};
  return poll(&end, 1, 0) == 1 && (end.revents & POLLHUP) != 0;
}

// In a PID namespace of its own the child is init: once it is gone (killed and reaped by the
// destructor), so is the process it left outside its group, which was in its namespace. Its pid is
// the host's view, and its identity is switched as without one.
TEST_F(ChildProcessTest, InAPidNamespaceNothingOutlivesTheChild) {
  if (geteuid() != 0) GTEST_SKIP() << "a PID namespace needs root";
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  ProcessSpec spec = Shell("");
  spec.pid_namespace = true;
  spec.identity = ProcessIdentity{70123, 70123};
  std::unique_ptr<ChildProcess> child;
  const std::optional<Leftover> leftover = SpawnWithLeftover(spec, io_, child);
  ASSERT_TRUE(leftover) << Log();
  if (!child->in_pid_namespace()) {
    kill(leftover->pid, SIGKILL);  // outside a namespace its pid is the host's
    close(leftover->read_fd);
    GTEST_SKIP() << "the kernel refused a PID namespace (root without CAP_SYS_ADMIN?)";
  }
  std::ifstream status("/proc/" + std::to_string(child->pid()) + "/status");
  std::string line;
  std::string nspid;
  std::string uid;
  while (std::getline(status, line)) {
    if (line.starts_with("NSpid:")) nspid = line;
    if (line.starts_with("Uid:")) uid = line;
  }
  EXPECT_TRUE(nspid.ends_with("\t1")) << nspid;  // init of its namespace
  EXPECT_NE(uid.find("70123"), std::string::npos) << uid;
  EXPECT_FALSE(HungUp(leftover->read_fd));  // alive, holding the pipe
  child.reset();
  EXPECT_TRUE(HungUp(leftover->read_fd));
  close(leftover->read_fd);
}

// Without one (what the kernel leaves an unprivileged node) the process group is all that is
// killed, and a process that left it survives: why instances run in namespaces where they can.
TEST_F(ChildProcessTest, WithoutAPidNamespaceAProcessOutsideTheGroupSurvives) {
  ProcessSpec spec = Shell("");
  std::unique_ptr<ChildProcess> child;
  const std::optional<Leftover> leftover = SpawnWithLeftover(spec, io_, child);
  ASSERT_TRUE(leftover) << Log();
  EXPECT_FALSE(child->in_pid_namespace());
  child.reset();
  EXPECT_FALSE(HungUp(leftover->read_fd));
  ASSERT_GT(leftover->pid, 1);
  kill(leftover->pid, SIGKILL);
  close(leftover->read_fd);
}

// Under gshare-init, without a PID namespace (what an unprivileged node gets): the init is a child
// subreaper, so the process that left the group became its child when its parent ended, and it is
// ended with the child.
TEST_F(ChildProcessTest, UnderTheInitAProcessOutsideTheGroupEndsWithTheChild) {
  ProcessSpec spec = Shell("");
  spec.init_program = GSHARE_INIT_PROGRAM;
  std::unique_ptr<ChildProcess> child;
  const std::optional<Leftover> leftover = SpawnWithLeftover(spec, io_, child);
  ASSERT_TRUE(leftover) << Log();
  EXPECT_FALSE(child->in_pid_namespace());
  EXPECT_FALSE(HungUp(leftover->read_fd));
  child.reset();
  EXPECT_TRUE(HungUp(leftover->read_fd)) << Log();
  if (!HungUp(leftover->read_fd)) kill(leftover->pid, SIGKILL);
  close(leftover->read_fd);
}

// The same when the program ends by itself: what it left goes before its end is reported.
TEST_F(ChildProcessTest, UnderTheInitWhatTheProgramLeftGoesWhenItEnds) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  ProcessSpec spec =
      Shell("setsid sh -c 'echo $$ >&3; exec sleep 86400' </dev/null & exec 3>&-; exit 5");
  spec.init_program = GSHARE_INIT_PROGRAM;
  spec.pass_fds = {fds[1]};
  auto child = ChildProcess::Spawn(io_, spec);
  close(fds[1]);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 5);
  EXPECT_TRUE(HungUp(fds[0])) << Log();  // the setsid process is gone already
  close(fds[0]);
}

// Under the init the node still sees what it saw without: the program's exec failure at Spawn,
// its exit status, its signal; a SIGTERM to the group reaches the program; and no zombie of what
// the program orphaned stays behind.
TEST_F(ChildProcessTest, UnderTheInitStatusSignalsAndErrorsAreTheProgramsOwn) {
  ProcessSpec missing = Shell("true");
  missing.argv = {dir_ + "/no-such-program"};
  missing.init_program = GSHARE_INIT_PROGRAM;
  auto not_found = ChildProcess::Spawn(io_, missing);
  ASSERT_FALSE(not_found.ok());
  EXPECT_EQ(not_found.status().code(), StatusCode::kNotFound);
  EXPECT_NE(not_found.status().message().find("no-such-program"), std::string::npos)
      << not_found.status().ToString();

  ProcessSpec no_init = Shell("true");
  no_init.init_program = dir_ + "/no-such-init";
  auto init_missing = ChildProcess::Spawn(io_, no_init);
  ASSERT_FALSE(init_missing.ok());
  EXPECT_NE(init_missing.status().message().find("no-such-init"), std::string::npos)
      << init_missing.status().ToString();

  EXPECT_NE(Log().find("no-such-program: No such file"), std::string::npos) << Log();
  std::filesystem::remove(log_);
  ProcessSpec exits = Shell("echo out; exit 3");
  exits.init_program = GSHARE_INIT_PROGRAM;
  auto child = ChildProcess::Spawn(io_, exits);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  int status = WaitForExit(**child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(Log(), "out\n");

  // An orphan that ends (its pid on stdout) is reaped by the init while the program still runs.
  std::filesystem::remove(log_);
  ProcessSpec waits = Shell("(sh -c 'echo $$' &); exec sleep 86400");
  waits.init_program = GSHARE_INIT_PROGRAM;
  child = ChildProcess::Spawn(io_, waits);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t orphan = 0;
  while (orphan == 0 && std::chrono::steady_clock::now() < guard) {
    orphan = static_cast<pid_t>(std::atoi(Log().c_str()));
    if (orphan == 0) usleep(1000);
  }
  ASSERT_GT(orphan, 1) << Log();
  const std::string stat = "/proc/" + std::to_string(orphan) + "/stat";
  while (std::filesystem::exists(stat) && std::chrono::steady_clock::now() < guard) usleep(1000);
  EXPECT_FALSE(std::filesystem::exists(stat)) << "the orphan is still there (a zombie?)";
  (*child)->SignalGroup(SIGTERM);
  status = WaitForExit(**child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// In a PID namespace the init is the namespace's first process; the program is its child there.
TEST_F(ChildProcessTest, InAPidNamespaceTheInitIsItsFirstProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "a PID namespace needs root";
  ProcessSpec spec = Shell("");
  spec.pid_namespace = true;
  spec.init_program = GSHARE_INIT_PROGRAM;
  std::unique_ptr<ChildProcess> child;
  const std::optional<Leftover> leftover = SpawnWithLeftover(spec, io_, child);
  ASSERT_TRUE(leftover) << Log();
  if (!child->in_pid_namespace()) {
    kill(leftover->pid, SIGKILL);
    close(leftover->read_fd);
    GTEST_SKIP() << "the kernel refused a PID namespace (root without CAP_SYS_ADMIN?)";
  }
  EXPECT_GT(leftover->pid, 1);  // its pid in the namespace: the init is 1
  EXPECT_FALSE(HungUp(leftover->read_fd));
  child.reset();
  EXPECT_TRUE(HungUp(leftover->read_fd));
  close(leftover->read_fd);
}

}  // namespace
}  // namespace gshare
