#include "gshare/fn/control_channel.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace gshare::fn {
namespace {

TEST(ControlChannelTest, CarriesMessagesAndOneDescriptorForAMap) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  ControlChannel& node = pair->first;
  ControlChannel function(std::move(pair->second));

  ASSERT_TRUE(function.Send({.type = ControlType::kHello, .a = 42, .b = 0x1000, .c = 4096}).ok());
  auto hello = node.Receive();
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ(hello->message.type, ControlType::kHello);
  EXPECT_EQ(hello->message.a, 42u);
  EXPECT_EQ(hello->message.b, 0x1000u);
  EXPECT_EQ(hello->message.c, 4096u);
  EXPECT_FALSE(hello->fd.valid());

  UniqueFd segment(::memfd_create("test", MFD_CLOEXEC));
  ASSERT_TRUE(segment.valid());
  ASSERT_EQ(::write(segment.get(), "gpu", 3), 3);
  ASSERT_TRUE(
      node.Send({.type = ControlType::kMap, .a = 4096, .b = 4096, .c = 7}, segment.get()).ok());
  auto map = function.Receive();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->message.type, ControlType::kMap);
  EXPECT_EQ(map->message.c, 7u);
  ASSERT_TRUE(map->fd.valid());
  EXPECT_NE(map->fd.get(), segment.get());
  char text[3];
  ASSERT_EQ(::pread(map->fd.get(), text, 3, 0), 3);  // the same file
  EXPECT_EQ(std::memcmp(text, "gpu", 3), 0);
}

TEST(ControlChannelTest, RejectsMalformedDatagramsAndStaysUsable) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  ControlChannel& node = pair->first;
  ControlChannel function(std::move(pair->second));

  ASSERT_EQ(::send(function.fd(), "abc", 3, 0), 3);
  auto short_datagram = node.Receive();
  ASSERT_FALSE(short_datagram.ok());
  EXPECT_EQ(short_datagram.status().code(), StatusCode::kInvalidArgument);

  char unknown[sizeof(ControlMessage)] = {};
  const std::uint32_t type = 55;
  std::memcpy(unknown, &type, sizeof(type));
  ASSERT_EQ(::send(function.fd(), unknown, sizeof(unknown), 0),
            static_cast<ssize_t>(sizeof(unknown)));
  auto unknown_type = node.Receive();
  ASSERT_FALSE(unknown_type.ok());
  EXPECT_NE(unknown_type.status().message().find("unknown message type 55"), std::string::npos);

  // A descriptor where none belongs is refused (and closed, not leaked to the receiver).
  UniqueFd stray(::memfd_create("stray", MFD_CLOEXEC));
  ASSERT_TRUE(function.Send({.type = ControlType::kLocked}, stray.get()).ok());
  auto with_fd = node.Receive();
  ASSERT_FALSE(with_fd.ok());
  EXPECT_NE(with_fd.status().message().find("locked with 1 descriptors"), std::string::npos);

  // A map without its descriptor is refused too.
  ASSERT_TRUE(node.Send({.type = ControlType::kMap}).ok());
  auto map_without = function.Receive();
  ASSERT_FALSE(map_without.ok());

  ASSERT_TRUE(function.Send({.type = ControlType::kUnmapped}).ok());
  auto next = node.Receive();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->message.type, ControlType::kUnmapped);
}

TEST(ControlChannelTest, TryReceiveSaysWhenNothingWaitsAndReceiveSeesTheClose) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  ControlChannel& node = pair->first;
  bool would_block = false;
  auto nothing = node.TryReceive(would_block);
  EXPECT_FALSE(nothing.ok());
  EXPECT_TRUE(would_block);

  pair->second.Reset();  // the function end closes
  auto closed = node.Receive();
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(node.Send({.type = ControlType::kLock}).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gshare::fn
