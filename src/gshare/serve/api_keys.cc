#include "gshare/serve/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "gshare/serve/data_dir.h"

namespace gshare::serve {
namespace {

constexpr std::size_t kMinAdminKeyBytes = 16;

std::string Base64Url(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const auto b1 = static_cast<unsigned char>(bytes[i + 1]);
    const auto b2 = static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[b0 >> 2];
    out += kAlphabet[((b0 & 0x03) << 4) | (b1 >> 4)];
    out += kAlphabet[((b1 & 0x0f) << 2) | (b2 >> 6)];
    out += kAlphabet[b2 & 0x3f];
  }
  if (i + 1 == bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    out += kAlphabet[b0 >> 2];
    out += kAlphabet[(b0 & 0x03) << 4];
  } else if (i + 2 == bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const auto b1 = static_cast<unsigned char>(bytes[i + 1]);
    out += kAlphabet[b0 >> 2];
    out += kAlphabet[((b0 & 0x03) << 4) | (b1 >> 4)];
    out += kAlphabet[(b1 & 0x0f) << 2];
  }
  return out;
}

std::string_view Trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

Status ValidateAdminKey(std::string_view key, const std::filesystem::path& source) {
  if (key.size() < kMinAdminKeyBytes || key.size() > kMaxApiKeyBytes) {
    return InvalidArgument(fmt::format("{}: an admin key has {} to {} characters; this one has {}",
                                       source.string(), kMinAdminKeyBytes, kMaxApiKeyBytes,
                                       key.size()));
  }
  for (const char c : key) {
    if (c <= ' ' || c > '~') {
      return InvalidArgument(fmt::format(
          "{}: an admin key has only visible ASCII characters (no spaces)", source.string()));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> RandomBytes(std::size_t count) {
  std::string bytes(count, '\0');
  std::size_t done = 0;
  while (done < count) {
    const ssize_t got = ::getrandom(bytes.data() + done, count - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("getrandom failed: {}", std::system_category().message(errno)));
    }
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

Result<std::string> GenerateApiKey() {
  GSHARE_ASSIGN_OR_RETURN(const std::string bytes, RandomBytes(kApiKeyRandomBytes));
  return std::string(kApiKeyPrefix) + Base64Url(bytes);
}

bool KeyHashesEqual(const KeyHash& a, const KeyHash& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<ServerSecret> ServerSecret::LoadOrCreate(const std::filesystem::path& data_dir) {
  GSHARE_RETURN_IF_ERROR(EnsureDataDir(data_dir));
  const std::filesystem::path path = data_dir / kServerSecretFileName;
  auto existing = ReadPrivateFile(path, kServerSecretBytes);
  if (existing.status().code() == StatusCode::kNotFound) {
    GSHARE_ASSIGN_OR_RETURN(const std::string bytes, RandomBytes(kServerSecretBytes));
    GSHARE_ASSIGN_OR_RETURN(const bool created, CreatePrivateFileOnce(path, bytes));
    if (created) return ServerSecret(bytes);
    // Another process created it first: use theirs.
    existing = ReadPrivateFile(path, kServerSecretBytes);
  }
  if (!existing.ok()) return existing.status();
  if (existing->size() != kServerSecretBytes) {
    return InvalidArgument(fmt::format("{}: holds {} bytes; a server secret is {} bytes",
                                       path.string(), existing->size(), kServerSecretBytes));
  }
  return ServerSecret(std::move(existing).value());
}

ServerSecret ServerSecret::FromBytes(std::string_view bytes) {
  return ServerSecret(std::string(bytes));
}

KeyHash ServerSecret::Hash(std::string_view key) const {
  KeyHash hash{};
  unsigned int length = 0;
  // HMAC with SHA-256 cannot fail for in-memory input short of an allocation failure; a failure
  // leaves the all-zero hash, which no stored hash equals by chance.
  const unsigned char* result =
      HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(key.data()), key.size(), hash.data(), &length);
  if (result == nullptr || length != hash.size()) hash.fill(0);
  return hash;
}

Result<AdminKey> LoadOrCreateAdminKey(const std::filesystem::path& data_dir,
                                      const std::filesystem::path& key_file) {
  if (!key_file.empty()) {
    auto text = ReadPrivateFile(key_file, 4 * kMaxApiKeyBytes);
    if (!text.ok()) return text.status().WithContext("the admin key file");
    const std::string_view key = Trim(*text);
    GSHARE_RETURN_IF_ERROR(ValidateAdminKey(key, key_file));
    return AdminKey{std::string(key), false};
  }
  GSHARE_RETURN_IF_ERROR(EnsureDataDir(data_dir));
  const std::filesystem::path path = data_dir / kAdminKeyFileName;
  auto text = ReadPrivateFile(path, 4 * kMaxApiKeyBytes);
  if (text.status().code() == StatusCode::kNotFound) {
    GSHARE_ASSIGN_OR_RETURN(const std::string key, GenerateApiKey());
    GSHARE_ASSIGN_OR_RETURN(const bool created, CreatePrivateFileOnce(path, key + "\n"));
    if (created) return AdminKey{key, true};
    text = ReadPrivateFile(path, 4 * kMaxApiKeyBytes);
  }
  if (!text.ok()) return text.status();
  const std::string_view key = Trim(*text);
  GSHARE_RETURN_IF_ERROR(ValidateAdminKey(key, path));
  return AdminKey{std::string(key), false};
}

Result<std::unique_ptr<TenantKeys>> TenantKeys::Open(Registry& registry, ServerSecret secret) {
  std::unique_ptr<TenantKeys> keys(new TenantKeys(registry, std::move(secret)));
  GSHARE_RETURN_IF_ERROR(keys->Reload());
  return keys;
}

std::uint64_t TenantKeys::Bucket(const KeyHash& hash) {
  std::uint64_t bucket = 0;
  std::memcpy(&bucket, hash.data(), sizeof(bucket));
  return bucket;
}

void TenantKeys::Forget(std::string_view tenant) {
  const auto found = hash_by_tenant_.find(std::string(tenant));
  if (found == hash_by_tenant_.end()) return;
  const auto bucket = index_.find(Bucket(found->second));
  if (bucket != index_.end()) {
    std::erase_if(bucket->second, [&](const Entry& entry) { return entry.tenant == tenant; });
    if (bucket->second.empty()) index_.erase(bucket);
  }
  hash_by_tenant_.erase(found);
}

void TenantKeys::Remember(std::string_view tenant, const KeyHash& hash) {
  Forget(tenant);
  index_[Bucket(hash)].push_back(Entry{hash, std::string(tenant)});
  hash_by_tenant_.emplace(std::string(tenant), hash);
}

Result<std::string> TenantKeys::AddTenant(std::string_view name) {
  MutexLock change(change_mutex_);
  GSHARE_ASSIGN_OR_RETURN(std::string key, GenerateApiKey());
  const KeyHash hash = secret_.Hash(key);
  GSHARE_RETURN_IF_ERROR(registry_.AddTenant(name, hash));
  MutexLock lock(mutex_);
  Remember(name, hash);
  return key;
}

Result<std::string> TenantKeys::RotateKey(std::string_view name) {
  MutexLock change(change_mutex_);
  GSHARE_ASSIGN_OR_RETURN(std::string key, GenerateApiKey());
  const KeyHash hash = secret_.Hash(key);
  GSHARE_RETURN_IF_ERROR(registry_.SetTenantKeyHash(name, hash));
  MutexLock lock(mutex_);
  Remember(name, hash);
  return key;
}

Status TenantKeys::RemoveTenant(std::string_view name) {
  MutexLock change(change_mutex_);
  GSHARE_RETURN_IF_ERROR(registry_.RemoveTenant(name));
  MutexLock lock(mutex_);
  Forget(name);
  return Status::Ok();
}

Status TenantKeys::Reload() {
  MutexLock change(change_mutex_);
  GSHARE_ASSIGN_OR_RETURN(const auto tenants, registry_.ListTenants());
  Index index;
  std::unordered_map<std::string, KeyHash> hash_by_tenant;
  for (const auto& tenant : tenants) {
    index[Bucket(tenant.key_hash)].push_back(Entry{tenant.key_hash, tenant.name});
    hash_by_tenant.emplace(tenant.name, tenant.key_hash);
  }
  MutexLock lock(mutex_);
  index_ = std::move(index);
  hash_by_tenant_ = std::move(hash_by_tenant);
  return Status::Ok();
}

std::optional<std::string> TenantKeys::Authenticate(std::string_view key) const {
  if (key.empty() || key.size() > kMaxApiKeyBytes) return std::nullopt;
  const KeyHash hash = secret_.Hash(key);
  MutexLock lock(mutex_);
  const auto bucket = index_.find(Bucket(hash));
  if (bucket == index_.end()) return std::nullopt;
  for (const Entry& entry : bucket->second) {
    if (KeyHashesEqual(entry.hash, hash)) return entry.tenant;
  }
  return std::nullopt;
}

bool TenantKeys::Matches(std::string_view key, const KeyHash& expected) const {
  if (key.empty() || key.size() > kMaxApiKeyBytes) return false;
  return KeyHashesEqual(secret_.Hash(key), expected);
}

}  // namespace gshare::serve
