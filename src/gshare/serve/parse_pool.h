// ParsePool: where the server parses request bodies too large to parse on an HTTP io thread.
// A body of at most kInlineParseBytes is parsed where it arrives; a larger one is handed here, so
// that no io thread is held by one tenant's large body while other requests (another tenant's
// small inference, a health check) wait behind it.
//
// Threads: `threads` of its own (ParsePoolThreads(): the cores less one, at least one), run at a
// lower priority than the io threads (nice +10), so a burst of large bodies takes the CPU the
// rest leaves. Work is queued per tenant and served round-robin (FairQueue), so one tenant's
// backlog of large bodies delays another's by at most one parse per thread; a tenant with
// `max_queued_per_tenant` jobs waiting gets ResourceExhausted for one more.
//
// Threading: Submit may be called from any thread and never blocks. Stop (and the destructor,
// which stops first) runs the jobs still queued with Unavailable (so that each is answered) and
// joins the threads; a Submit after it is refused with Unavailable, so a stopped pool may still be
// called (the backend's answers, while it shuts down). `before_job` (tests) runs on a pool thread
// before each job.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gshare/common/fair_queue.h"
#include "gshare/common/mutex.h"
#include "gshare/common/status.h"

namespace gshare::serve {

// Bodies up to this parse on the io thread that read them.
inline constexpr std::size_t kInlineParseBytes = 64 * 1024;

// The machine's cores less one (the io threads' share), at least one.
unsigned ParsePoolThreads();

struct ParsePoolOptions {
  unsigned threads = 0;  // 0: ParsePoolThreads()
  std::size_t max_queued_per_tenant = 64;
  int nice = 10;                       // added to the pool threads' priority (setpriority)
  std::function<void()> before_job{};  // tests: runs on the pool thread before each job
};

class ParsePool {
 public:
  // A job gets OK to do its work, or Unavailable when the pool is shutting down (it should answer
  // its request that way).
  using Job = std::function<void(const Status& go)>;

  explicit ParsePool(ParsePoolOptions options = {});
  ~ParsePool();
  ParsePool(const ParsePool&) = delete;
  ParsePool& operator=(const ParsePool&) = delete;

  // Queues `job` for `tenant`. ResourceExhausted (the job is not queued, nor run) when the tenant
  // has max_queued_per_tenant jobs waiting, unless `bounded` is false (work whose number is bounded
  // elsewhere, such as answers to requests in flight, which must not be refused).
  Status Submit(const std::string& tenant, Job job, bool bounded = true) EXCLUDES(mutex_);
  // Refuses new jobs, answers those queued with Unavailable, joins the threads. Idempotent.
  void Stop() EXCLUDES(mutex_);
  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void Work() EXCLUDES(mutex_);

  const ParsePoolOptions options_;
  Mutex mutex_;
  CondVar changed_;
  FairQueue<Job> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gshare::serve
