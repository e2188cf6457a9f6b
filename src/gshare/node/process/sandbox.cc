#include "gshare/node/process/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "gshare/node/process/seccomp_filter.h"

namespace gshare {
namespace {

// Enter's steps, numbered above ChildProcess's and gshare-init's.
enum Step : int {
  kStepPrivate = 200,
  kStepRoot,
  kStepFolder,
  kStepFile,
  kStepSymlink,
  kStepBind,
  kStepReadOnly,
  kStepTmpfs,
  kStepProc,
  kStepPivot,
  kStepDetach,
  kStepRootReadOnly,
  kStepHostname,
};

// Whether `path` is `folder` or below it (both lexically normal and absolute).
bool Within(std::string_view path, std::string_view folder) {
  if (folder == "/") return true;
  return path.size() >= folder.size() && path.compare(0, folder.size(), folder) == 0 &&
         (path.size() == folder.size() || path[folder.size()] == '/');
}

constexpr unsigned long kNoSuidNoDev = MS_NOSUID | MS_NODEV;

// mount(2) without the C library (the child may call nothing that binds lazily).
int Mount(const char* source, const char* target, const char* type, unsigned long flags,
          const void* data) {
  return static_cast<int>(::syscall(SYS_mount, source, target, type, flags, data));
}

}  // namespace

std::vector<std::string> SandboxSystemPaths() {
  std::vector<std::string> paths;
  for (const char* path :
       {"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat info {};
    if (::lstat(path, &info) == 0) paths.emplace_back(path);
  }
  return paths;
}

const char* SandboxPlan::StepName(int step) {
  switch (step) {
    case kStepPrivate:
      return "making the mount namespace private";
    case kStepRoot:
      return "mounting the sandbox's root";
    case kStepFolder:
      return "making a mount point";
    case kStepFile:
      return "making a file mount point";
    case kStepSymlink:
      return "making a symlink";
    case kStepBind:
      return "binding a host path";
    case kStepReadOnly:
      return "remounting a bind read-only";
    case kStepTmpfs:
      return "mounting a tmpfs";
    case kStepProc:
      return "mounting /proc";
    case kStepPivot:
      return "pivot_root";
    case kStepDetach:
      return "detaching the host's root";
    case kStepRootReadOnly:
      return "remounting the sandbox's root read-only";
    case kStepHostname:
      return "sethostname";
    default:
      return nullptr;
  }
}

void SandboxPlan::AddParents(const std::string& path) {
  const std::filesystem::path target(path);
  std::vector<std::string> parents;
  for (auto parent = target.parent_path(); parent != parent.root_path();
       parent = parent.parent_path()) {
    parents.push_back(parent.string());
  }
  std::reverse(parents.begin(), parents.end());
  for (const std::string& parent : parents) {
    // Below a bind the host's folders are there already.
    if (Shown(parent)) return;
    if (std::find(made_.begin(), made_.end(), parent) != made_.end()) continue;
    made_.push_back(parent);
    operations_.push_back({Kind::kDir, "", root_dir_ + parent, 0});
  }
}

bool SandboxPlan::Shown(const std::string& path) const {
  return std::any_of(operations_.begin(), operations_.end(), [&](const Operation& o) {
    return (o.kind == Kind::kBindReadOnly || o.kind == Kind::kBindWritable ||
            o.kind == Kind::kSymlink) &&
           Within(path, std::string_view(o.target).substr(root_dir_.size()));
  });
}

void SandboxPlan::Add(Kind kind, std::string source, const std::string& path) {
  const bool shown = Shown(path);  // a host path below a bind: its mount point is there
  AddParents(path);
  if (!shown && (kind == Kind::kBindReadOnly || kind == Kind::kBindWritable ||
                 kind == Kind::kTmpfs || kind == Kind::kProc)) {
    // The mount point: a folder, or an empty file for a file's bind.
    struct stat info {};
    const bool file = (kind == Kind::kBindReadOnly || kind == Kind::kBindWritable) &&
                      ::stat(source.c_str(), &info) == 0 && !S_ISDIR(info.st_mode);
    if (std::find(made_.begin(), made_.end(), path) == made_.end()) {
      made_.push_back(path);
      operations_.push_back({file ? Kind::kFile : Kind::kDir, "", root_dir_ + path, 0});
    }
  }
  // A bind's remount: read-only or not; device nodes keep working on theirs (no MS_NODEV);
  // nothing is setuid.
  unsigned long remount = MS_REMOUNT | MS_BIND | MS_NOSUID;
  if (!Within(path, "/dev")) remount |= MS_NODEV;
  if (kind == Kind::kBindReadOnly) remount |= MS_RDONLY;
  operations_.push_back({kind, std::move(source), root_dir_ + path, remount});
}

Result<SandboxPlan> SandboxPlan::Prepare(const SandboxSpec& spec) {
  SandboxPlan plan;
  const std::filesystem::path root(spec.root_dir);
  if (!root.is_absolute() || root.lexically_normal() == root.root_path()) {
    return InvalidArgument(
        fmt::format("the sandbox's root folder '{}' is not absolute", spec.root_dir));
  }
  plan.root_dir_ = root.lexically_normal().string();
  while (plan.root_dir_.size() > 1 && plan.root_dir_.back() == '/') plan.root_dir_.pop_back();
  plan.hostname_ = spec.hostname;
  GSHARE_ASSIGN_OR_RETURN(plan.filter_, SandboxSeccompFilter());

  auto normal = [](const std::string& path) -> Result<std::string> {
    const std::filesystem::path p(path);
    std::string text = p.lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    if (!p.is_absolute() || text == "/") {
      return InvalidArgument(
          fmt::format("sandbox path '{}' is not an absolute path below /", path));
    }
    struct stat info {};
    if (::stat(text.c_str(), &info) != 0) {
      return InvalidArgument(fmt::format("sandbox path '{}': {}", path, std::strerror(errno)));
    }
    return text;
  };

  // The scratch file systems first: a node folder below /tmp (tests keep theirs there) is bound
  // onto the private /tmp, not hidden by it.
  // /dev: a small tmpfs with the harmless devices bound in (device nodes work on their binds).
  plan.Add(Kind::kTmpfs, "mode=0755,size=1m", "/dev");
  for (const char* device :
       {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
    struct stat info {};
    if (::stat(device, &info) == 0 && S_ISCHR(info.st_mode)) {
      plan.Add(Kind::kBindWritable, device, device);
    }
  }
  for (const std::string& device : spec.devices) {
    struct stat info {};
    const std::filesystem::path path(device);
    if (path.parent_path() != "/dev" || ::stat(device.c_str(), &info) != 0 ||
        !S_ISCHR(info.st_mode)) {
      return InvalidArgument(
          fmt::format("sandbox device '{}' is not a character device directly in /dev", device));
    }
    plan.Add(Kind::kBindWritable, device, device);
  }
  plan.Add(Kind::kSymlink, "/proc/self/fd", "/dev/fd");
  plan.Add(Kind::kSymlink, "/proc/self/fd/0", "/dev/stdin");
  plan.Add(Kind::kSymlink, "/proc/self/fd/1", "/dev/stdout");
  plan.Add(Kind::kSymlink, "/proc/self/fd/2", "/dev/stderr");
  const std::string scratch = fmt::format("mode=1777,size={}", spec.tmp_bytes);
  plan.Add(Kind::kTmpfs, scratch, "/dev/shm");
  plan.Add(Kind::kTmpfs, scratch, "/tmp");
  plan.Add(Kind::kProc, "", "/proc");
  for (const std::string& path : SandboxSystemPaths()) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) continue;
    if (S_ISLNK(info.st_mode)) {
      std::error_code error;
      const auto text = std::filesystem::read_symlink(path, error);
      if (error) return IoError(fmt::format("readlink {}: {}", path, error.message()));
      plan.Add(Kind::kSymlink, text.string(), path);
    } else if (S_ISDIR(info.st_mode)) {
      plan.Add(Kind::kBindReadOnly, path, path);
    }
  }
  std::vector<std::string> read_only;
  for (const std::string& path : spec.read_only) {
    GSHARE_ASSIGN_OR_RETURN(std::string text, normal(path));
    read_only.push_back(std::move(text));
  }
  // Parents before what lies below them, so that a path inside one already shown is skipped.
  std::sort(read_only.begin(), read_only.end(),
            [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  for (const std::string& path : read_only) {
    if (!plan.Shown(path)) plan.Add(Kind::kBindReadOnly, path, path);
  }
  if (::access("/sys/devices/system/cpu", R_OK) == 0 && !plan.Shown("/sys/devices/system/cpu")) {
    plan.Add(Kind::kBindReadOnly, "/sys/devices/system/cpu", "/sys/devices/system/cpu");
  }
  for (const std::string& path : spec.writable) {
    GSHARE_ASSIGN_OR_RETURN(std::string text, normal(path));
    plan.Add(Kind::kBindWritable, text, text);
  }

  // No bind may show a hidden folder: neither it nor a folder above it.
  std::vector<std::string> hidden;
  for (const std::string& path : spec.hidden) {
    std::string text = std::filesystem::path(path).lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    hidden.push_back(std::move(text));
  }
  for (const Operation& o : plan.operations_) {
    if (o.kind != Kind::kBindReadOnly && o.kind != Kind::kBindWritable) continue;
    const std::string shown = o.target.substr(plan.root_dir_.size());
    for (const std::string& folder : hidden) {
      if (Within(folder, shown)) {
        return InvalidArgument(fmt::format(
            "the sandbox would show {}, which holds {}: move the node's data folder out of it",
            shown, folder));
      }
    }
  }
  plan.made_.clear();
  return plan;
}

int SandboxPlan::Enter(int* step) const {
  // Nothing mounted here reaches the host's namespace.
  *step = kStepPrivate;
  if (Mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  *step = kStepRoot;
  if (Mount("tmpfs", root_dir_.c_str(), "tmpfs", kNoSuidNoDev, "mode=0755,size=16m") != 0) {
    return errno;
  }
  // Mount points every uid may pass (the node's umask would make them its own); the program gets
  // the node's umask back.
  const auto node_umask = ::syscall(SYS_umask, 022);
  const int error = Build(step);
  ::syscall(SYS_umask, node_umask);
  if (error != 0) return error;
  // The new root over the old one, and the old one detached: nothing of the host's tree is left.
  *step = kStepPivot;
  if (::syscall(SYS_chdir, root_dir_.c_str()) != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
  *step = kStepDetach;
  if (::syscall(SYS_umount2, ".", MNT_DETACH) != 0) return errno;
  if (::syscall(SYS_chdir, "/") != 0) return errno;
  *step = kStepRootReadOnly;
  if (Mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | kNoSuidNoDev, nullptr) != 0) {
    return errno;
  }
  *step = kStepHostname;
  if (::syscall(SYS_sethostname, hostname_.data(), hostname_.size()) != 0) return errno;
  return 0;
}

int SandboxPlan::Build(int* step) const {
  for (const Operation& o : operations_) {
    const char* target = o.target.c_str();
    switch (o.kind) {
      case Kind::kDir:
        *step = kStepFolder;
        if (::syscall(SYS_mkdirat, AT_FDCWD, target, 0755) != 0 && errno != EEXIST) return errno;
        break;
      case Kind::kFile: {
        *step = kStepFile;
        const int fd = static_cast<int>(::syscall(
            SYS_openat, AT_FDCWD, target, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
        if (fd < 0) return errno;
        ::syscall(SYS_close, fd);
        break;
      }
      case Kind::kSymlink:
        *step = kStepSymlink;
        if (::syscall(SYS_symlinkat, o.source.c_str(), AT_FDCWD, target) != 0) return errno;
        break;
      case Kind::kBindReadOnly:
      case Kind::kBindWritable: {
        *step = kStepBind;
        if (Mount(o.source.c_str(), target, nullptr, MS_BIND, nullptr) != 0) return errno;
        *step = kStepReadOnly;
        if (Mount(nullptr, target, nullptr, o.remount_flags, nullptr) != 0) return errno;
        break;
      }
      case Kind::kTmpfs:
        *step = kStepTmpfs;
        if (Mount("tmpfs", target, "tmpfs", kNoSuidNoDev, o.source.c_str()) != 0) return errno;
        break;
      case Kind::kProc:
        *step = kStepProc;
        if (Mount("proc", target, "proc", kNoSuidNoDev | MS_NOEXEC, nullptr) != 0) return errno;
        break;
    }
  }
  return 0;
}

int SandboxPlan::Confine() const {
  if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  const sock_fprog program{static_cast<unsigned short>(filter_.size()),
                           const_cast<sock_filter*>(filter_.data())};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return errno;
  return 0;
}

}  // namespace gshare
