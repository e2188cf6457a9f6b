// HTTP/1.1 over Unix sockets: how the node talks to its function processes (the function
// protocol, docs/live-node.md), on Boost.Beast.
//
// UnixHttpServer is the function's side: it accepts on a socket path (created mode 0600), reads
// requests with bounded header and body sizes (431 and 413 past them, 400 for a malformed one),
// answers each with the handler's response and closes the connection (one request per
// connection), one connection at a time on its own thread (a node sends one batch at a time to an
// instance).
//
// SendUnixHttpRequest is the node's side: one request on a fresh connection, asynchronous on the
// node's event loop, with a deadline and a bounded response body; its callback runs on the loop.
//
// Errors: Status values, never exceptions (Beast's are caught at this edge).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gshare/common/status.h"
#include "gshare/net/http_message.h"

namespace gshare::net {

class UnixHttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds `socket_path` (an existing socket file there is replaced) and starts serving.
  static Result<std::unique_ptr<UnixHttpServer>> Start(const std::string& socket_path,
                                                       Handler handler, HttpLimits limits = {});
  // Stops accepting, ends the connection being served, joins the thread, removes the socket.
  ~UnixHttpServer();

 private:
  struct Impl;
  explicit UnixHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sends `request` to the server at `socket_path` and calls `done` on `loop` with its response,
// or with DeadlineExceeded after `deadline`, Unavailable when nothing listens, InvalidArgument
// for a response past `limits` or malformed.
void SendUnixHttpRequest(boost::asio::io_context& loop, const std::string& socket_path,
                         HttpRequest request, std::chrono::milliseconds deadline, HttpLimits limits,
                         std::function<void(Result<HttpResponse>)> done);

}  // namespace gshare::net
