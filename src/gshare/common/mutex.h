// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable_any with the capability
// annotations of common/thread_annotations.h, so that clang's -Wthread-safety can check which
// members a lock guards.
//
// Mutex is not recursive. MutexLock holds a Mutex for its scope. CondVar::Wait and WaitFor must be
// called with the mutex held; they release the mutex while waiting and hold it again on return.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "gshare/common/thread_annotations.h"

namespace gshare {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }

  // BasicLockable, for CondVar.
  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~MutexLock() RELEASE() { mutex_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

class CondVar {
 public:
  // Waits until `done()` is true. Precondition: `mutex` is held by the caller.
  template <typename Predicate>
  void Wait(Mutex& mutex, Predicate done) REQUIRES(mutex) {
    condition_.wait(mutex, std::move(done));
  }
  // Waits until `done()` is true or `timeout` has passed; returns done(). Precondition: `mutex`
  // is held by the caller.
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mutex, std::chrono::duration<Rep, Period> timeout, Predicate done)
      REQUIRES(mutex) {
    return condition_.wait_for(mutex, timeout, std::move(done));
  }
  void NotifyAll() { condition_.notify_all(); }
  void NotifyOne() { condition_.notify_one(); }

 private:
  std::condition_variable_any condition_;
};

}  // namespace gshare
