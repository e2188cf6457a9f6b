#include "gshare/serve/registry_watcher.h"

#include <spdlog/spdlog.h>

#include <optional>

namespace gshare::serve {

RegistryWatcher::RegistryWatcher(Registry& registry, std::chrono::milliseconds interval,
                                 std::function<void()> changed, std::optional<std::int64_t> since)
    : registry_(registry), interval_(interval), changed_(std::move(changed)), since_(since) {
  thread_ = std::thread([this] { Run(); });
}

RegistryWatcher::~RegistryWatcher() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  stop_.NotifyAll();
  thread_.join();
}

std::uint64_t RegistryWatcher::polls() const {
  MutexLock lock(mutex_);
  return polls_;
}

void RegistryWatcher::Run() {
  std::optional<std::int64_t> seen = since_;
  if (!seen) {
    if (auto first = registry_.DataVersion(); first.ok()) seen = *first;
  }
  bool failing = false;
  while (true) {
    {
      MutexLock lock(mutex_);
      if (stop_.WaitFor(mutex_, interval_, [this]() REQUIRES(mutex_) { return stopping_; })) {
        return;
      }
    }
    const Result<std::int64_t> version = registry_.DataVersion();
    bool changed = false;
    if (!version.ok()) {
      if (!failing) spdlog::warn("the registry cannot be read: {}", version.status().ToString());
      failing = true;
    } else {
      changed = failing || !seen || *version != *seen;
      failing = false;
      seen = *version;
    }
    if (changed) changed_();
    MutexLock lock(mutex_);
    ++polls_;
  }
}

}  // namespace gshare::serve
