#include "gshare/serve/parse_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace gshare::serve {

unsigned ParsePoolThreads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, cores - 1);
}

ParsePool::ParsePool(ParsePoolOptions options) : options_(std::move(options)) {
  const unsigned count = options_.threads == 0 ? ParsePoolThreads() : options_.threads;
  threads_.reserve(count);
  for (unsigned i = 0; i < count; ++i) threads_.emplace_back([this] { Work(); });
}

ParsePool::~ParsePool() { Stop(); }

void ParsePool::Stop() {
  std::vector<Job> left;
  {
    MutexLock lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    left = queue_.TakeAll();
  }
  changed_.NotifyAll();
  for (std::thread& thread : threads_) thread.join();
  for (Job& job : left) job(Unavailable("the server is shutting down"));
}

Status ParsePool::Submit(const std::string& tenant, Job job, bool bounded) {
  {
    MutexLock lock(mutex_);
    if (stopping_) return Unavailable("the server is shutting down");
    if (bounded && queue_.size(tenant) >= options_.max_queued_per_tenant) {
      return ResourceExhausted(
          fmt::format("{} large requests of this tenant are waiting to be parsed",
                      options_.max_queued_per_tenant));
    }
    queue_.Push(tenant, std::move(job));
  }
  changed_.NotifyOne();
  return Status::Ok();
}

void ParsePool::Work() {
  // Linux gives each thread a nice value of its own: below the io threads, which answer everyone.
  if (options_.nice != 0 &&
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), options_.nice) != 0) {
    spdlog::debug("parse pool: setpriority: {}", std::strerror(errno));
  }
  while (true) {
    std::optional<Job> job;
    {
      MutexLock lock(mutex_);
      changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.Pop();
    }
    if (options_.before_job) options_.before_job();
    (*job)(Status::Ok());
  }
}

}  // namespace gshare::serve
