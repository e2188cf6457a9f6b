// The live node's ComputeArbiter against the simulator's model of GPU time slicing.
//
// A scenario (runs on one GPU, each an arrival and a number of equal kernels) is played twice:
// through ComputeArbiter on a virtual clock, by clients that behave as the function library does
// (fn/runtime.h: granted, a client runs kernels back to back and gives the engine back at the
// first kernel boundary after the quantum, asking again at once if it has work left, or when its
// work is done); and through the simulator's compute model (sim/compute_sharing.h). The arbiter
// ends a quantum at a kernel boundary, the model at the exact quantum: each quantum that ended
// before a run completed may move its completion by up to one kernel. When the kernel length
// divides the quantum, the two agree exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "gshare/common/timer_queue.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/node/switch/compute_arbiter.h"
#include "gshare/sim/compute_sharing.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

struct ScenarioRun {
  Duration arrival{};
  int kernels = 0;
};

struct ArbiterOutcome {
  std::vector<Duration> completion;  // per run
  // Per run: the quanta that ended (a client gave the engine back with work left) before it
  // completed.
  std::vector<int> quanta_ended_before;
};

// Plays the scenario through a ComputeArbiter on a virtual clock. Events at equal times run in
// the order they were scheduled: all arrivals are scheduled first, so an arrival at the instant
// a kernel ends is in line before the holder gives the engine back.
class VirtualGpu {
 public:
  VirtualGpu(Duration quantum, Duration kernel) : arbiter_(quantum), kernel_(kernel) {}

  ArbiterOutcome Play(const std::vector<ScenarioRun>& runs) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      clients_.push_back(std::make_unique<Client>(*this, runs[i].kernels));
      events_.Push(TimePoint{} + runs[i].arrival, {clients_.back().get(), Action::kArrive});
    }
    while (!events_.empty()) {
      auto entry = events_.Pop();
      now_ = entry.time;
      Client& client = *entry.payload.client;
      if (entry.payload.action == Action::kArrive) {
        arbiter_.Acquire(&client);
      } else {
        client.KernelEnded();
      }
    }
    ArbiterOutcome outcome;
    for (const auto& client : clients_) {
      outcome.completion.push_back(client->completed - TimePoint{});
      outcome.quanta_ended_before.push_back(client->quanta_ended_before);
    }
    return outcome;
  }

 private:
  enum class Action { kArrive, kKernelEnd };
  class Client;
  struct Event {
    Client* client;
    Action action;
  };

  class Client final : public ComputeArbiter::Client {
   public:
    Client(VirtualGpu& gpu, int kernels) : gpu_(gpu), kernels_left_(kernels) {}
    virtual ~Client() = default;

    // Granted (possibly from inside another client's Release): the first kernel starts now.
    void GrantCompute(Duration quantum) override {
      grant_start_ = gpu_.now_;
      quantum_ = quantum;
      gpu_.events_.Push(gpu_.now_ + gpu_.kernel_, {this, Action::kKernelEnd});
    }

    void KernelEnded() {
      if (--kernels_left_ == 0) {  // the request ends: EndWork gives the engine back
        completed = gpu_.now_;
        quanta_ended_before = gpu_.quanta_ended_;
        gpu_.arbiter_.Release(this);
        return;
      }
      if (gpu_.now_ - grant_start_ >= quantum_) {  // the next Launch asks again
        ++gpu_.quanta_ended_;
        gpu_.arbiter_.Release(this);
        gpu_.arbiter_.Acquire(this);
        return;
      }
      gpu_.events_.Push(gpu_.now_ + gpu_.kernel_, {this, Action::kKernelEnd});
    }

    TimePoint completed{};
    int quanta_ended_before = 0;

   private:
    VirtualGpu& gpu_;
    int kernels_left_;
    TimePoint grant_start_{};
    Duration quantum_{};
  };

  ComputeArbiter arbiter_;
  const Duration kernel_;
  TimePoint now_{};
  TimerQueue<Event> events_;
  std::vector<std::unique_ptr<Client>> clients_;
  int quanta_ended_ = 0;
};

struct Scenario {
  const char* name;
  std::vector<ScenarioRun> runs;
};

// The scenarios, with kernels of `kernel` and runs of about the compute times named.
std::vector<Scenario> Scenarios(Duration kernel) {
  const auto kernels = [&](Duration compute) { return static_cast<int>(compute / kernel); };
  return {
      {"one run alone", {{Duration::zero(), kernels(milliseconds(120))}}},
      {"two runs arriving together",
       {{Duration::zero(), kernels(milliseconds(60))},
        {Duration::zero(), kernels(milliseconds(60))}}},
      {"three staggered",
       {{Duration::zero(), kernels(milliseconds(60))},
        {milliseconds(7), kernels(milliseconds(45))},
        {milliseconds(26), kernels(milliseconds(30))}}},
      {"a short run arriving during a long one",
       {{Duration::zero(), kernels(milliseconds(300))},
        {milliseconds(133), kernels(milliseconds(15))}}},
  };
}

std::int64_t Microseconds(Duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

struct Compared {
  ArbiterOutcome arbiter;
  std::vector<Duration> model;
};

Compared Compare(const Scenario& scenario, Duration quantum, Duration kernel) {
  Compared compared;
  VirtualGpu gpu(quantum, kernel);
  compared.arbiter = gpu.Play(scenario.runs);
  std::vector<ComputeRun> runs;
  for (const ScenarioRun& run : scenario.runs) runs.push_back({run.arrival, kernel * run.kernels});
  auto model = SimulateComputeSharing(runs, quantum);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (model.ok()) compared.model = *model;
  return compared;
}

TEST(ComputeArbiterModelTest, AgreesWithinAKernelPerQuantumWithKernelsThatOverrunTheQuantum) {
  const Duration quantum = kDefaultComputeQuantum;
  const Duration kernel = milliseconds(3);  // a quantum ends after 7 kernels: 21 ms
  for (const Scenario& scenario : Scenarios(kernel)) {
    SCOPED_TRACE(scenario.name);
    const Compared compared = Compare(scenario, quantum, kernel);
    ASSERT_EQ(compared.model.size(), scenario.runs.size());
    for (std::size_t i = 0; i < scenario.runs.size(); ++i) {
      const Duration difference = compared.arbiter.completion[i] - compared.model[i];
      const Duration bound = kernel * compared.arbiter.quanta_ended_before[i];
      EXPECT_LE(difference < Duration::zero() ? -difference : difference, bound)
          << "run " << i << ": arbiter " << Microseconds(compared.arbiter.completion[i])
          << " us, model " << Microseconds(compared.model[i]) << " us, "
          << compared.arbiter.quanta_ended_before[i] << " quanta ended before";
    }
  }
}

TEST(ComputeArbiterModelTest, AgreesExactlyWhenKernelsDivideTheQuantum) {
  const Duration quantum = kDefaultComputeQuantum;
  for (const Duration kernel : {milliseconds(5), milliseconds(1)}) {
    for (const Scenario& scenario : Scenarios(kernel)) {
      SCOPED_TRACE(scenario.name);
      const Compared compared = Compare(scenario, quantum, kernel);
      EXPECT_EQ(compared.arbiter.completion, compared.model);
    }
  }
}

// The figures behind the agreement, worked by hand (3 ms kernels, 20 ms quanta).
TEST(ComputeArbiterModelTest, ShortRunDuringALongOneWorkedExample) {
  const Duration kernel = milliseconds(3);
  const Scenario scenario = Scenarios(kernel)[3];
  const Compared compared = Compare(scenario, kDefaultComputeQuantum, kernel);
  // Model: the long run started alone at 0; the short one came at 133 ms and waits for the
  // quantum boundary at 140 ms, runs 140-155, and the long run ends at 300 + 15 = 315 ms.
  EXPECT_EQ(compared.model, (std::vector<Duration>{milliseconds(315), milliseconds(155)}));
  // Arbiter: the long run's quanta end at kernel boundaries, every 21 ms (126, 147 ms); the short
  // one runs 147-162 ms; the long run ends at 315 ms.
  EXPECT_EQ(compared.arbiter.completion,
            (std::vector<Duration>{milliseconds(315), milliseconds(162)}));
  EXPECT_EQ(compared.arbiter.quanta_ended_before[1], 7);
}

TEST(ComputeArbiterModelTest, TheModelRefusesRunsWithoutCompute) {
  const std::vector<ComputeRun> runs = {{Duration::zero(), milliseconds(5)},
                                        {milliseconds(1), Duration::zero()}};
  EXPECT_EQ(SimulateComputeSharing(runs, milliseconds(20)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare
