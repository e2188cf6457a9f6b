#include "gshare/fn/control_channel.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace gshare::fn {
namespace {

bool KnownType(std::uint32_t type) {
  return (type >= 1 && type <= 7) || (type >= 101 && type <= 106);
}

}  // namespace

std::string_view ControlTypeName(ControlType type) {
  switch (type) {
    case ControlType::kHello:
      return "hello";
    case ControlType::kMapped:
      return "mapped";
    case ControlType::kLocked:
      return "locked";
    case ControlType::kUnmapped:
      return "unmapped";
    case ControlType::kComputeAcquire:
      return "compute-acquire";
    case ControlType::kComputeRelease:
      return "compute-release";
    case ControlType::kQuotaExceeded:
      return "quota-exceeded";
    case ControlType::kMap:
      return "map";
    case ControlType::kLock:
      return "lock";
    case ControlType::kUnmap:
      return "unmap";
    case ControlType::kUnlock:
      return "unlock";
    case ControlType::kComputeGrant:
      return "compute-grant";
    case ControlType::kSetQuota:
      return "set-quota";
  }
  return "unknown";
}

Result<std::pair<ControlChannel, UniqueFd>> ControlChannel::CreatePair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return IoError(fmt::format("control channel: socketpair: {}", std::strerror(errno)));
  }
  UniqueFd node(fds[0]);
  UniqueFd function(fds[1]);
  return std::pair<ControlChannel, UniqueFd>(ControlChannel(std::move(node)), std::move(function));
}

Status ControlChannel::Send(const ControlMessage& message, int fd) const {
  iovec iov{const_cast<ControlMessage*>(&message), sizeof(message)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  for (;;) {
    const ssize_t sent = ::sendmsg(socket_.get(), &header, MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(sizeof(message))) return Status::Ok();
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)) {
      return Unavailable(
          fmt::format("control channel: peer gone sending {}", ControlTypeName(message.type)));
    }
    return IoError(fmt::format("control channel: sending {}: {}", ControlTypeName(message.type),
                               sent < 0 ? std::strerror(errno) : "short datagram"));
  }
}

Result<ReceivedMessage> ControlChannel::Receive() const { return ReceiveWithFlags(0, nullptr); }

Result<ReceivedMessage> ControlChannel::TryReceive(bool& would_block) const {
  return ReceiveWithFlags(MSG_DONTWAIT, &would_block);
}

Result<ReceivedMessage> ControlChannel::ReceiveWithFlags(int flags, bool* would_block) const {
  if (would_block != nullptr) *would_block = false;
  ReceivedMessage received;
  // One byte more than a message, so that an oversized datagram is seen as such.
  alignas(ControlMessage) char buffer[sizeof(ControlMessage) + 1];
  iovec iov{buffer, sizeof(buffer)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  // Room for a few descriptors: any beyond the one a kMap may carry are closed, not leaked.
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = ::recvmsg(socket_.get(), &header, flags | MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && would_block != nullptr) {
    *would_block = true;
    return Unavailable("control channel: would block");
  }
  if (got < 0) {
    return IoError(fmt::format("control channel: recvmsg: {}", std::strerror(errno)));
  }
  if (got == 0) return Unavailable("control channel: the peer closed it");

  // Take every descriptor first, so that none leaks whatever is wrong with the datagram.
  int descriptors = 0;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&header); cmsg != nullptr; cmsg = CMSG_NXTHDR(&header, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (descriptors++ == 0) {
        received.fd.Reset(fd);
      } else {
        ::close(fd);
      }
    }
  }
  if ((header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      static_cast<std::size_t>(got) != sizeof(ControlMessage)) {
    return InvalidArgument(fmt::format("control channel: a datagram of {} bytes, not {}", got,
                                       sizeof(ControlMessage)));
  }
  std::memcpy(&received.message, buffer, sizeof(ControlMessage));
  const auto raw_type = static_cast<std::uint32_t>(received.message.type);
  if (!KnownType(raw_type)) {
    return InvalidArgument(fmt::format("control channel: unknown message type {}", raw_type));
  }
  const bool wants_fd = received.message.type == ControlType::kMap;
  if (wants_fd != (descriptors == 1)) {
    return InvalidArgument(fmt::format("control channel: {} with {} descriptors",
                                       ControlTypeName(received.message.type), descriptors));
  }
  return received;
}

}  // namespace gshare::fn
