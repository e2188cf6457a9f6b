#include "gshare/serve/model_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "gshare/common/unique_fd.h"
#include "gshare/common/units.h"

namespace gshare::serve {
namespace {

constexpr std::size_t kMaxNameBytes = 1024;
constexpr std::size_t kMaxPartBytes = 255;
constexpr std::size_t kMaxParts = 8;
// A body of unknown length reserves storage in steps of this much.
constexpr std::uint64_t kReserveStep = 8ULL << 20;

std::string Errno(std::string_view what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

// The parts of a name that passed CheckName.
std::vector<std::string> PartsOf(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) return parts;
    start = slash + 1;
  }
}

// Opens the folder `parts` under `root` without following a link, creating what is missing with
// `mode` and `gid` (where given) when `create`. NotFound when a part is missing and not created;
// FailedPrecondition when a part is something other than a folder.
Result<UniqueFd> OpenFolder(const std::filesystem::path& root,
                            const std::vector<std::string>& parts, bool create, mode_t mode,
                            std::optional<gid_t> gid) {
  UniqueFd folder(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!folder.valid()) {
    if (errno == ENOENT) return NotFound("no such folder");
    return IoError(Errno("open " + root.string()));
  }
  for (const std::string& part : parts) {
    if (create && ::mkdirat(folder.get(), part.c_str(), mode) == 0) {
      UniqueFd made(
          ::openat(folder.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
      if (!made.valid()) return IoError(Errno("open " + part));
      // The umask took bits from `mode`; the group is the tenant's where its functions need it.
      if (::fchmod(made.get(), mode) != 0) return IoError(Errno("chmod " + part));
      if (gid && ::fchown(made.get(), static_cast<uid_t>(-1), *gid) != 0) {
        return IoError(Errno("chown " + part));
      }
      folder = std::move(made);
      continue;
    }
    if (create && errno != EEXIST) return IoError(Errno("mkdir " + part));
    UniqueFd next(
        ::openat(folder.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!next.valid()) {
      if (errno == ENOENT) return NotFound("no such folder");
      if (errno == ENOTDIR || errno == ELOOP) {
        return FailedPrecondition(fmt::format("'{}' is a file, not a folder", part));
      }
      return IoError(Errno("open " + part));
    }
    folder = std::move(next);
  }
  return folder;
}

// Opens the regular file `name` (passed CheckName) of `tenant` for reading, no link followed on
// the way; NotFound for anything else.
Result<UniqueFd> OpenTenantFile(const std::filesystem::path& models, const std::string& tenant,
                                const std::string& name) {
  const Status not_found = NotFound(fmt::format("file '{}' not found", name));
  std::vector<std::string> parts = PartsOf(name);
  const std::string leaf = parts.back();
  parts.pop_back();
  parts.insert(parts.begin(), tenant);
  auto folder = OpenFolder(models, parts, /*create=*/false, 0, std::nullopt);
  if (!folder.ok()) return folder.status().code() == StatusCode::kIo ? folder.status() : not_found;
  UniqueFd file(
      ::openat(folder->get(), leaf.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat info {};
  if (!file.valid() || ::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) return not_found;
  return file;
}

std::string Hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(size * 2, '0');
  for (std::size_t i = 0; i < size; ++i) {
    hex[2 * i] = kDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return hex;
}

// What a digest was taken of: a file changed since (by hand, say) has another stamp.
std::string StampOf(const struct stat& info) {
  return fmt::format("{} {} {} {}", info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec,
                     info.st_ino);
}

net::HttpResponse Refusal(int status, std::string message) {
  return net::JsonErrorResponse(status, message);
}

}  // namespace

// SHA-256 over the pieces of an upload, or of a file read whole.
struct ModelFileUpload::Hash {
  Hash() : context(EVP_MD_CTX_new()) {
    if (context == nullptr || EVP_DigestInit_ex(context, EVP_sha256(), nullptr) != 1) {
      throw std::runtime_error("SHA-256 is not available");
    }
  }
  ~Hash() { EVP_MD_CTX_free(context); }
  Hash(const Hash&) = delete;
  Hash& operator=(const Hash&) = delete;
  void Update(std::string_view bytes) { EVP_DigestUpdate(context, bytes.data(), bytes.size()); }
  std::string Finish() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    EVP_DigestFinal_ex(context, digest.data(), &size);
    return Hex(digest.data(), size);
  }
  EVP_MD_CTX* context;
};

ModelFileUpload::ModelFileUpload(ModelFileStore& store, std::string tenant, std::string name,
                                 int fd, std::filesystem::path temp, std::uint64_t reserved,
                                 std::unique_ptr<Hash> hash)
    : store_(store),
      tenant_(std::move(tenant)),
      name_(std::move(name)),
      fd_(fd),
      temp_(std::move(temp)),
      reserved_(reserved),
      hash_(std::move(hash)) {}

ModelFileUpload::~ModelFileUpload() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove(temp_, ignored);
  }
  store_.Release(tenant_, reserved_);
  store_.EndUpload(tenant_);
}

std::optional<net::HttpResponse> ModelFileUpload::Append(std::string_view bytes) {
  if (fd_ < 0) return Refusal(500, "the upload has ended");
  const std::uint64_t max_file = store_.options_.max_file_bytes;
  if (bytes.size() > max_file - std::min(written_, max_file)) {
    return Refusal(413, fmt::format("the file is larger than the limit of {} (--max-file)",
                                    FormatBytes(max_file)));
  }
  if (written_ + bytes.size() > reserved_) {
    // A body of unknown length: reserve the next step of the tenant's storage.
    const std::uint64_t needed = written_ + bytes.size() - reserved_;
    const std::uint64_t stored = store_.UsageBesides(tenant_, name_).bytes;
    std::uint64_t more = std::max(needed, kReserveStep);
    // A step ahead, or the last of the quota.
    const bool reserved = store_.Reserve(tenant_, stored, more) ||
                          (needed < more && store_.Reserve(tenant_, stored, more = needed));
    if (!reserved) {
      return Refusal(429, fmt::format("the tenant's files would take more than its storage of {} "
                                      "(--tenant-storage); nothing was kept",
                                      FormatBytes(store_.options_.tenant_storage_bytes)));
    }
    reserved_ += more;
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::error("files: writing {}: {}", temp_.string(), std::strerror(errno));
      return Refusal(errno == ENOSPC ? 507 : 500,
                     errno == ENOSPC ? "the node's disk is full; nothing was kept"
                                     : "the node could not store the file; nothing was kept");
    }
    done += static_cast<std::size_t>(n);
  }
  hash_->Update(bytes);
  written_ += bytes.size();
  return std::nullopt;
}

ModelFileStore::ModelFileStore(ModelFileStoreOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<ModelFileStore>> ModelFileStore::Open(ModelFileStoreOptions options) {
  if (!options.data_dir.is_absolute()) {
    return InvalidArgument("the model file store needs an absolute data directory");
  }
  if (options.max_file_bytes == 0) return InvalidArgument("--max-file must be at least 1 byte");
  std::error_code error;
  for (const char* folder : {"models", "uploads", "digests"}) {
    std::filesystem::create_directories(options.data_dir / folder, error);
    if (error) {
      return IoError(fmt::format("cannot create {}: {}", (options.data_dir / folder).string(),
                                 error.message()));
    }
  }
  // What a crash left half uploaded.
  for (const auto& entry :
       std::filesystem::directory_iterator(options.data_dir / "uploads", error)) {
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
  if (error) return IoError(fmt::format("cannot list the uploads folder: {}", error.message()));
  return std::unique_ptr<ModelFileStore>(new ModelFileStore(std::move(options)));
}

Status ModelFileStore::CheckName(std::string_view name) {
  if (name.empty()) return InvalidArgument("a file name is empty");
  if (name.size() > kMaxNameBytes) {
    return InvalidArgument(fmt::format("a file name has at most {} bytes", kMaxNameBytes));
  }
  if (name.front() == '/') {
    return InvalidArgument("a file name is relative to the tenant's folder; it starts with '/'");
  }
  std::size_t parts = 0;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    const std::string_view part = name.substr(start, slash - start);
    if (++parts > kMaxParts) {
      return InvalidArgument(fmt::format("a file name has at most {} parts", kMaxParts));
    }
    if (part.empty()) return InvalidArgument("a file name has an empty part ('//' or a final '/')");
    if (part.size() > kMaxPartBytes) {
      return InvalidArgument(
          fmt::format("a part of a file name has at most {} bytes", kMaxPartBytes));
    }
    if (part.front() == '.') {
      return InvalidArgument("a part of a file name starts with '.' (no '..', no hidden files)");
    }
    for (const char c : part) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      if (!plain) {
        return InvalidArgument(
            "a file name has letters, digits, '.', '_', '-' and '/' between parts only");
      }
    }
    start = slash + 1;
  }
  return Status::Ok();
}

Status ModelFileStore::CheckTenant(std::string_view tenant) {
  if (tenant.find('/') != std::string_view::npos || !CheckName(tenant).ok()) {
    return InvalidArgument(fmt::format("'{}' is not a tenant's name", tenant));
  }
  return Status::Ok();
}

std::filesystem::path ModelFileStore::PathOf(const std::string& tenant,
                                             const std::string& name) const {
  return options_.data_dir / "models" / tenant / name;
}

std::filesystem::path ModelFileStore::DigestPath(const std::string& tenant,
                                                 const std::string& name) const {
  // Named by the name's own SHA-256: one flat folder, and a file name of 64 bytes whatever the
  // name's length.
  ModelFileUpload::Hash hash;
  hash.Update(name);
  return options_.data_dir / "digests" / tenant / hash.Finish();
}

ModelFileStore::Usage ModelFileStore::UsageOf(const std::string& tenant) const {
  Usage usage;
  std::error_code error;
  const auto folder = options_.data_dir / "models" / tenant;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored) && !it->is_symlink(ignored)) {
      usage.bytes += it->file_size(ignored);
      ++usage.files;
    }
  }
  return usage;
}

std::uint64_t ModelFileStore::StoredBytes(const std::string& tenant) const {
  return UsageOf(tenant).bytes;
}

ModelFileStore::Usage ModelFileStore::UsageBesides(const std::string& tenant,
                                                   const std::string& name) const {
  Usage usage = UsageOf(tenant);
  auto file = OpenTenantFile(options_.data_dir / "models", tenant, name);
  struct stat info {};
  if (!file.ok() || ::fstat(file->get(), &info) != 0) return usage;
  usage.bytes -= std::min(usage.bytes, static_cast<std::uint64_t>(info.st_size));
  usage.files -= std::min<std::uint64_t>(usage.files, 1);
  return usage;
}

bool ModelFileStore::BeginUploadCount(const std::string& tenant) {
  MutexLock lock(mutex_);
  std::size_t& count = uploads_[tenant];
  if (options_.max_uploads != 0 && count >= options_.max_uploads) {
    if (count == 0) uploads_.erase(tenant);
    return false;
  }
  ++count;
  return true;
}

void ModelFileStore::EndUpload(const std::string& tenant) {
  MutexLock lock(mutex_);
  const auto it = uploads_.find(tenant);
  if (it == uploads_.end()) return;
  if (--it->second == 0) uploads_.erase(it);
}

std::uint64_t ModelFileStore::ReservedBytes(const std::string& tenant) const {
  MutexLock lock(mutex_);
  const auto it = reserved_.find(tenant);
  return it == reserved_.end() ? 0 : it->second;
}

bool ModelFileStore::Reserve(const std::string& tenant, std::uint64_t stored, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  std::uint64_t& reserved = reserved_[tenant];
  const std::uint64_t quota = options_.tenant_storage_bytes;
  if (quota != 0) {
    const std::uint64_t taken = stored + reserved;
    if (taken > quota || bytes > quota - taken) {
      if (reserved == 0) reserved_.erase(tenant);
      return false;
    }
  }
  reserved += bytes;
  return true;
}

void ModelFileStore::Release(const std::string& tenant, std::uint64_t bytes) {
  if (bytes == 0) return;
  MutexLock lock(mutex_);
  const auto it = reserved_.find(tenant);
  if (it == reserved_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) reserved_.erase(it);
}

Result<std::shared_ptr<ModelFileUpload>> ModelFileStore::BeginUpload(
    const std::string& tenant, const std::string& name, std::optional<std::uint64_t> declared) {
  GSHARE_RETURN_IF_ERROR(CheckTenant(tenant));
  GSHARE_RETURN_IF_ERROR(CheckName(name));
  if (declared && *declared > options_.max_file_bytes) {
    return OutOfRange(fmt::format("a file of {} bytes is larger than the limit of {} (--max-file)",
                                  *declared, FormatBytes(options_.max_file_bytes)));
  }
  auto hash = std::make_unique<ModelFileUpload::Hash>();  // before anything that must be undone
  // The count first: a refused upload costs no walk of the folder.
  if (!BeginUploadCount(tenant)) {
    return ResourceExhausted(
        fmt::format("the tenant has {} uploads in progress, its limit; try again when one ends",
                    options_.max_uploads));
  }
  const Usage usage = UsageBesides(tenant, name);
  if (options_.max_files != 0 && usage.files + 1 > options_.max_files) {
    EndUpload(tenant);
    return ResourceExhausted(
        fmt::format("the tenant has {} files, its limit; delete one first", usage.files));
  }
  const std::uint64_t reserve = declared.value_or(0);
  if (!Reserve(tenant, usage.bytes, reserve)) {
    EndUpload(tenant);
    return ResourceExhausted(fmt::format(
        "the tenant's files would take more than its storage of {} (--tenant-storage): {} stored, "
        "{} being uploaded",
        FormatBytes(options_.tenant_storage_bytes), FormatBytes(usage.bytes),
        FormatBytes(ReservedBytes(tenant) + reserve)));
  }
  std::uint64_t number = 0;
  {
    MutexLock lock(mutex_);
    number = next_upload_++;
  }
  const auto temp = options_.data_dir / "uploads" / fmt::format("{}-{}", ::getpid(), number);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const std::string why = Errno("create " + temp.string());
    Release(tenant, reserve);
    EndUpload(tenant);
    spdlog::error("files: {}", why);
    return IoError("the node could not store the file");
  }
  return std::shared_ptr<ModelFileUpload>(
      new ModelFileUpload(*this, tenant, name, fd, temp, reserve, std::move(hash)));
}

Result<ModelFileStore::Committed> ModelFileStore::Commit(ModelFileUpload& upload) {
  if (upload.fd_ < 0) return FailedPrecondition("the upload has ended");
  const std::string& tenant = upload.tenant_;
  const std::string& name = upload.name_;
  // Whatever happens next, the upload is spent: its file goes (unless renamed) with the Upload.
  UniqueFd file(std::exchange(upload.fd_, -1));
  // Its reservation is given back once its bytes are stored, or not at all.
  struct GiveBack {
    ModelFileStore& store;
    ModelFileUpload& upload;
    ~GiveBack() { store.Release(upload.tenant_, std::exchange(upload.reserved_, 0)); }
  } give_back{*this, upload};
  const auto remove_temp = [&] {
    std::error_code ignored;
    std::filesystem::remove(upload.temp_, ignored);
  };
  // The quota against what the folder holds now (other uploads may have ended meanwhile).
  const Usage usage = UsageBesides(tenant, name);
  if (options_.max_files != 0 && usage.files + 1 > options_.max_files) {
    remove_temp();
    return ResourceExhausted(
        fmt::format("the tenant has {} files, its limit; nothing was kept", usage.files));
  }
  if (options_.tenant_storage_bytes != 0 &&
      usage.bytes + upload.written_ > options_.tenant_storage_bytes) {
    remove_temp();
    return ResourceExhausted(fmt::format(
        "the tenant's files would take more than its storage of {} (--tenant-storage); nothing "
        "was kept",
        FormatBytes(options_.tenant_storage_bytes)));
  }
  std::optional<gid_t> gid;
  if (options_.reader_group) {
    auto group = options_.reader_group(tenant);
    if (!group.ok()) {
      remove_temp();
      spdlog::error("files: tenant '{}': its functions' group: {}", tenant,
                    group.status().ToString());
      return Internal("the node could not store the file");
    }
    gid = *group;
  }
  const auto fail = [&](std::string why) -> Status {
    remove_temp();
    spdlog::error("files: tenant '{}', '{}': {}", tenant, name, why);
    return IoError("the node could not store the file");
  };
  if (::fsync(file.get()) != 0) return fail(Errno("fsync"));
  if (::fchmod(file.get(), gid ? 0640 : 0600) != 0) return fail(Errno("chmod"));
  if (gid && ::fchown(file.get(), static_cast<uid_t>(-1), *gid) != 0) return fail(Errno("chown"));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) return fail(Errno("stat"));

  std::vector<std::string> parts = PartsOf(name);
  const std::string leaf = parts.back();
  parts.pop_back();
  parts.insert(parts.begin(), tenant);
  auto folder =
      OpenFolder(options_.data_dir / "models", parts, /*create=*/true, gid ? 0750 : 0700, gid);
  if (!folder.ok()) {
    if (folder.status().code() == StatusCode::kFailedPrecondition) {
      remove_temp();
      return FailedPrecondition(
          fmt::format("file '{}' cannot be stored: {}", name, folder.status().message()));
    }
    return fail(folder.status().message());
  }
  struct stat existing {};
  const bool replaced = ::fstatat(folder->get(), leaf.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (replaced && S_ISDIR(existing.st_mode)) {
    remove_temp();
    return FailedPrecondition(fmt::format("'{}' is a folder of files, not a file", name));
  }
  UniqueFd uploads(::open((options_.data_dir / "uploads").c_str(),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!uploads.valid()) return fail(Errno("open the uploads folder"));
  if (::renameat(uploads.get(), upload.temp_.filename().c_str(), folder->get(), leaf.c_str()) !=
      0) {
    return fail(Errno("rename"));
  }
  ::fsync(folder->get());
  std::string sha256 = upload.hash_->Finish();
  if (Status written = WriteDigest(tenant, name, sha256 + " " + StampOf(info)); !written.ok()) {
    spdlog::warn("files: the digest of '{}' of tenant '{}' was not kept: {}", name, tenant,
                 written.message());
  }
  return Committed{{name, upload.written_, std::move(sha256)}, replaced};
}

Status ModelFileStore::WriteDigest(const std::string& tenant, const std::string& name,
                                   std::string_view line) {
  const auto path = DigestPath(tenant, name);
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) return IoError(error.message());
  const auto temp = path.string() + ".new";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << line << '\n';
    if (!out) return IoError("cannot write " + temp);
  }
  std::filesystem::rename(temp, path, error);
  if (error) return IoError(error.message());
  return Status::Ok();
}

Result<ModelFileInfo> ModelFileStore::Describe(const std::string& tenant, const std::string& name) {
  GSHARE_ASSIGN_OR_RETURN(UniqueFd file,
                          OpenTenantFile(options_.data_dir / "models", tenant, name));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) return IoError(Errno("stat " + name));
  const std::string stamp = StampOf(info);
  {
    std::ifstream in(DigestPath(tenant, name));
    std::string line;
    if (std::getline(in, line) && line.size() > 65 && line.substr(65) == stamp) {
      return ModelFileInfo{name, static_cast<std::uint64_t>(info.st_size), line.substr(0, 64)};
    }
  }
  ModelFileUpload::Hash hash;
  std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t n = ::read(file.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(Errno("read " + name));
    if (n == 0) break;
    hash.Update(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
  }
  std::string sha256 = hash.Finish();
  if (Status written = WriteDigest(tenant, name, sha256 + " " + stamp); !written.ok()) {
    spdlog::warn("files: the digest of '{}' of tenant '{}' was not kept: {}", name, tenant,
                 written.message());
  }
  return ModelFileInfo{name, static_cast<std::uint64_t>(info.st_size), std::move(sha256)};
}

Result<std::vector<ModelFileInfo>> ModelFileStore::List(const std::string& tenant) {
  GSHARE_RETURN_IF_ERROR(CheckTenant(tenant));
  std::vector<ModelFileInfo> files;
  const auto folder = options_.data_dir / "models" / tenant;
  std::error_code error;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(folder, error))) return files;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    std::error_code ignored;
    if (it->is_symlink(ignored) || !it->is_regular_file(ignored)) continue;
    const std::string name = it->path().lexically_relative(folder).generic_string();
    if (!CheckName(name).ok()) continue;  // placed by hand under a name the API cannot reach
    auto file = Describe(tenant, name);
    if (!file.ok()) continue;  // gone meanwhile
    files.push_back(*std::move(file));
  }
  if (error) return IoError(fmt::format("cannot list the files: {}", error.message()));
  std::sort(files.begin(), files.end(),
            [](const ModelFileInfo& a, const ModelFileInfo& b) { return a.name < b.name; });
  return files;
}

Result<ModelFileInfo> ModelFileStore::Find(const std::string& tenant, const std::string& name) {
  GSHARE_RETURN_IF_ERROR(CheckTenant(tenant));
  GSHARE_RETURN_IF_ERROR(CheckName(name));
  return Describe(tenant, name);
}

Status ModelFileStore::Delete(const std::string& tenant, const std::string& name) {
  GSHARE_RETURN_IF_ERROR(CheckTenant(tenant));
  GSHARE_RETURN_IF_ERROR(CheckName(name));
  std::vector<std::string> parts = PartsOf(name);
  const std::string leaf = parts.back();
  parts.pop_back();
  parts.insert(parts.begin(), tenant);
  auto folder = OpenFolder(options_.data_dir / "models", parts, /*create=*/false, 0, std::nullopt);
  const Status not_found = NotFound(fmt::format("file '{}' not found", name));
  if (!folder.ok()) {
    return folder.status().code() == StatusCode::kIo ? folder.status() : not_found;
  }
  struct stat info {};
  if (::fstatat(folder->get(), leaf.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(info.st_mode)) {
    return not_found;
  }
  if (::unlinkat(folder->get(), leaf.c_str(), 0) != 0) {
    spdlog::error("files: tenant '{}': {}", tenant, Errno("unlink " + name));
    return IoError("the node could not delete the file");
  }
  std::error_code ignored;
  std::filesystem::remove(DigestPath(tenant, name), ignored);
  // Folders the file leaves empty go too (a folder that is not empty stays, and ends the walk).
  std::vector<std::string> emptied = PartsOf(name);
  emptied.pop_back();
  while (!emptied.empty()) {
    std::vector<std::string> parent = emptied;
    const std::string last = parent.back();
    parent.pop_back();
    parent.insert(parent.begin(), tenant);
    auto above =
        OpenFolder(options_.data_dir / "models", parent, /*create=*/false, 0, std::nullopt);
    if (!above.ok() || ::unlinkat(above->get(), last.c_str(), AT_REMOVEDIR) != 0) break;
    emptied.pop_back();
  }
  return Status::Ok();
}

void ModelFileStore::RemoveTenant(const std::string& tenant) {
  if (!CheckTenant(tenant).ok()) return;
  for (const char* folder : {"models", "digests"}) {
    std::error_code error;
    std::filesystem::remove_all(options_.data_dir / folder / tenant, error);
    if (error) {
      spdlog::warn("files: cannot remove the {} of tenant '{}': {}", folder, tenant,
                   error.message());
    }
  }
}

}  // namespace gshare::serve
