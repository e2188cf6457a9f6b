// RequestTable: what a policy keeps about the requests it holds, freed when each is answered.
//
// Entries are added on arrival and erased when the request is answered (a run ended OK, or the
// policy failed it), so the table holds only requests in flight however long the run. Not
// thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "gshare/model/request.h"

namespace gshare {

class RequestTable {
 public:
  // Attempts a request gets: a run that fails or whose instance or GPU dies costs one; after the
  // last, the policy answers the request with the failure.
  static constexpr int kMaxAttempts = 3;

  void Add(const Request& request) { entries_.emplace(request.id, Entry{request, 0}); }
  // Precondition: the request is held.
  const Request& Get(RequestId id) const { return entries_.at(id).request; }
  bool Holds(RequestId id) const { return entries_.contains(id); }
  void Erase(RequestId id) { entries_.erase(id); }
  // Counts a failed attempt; true while the request may be tried again.
  bool Retry(RequestId id) { return ++entries_.at(id).failures < kMaxAttempts; }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Request request;
    int failures = 0;
  };
  std::unordered_map<RequestId, Entry> entries_;
};

}  // namespace gshare
