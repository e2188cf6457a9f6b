#include "gshare/node/switch/compute_arbiter.h"

#include <algorithm>

namespace gshare {

void ComputeArbiter::Acquire(Client* client) {
  if (holder_ == client || std::find(waiting_.begin(), waiting_.end(), client) != waiting_.end()) {
    return;
  }
  waiting_.push_back(client);
  if (holder_ == nullptr) GrantNext();
}

void ComputeArbiter::Release(Client* client) {
  if (holder_ != client) return;
  holder_ = nullptr;
  GrantNext();
}

void ComputeArbiter::Withdraw(Client* client) {
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), client), waiting_.end());
  Release(client);
}

void ComputeArbiter::GrantNext() {
  if (waiting_.empty()) return;
  holder_ = waiting_.front();
  waiting_.pop_front();
  ++grants_;
  holder_->GrantCompute(quantum_);
}

}  // namespace gshare
