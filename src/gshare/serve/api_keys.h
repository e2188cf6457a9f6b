// API keys of `gshare serve`: the admin key and one key per tenant.
//
// A key is a bearer token: 256 random bits from getrandom, written as "gsk_" followed by 43
// base64url characters. Only its keyed hash is stored, HMAC-SHA-256 under the server secret
// (DATA_DIR/server.secret, 32 random bytes made at first use), so a copy of the registry alone
// does not let anyone present a key, and a lookup costs one HMAC rather than a slow password hash
// (the keys are random, so there is nothing to guess that a slow hash would protect). Hashes are
// compared in constant time.
//
// TenantKeys composes the registry (registry.h) with an in-memory index from key hash to tenant:
// adding a tenant makes its key, rotation replaces it (the old key stops matching when the call
// returns), removal forgets it. The index sees changes made through this TenantKeys; changes made
// by another process (`gshare tenant` beside a running server) are seen after Reload.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/serve/authenticator.h"
#include "gshare/serve/registry.h"

namespace gshare::serve {

inline constexpr std::string_view kApiKeyPrefix = "gsk_";
inline constexpr std::size_t kApiKeyRandomBytes = 32;
inline constexpr std::size_t kServerSecretBytes = 32;
// A presented key longer than this is refused without hashing it.
inline constexpr std::size_t kMaxApiKeyBytes = 256;

// `count` bytes from getrandom (the kernel's CSPRNG).
Result<std::string> RandomBytes(std::size_t count);

// A new key: kApiKeyPrefix and kApiKeyRandomBytes random bytes in unpadded base64url.
Result<std::string> GenerateApiKey();

// Equality of two hashes in time independent of where they differ (CRYPTO_memcmp).
bool KeyHashesEqual(const KeyHash& a, const KeyHash& b);

// The key under which API keys are hashed. Immutable once loaded; thread-safe.
class ServerSecret {
 public:
  // Reads DATA_DIR/server.secret, or creates it (mode 0600, kServerSecretBytes random bytes)
  // where it does not exist. FailedPrecondition when its mode lets anyone but its owner access
  // it; InvalidArgument when it does not hold exactly kServerSecretBytes bytes.
  static Result<ServerSecret> LoadOrCreate(const std::filesystem::path& data_dir);
  // A secret from given bytes (tests).
  static ServerSecret FromBytes(std::string_view bytes);

  KeyHash Hash(std::string_view key) const;

 private:
  explicit ServerSecret(std::string bytes) : bytes_(std::move(bytes)) {}

  std::string bytes_;
};

// The admin key, and whether this call generated it (then the caller prints it once; it is
// never printed again).
struct AdminKey {
  std::string key;
  bool generated = false;
};

// With `key_file` set, reads the admin key from it (the same mode check as the secret; surrounding
// whitespace is dropped). Otherwise reads DATA_DIR/admin.key, generating it (GenerateApiKey, mode
// 0600) where it does not exist. A key is 16 to kMaxApiKeyBytes visible ASCII characters.
Result<AdminKey> LoadOrCreateAdminKey(const std::filesystem::path& data_dir,
                                      const std::filesystem::path& key_file = {});

// Tenants and their keys over a registry.
//
// Thread safety: every method may be called from any thread. Authenticate takes the index mutex
// only to read the index (no database access; the HMAC is computed before). The methods that
// change keys hold a second mutex for their whole run, which orders them, and write the registry
// first and the index after, so the index never names a key the registry has replaced.
class TenantKeys final : public Authenticator {
 public:
  // Loads every tenant's key hash from `registry`, which must outlive the returned object.
  static Result<std::unique_ptr<TenantKeys>> Open(Registry& registry, ServerSecret secret);

  // Adds a tenant with a new key and returns the key; it is stored nowhere, so this is the one
  // time it can be shown.
  Result<std::string> AddTenant(std::string_view name) EXCLUDES(change_mutex_, mutex_);
  // Gives `name` a new key and returns it; the old key stops matching.
  Result<std::string> RotateKey(std::string_view name) EXCLUDES(change_mutex_, mutex_);
  // Removes the tenant and its functions; its key stops matching.
  Status RemoveTenant(std::string_view name) EXCLUDES(change_mutex_, mutex_);
  // Rebuilds the index from the registry (changes by another process).
  Status Reload() EXCLUDES(change_mutex_, mutex_);

  // The tenant whose key `key` is, or nothing.
  std::optional<std::string> Authenticate(std::string_view key) const override EXCLUDES(mutex_);
  // Whether `key` hashes to `expected` (the admin key's hash, say), in constant time.
  bool Matches(std::string_view key, const KeyHash& expected) const;
  const ServerSecret& secret() const { return secret_; }

 private:
  struct Entry {
    KeyHash hash;
    std::string tenant;
  };
  // The index is bucketed by the hash's first 8 bytes; candidates in a bucket are compared in
  // full with KeyHashesEqual, so no comparison of a whole hash exits early.
  using Index = std::unordered_map<std::uint64_t, std::vector<Entry>>;

  TenantKeys(Registry& registry, ServerSecret secret)
      : registry_(registry), secret_(std::move(secret)) {}

  static std::uint64_t Bucket(const KeyHash& hash);
  void Forget(std::string_view tenant) REQUIRES(mutex_);
  void Remember(std::string_view tenant, const KeyHash& hash) REQUIRES(mutex_);

  Registry& registry_;
  const ServerSecret secret_;
  Mutex change_mutex_ ACQUIRED_BEFORE(mutex_);
  mutable Mutex mutex_;
  Index index_ GUARDED_BY(mutex_);
  std::unordered_map<std::string, KeyHash> hash_by_tenant_ GUARDED_BY(mutex_);
};

}  // namespace gshare::serve
