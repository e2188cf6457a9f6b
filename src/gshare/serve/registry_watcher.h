// RegistryWatcher: notices changes another process makes to the registry (`gshare tenant add`,
// `remove`, a key rotated beside a running server) by polling SQLite's `PRAGMA data_version` on
// the server's own connection, which changes exactly when another connection commits.
//
// Threading: one thread of its own polls every `interval` and calls `changed` on it when the
// version moved since `since` (the version the caller read its state at) or the last poll, and
// on the first poll that works after one that failed (the change may have been missed). `changed`
// must not block for long. The destructor stops and joins the thread; the registry must outlive the
// watcher.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

#include "gshare/common/mutex.h"
#include "gshare/serve/registry.h"

namespace gshare::serve {

// How often the server looks at the registry: a change by `gshare tenant` takes effect within
// this, plus the time the change itself takes.
inline constexpr std::chrono::milliseconds kRegistryPollInterval{250};

class RegistryWatcher {
 public:
  // `since`: the data version the caller's state was read at (a change after it, before the
  // watcher started, is reported at the first poll); nullopt: the version at the first poll.
  RegistryWatcher(Registry& registry, std::chrono::milliseconds interval,
                  std::function<void()> changed, std::optional<std::int64_t> since);
  ~RegistryWatcher();
  RegistryWatcher(const RegistryWatcher&) = delete;
  RegistryWatcher& operator=(const RegistryWatcher&) = delete;

  // How many polls have been made (for tests that wait for one past a change).
  std::uint64_t polls() const EXCLUDES(mutex_);

 private:
  void Run() EXCLUDES(mutex_);

  Registry& registry_;
  const std::chrono::milliseconds interval_;
  const std::function<void()> changed_;
  const std::optional<std::int64_t> since_;
  mutable Mutex mutex_;
  CondVar stop_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::uint64_t polls_ GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace gshare::serve
