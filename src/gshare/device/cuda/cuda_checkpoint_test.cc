// The driver's process checkpoint API on a real CUDA process (ctest label `gpu`): a child
// (cuda_checkpoint_test_child) holds a pattern in 256 MiB of device memory; the test checkpoints
// it, sees the GPU's free memory come back, restores and unlocks it, and the child checks its
// pattern. Skips, saying why, where there is no GPU or driver, or the driver refuses the API.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gshare/common/testing/beside_self.h"
#include "gshare/device/cuda/cuda_checkpoint.h"

extern char** environ;

namespace gshare {
namespace {

constexpr std::int64_t kChildBytes = 256LL << 20;
// What a checkpointed process may still hold on its GPU, at most.
constexpr std::int64_t kLeftoverBytes = 64LL << 20;
constexpr std::chrono::milliseconds kLockTimeout{30'000};

// The child, with its standard input and output as pipes. Killed if still running at the end.
class Child {
 public:
  ~Child() {
    if (in_ != nullptr) std::fclose(in_);
    if (out_ != nullptr) std::fclose(out_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool Start() {
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    std::string path = gshare::testing::BesideSelf(CUDA_CHECKPOINT_TEST_CHILD);
    std::string bytes = std::to_string(kChildBytes);
    char* argv[] = {path.data(), bytes.data(), nullptr};
    const int spawned = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(to_child[1], "w");
    out_ = ::fdopen(from_child[0], "r");
    if (spawned != 0) pid_ = 0;
    return spawned == 0 && in_ != nullptr && out_ != nullptr;
  }

  // The child's next line, without its newline ("" at its end).
  std::string ReadLine() {
    char line[256];
    if (std::fgets(line, sizeof line, out_) == nullptr) return "";
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
  bool Tell(const char* line) { return std::fputs(line, in_) >= 0 && std::fflush(in_) == 0; }
  // Its exit status, once it ended (-1 when it did not exit normally).
  int Wait() {
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int pid() const { return static_cast<int>(pid_); }

 private:
  pid_t pid_ = 0;
  std::FILE* in_ = nullptr;
  std::FILE* out_ = nullptr;
};

class CudaCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no CUDA GPU here: " << cudaGetErrorString(e);
    }
    gpus_ = count;
    auto api = OpenProcessCheckpointApi();
    if (!api.ok()) GTEST_SKIP() << "no process checkpoint API: " << api.status().ToString();
    api_ = std::move(api).value();
    probe_ = ProbeProcessCheckpointApi();
    // "unknown" (the driver did not answer about this process in time) is tried all the same: the
    // test's calls are on a child process.
    if (probe_.starts_with("unsupported")) GTEST_SKIP() << "process checkpoint API " << probe_;
    // This process's own context first, so that it counts in every figure alike.
    for (int gpu = 0; gpu < gpus_; ++gpu) {
      ASSERT_EQ(cudaSetDevice(gpu), cudaSuccess);
      ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    }
  }

  // The GPU's free memory, as its driver counts it.
  static std::int64_t FreeBytes(int gpu) {
    std::size_t free = 0, total = 0;
    EXPECT_EQ(cudaSetDevice(gpu), cudaSuccess);
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return static_cast<std::int64_t>(free);
  }

  static GpuUuidBytes Uuid(int gpu) {
    cudaDeviceProp properties{};
    EXPECT_EQ(cudaGetDeviceProperties(&properties, gpu), cudaSuccess);
    GpuUuidBytes bytes{};
    std::memcpy(bytes.data(), properties.uuid.bytes, bytes.size());
    return bytes;
  }

  void ExpectState(int pid, ProcessCheckpointState expected) {
    auto state = api_->GetState(pid);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(*state, expected) << ProcessCheckpointStateName(*state);
  }

  int gpus_ = 0;
  std::unique_ptr<ProcessCheckpointApi> api_;
  std::string probe_;
};

TEST_F(CudaCheckpointTest, CheckpointFreesTheGpuAndRestoreBringsThePatternBack) {
  const std::int64_t before = FreeBytes(0);
  Child child;
  ASSERT_TRUE(child.Start());
  ASSERT_EQ(child.ReadLine(), "ready");
  const std::int64_t resident = FreeBytes(0);
  EXPECT_GE(before - resident, kChildBytes) << "the child's memory is on the GPU";
  ExpectState(child.pid(), ProcessCheckpointState::kRunning);

  ASSERT_TRUE(api_->Lock(child.pid(), kLockTimeout).ok());
  ExpectState(child.pid(), ProcessCheckpointState::kLocked);
  const Status checkpointed = api_->Checkpoint(child.pid());
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.ToString();
  ExpectState(child.pid(), ProcessCheckpointState::kCheckpointed);
  const std::int64_t away = FreeBytes(0);
  EXPECT_LE(before, away + kLeftoverBytes)
      << "after the checkpoint the GPU has " << (before - away) / (1 << 20)
      << " MiB less free than before the child started";

  const Status restored = api_->Restore(child.pid(), {});
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ExpectState(child.pid(), ProcessCheckpointState::kLocked);
  const Status unlocked = api_->Unlock(child.pid());
  ASSERT_TRUE(unlocked.ok()) << unlocked.ToString();
  ExpectState(child.pid(), ProcessCheckpointState::kRunning);
  EXPECT_GE(before - FreeBytes(0), kChildBytes) << "its memory is back on the GPU";

  ASSERT_TRUE(child.Tell("verify\n"));
  EXPECT_EQ(child.ReadLine(), "ok");
  EXPECT_EQ(child.Wait(), 0);
}

// Where it cannot be exercised (one GPU, two of different types, a driver before R580) it skips,
// its message starting "unsupported here:", which the GPU check reports as unsupported, not as a
// missing GPU.
TEST_F(CudaCheckpointTest, RestoreOntoAnotherGpuMovesTheMemoryThere) {
  if (gpus_ < 2) {
    GTEST_SKIP() << "unsupported here: restore onto another GPU needs a second GPU of the same "
                    "chip type; this machine has one";
  }
  if (probe_.find("another GPU of the same chip type: yes") == std::string::npos) {
    GTEST_SKIP() << "unsupported here: restore onto another GPU needs driver R580 (" << probe_
                 << ")";
  }
  cudaDeviceProp first{}, second{};
  ASSERT_EQ(cudaGetDeviceProperties(&first, 0), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&second, 1), cudaSuccess);
  if (std::string(first.name) != second.name) {
    GTEST_SKIP() << "unsupported here: restore onto another GPU needs a second GPU of the same "
                    "chip type; GPUs 0 and 1 differ ("
                 << first.name << ", " << second.name << ")";
  }
  const std::int64_t before_0 = FreeBytes(0);
  const std::int64_t before_1 = FreeBytes(1);
  Child child;
  ASSERT_TRUE(child.Start());
  ASSERT_EQ(child.ReadLine(), "ready");
  ASSERT_TRUE(api_->Lock(child.pid(), kLockTimeout).ok());
  ASSERT_TRUE(api_->Checkpoint(child.pid()).ok());
  const GpuPair pair{.from = Uuid(0), .to = Uuid(1)};
  const Status restored = api_->Restore(child.pid(), {&pair, 1});
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ASSERT_TRUE(api_->Unlock(child.pid()).ok());
  EXPECT_LE(before_0, FreeBytes(0) + kLeftoverBytes) << "GPU 0 is free of it";
  EXPECT_GE(before_1 - FreeBytes(1), kChildBytes) << "its memory is on GPU 1";
  ASSERT_TRUE(child.Tell("verify\n"));
  EXPECT_EQ(child.ReadLine(), "ok");
  EXPECT_EQ(child.Wait(), 0);
}

}  // namespace
}  // namespace gshare
