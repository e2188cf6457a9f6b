#include "gshare/net/unix_http.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>

namespace gshare::net {
namespace {

std::string SocketPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".sock"))
      .string();
}

// Sends one request and runs the loop until it is answered.
Result<HttpResponse> Send(const std::string& path, HttpRequest request,
                          std::chrono::milliseconds deadline = std::chrono::seconds(30),
                          HttpLimits limits = {}) {
  boost::asio::io_context loop;
  std::optional<Result<HttpResponse>> answer;
  SendUnixHttpRequest(loop, path, std::move(request), deadline, limits,
                      [&](Result<HttpResponse> r) { answer = std::move(r); });
  loop.run();
  return std::move(*answer);
}

TEST(UnixHttpTest, AnswersRequestsOverAUnixSocket) {
  const std::string path = SocketPath("http-echo");
  auto server = UnixHttpServer::Start(path, [](const HttpRequest& request) {
    return HttpResponse{request.target == "/v2/health/ready" ? 200 : 404,
                        request.method + " " + request.target + " " + request.body, "text/plain"};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);  // only its owner (and root) may connect

  auto ready = Send(path, {"GET", "/v2/health/ready", "", ""});
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "GET /v2/health/ready ");
  auto posted = Send(path, {"POST", "/v2/models/m/infer", "{\"x\": 1}", "application/json"});
  ASSERT_TRUE(posted.ok());
  EXPECT_EQ(posted->status, 404);
  EXPECT_EQ(posted->body, "POST /v2/models/m/infer {\"x\": 1}");
  EXPECT_EQ(posted->content_type, "text/plain");
}

TEST(UnixHttpTest, BoundsBodiesBothWays) {
  const std::string path = SocketPath("http-limits");
  auto server = UnixHttpServer::Start(path,
                                      [](const HttpRequest&) {
                                        return HttpResponse{200, std::string(5000, 'x')};
                                      },
                                      {.header_bytes = 4096, .body_bytes = 1000});
  ASSERT_TRUE(server.ok());
  auto too_large = Send(path, {"POST", "/", std::string(2000, 'y'), ""});
  ASSERT_TRUE(too_large.ok()) << too_large.status().ToString();
  EXPECT_EQ(too_large->status, 413);
  EXPECT_NE(too_large->body.find("too large"), std::string::npos);
  auto answer_too_large =
      Send(path, {"GET", "/", "", ""}, std::chrono::seconds(30), {.body_bytes = 1000});
  ASSERT_FALSE(answer_too_large.ok());
  EXPECT_EQ(answer_too_large.status().code(), StatusCode::kInvalidArgument);
}

TEST(UnixHttpTest, NothingListeningAndNoAnswerInTimeAreErrors) {
  auto nobody = Send(SocketPath("http-nobody"), {"GET", "/", "", ""});
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);

  const std::string path = SocketPath("http-slow");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = UnixHttpServer::Start(path, [released](const HttpRequest&) {
    released.wait();  // answers only once the client has given up
    return HttpResponse{200, "late"};
  });
  ASSERT_TRUE(server.ok());
  auto late = Send(path, {"GET", "/", "", ""}, std::chrono::milliseconds(50));
  release.set_value();
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace gshare::net
