// ComputeArbiter: one GPU's compute engine, shared by the instances resident on it.
//
// A GPU runs one context's kernels at a time and switches between contexts in time slices. The
// arbiter does the same for an emulated GPU: an instance asks for the engine (Acquire), the
// arbiter grants it to one instance at a time, first come first served, with a quantum
// (kDefaultComputeQuantum by default); the instance gives it back at its first kernel boundary
// after the quantum or when its request ends (Release), and goes to the back of the line if it
// wants more. Kernels are never preempted (the function library checks the quantum between
// kernels).
//
// Threading: the node's event loop only. Clients must be withdrawn before they are destroyed.
#pragma once

#include <cstdint>
#include <deque>

#include "gshare/common/units.h"
#include "gshare/model/compute_quantum.h"

namespace gshare {

class ComputeArbiter {
 public:
  class Client {
   public:
    virtual void GrantCompute(Duration quantum) = 0;

   protected:
    ~Client() = default;
  };

  // The node hands every arbiter the policy's quantum (LiveExecutorOptions::quantum).
  explicit ComputeArbiter(Duration quantum = kDefaultComputeQuantum) : quantum_(quantum) {}

  // `client` wants the engine; granted now when it is free. Asking twice is asking once.
  void Acquire(Client* client);
  // The holder gives the engine back; the next in line gets it. Ignored from a non-holder.
  void Release(Client* client);
  // Takes `client` out: out of the line, and the engine back when it holds it (a lock, a crash).
  void Withdraw(Client* client);

  const Client* holder() const { return holder_; }
  std::size_t waiting() const { return waiting_.size(); }
  std::uint64_t grants() const { return grants_; }
  Duration quantum() const { return quantum_; }

 private:
  void GrantNext();

  const Duration quantum_;
  Client* holder_ = nullptr;
  std::deque<Client*> waiting_;
  std::uint64_t grants_ = 0;
};

}  // namespace gshare
