// TimerQueue<Payload>: a min-queue of (time, payload) with deterministic tie-breaking.
//
// Entries with equal times pop in the order they were pushed (FIFO), so a simulation driven by
// this queue is reproducible: the same inputs give the same order of events, on every run.
// Not thread-safe. Push and Pop are O(log n).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gshare/common/units.h"

namespace gshare {

template <typename Payload>
class TimerQueue {
 public:
  struct Entry {
    TimePoint time;
    std::uint64_t sequence;  // insertion order: the tie-breaker
    Payload payload;
  };

  void Push(TimePoint time, Payload payload) {
    heap_.push_back(Entry{time, next_sequence_++, std::move(payload)});
    SiftUp(heap_.size() - 1);
  }

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // The earliest entry. Precondition: !empty().
  const Entry& Top() const { return heap_.front(); }

  // Removes and returns the earliest entry. Precondition: !empty().
  Entry Pop() {
    Entry top = std::move(heap_.front());
    if (heap_.size() > 1) {
      heap_.front() = std::move(heap_.back());
      heap_.pop_back();
      SiftDown(0);
    } else {
      heap_.pop_back();
    }
    return top;
  }

  void Reserve(std::size_t n) { heap_.reserve(n); }

 private:
  static bool Before(const Entry& a, const Entry& b) {
    return a.time < b.time || (a.time == b.time && a.sequence < b.sequence);
  }
  void SiftUp(std::size_t i) {
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!Before(heap_[i], heap_[parent])) break;
      std::swap(heap_[i], heap_[parent]);
      i = parent;
    }
  }
  void SiftDown(std::size_t i) {
    const std::size_t n = heap_.size();
    while (true) {
      const std::size_t left = 2 * i + 1;
      if (left >= n) break;
      std::size_t best = left;
      if (left + 1 < n && Before(heap_[left + 1], heap_[left])) best = left + 1;
      if (!Before(heap_[best], heap_[i])) break;
      std::swap(heap_[i], heap_[best]);
      i = best;
    }
  }

  std::vector<Entry> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace gshare
