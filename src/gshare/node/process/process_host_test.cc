// Real function processes (the example functions' program) serving real inference on emulated
// GPUs under a real policy: every answer is checked against the reference implementation.
#include "gshare/node/process/process_host.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/device/device_registry.h"
#include "gshare/node/live_executor.h"
#include "gshare/node/live_node.h"
#include "gshare/sched/policy_registry.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

// With `encode_ahead`, every request is also encoded ahead in the binary form (as the server's
// backend does) and answers to a request alone are taken undecoded, decoded here.
class CheckedRequests final : public RequestSource {
 public:
  CheckedRequests(examples::OutputChecker& checker, std::vector<std::string> models,
                  bool encode_ahead)
      : checker_(checker), models_(std::move(models)), encode_ahead_(encode_ahead) {}
  void Add(RequestId id, FunctionId function) {
    const std::string& model = models_[function];
    auto input = checker_.InputFor(model, id);
    ASSERT_TRUE(input.ok());
    InferRequest request;
    request.inputs.push_back(std::move(input).value());
    if (encode_ahead_) {
      const InferRequest before = request;
      auto encoded = EncodeAlone(request, /*binary=*/true);
      ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
      ASSERT_EQ(request, before);  // read in place, given back
      encoded_[id] = std::move(encoded).value();
    }
    inputs_[id] = {function, std::move(request)};
  }
  const InferRequest* Input(RequestId id) override {
    auto it = inputs_.find(id);
    return it == inputs_.end() ? nullptr : &it->second.second;
  }
  void Answer(RequestId id, InferResponse response) override {
    ++answers[id];
    const std::string& model = models_[inputs_.at(id).first];
    if (response.outputs.size() != 1 || !checker_.Check(model, id, response.outputs.front()).ok()) {
      ++wrong;
    }
  }
  void Fail(RequestId id, const Status& status) override {
    ++answers[id];
    failures.push_back(status.ToString());
  }
  std::optional<EncodedRequest> TakeEncoded(RequestId id) override {
    auto it = encoded_.find(id);
    if (it == encoded_.end()) return std::nullopt;
    EncodedRequest taken = std::move(it->second);
    encoded_.erase(it);
    ++taken_ahead;
    return taken;
  }
  void DropEncoded(RequestId id) override {
    if (encoded_.erase(id) > 0) ++dropped_ahead;
  }
  bool TakesEncodedAnswers() const override { return encode_ahead_; }
  void AnswerEncoded(RequestId id, FunctionAnswer answer) override {
    ++encoded_answers;
    Result<InferResponse> response = DecodeAnswerAlone(answer);
    if (!response.ok()) return Fail(id, response.status());
    Answer(id, std::move(response).value());
  }

  std::map<RequestId, int> answers;
  int wrong = 0;
  std::vector<std::string> failures;
  int taken_ahead = 0;      // requests whose body encoded ahead was taken
  int dropped_ahead = 0;    // and dropped (sent in a batch of several)
  int encoded_answers = 0;  // answers handed over undecoded

 private:
  examples::OutputChecker& checker_;
  std::vector<std::string> models_;
  const bool encode_ahead_;
  std::map<RequestId, std::pair<FunctionId, InferRequest>> inputs_;
  std::map<RequestId, EncodedRequest> encoded_;
};

class ProcessHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("process-host-{}", ::getpid());
    std::filesystem::create_directories(dir_ / "run");
    ::chmod(dir_.c_str(), 0755);
    for (const auto kind : {examples::ModelKind::kMlp, examples::ModelKind::kCnn}) {
      const std::string path =
          (dir_ / fmt::format("{}.safetensors", examples::ModelKindName(kind))).string();
      ASSERT_TRUE(examples::WriteExampleWeights(kind, 1, path).ok());
      ::chmod(path.c_str(), 0644);
    }
    auto checker = examples::OutputChecker::Create(dir_.string());
    ASSERT_TRUE(checker.ok());
    checker_ = std::move(checker).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Sets `answered` to the number of requests answered (each exactly once, checked inside), and
  // with `ahead` (encode_ahead), how many requests were sent as encoded ahead and how many
  // answers came undecoded.
  struct Ahead {
    int sent = 0;                  // bodies encoded ahead that the host took
    int dropped = 0;               // and that it dropped (the request went in a batch of several)
    int answers = 0;               // answers handed back undecoded
    std::uint64_t as_encoded = 0;  // requests the host sent with the body encoded ahead
  };
  void Replay(const std::string& policy_name, int kill_at, int& answered, Ahead* ahead = nullptr);

  std::filesystem::path dir_;
  std::unique_ptr<examples::OutputChecker> checker_;
};

// Runs 30 requests over 1.5 s, the three functions in turn, under `policy`; with `kill_at`,
// a ready instance is killed (SIGKILL) as soon as one is ready once request `kill_at` arrived.
void ProcessHostTest::Replay(const std::string& policy_name, int kill_at, int& answered,
                             Ahead* ahead) {
  const std::vector<std::string> models = {"mlp", "cnn", "echo"};
  CheckedRequests requests(*checker_, models, ahead != nullptr);
  // Real processes, in real time: the node's clock is the machine's steady clock.
  LiveNodeOptions node_options;
  node_options.calibrate_copies = false;
  node_options.devices = *MakeDeviceOptions("emulated", "2x1Gi", "12GB/s");
  node_options.snapshot_pool_bytes = 256 * kMiB;
  node_options.prepared_bytes_per_gpu = 256 * kMiB;
  node_options.policy = policy_name;
  node_options.policy_options.instance_start = Duration::zero();
  node_options.policy_options.pool_idle = milliseconds(500);
  node_options.policy_options.keep_alive = milliseconds(500);
  node_options.host.run_dir = (dir_ / "run").string();
  LiveNodeParts parts;
  parts.requests = &requests;
  auto node = LiveNode::Create(node_options, std::move(parts));
  ASSERT_TRUE(node.ok()) << node.status().ToString();

  std::vector<ResolvedFunction> functions;
  std::vector<InstanceCommand> commands;
  const std::uint64_t memory[] = {64 * kMiB, 32 * kMiB, 8 * kMiB};
  for (std::size_t f = 0; f < models.size(); ++f) {
    ResolvedFunction spec;
    spec.name = models[f];
    spec.tenant = f == 2 ? "other" : "t";
    spec.model_bytes = memory[f] / 2;
    spec.gpu_memory_bytes = memory[f];
    spec.exec_by_batch = {milliseconds(5), milliseconds(8), milliseconds(11), milliseconds(14)};
    spec.max_batch = 4;
    spec.slo = std::chrono::seconds(3);
    functions.push_back(spec);
    InstanceCommand command;
    command.argv = {GSHARE_FUNCTION_BINARY, "--model", models[f]};
    if (models[f] != "echo") {
      command.argv.push_back("--weights");
      command.argv.push_back((dir_ / (models[f] + ".safetensors")).string());
    }
    command.model = models[f];
    command.name = models[f];
    command.tenant = spec.tenant;
    commands.push_back(command);
  }
  LiveNode& n = **node;
  for (std::size_t f = 0; f < functions.size(); ++f) {
    n.AddFunction({.function = functions[f], .command = commands[f], .run_timeout = {}});
  }
  LiveExecutor& executor = n.executor();
  ProcessHost& host = *n.process_host();

  // 30 requests over 1.5 s, the three functions in turn.
  const int kRequests = 30;
  std::vector<LoopTimer> arrivals;
  int submitted = 0;
  int killed = 0;
  std::set<uid_t> uids;
  for (int i = 0; i < kRequests; ++i) {
    const auto function = static_cast<FunctionId>(i % 3);
    requests.Add(static_cast<RequestId>(i), function);
    arrivals.push_back(n.clock().After(milliseconds(50 * i), [&, i, function] {
      Request request;
      request.id = static_cast<RequestId>(i);
      request.function = function;
      request.arrival = executor.Now();
      request.deadline = request.arrival + functions[function].slo;
      ++submitted;
      executor.Submit(request);
      for (const pid_t pid : host.ready_pids()) {  // the uid each instance runs as
        struct stat info {};
        if (::stat(fmt::format("/proc/{}", pid).c_str(), &info) == 0) uids.insert(info.st_uid);
      }
    }));
  }
  const SteadyClock& wall = SteadyClock::Shared();  // a guard against a hang only
  const TimePoint give_up = wall.Now() + std::chrono::seconds(30);
  // The kill: the first moment, once request kill_at has arrived, that an instance is ready.
  const auto kill_when_due = [&] {
    if (kill_at >= 0 && killed == 0 && submitted > kill_at && !host.ready_pids().empty()) {
      ::kill(host.ready_pids().front(), SIGKILL);
      ++killed;
    }
  };
  while (submitted < kRequests || executor.Busy() ||
         static_cast<int>(requests.answers.size()) < kRequests || (kill_at >= 0 && killed == 0)) {
    n.loop().run_one_for(milliseconds(100));
    kill_when_due();
    if (wall.Now() > give_up) {
      std::string logs;
      for (const auto& entry :
           std::filesystem::recursive_directory_iterator(dir_ / "run" / "logs")) {
        std::ifstream in(entry.path());
        logs += entry.path().filename().string() + ":\n" +
                std::string(std::istreambuf_iterator<char>(in), {}) + "\n";
      }
      FAIL() << "the replay did not settle: " << requests.answers.size() << " answered, "
             << submitted << " submitted, " << host.running() << " processes, busy "
             << executor.Busy() << "\n"
             << executor.DebugState() << logs;
    }
  }
  EXPECT_TRUE(executor.violation().ok()) << executor.violation().ToString();
  EXPECT_EQ(requests.wrong, 0);
  if (kill_at < 0) {
    EXPECT_TRUE(requests.failures.empty()) << requests.failures.front();
  }
  // Every request answered exactly once: by a run (checked right), or, for one that was on the
  // killed process, possibly with an error; never lost, never twice.
  EXPECT_EQ(static_cast<int>(requests.answers.size()), kRequests);
  for (const auto& [id, count] : requests.answers) EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(executor.unanswered(), 0u);
  if (::geteuid() == 0) {  // each tenant's instances under a uid of its own
    EXPECT_TRUE(uids.contains(host.UidOf("t")));
    EXPECT_NE(host.UidOf("t"), host.UidOf("other"));
    EXPECT_FALSE(uids.contains(0));
  }
  if (kill_at >= 0) {
    EXPECT_EQ(killed, 1);
  }
  if (ahead != nullptr) {
    *ahead = {requests.taken_ahead, requests.dropped_ahead, requests.encoded_answers,
              host.sent_as_encoded()};
  }
  n.Shutdown();
  answered = static_cast<int>(requests.answers.size());
}

TEST_F(ProcessHostTest, ExampleFunctionsServeCheckedInferenceUnderAPolicy) {
  for (const char* policy : {"gshare", "fifo", "keepalive"}) {
    SCOPED_TRACE(policy);
    int answered = 0;
    Replay(policy, -1, answered);
    EXPECT_EQ(answered, 30);
  }
}

// Requests encoded ahead by their source (as the server's backend does): a batch of one is sent
// as it was encoded and its answer handed back undecoded; every answer is still right, batches of
// several still go through the host's own codec, and a request is never sent ahead twice.
TEST_F(ProcessHostTest, RequestsEncodedAheadAreSentAsTheyAreAndAnsweredUndecoded) {
  for (const char* policy : {"gshare", "keepalive"}) {
    SCOPED_TRACE(policy);
    int answered = 0;
    Ahead ahead;
    Replay(policy, -1, answered, &ahead);
    EXPECT_EQ(answered, 30);
    // The functions speak binary once their first instance answered GET /v2: requests sent
    // alone after that take the fast path. Each taken body is sent and answered undecoded.
    // Each request is sent once: alone (its body taken) or in a batch of several (dropped).
    // Spaced 50 ms apart over three functions, at least one runs alone.
    EXPECT_GT(ahead.sent, 0);
    EXPECT_EQ(ahead.sent + ahead.dropped, 30);
    EXPECT_EQ(ahead.as_encoded, static_cast<std::uint64_t>(ahead.sent));  // each sent as it was
    EXPECT_EQ(ahead.answers, ahead.sent);
  }
}

// A function process killed while requests come: the executor reports the death, the policy
// runs the requests again on a new instance or answers them with an error, and each is answered
// once; every answer that is a result is right.
TEST_F(ProcessHostTest, AKilledFunctionProcessLosesNoRequestAndAnswersNoneTwice) {
  int answered = 0;
  Replay("gshare", 10, answered);
  EXPECT_EQ(answered, 30);
  // The same with requests encoded ahead: one sent again after the kill is encoded by the host.
  Ahead ahead;
  Replay("gshare", 10, answered, &ahead);
  EXPECT_EQ(answered, 30);
  EXPECT_GT(ahead.sent, 0);
}

}  // namespace
}  // namespace gshare
