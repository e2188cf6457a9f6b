// A plain synchronous HTTP/1.1 client on one connection, for the serve tests that start a server
// on a free port of 127.0.0.1 (front_test.cc, management_api_test.cc). Not thread-safe: one
// client per thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace gshare::serve {

using HttpClientResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Reads give up after 30 s (a safety net so that a broken server fails the test instead of
// hanging it; no assertion depends on it).
class HttpClientForTest {
 public:
  explicit HttpClientForTest(std::uint16_t port) : socket_(io_) {
    boost::system::error_code error;
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port}, error);
    EXPECT_FALSE(error) << error.message();
    const timeval limit{30, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  }

  // The bytes of one request, a key given as Bearer.
  static std::string Request(std::string_view method, std::string_view target,
                             std::optional<std::string_view> key = std::nullopt,
                             std::string_view body = "") {
    std::string raw =
        std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n";
    if (key) raw += "Authorization: Bearer " + std::string(*key) + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") {
      raw += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    raw += "\r\n";
    raw += body;
    return raw;
  }

  // Sends one request and reads its answer; nullopt when the connection ended instead.
  std::optional<HttpClientResponse> Send(std::string_view method, std::string_view target,
                                         std::optional<std::string_view> key = std::nullopt,
                                         std::string_view body = "") {
    return SendRaw(Request(method, target, key, body), method == "HEAD");
  }
  std::optional<HttpClientResponse> SendRaw(std::string_view raw, bool head = false) {
    Write(raw);
    boost::system::error_code error;
    boost::beast::http::response_parser<boost::beast::http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.skip(head);
    boost::beast::http::read(socket_, buffer_, parser, error);
    if (error) return std::nullopt;
    return parser.release();
  }

  // Writes `raw` without reading an answer.
  void Write(std::string_view raw) {
    boost::system::error_code error;
    boost::asio::write(socket_, boost::asio::buffer(raw.data(), raw.size()), error);
    EXPECT_FALSE(error) << error.message();
  }
  // Closes the connection, as a client that stops waiting does.
  void Close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// The whole answer as it came on the wire (status line, every field, body).
inline std::string Wire(const HttpClientResponse& response) {
  std::ostringstream out;
  out << response;
  return out.str();
}

// The message of an `{"error": "..."}` body, or a note that the body is not one.
inline std::string ErrorOf(const HttpClientResponse& response) {
  const nlohmann::json body = nlohmann::json::parse(response.body(), nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_string()) {
    return "<not an error body: " + response.body() + ">";
  }
  return body["error"].get<std::string>();
}

}  // namespace gshare::serve
