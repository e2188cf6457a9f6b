#include "gshare/fn/control_session.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>

#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace gshare::fn {

Result<std::uint64_t> ReadNodeNumber(const char* name, int base) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    return InvalidArgument(fmt::format(
        "{} is not set: this program is a gshare function and must be started by a gshare node",
        name));
  }
  std::string_view view(text);
  if (base == 16 && (view.starts_with("0x") || view.starts_with("0X"))) view.remove_prefix(2);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value, base);
  if (view.empty() || error != std::errc() || end != view.data() + view.size()) {
    return InvalidArgument(fmt::format("{}={} is not a number", name, text));
  }
  return value;
}

std::uint64_t PidAsTheNodeSeesIt() {
  char text[32];
  const ssize_t length = ::readlink("/proc/self", text, sizeof text - 1);
  if (length > 0) {
    text[length] = '\0';
    const long pid = std::strtol(text, nullptr, 10);
    if (pid > 0) return static_cast<std::uint64_t>(pid);
  }
  return static_cast<std::uint64_t>(::getpid());
}

Status SealFunctionProcess(int control_fd) {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Internal(fmt::format("prctl(PR_SET_DUMPABLE): {}", std::strerror(errno)));
  }
  if (::fcntl(control_fd, F_SETFD, FD_CLOEXEC) != 0) {
    return InvalidArgument(
        fmt::format("the control channel (fd {}): {}", control_fd, std::strerror(errno)));
  }
  return Status::Ok();
}

Status ServeControl(const ControlChannel& channel,
                    const std::function<Status(ReceivedMessage)>& handle,
                    const std::function<void(std::string_view)>& log) {
  for (;;) {
    auto received = channel.Receive();
    if (!received.ok()) {
      if (received.status().code() == StatusCode::kInvalidArgument) {
        log("ignored: " + received.status().ToString());
        continue;
      }
      return received.status();
    }
    Status handled = handle(std::move(received).value());
    if (!handled.ok()) {
      log(handled.ToString());
      if (handled.code() == StatusCode::kUnavailable) return handled;
    }
  }
}

}  // namespace gshare::fn
