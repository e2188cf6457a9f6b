#include "gshare/fn/control_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gshare::fn {
namespace {

constexpr const char* kVariable = "GSHARE_CONTROL_SESSION_TEST_NUMBER";

Result<std::uint64_t> ReadWith(const char* value, int base) {
  if (value == nullptr) {
    ::unsetenv(kVariable);
  } else {
    ::setenv(kVariable, value, 1);
  }
  return ReadNodeNumber(kVariable, base);
}

TEST(ControlSessionTest, ReadsTheNodesNumbersAndNamesWhatIsWrong) {
  EXPECT_EQ(ReadWith("42", 10).value(), 42u);
  EXPECT_EQ(ReadWith("0x7e0000000000", 16).value(), 0x7e0000000000u);
  EXPECT_EQ(ReadWith("7E00", 16).value(), 0x7e00u);
  const Status unset = ReadWith(nullptr, 10).status();
  EXPECT_EQ(unset.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unset.message().find("must be started by a gshare node"), std::string::npos);
  EXPECT_EQ(ReadWith("", 10).status().code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"12x", "-1", "0x", " 3", "99999999999999999999999"}) {
    const Status status = ReadWith(bad, bad[0] == '0' ? 16 : 10).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("is not a number"), std::string::npos) << bad;
  }
  ::unsetenv(kVariable);
}

TEST(ControlSessionTest, SealingMarksTheChannelCloseOnExecAndRefusesABadOne) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  ASSERT_EQ(::fcntl(pair->second.get(), F_SETFD, 0), 0);  // as a child inherits it
  ASSERT_TRUE(SealFunctionProcess(pair->second.get()).ok());
  EXPECT_NE(::fcntl(pair->second.get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(SealFunctionProcess(-1).code(), StatusCode::kInvalidArgument);
}

TEST(ControlSessionTest, ServesUntilTheNodeIsGoneLoggingWhatItSkips) {
  auto pair = ControlChannel::CreatePair();
  ASSERT_TRUE(pair.ok());
  ControlChannel& node = pair->first;
  ControlChannel function(std::move(pair->second));
  // An unknown message type is skipped; a failed handling is logged and the loop goes on; one
  // failed with kUnavailable ends it.
  ControlMessage unknown{};
  unknown.type = static_cast<ControlType>(999);
  ASSERT_TRUE(node.Send(unknown).ok());
  ASSERT_TRUE(node.Send({.type = ControlType::kLock}).ok());
  ASSERT_TRUE(node.Send({.type = ControlType::kUnlock}).ok());
  ASSERT_TRUE(node.Send({.type = ControlType::kSetQuota, .a = 1}).ok());
  std::vector<ControlType> handled;
  std::vector<std::string> logged;
  const Status ended = ServeControl(
      function,
      [&](ReceivedMessage received) {
        handled.push_back(received.message.type);
        if (received.message.type == ControlType::kLock) return FailedPrecondition("not mapped");
        if (received.message.type == ControlType::kUnlock) return Unavailable("stop here");
        return Status::Ok();
      },
      [&](std::string_view line) { logged.emplace_back(line); });
  EXPECT_EQ(ended.code(), StatusCode::kUnavailable);
  EXPECT_EQ(handled, (std::vector<ControlType>{ControlType::kLock, ControlType::kUnlock}));
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_EQ(logged[0].rfind("ignored: ", 0), 0u);
  EXPECT_NE(logged[1].find("not mapped"), std::string::npos);
  EXPECT_NE(logged[2].find("stop here"), std::string::npos);
  // The node closing the channel ends the loop too, with the channel's reason.
  node = ControlChannel();
  const Status closed = ServeControl(
      function, [](ReceivedMessage) { return Status::Ok(); }, [](std::string_view) {});
  EXPECT_FALSE(closed.ok());
}

}  // namespace
}  // namespace gshare::fn
