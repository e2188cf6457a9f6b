#include "gshare/node/snapshot_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

namespace gshare {

Snapshot::Snapshot(std::string function_id, std::uint64_t size_bytes, std::uint64_t chunk_bytes,
                   std::vector<std::span<std::byte>> chunks, std::vector<std::uint32_t> chunk_ids)
    : function_id_(std::move(function_id)),
      size_bytes_(size_bytes),
      chunk_bytes_(chunk_bytes),
      chunks_(std::move(chunks)),
      chunk_ids_(std::move(chunk_ids)) {}

std::uint64_t Snapshot::chunk_offset_bytes(std::size_t index) const {
  return static_cast<std::uint64_t>(index) * chunk_bytes_;
}

bool Snapshot::Holds(const DeviceBuffer& buffer) const {
  MutexLock lock(binding_mutex_);
  return binding_.has_value() && binding_->buffer_id == buffer.id() &&
         binding_->write_generation == buffer.write_generation();
}

std::optional<Snapshot::Binding> Snapshot::binding() const {
  MutexLock lock(binding_mutex_);
  return binding_;
}

void Snapshot::EnterTransfer() const {
  MutexLock lock(gate_mutex_);
  if (in_transfer_) {
    transfers_waiting_.fetch_add(1, std::memory_order_acq_rel);
    gate_changed_.Wait(gate_mutex_, [this]() REQUIRES(gate_mutex_) { return !in_transfer_; });
    transfers_waiting_.fetch_sub(1, std::memory_order_acq_rel);
  }
  in_transfer_ = true;
}

void Snapshot::LeaveTransfer() const {
  // Notified under the lock: the last handle may drop the snapshot as soon as the gate opens.
  MutexLock lock(gate_mutex_);
  in_transfer_ = false;
  gate_changed_.NotifyOne();
}

Snapshot::TransferLock::TransferLock(Snapshot& snapshot) : snapshot_(&snapshot) {
  snapshot_->EnterTransfer();
}

Snapshot::TransferLock::TransferLock(TransferLock&& other) noexcept
    : snapshot_(std::exchange(other.snapshot_, nullptr)) {}

Snapshot::TransferLock::~TransferLock() {
  if (snapshot_ != nullptr) snapshot_->LeaveTransfer();
}

void Snapshot::TransferLock::Bind(const DeviceBuffer& buffer, std::uint64_t write_generation) {
  MutexLock lock(snapshot_->binding_mutex_);
  snapshot_->binding_ = Binding{buffer.id(), write_generation};
}

void Snapshot::TransferLock::Unbind() {
  MutexLock lock(snapshot_->binding_mutex_);
  snapshot_->binding_.reset();
}

const std::vector<std::uint64_t>& Snapshot::TransferLock::digests() const {
  return snapshot_->digests_;
}

void Snapshot::TransferLock::SetDigests(std::vector<std::uint64_t> digests) {
  snapshot_->digests_ = digests.size() == snapshot_->chunks_.size() ? std::move(digests)
                                                                    : std::vector<std::uint64_t>();
}

Status Snapshot::Write(std::uint64_t offset_bytes, std::span<const std::byte> source) {
  if (offset_bytes > size_bytes_ || source.size() > size_bytes_ - offset_bytes) {
    return OutOfRange(fmt::format("snapshot of '{}': write of {} bytes at {} past its {} bytes",
                                  function_id_, source.size(), offset_bytes, size_bytes_));
  }
  TransferLock transfer(*this);
  transfer.Unbind();
  transfer.SetDigests({});
  while (!source.empty()) {
    const std::size_t index = offset_bytes / chunk_bytes_;
    const std::uint64_t within = offset_bytes % chunk_bytes_;
    const std::size_t n = std::min<std::uint64_t>(source.size(), chunks_[index].size() - within);
    std::memcpy(chunks_[index].data() + within, source.data(), n);
    source = source.subspan(n);
    offset_bytes += n;
  }
  return Status::Ok();
}

Status Snapshot::Read(std::uint64_t offset_bytes, std::span<std::byte> destination) const {
  if (offset_bytes > size_bytes_ || destination.size() > size_bytes_ - offset_bytes) {
    return OutOfRange(fmt::format("snapshot of '{}': read of {} bytes at {} past its {} bytes",
                                  function_id_, destination.size(), offset_bytes, size_bytes_));
  }
  // Reading changes nothing, but must not overlap a checkpoint writing the bytes.
  EnterTransfer();
  while (!destination.empty()) {
    const std::size_t index = offset_bytes / chunk_bytes_;
    const std::uint64_t within = offset_bytes % chunk_bytes_;
    const std::size_t n =
        std::min<std::uint64_t>(destination.size(), chunks_[index].size() - within);
    std::memcpy(destination.data(), chunks_[index].data() + within, n);
    destination = destination.subspan(n);
    offset_bytes += n;
  }
  LeaveTransfer();
  return Status::Ok();
}

SnapshotRef::SnapshotRef(SnapshotStore* store, Snapshot* snapshot)
    : store_(store), snapshot_(snapshot) {}

SnapshotRef::SnapshotRef(const SnapshotRef& other)
    : store_(other.store_), snapshot_(other.snapshot_) {
  if (snapshot_ != nullptr) store_->AddHandle(snapshot_);
}

SnapshotRef& SnapshotRef::operator=(const SnapshotRef& other) {
  if (this != &other) {
    if (other.snapshot_ != nullptr) other.store_->AddHandle(other.snapshot_);
    Reset();
    store_ = other.store_;
    snapshot_ = other.snapshot_;
  }
  return *this;
}

SnapshotRef::SnapshotRef(SnapshotRef&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)),
      snapshot_(std::exchange(other.snapshot_, nullptr)) {}

SnapshotRef& SnapshotRef::operator=(SnapshotRef&& other) noexcept {
  if (this != &other) {
    Reset();
    store_ = std::exchange(other.store_, nullptr);
    snapshot_ = std::exchange(other.snapshot_, nullptr);
  }
  return *this;
}

SnapshotRef::~SnapshotRef() { Reset(); }

void SnapshotRef::Reset() {
  if (snapshot_ != nullptr) store_->DropHandle(snapshot_);
  store_ = nullptr;
  snapshot_ = nullptr;
}

Result<std::unique_ptr<SnapshotStore>> SnapshotStore::Create(HostMemory& host_memory,
                                                             SnapshotStoreOptions options) {
  if (options.chunk_bytes == 0) return InvalidArgument("snapshot chunk size must be positive");
  const std::uint64_t chunks = options.pool_bytes / options.chunk_bytes;
  if (chunks == 0) {
    return InvalidArgument(fmt::format("snapshot pool of {} is smaller than one {} chunk",
                                       FormatBytes(options.pool_bytes),
                                       FormatBytes(options.chunk_bytes)));
  }
  if (chunks > UINT32_MAX) return InvalidArgument("snapshot pool has too many chunks");
  auto pool = host_memory.Allocate(chunks * options.chunk_bytes);
  if (!pool.ok()) return pool.status().WithContext("allocating the snapshot pool");
  return std::unique_ptr<SnapshotStore>(
      new SnapshotStore(std::move(pool).value(), options.chunk_bytes));
}

SnapshotStore::SnapshotStore(std::unique_ptr<PinnedHostBuffer> pool, std::uint64_t chunk_bytes)
    : pool_(std::move(pool)),
      chunk_bytes_(chunk_bytes),
      chunk_total_(pool_->size_bytes() / chunk_bytes) {
  // A stack whose top is chunk 0: a fresh pool hands out adjacent chunks in order.
  free_chunks_.reserve(chunk_total_);
  for (std::size_t i = chunk_total_; i > 0; --i) {
    free_chunks_.push_back(static_cast<std::uint32_t>(i - 1));
  }
}

SnapshotStore::~SnapshotStore() {
  MutexLock lock(mutex_);
  for ([[maybe_unused]] const auto& [key, snapshot] : live_) {
    assert(snapshot->handles_ == 0 && "a SnapshotRef outlived its SnapshotStore");
  }
}

Result<SnapshotRef> SnapshotStore::Create(const std::string& function_id,
                                          std::uint64_t size_bytes) {
  if (size_bytes == 0) {
    return InvalidArgument(fmt::format("snapshot of '{}' must not be empty", function_id));
  }
  const std::uint64_t needed = (size_bytes + chunk_bytes_ - 1) / chunk_bytes_;
  MutexLock lock(mutex_);
  if (index_.contains(function_id)) {
    return AlreadyExists(fmt::format("function '{}' already has a snapshot", function_id));
  }
  if (needed > free_chunks_.size()) {
    return ResourceExhausted(
        fmt::format("snapshot of '{}' needs {} but the pinned pool has {} free of {}", function_id,
                    FormatBytes(size_bytes), FormatBytes(free_chunks_.size() * chunk_bytes_),
                    FormatBytes(capacity_bytes())));
  }
  std::vector<std::span<std::byte>> chunks;
  std::vector<std::uint32_t> ids;
  chunks.reserve(needed);
  ids.reserve(needed);
  std::uint64_t left = size_bytes;
  for (std::uint64_t i = 0; i < needed; ++i) {
    const std::uint32_t id = free_chunks_.back();
    free_chunks_.pop_back();
    const std::uint64_t n = std::min(left, chunk_bytes_);
    chunks.push_back(pool_->bytes().subspan(id * chunk_bytes_, n));
    ids.push_back(id);
    left -= n;
  }
  auto snapshot = std::unique_ptr<Snapshot>(
      new Snapshot(function_id, size_bytes, chunk_bytes_, std::move(chunks), std::move(ids)));
  Snapshot* raw = snapshot.get();
  raw->handles_ = 1;
  index_.emplace(function_id, raw);
  live_.emplace(raw, std::move(snapshot));
  return SnapshotRef(this, raw);
}

Result<SnapshotRef> SnapshotStore::Find(const std::string& function_id) const {
  MutexLock lock(mutex_);
  auto it = index_.find(function_id);
  if (it == index_.end()) {
    return NotFound(fmt::format("function '{}' has no snapshot", function_id));
  }
  ++it->second->handles_;
  return SnapshotRef(const_cast<SnapshotStore*>(this), it->second);
}

Status SnapshotStore::Remove(const std::string& function_id) {
  MutexLock lock(mutex_);
  auto it = index_.find(function_id);
  if (it == index_.end()) {
    return NotFound(fmt::format("function '{}' has no snapshot", function_id));
  }
  Snapshot* snapshot = it->second;
  index_.erase(it);
  snapshot->indexed_ = false;
  if (snapshot->handles_ == 0) FreeLocked(snapshot);
  return Status::Ok();
}

void SnapshotStore::AddHandle(Snapshot* snapshot) {
  MutexLock lock(mutex_);
  ++snapshot->handles_;
}

void SnapshotStore::DropHandle(Snapshot* snapshot) {
  MutexLock lock(mutex_);
  assert(snapshot->handles_ > 0);
  if (--snapshot->handles_ == 0 && !snapshot->indexed_) FreeLocked(snapshot);
}

void SnapshotStore::FreeLocked(Snapshot* snapshot) {
  // Pushed in reverse, so that the next snapshot takes the same chunks in the same order.
  for (auto it = snapshot->chunk_ids_.rbegin(); it != snapshot->chunk_ids_.rend(); ++it) {
    free_chunks_.push_back(*it);
  }
  live_.erase(snapshot);
}

int SnapshotStore::handle_count(const std::string& function_id) const {
  MutexLock lock(mutex_);
  auto it = index_.find(function_id);
  return it == index_.end() ? 0 : it->second->handles_;
}

std::uint64_t SnapshotStore::used_bytes() const {
  MutexLock lock(mutex_);
  return (chunk_total_ - free_chunks_.size()) * chunk_bytes_;
}

std::uint64_t SnapshotStore::free_bytes() const {
  MutexLock lock(mutex_);
  return free_chunks_.size() * chunk_bytes_;
}

std::size_t SnapshotStore::snapshot_count() const {
  MutexLock lock(mutex_);
  return index_.size();
}

}  // namespace gshare
