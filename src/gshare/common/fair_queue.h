// FairQueue: a queue per owner (a tenant), served round-robin: Pop takes the oldest item of the
// owner whose turn it is, then that owner goes to the back of the turn. An owner with a thousand
// items queued waits as long as an owner with one for its next item to be taken, so no owner can
// make another's work wait behind its backlog.
//
// Not thread-safe: its owner guards it (a mutex beside it). Items are moved in and out.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gshare {

template <typename T>
class FairQueue {
 public:
  void Push(const std::string& owner, T item) {
    auto& queue = queues_[owner];
    if (queue.empty()) turn_.push_back(owner);
    queue.push_back(std::move(item));
    ++size_;
  }

  // The oldest item of the owner whose turn it is; nothing when the queue is empty.
  std::optional<T> Pop() {
    if (turn_.empty()) return std::nullopt;
    const std::string owner = std::move(turn_.front());
    turn_.pop_front();
    auto found = queues_.find(owner);
    T item = std::move(found->second.front());
    found->second.pop_front();
    --size_;
    if (found->second.empty()) {
      queues_.erase(found);
    } else {
      turn_.push_back(owner);
    }
    return item;
  }

  // Everything still queued, owner by owner (for answering it at shutdown).
  std::vector<T> TakeAll() {
    std::vector<T> items;
    items.reserve(size_);
    for (auto& [owner, queue] : queues_) {
      for (T& item : queue) items.push_back(std::move(item));
    }
    queues_.clear();
    turn_.clear();
    size_ = 0;
    return items;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::size_t size(const std::string& owner) const {
    const auto found = queues_.find(owner);
    return found == queues_.end() ? 0 : found->second.size();
  }

 private:
  std::map<std::string, std::deque<T>> queues_;  // only owners with an item
  std::deque<std::string> turn_;                 // those owners, next first
  std::size_t size_ = 0;
};

}  // namespace gshare
