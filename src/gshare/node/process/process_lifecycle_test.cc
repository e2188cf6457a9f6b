// The life of function processes under the ProcessHost: start, ready, stop; a crash and the
// restart backoff that follows it; a crash loop; a start that fails; a readiness timeout; the
// health watch; a stop during a restart delay; a function that ignores SIGTERM. The processes are
// the tests' own (lifecycle_test_function), ended by pid or by the host.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "gshare/net/unix_http.h"
#include "gshare/node/process/process_host.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Whether this process may make PID namespaces (root with CAP_SYS_ADMIN: not in every container).
bool PidNamespacesAllowed() {
  const pid_t child = ::fork();
  if (child == 0) _exit(::unshare(CLONE_NEWPID) == 0 ? 0 : 1);
  int status = 0;
  return child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

class NoRequests final : public RequestSource {
 public:
  const InferRequest* Input(RequestId) override { return nullptr; }
  void Answer(RequestId, InferResponse) override {}
  void Fail(RequestId, const Status&) override {}
};

class ProcessLifecycleTest : public ::testing::Test {
 protected:
  struct Seen {
    bool ready = false;
    std::optional<Status> exit;
  };

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("lifecycle-{}", ::getpid());
    std::filesystem::create_directories(dir_ / "run");
    ::chmod(dir_.c_str(), 0755);
    ::chmod((dir_ / "run").c_str(), 0755);
    options_.run_dir = (dir_ / "run").string();
    options_.ready_poll = milliseconds(5);
    options_.restart_backoff_initial = milliseconds(40);
    options_.restart_backoff_max = milliseconds(160);
    options_.max_crashes = 3;
    options_.stable_after = std::chrono::hours(1);
    options_.stop_grace = milliseconds(100);
    options_.init_program = GSHARE_INIT_PROGRAM;  // as every composition of the host has it
  }
  void TearDown() override {
    host_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void MakeHost(std::vector<std::string> flags = {}) {
    InstanceCommand command;
    command.argv = {LIFECYCLE_TEST_FUNCTION};
    for (auto& flag : flags) command.argv.push_back(flag);
    command.name = "life";
    command.model = "life";
    command.tenant = "t";
    host_ = std::make_unique<ProcessHost>(clock_, std::vector<InstanceCommand>{command}, requests_,
                                          options_);
  }

  Status Start(InstanceId id) {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
      return IoError("socketpair");
    }
    node_ends_[id] = UniqueFd(ends[0]);
    InstanceLaunch launch;
    launch.instance = id;
    launch.function = 0;
    launch.control = UniqueFd(ends[1]);
    launch.on_ready = [this, id](std::int64_t) { seen_[id].ready = true; };
    launch.on_exit = [this, id](Status status) { seen_[id].exit = status; };
    return host_->Start(std::move(launch));
  }

  // Runs the loop until `done` holds; the bound only guards against a hang.
  template <typename Done>
  bool RunUntil(Done done) {
    const auto guard = Clock::now() + std::chrono::seconds(60);
    while (!done()) {
      if (Clock::now() > guard) return false;
      if (loop_.stopped()) loop_.restart();  // it stops whenever it runs out of work
      loop_.run_one_for(milliseconds(50));
    }
    return true;
  }
  bool Ready(InstanceId id) {
    return RunUntil([&] { return seen_[id].ready || seen_[id].exit.has_value(); }) &&
           seen_[id].ready;
  }
  bool Ended(InstanceId id) {
    return RunUntil([&] { return seen_[id].exit.has_value(); });
  }

  std::string Socket(InstanceId id) const {
    return (dir_ / "run" / "instances" / std::to_string(id) / "socket").string();
  }
  Result<net::HttpResponse> Send(InstanceId id, const std::string& method,
                                 const std::string& target) {
    std::optional<Result<net::HttpResponse>> answer;
    net::SendUnixHttpRequest(
        loop_, Socket(id), {method, target, "", ""}, milliseconds(10000), {},
        [&](Result<net::HttpResponse> got) { answer.emplace(std::move(got)); });
    RunUntil([&] { return answer.has_value(); });
    return answer.value_or(Result<net::HttpResponse>(Internal("no answer")));
  }

  // Crashes the ready instance `id` (exit status 3) and waits for the host to see its end.
  void Crash(InstanceId id) {
    ASSERT_TRUE(Ready(id)) << id;
    (void)Send(id, "POST", "/test/crash");
    ASSERT_TRUE(Ended(id));
    ASSERT_FALSE(seen_[id].exit->ok());
    EXPECT_NE(seen_[id].exit->message().find("exited with status 3"), std::string::npos)
        << seen_[id].exit->ToString();
  }

  std::filesystem::path dir_;
  boost::asio::io_context loop_;
  // Real processes start and end in real time: the host's delays are the machine's steady clock.
  SteadyLoopClock clock_{loop_};
  NoRequests requests_;
  ProcessHostOptions options_;
  std::unique_ptr<ProcessHost> host_;
  std::map<InstanceId, UniqueFd> node_ends_;
  std::map<InstanceId, Seen> seen_;
};

TEST_F(ProcessLifecycleTest, StartReadyStop) {
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1));
  EXPECT_EQ(host_->running(), 1u);
  ASSERT_EQ(host_->ready_pids().size(), 1u);
  // Its identity: the tenant's uid (as root), not dumpable, the control channel as descriptor 3.
  auto identity = Send(1, "GET", "/test/identity");
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  const uid_t uid = host_->UidOf("t");
  EXPECT_EQ(identity->body, fmt::format("{} {} 0 1", uid, uid));
  if (::geteuid() == 0 && options_.distinct_uids) {
    EXPECT_NE(uid, 0u);
  }
  if (PidNamespacesAllowed()) {  // in a PID namespace of its own, the first child of its init
    std::ifstream status(fmt::format("/proc/{}/status", host_->ready_pids().front()));
    std::string line;
    std::string nspid;
    while (std::getline(status, line)) {
      if (line.starts_with("NSpid:")) nspid = line;
    }
    EXPECT_TRUE(nspid.ends_with("\t2")) << nspid;
  }
  host_->Stop(1);
  ASSERT_TRUE(Ended(1));
  EXPECT_TRUE(seen_[1].exit->ok()) << seen_[1].exit->ToString();
  EXPECT_EQ(host_->running(), 0u);
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run" / "logs" / "t" / "life.log"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run" / "instances" / "1"));
}

// What a tenant's uid left in the shared folders goes with its last instance; what other uids
// own stays; a link is removed as itself. The function's log goes when its command does.
TEST_F(ProcessLifecycleTest, ATenantsLeftoversInSharedFoldersGoWithItsLastInstance) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: tenants have uids of their own only then";
  const std::filesystem::path shm = dir_ / "shm";
  std::filesystem::create_directories(shm);
  ::chmod(shm.c_str(), 01777);
  options_.tenant_shared_folders = {shm.string()};
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Start(2).ok());
  ASSERT_TRUE(Ready(1) && Ready(2));
  const uid_t uid = host_->UidOf("t");
  ASSERT_NE(uid, 0u);
  const auto make = [&](const std::string& name, uid_t owner, bool folder) {
    const std::filesystem::path path = shm / name;
    if (folder) {
      std::filesystem::create_directories(path / "inside");
    } else {
      std::ofstream(path) << "x";
    }
    ASSERT_EQ(::lchown(path.c_str(), owner, owner), 0);
  };
  make("tenant-file", uid, false);
  make("tenant-folder", uid, true);
  make("other-file", uid + 1, false);
  make("root-file", 0, false);
  std::filesystem::create_symlink(dir_ / "run", shm / "tenant-link");
  ASSERT_EQ(::lchown((shm / "tenant-link").c_str(), uid, uid), 0);

  host_->Stop(1);
  ASSERT_TRUE(Ended(1));
  host_->WaitForCleanups();
  EXPECT_TRUE(std::filesystem::exists(shm / "tenant-file"));  // instance 2 still runs
  host_->Stop(2);
  ASSERT_TRUE(Ended(2));
  host_->WaitForCleanups();
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(shm)) {
    left.insert(entry.path().filename().string());
  }
  EXPECT_EQ(left, (std::set<std::string>{"other-file", "root-file"}));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run"));  // the link's target is untouched

  EXPECT_TRUE(std::filesystem::exists(dir_ / "run" / "logs" / "t" / "life.log"));
  host_->RemoveCommand(0);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run" / "logs" / "t"));
}

// Where an instance runs outside a PID namespace, what escaped it is found by its uid: when the
// tenant's last instance ends, every process of the uid is ended. (The range is this test's own,
// so that no other test's processes share the uid.)
TEST_F(ProcessLifecycleTest, WithoutANamespaceTheUidsProcessesEndWithItsLastInstance) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: tenants have uids of their own only then";
  options_.pid_namespaces = false;
  options_.kill_uid_leftovers = true;
  options_.first_uid = 200000 + static_cast<uid_t>(::getpid() % 10000) * 10;
  options_.uid_count = 10;
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1));
  const uid_t uid = host_->UidOf("t");
  ASSERT_GE(uid, options_.first_uid);
  // A process of the tenant's uid that is no instance's: what a setsid child would leave.
  const pid_t stray = ::fork();
  if (stray == 0) {
    if (::setresuid(uid, uid, uid) != 0) _exit(126);
    ::execl("/bin/sleep", "sleep", "86400", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(stray, 0);
  const auto runs_as_uid = [&] {
    std::ifstream status(fmt::format("/proc/{}/status", stray));
    std::string line;
    while (std::getline(status, line)) {
      if (line.starts_with("Uid:")) return line.find(std::to_string(uid)) != std::string::npos;
    }
    return false;
  };
  ASSERT_TRUE(RunUntil(runs_as_uid));
  host_->Stop(1);
  ASSERT_TRUE(Ended(1));
  // Killed before the instance's end was reported: it is ours to reap.
  int status = 0;
  pid_t reaped = 0;
  ASSERT_TRUE(RunUntil([&] {
    reaped = ::waitpid(stray, &status, WNOHANG);
    return reaped != 0;
  }));
  ASSERT_EQ(reaped, stray);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST_F(ProcessLifecycleTest, CrashesRestartWithDoublingBackoffUntilACrashLoop) {
  // A crash loop is held for restart_backoff_max: long enough that a slow machine still sees it.
  options_.restart_backoff_max = std::chrono::seconds(2);
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  Crash(1);
  RestartState after = host_->FunctionRestarts(0);
  EXPECT_EQ(after.consecutive_crashes, 1);
  EXPECT_EQ(after.next_delay, milliseconds(40));
  EXPECT_FALSE(after.crash_loop);

  // Each next instance is spawned no earlier than the backoff after the last crash (a timer never
  // fires early), and the backoff doubles: 40, 80, 160 ms.
  for (InstanceId id = 2; id <= 4; ++id) {
    const RestartState before = host_->FunctionRestarts(0);
    ASSERT_TRUE(Start(id).ok());
    ASSERT_TRUE(Ready(id)) << id;
    const auto spawned = host_->SpawnedAt(id);
    ASSERT_TRUE(spawned.has_value());
    EXPECT_GE(*spawned - before.last_crash, before.next_delay) << id;
    Crash(id);
    EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, static_cast<int>(id));
  }
  EXPECT_EQ(host_->FunctionRestarts(0).next_delay, options_.restart_backoff_max);

  // 4 crashes in a row, past max_crashes (3): a crash loop. Start refuses, naming it.
  ASSERT_TRUE(host_->FunctionRestarts(0).crash_loop);
  const Status refused = Start(5);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("crash loop"), std::string::npos) << refused.ToString();
  EXPECT_NE(refused.message().find("logs/t/life.log"), std::string::npos) << refused.ToString();
  EXPECT_EQ(host_->running(), 0u);

  // After restart_backoff_max since the last crash, one try is allowed; a clean stop after it was
  // ready forgets the crashes.
  bool waited = false;
  LoopTimer wait = clock_.At(
      host_->FunctionRestarts(0).last_crash + options_.restart_backoff_max + milliseconds(1),
      [&] { waited = true; });
  ASSERT_TRUE(RunUntil([&] { return waited; }));
  EXPECT_FALSE(host_->FunctionRestarts(0).crash_loop);
  ASSERT_TRUE(Start(6).ok());
  ASSERT_TRUE(Ready(6));
  host_->Stop(6);
  ASSERT_TRUE(Ended(6));
  EXPECT_TRUE(seen_[6].exit->ok());
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 0);
}

TEST_F(ProcessLifecycleTest, AStartThatFailsIsACrashAndNeverReady) {
  MakeHost({"--crash-at-start"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ended(1));
  EXPECT_FALSE(seen_[1].ready);
  EXPECT_NE(seen_[1].exit->message().find("exited with status 4"), std::string::npos)
      << seen_[1].exit->ToString();
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 1);
}

// A function that puts a symlink where its socket should be (to a socket of its own here; it could
// name another tenant's) is never connected to through it: the host opens the path without
// following links, finds no socket of the instance's own, and kills it.
TEST_F(ProcessLifecycleTest, ASymlinkInPlaceOfTheSocketIsRefused) {
  MakeHost({"--symlink-socket"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ended(1));
  EXPECT_FALSE(seen_[1].ready);
  EXPECT_EQ(seen_[1].exit->code(), StatusCode::kPermissionDenied) << seen_[1].exit->ToString();
  EXPECT_NE(seen_[1].exit->message().find("not a socket of its own"), std::string::npos)
      << seen_[1].exit->ToString();
}

// A function that makes its socket again after the node first connected (a loader that answers
// 503 first) is still reached: a failed connection makes the node open the path afresh.
TEST_F(ProcessLifecycleTest, ASocketMadeAgainIsReachedAgain) {
  MakeHost({"--rebind-socket"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1)) << (seen_[1].exit ? seen_[1].exit->ToString() : "");
}

TEST_F(ProcessLifecycleTest, AMissingProgramIsRefusedAtStart) {
  InstanceCommand command;
  command.argv = {(dir_ / "no-such-program").string()};
  command.name = "missing";
  host_ = std::make_unique<ProcessHost>(clock_, std::vector<InstanceCommand>{command}, requests_,
                                        options_);
  const Status status = Start(1);
  EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.ToString();
  EXPECT_NE(status.message().find("no-such-program"), std::string::npos);
  EXPECT_EQ(host_->running(), 0u);
  loop_.poll();
  EXPECT_FALSE(seen_[1].exit.has_value());  // refused: no callback
}

TEST_F(ProcessLifecycleTest, NotReadyInTimeIsKilledAsACrash) {
  options_.ready_timeout = milliseconds(200);
  MakeHost({"--never-ready"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ended(1));
  EXPECT_FALSE(seen_[1].ready);
  EXPECT_EQ(seen_[1].exit->code(), StatusCode::kDeadlineExceeded) << seen_[1].exit->ToString();
  EXPECT_NE(seen_[1].exit->message().find("not ready within 200 ms"), std::string::npos);
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 1);
  EXPECT_EQ(host_->running(), 0u);
}

TEST_F(ProcessLifecycleTest, TheHealthWatchKillsAnInstanceThatStopsAnsweringReady) {
  options_.health_interval = milliseconds(20);
  options_.health_failures = 2;
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1));
  auto answer = Send(1, "POST", "/test/unhealthy");
  ASSERT_TRUE(answer.ok());
  ASSERT_TRUE(Ended(1));
  EXPECT_EQ(seen_[1].exit->code(), StatusCode::kUnavailable);
  EXPECT_NE(seen_[1].exit->message().find("failed 2 health checks in a row"), std::string::npos)
      << seen_[1].exit->ToString();
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 1);
}

TEST_F(ProcessLifecycleTest, AStoppedProcessIsKilledAfterTheGraceWhenItIgnoresSigterm) {
  MakeHost({"--ignore-sigterm"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1));
  const pid_t pid = host_->ready_pids().front();
  host_->Stop(1);
  ASSERT_TRUE(Ended(1));
  EXPECT_TRUE(seen_[1].exit->ok());  // a stop, not a crash
  EXPECT_EQ(::kill(pid, 0), -1);     // reaped: the pid is gone
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 0);
}

// Outside a PID namespace, a program that keeps its init stopped (they share a uid) and ignores
// SIGTERM: the init cannot carry out the hard stop, so after another grace the host kills the
// program's group and the init.
TEST_F(ProcessLifecycleTest, AProgramThatStopsItsInitIsStillEnded) {
  options_.pid_namespaces = false;
  MakeHost({"--ignore-sigterm", "--stop-parent"});
  ASSERT_TRUE(Start(1).ok());
  ASSERT_TRUE(Ready(1));
  const pid_t pid = host_->ready_pids().front();
  host_->Stop(1);
  ASSERT_TRUE(Ended(1));
  EXPECT_TRUE(seen_[1].exit->ok()) << seen_[1].exit->ToString();  // a stop, not a crash
  // Killed with its init (a SIGKILL takes effect soon after it is sent), then reaped by the
  // host's init when it does: gone, or a zombie.
  const auto dead = [pid] {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    const std::size_t close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z';
  };
  EXPECT_TRUE(RunUntil(dead));
}

TEST_F(ProcessLifecycleTest, AStopDuringTheRestartDelayCancelsTheStart) {
  options_.restart_backoff_initial = std::chrono::seconds(30);
  options_.restart_backoff_max = std::chrono::seconds(60);
  MakeHost();
  ASSERT_TRUE(Start(1).ok());
  Crash(1);
  ASSERT_TRUE(Start(2).ok());  // waits 30 s before its spawn
  EXPECT_FALSE(host_->SpawnedAt(2).has_value());
  EXPECT_EQ(host_->running(), 0u);
  host_->Stop(2);
  ASSERT_TRUE(Ended(2));
  EXPECT_TRUE(seen_[2].exit->ok());
  EXPECT_FALSE(seen_[2].ready);
  EXPECT_EQ(host_->running(), 0u);
  EXPECT_EQ(host_->FunctionRestarts(0).consecutive_crashes, 1);  // nothing ran: still counted
}

}  // namespace
}  // namespace gshare
