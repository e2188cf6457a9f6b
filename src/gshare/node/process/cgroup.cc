#include "gshare/node/process/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gshare {
namespace {

const std::vector<std::string> kRequired = {"memory", "pids"};

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> Words(std::string_view text) {
  std::set<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) words.insert(word);
  return words;
}

Status WriteFile(const std::string& path, const std::string& value) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out) return IoError(fmt::format("opening {}: {}", path, std::strerror(errno)));
  out << value;
  out.flush();
  if (!out)
    return IoError(fmt::format("writing '{}' to {}: {}", value, path, std::strerror(errno)));
  return Status::Ok();
}

std::string Join(const std::vector<std::string>& items) {
  std::string joined;
  for (const auto& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

}  // namespace

std::optional<std::string> FindCgroup2Mount(std::string_view mountinfo) {
  std::istringstream in{std::string(mountinfo)};
  for (std::string line; std::getline(in, line);) {
    // "id parent major:minor root mount-point options [optional...] - fstype source super".
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string field, mount_point;
    for (int i = 0; i < 5 && head >> field; ++i) mount_point = field;
    if (!mount_point.empty()) return mount_point;
  }
  return std::nullopt;
}

std::optional<std::string> OwnCgroup2Path(std::string_view proc_self_cgroup) {
  std::istringstream in{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return std::nullopt;
}

CgroupDecision DecideCgroups(const std::string& node_cgroup_dir) {
  CgroupDecision decision;
  const auto offered_text = ReadFile(node_cgroup_dir + "/cgroup.controllers");
  if (!offered_text) {
    decision.reason = fmt::format(
        "no cgroup for function processes: cannot read {}/cgroup.controllers", node_cgroup_dir);
    return decision;
  }
  const auto offered = Words(*offered_text);
  std::vector<std::string> missing;
  for (const auto& name : kRequired) {
    if (!offered.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    decision.reason = fmt::format(
        "no cgroup for function processes: the cgroup v2 tree at {} offers [{}], not {} (not "
        "delegated)",
        node_cgroup_dir, Join({offered.begin(), offered.end()}), Join(missing));
    return decision;
  }
  const auto enabled = Words(ReadFile(node_cgroup_dir + "/cgroup.subtree_control").value_or(""));
  std::vector<std::string> to_enable;
  for (const auto& name : kRequired) {
    if (!enabled.count(name)) to_enable.push_back("+" + name);
  }
  if (!to_enable.empty()) {
    std::string request;
    for (const auto& item : to_enable) request += (request.empty() ? "" : " ") + item;
    Status status = WriteFile(node_cgroup_dir + "/cgroup.subtree_control", request);
    if (!status.ok()) {
      // cgroup v2 lets a cgroup that holds processes enable no controller for its children, and
      // a service manager's delegated cgroup (systemd's Delegate=yes) holds the node itself. The
      // node moves into a leaf of its own, gshare-node, and tries once more; its instances'
      // cgroups are that leaf's siblings.
      const std::string leaf = node_cgroup_dir + "/gshare-node";
      if ((::mkdir(leaf.c_str(), 0755) == 0 || errno == EEXIST) &&
          WriteFile(leaf + "/cgroup.procs", std::to_string(::getpid())).ok()) {
        const Status again = WriteFile(node_cgroup_dir + "/cgroup.subtree_control", request);
        if (again.ok()) {
          spdlog::info("moved the node into {} so that its cgroup can delegate {} to instances",
                       leaf, Join(kRequired));
          status = Status::Ok();
        } else {
          status = again;
        }
      }
    }
    if (!status.ok()) {
      decision.reason = fmt::format(
          "no cgroup for function processes: {} (a cgroup holding processes cannot enable "
          "controllers for children; run the node in a delegated cgroup of its own)",
          status.message());
      return decision;
    }
  }
  decision.enabled = true;
  decision.parent_dir = node_cgroup_dir;
  decision.reason = fmt::format("function processes get a cgroup each under {} ({})",
                                node_cgroup_dir, Join(kRequired));
  return decision;
}

CgroupDecision DecideCgroupsForThisProcess() {
  const auto mount = FindCgroup2Mount(ReadFile("/proc/self/mountinfo").value_or(""));
  if (!mount) return {false, "", "no cgroup for function processes: cgroup v2 is not mounted"};
  const auto own = OwnCgroup2Path(ReadFile("/proc/self/cgroup").value_or(""));
  if (!own) {
    return {false, "", "no cgroup for function processes: this process has no cgroup v2 path"};
  }
  return DecideCgroups(*own == "/" ? *mount : *mount + *own);
}

Result<std::unique_ptr<InstanceCgroup>> InstanceCgroup::Create(const std::string& parent_dir,
                                                               const std::string& name,
                                                               const CgroupLimits& limits) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument(fmt::format("cgroup name '{}' is not a plain name", name));
  }
  const std::string dir = parent_dir + "/" + name;
  if (mkdir(dir.c_str(), 0755) != 0) {
    return IoError(fmt::format("creating cgroup {}: {}", dir, std::strerror(errno)));
  }
  auto cgroup = std::unique_ptr<InstanceCgroup>(new InstanceCgroup(dir));
  if (limits.memory_max_bytes) {
    GSHARE_RETURN_IF_ERROR(
        WriteFile(dir + "/memory.max", std::to_string(*limits.memory_max_bytes)));
  }
  if (limits.pids_max) {
    GSHARE_RETURN_IF_ERROR(WriteFile(dir + "/pids.max", std::to_string(*limits.pids_max)));
  }
  return cgroup;
}

InstanceCgroup::~InstanceCgroup() {
  // Whatever is left in it (a descendant that left the process group) is killed first, where the
  // kernel offers cgroup.kill (5.14 and later); the rmdir then fails only while they die.
  if (access((dir_ + "/cgroup.kill").c_str(), W_OK) == 0)
    (void)WriteFile(dir_ + "/cgroup.kill", "1");
  if (rmdir(dir_.c_str()) != 0) {
    spdlog::warn("removing cgroup {}: {}", dir_, std::strerror(errno));
  }
}

}  // namespace gshare
