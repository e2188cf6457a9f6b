// The sandbox escapes a tenant's code might try, each asserted refused, with a positive control
// beside each (what the sandbox must still allow). The escapes run in sandbox_escape_probe,
// started by ChildProcess exactly as the node starts a tenant's function: as a uid of its own, in
// the sandbox. Needs root and a kernel that gives it namespaces; skipped elsewhere.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gshare/node/process/child_process.h"
#include "gshare/node/process/seccomp_filter.h"

namespace gshare {
namespace {

constexpr uid_t kTenant = 64001;
constexpr uid_t kNeighbour = 64002;

// Whether this process may make mount namespaces (root with CAP_SYS_ADMIN: not in every
// container).
bool NamespacesAllowed() {
  if (::geteuid() != 0) return false;
  const pid_t child = ::fork();
  if (child == 0) _exit(::unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID) == 0 ? 0 : 1);
  int status = 0;
  return child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The uids of the host's processes with `uid` as their real uid.
int ProcessesOf(uid_t uid) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat info {};
    if (::stat(entry.path().c_str(), &info) == 0 && info.st_uid == uid) ++count;
  }
  return count;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NamespacesAllowed()) GTEST_SKIP() << "needs root with namespaces";
    char pattern[] = "/tmp/gshare-sandbox-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ::chmod(dir_.c_str(), 0755);
    for (const char* folder : {"root", "models/mine", "models/other", "server", "instance"}) {
      std::filesystem::create_directories(dir_ + "/" + folder);
    }
    std::ofstream(dir_ + "/models/mine/model.pt") << "weights";
    ::chmod((dir_ + "/models/mine/model.pt").c_str(), 0644);
    ::chmod((dir_ + "/models").c_str(), 0755);
    ::chmod((dir_ + "/models/mine").c_str(), 0755);
    std::ofstream(dir_ + "/models/other/secret") << "the neighbour's";
    std::ofstream(dir_ + "/server/registry.db") << "keys";
    ::chmod((dir_ + "/instance").c_str(), 0700);
    ASSERT_EQ(::chown((dir_ + "/instance").c_str(), kTenant, kTenant), 0);
    node_umask_ = ::umask(077);  // as the server has it: the sandbox's folders stay passable
  }
  void TearDown() override {
    if (node_umask_) ::umask(*node_umask_);
    children_.clear();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  ProcessSpec Probe(std::vector<std::string> args, uid_t uid = kTenant) {
    ProcessSpec spec;
    spec.argv = {SANDBOX_ESCAPE_PROBE};
    for (auto& arg : args) spec.argv.push_back(std::move(arg));
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.working_dir = "/tmp";
    spec.log_path = fmt::format("{}/log-{}", dir_, ++logs_);
    spec.identity = ProcessIdentity{uid, uid};
    spec.sandbox = SandboxSpec{
        .root_dir = dir_ + "/root",
        .read_only = {std::filesystem::path(SANDBOX_ESCAPE_PROBE).parent_path().string(),
                      dir_ + "/models/mine"},
        .writable = {dir_ + "/instance"},
    };
    return spec;
  }

  struct Outcome {
    int exit = -1;  // the probe's exit status (0: refused)
    std::string said;
  };

  // Runs the probe to its end.
  Outcome Run(std::vector<std::string> args, uid_t uid = kTenant) {
    const ProcessSpec spec = Probe(std::move(args), uid);
    auto child = ChildProcess::Spawn(io_, spec);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return {};
    std::optional<int> status;
    (*child)->OnExit([&](int s) { status = s; });
    io_.restart();
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!status && std::chrono::steady_clock::now() < guard) {
      io_.run_one_for(std::chrono::seconds(1));
    }
    EXPECT_TRUE(status && WIFEXITED(*status)) << "the probe did not end by itself";
    return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, ReadFile(spec.log_path)};
  }

  // Starts a probe that stays (linger) and waits until it says so; its host pid.
  pid_t StartLingering(uid_t uid) {
    const ProcessSpec spec = Probe({"linger"}, uid);
    auto child = ChildProcess::Spawn(io_, spec);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return -1;
    const pid_t pid = (*child)->pid();
    children_.push_back(std::move(child).value());
    // A bounded wait for what it prints (it is a process of its own: nothing else to wait on).
    for (int i = 0; i < 6000 && ReadFile(spec.log_path).find("started") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_NE(ReadFile(spec.log_path).find("started"), std::string::npos);
    return pid;
  }

  std::string dir_;
  std::optional<mode_t> node_umask_;
  int logs_ = 0;
  boost::asio::io_context io_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
};

TEST_F(SandboxTest, TheProbeItselfStartsHere) {
  EXPECT_TRUE(ProbeSandbox(dir_ + "/root").ok()) << ProbeSandbox(dir_ + "/root").ToString();
}

TEST_F(SandboxTest, ReadsItsOwnModelFolderAndNothingOfTheNodeOrOtherTenants) {
  // Positive control: what the sandbox shows it may read ("got through": exit 1).
  EXPECT_EQ(Run({"read", dir_ + "/models/mine/model.pt"}).exit, 1);
  for (const std::string& path : {dir_ + "/models/other/secret", dir_ + "/server/registry.db",
                                  dir_ + "/log-1", std::string("/root")}) {
    const Outcome outcome = Run({"read", path});
    EXPECT_EQ(outcome.exit, 0) << path << ": " << outcome.said;
    EXPECT_NE(outcome.said.find("No such file"), std::string::npos) << path << ": " << outcome.said;
  }
  EXPECT_EQ(Run({"list", dir_ + "/models/other"}).exit, 0);
  EXPECT_EQ(Run({"list", dir_ + "/server"}).exit, 0);
}

TEST_F(SandboxTest, WritesOnlyToItsTmpAndItsInstanceFolder) {
  EXPECT_EQ(Run({"tmp-works"}).exit, 0);
  EXPECT_EQ(Run({"write", dir_ + "/instance/socket"}).exit, 1);  // its own folder: allowed
  for (const std::string& path :
       {dir_ + "/models/mine/planted", std::string("/usr/planted"), std::string("/etc/planted"),
        std::string("/planted"), dir_ + "/planted"}) {
    const Outcome outcome = Run({"write", path});
    EXPECT_EQ(outcome.exit, 0) << path << ": " << outcome.said;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/models/mine/planted"));
  // What it wrote to /tmp was its own tmpfs, not the host's.
  EXPECT_FALSE(std::filesystem::exists("/tmp/scratch") &&
               std::filesystem::last_write_time("/tmp/scratch") >
                   std::filesystem::file_time_type::clock::now() - std::chrono::minutes(1));
}

TEST_F(SandboxTest, HasNoNetworkAndNoHostSocket) {
  // A listener on the host's loopback.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const Outcome tcp = Run({"connect-tcp", std::to_string(ntohs(address.sin_port))});
  EXPECT_EQ(tcp.exit, 0) << tcp.said;
  EXPECT_NE(tcp.said.find("socket(AF_INET): refused"), std::string::npos) << tcp.said;
  ::close(listener);

  const std::string path = dir_ + "/server/socket";
  const int unix_listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un unix_address{};
  unix_address.sun_family = AF_UNIX;
  std::snprintf(unix_address.sun_path, sizeof unix_address.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(unix_listener, reinterpret_cast<sockaddr*>(&unix_address), sizeof unix_address),
            0);
  ASSERT_EQ(::listen(unix_listener, 4), 0);
  ::chmod(path.c_str(), 0777);
  const Outcome host_socket = Run({"connect-unix", path});
  EXPECT_EQ(host_socket.exit, 0) << host_socket.said;
  ::close(unix_listener);
}

TEST_F(SandboxTest, CannotTraceOrSignalANeighbour) {
  const pid_t neighbour = StartLingering(kNeighbour);
  ASSERT_GT(neighbour, 0);
  for (const char* action : {"ptrace", "kill"}) {
    const Outcome outcome = Run({action, std::to_string(neighbour)});
    EXPECT_EQ(outcome.exit, 0) << action << ": " << outcome.said;
  }
  // Not even a process of its own PID namespace can be traced (the filter).
  const Outcome self = Run({"ptrace", "1"});
  EXPECT_EQ(self.exit, 0) << self.said;
  EXPECT_NE(self.said.find("Operation not permitted"), std::string::npos) << self.said;
  EXPECT_EQ(::kill(neighbour, 0), 0);  // the neighbour is still there
}

TEST_F(SandboxTest, MakesNoNamespaceAndReachesNoGuardedKernelCall) {
  for (const char* action : {"userns", "clone-newns", "clone3", "mount", "bpf", "perf"}) {
    const Outcome outcome = Run({action});
    EXPECT_EQ(outcome.exit, 0) << action << ": " << outcome.said;
  }
}

TEST_F(SandboxTest, NothingItStartsOutlivesIt) {
  constexpr uid_t kLingerer = 64003;
  const pid_t pid = StartLingering(kLingerer);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(ProcessesOf(kLingerer), 2);  // the probe and what it left its group with
  children_.clear();                     // the node ends the function
  EXPECT_EQ(ProcessesOf(kLingerer), 0);
}

TEST_F(SandboxTest, RunsAsTheTenantsUidOnTheHost) {
  const Outcome outcome = Run({"whoami"});
  EXPECT_NE(outcome.said.find(fmt::format("uid {} gid {} pid 1", kTenant, kTenant)),
            std::string::npos)
      << outcome.said;
  const pid_t pid = StartLingering(kTenant);
  ASSERT_GT(pid, 0);
  const std::string status = ReadFile(fmt::format("/proc/{}/status", pid));
  EXPECT_NE(status.find(fmt::format("Uid:\t{0}\t{0}\t{0}\t{0}", kTenant)), std::string::npos)
      << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos);
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos);
}

TEST(SeccompFilterTest, IsAProgramTheKernelTakes) {
  auto filter = SandboxSeccompFilter();
  ASSERT_TRUE(filter.ok()) << filter.status().ToString();
  EXPECT_GT(filter->size(), 60u);
  EXPECT_LT(filter->size(), 4096u);  // BPF_MAXINSNS
  EXPECT_EQ(filter->back().code, BPF_RET | BPF_K);
}

// A device to show (a GPU's) must be a character device directly in /dev.
TEST(SandboxPlanTest, ShowsCharacterDevicesOfDevOnly) {
  EXPECT_TRUE(SandboxPlan::Prepare({.root_dir = "/tmp", .devices = {"/dev/full"}}).ok());
  for (const char* bad : {"/etc/hostname", "/dev", "/dev/no-such-gshare-device", "dev/full"}) {
    auto refused = SandboxPlan::Prepare({.root_dir = "/tmp", .devices = {bad}});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("not a character device"), std::string::npos)
        << refused.status().ToString();
  }
}

TEST(SandboxPlanTest, RefusesPathsItCannotShow) {
  EXPECT_FALSE(SandboxPlan::Prepare({.root_dir = "relative"}).ok());
  EXPECT_FALSE(SandboxPlan::Prepare({.root_dir = "/tmp", .read_only = {"/"}}).ok());
  EXPECT_FALSE(SandboxPlan::Prepare({.root_dir = "/tmp", .read_only = {"models"}}).ok());
  EXPECT_FALSE(
      SandboxPlan::Prepare({.root_dir = "/tmp", .read_only = {"/no/such/gshare/folder"}}).ok());
  EXPECT_TRUE(SandboxPlan::Prepare({.root_dir = "/tmp", .read_only = {"/usr/bin"}}).ok());
  // Nothing that holds the node's data is shown: a data folder under /usr, or under a shown one.
  auto under_usr = SandboxPlan::Prepare({.root_dir = "/tmp", .hidden = {"/usr/local/var/gshare"}});
  ASSERT_FALSE(under_usr.ok());
  EXPECT_NE(under_usr.status().message().find("would show /usr, which holds /usr/local/var/gshare"),
            std::string::npos)
      << under_usr.status().ToString();
  EXPECT_FALSE(SandboxPlan::Prepare(
                   {.root_dir = "/tmp", .read_only = {"/usr/bin", "/tmp"}, .hidden = {"/tmp/data"}})
                   .ok());
  // A shown folder inside the hidden one (the tenant's models, the instance's socket) is fine.
  EXPECT_TRUE(
      SandboxPlan::Prepare({.root_dir = "/tmp", .read_only = {"/tmp"}, .hidden = {"/srv/x"}}).ok());
}

}  // namespace
}  // namespace gshare
