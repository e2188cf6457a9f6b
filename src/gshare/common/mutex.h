// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable_any with the capability
// annotations of common/thread_annotations.h, so that clang's -Wthread-safety can check which
// members a lock guards.
//
// Mutex is not recursive. MutexLock holds a Mutex for its scope. CondVar::Wait must be called
// with the mutex held; it releases the mutex while waiting and holds it again on return.
#pragma once

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
  void NotifyAll() { condition_.notify_all(); }
  void NotifyOne() { condition_.notify_one(); }

 private:
  std::condition_variable_any condition_;
};

}  // namespace gshare
