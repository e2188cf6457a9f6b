// HttpClient: HTTP/1.1 over TCP for tools and tests (gshare replay, the tests of servers), on
// Boost.Beast. Plain HTTP only: no TLS.
//
// One HttpClient is one connection to one server, opened at the first request and kept alive for
// the next ones; requests go one at a time, each answered before the next is sent. For N
// requests in flight, use N clients on N threads (a pool of workers): the concurrency is bounded
// by the number of clients.
//
// Connections: the connection is reused while the server keeps it alive; it is closed after an
// answer with `Connection: close`, after any error and after a timeout (a late answer must not be
// read as the next request's). A request sent on a reused connection that the server had closed
// meanwhile (it ended an idle connection: the connection breaks before any byte of the answer
// came) is sent once more on a new connection, unless it is a POST: a server that read the
// request and then closed without answering would see it twice, and a POST (an inference, a
// create) must not run twice; it fails with Unavailable instead, and the caller decides. A request
// on a new connection is never sent twice.
//
// Timeouts: one deadline per request covers resolving the host, connecting, writing the request
// and reading the whole answer. Limits: the answer's header and body are bounded (HttpLimits); a
// declared Content-Length past the body limit is refused before any of the body is read.
//
// Threading: an HttpClient is not thread-safe: one thread uses it at a time. It runs its own
// io_context on the calling thread, during Send only.
//
// Errors: Status values, never exceptions (Beast's are caught at this edge). InvalidArgument for
// a malformed URL or request, or an answer that is malformed or past the limits; Unavailable when
// the host does not resolve, nothing listens, or the connection breaks; DeadlineExceeded when the
// deadline passes first.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/net/http_message.h"

namespace gshare::net {

// Where a server listens.
struct HttpEndpoint {
  std::string host;  // a name, an IPv4 address or an IPv6 address (without brackets)
  std::uint16_t port = 80;

  // "host:port", with brackets around an IPv6 address: the Host header's form.
  std::string HostPort() const;
};

// Parses "http://host[:port][/]" (the scheme in any case; the port 80 when left out; an IPv6
// address in brackets). Errors (InvalidArgument, saying what to give instead): another scheme, an
// https URL (this client speaks plain HTTP: point it at the server itself or at a plain-HTTP
// proxy), user information, a path other than "/", a query or a fragment, a port outside
// 1..65535.
Result<HttpEndpoint> ParseHttpUrl(std::string_view url);

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // the path and query, printable ASCII
  std::string body{};
  std::string content_type{};  // empty: no Content-Type
  // Further header fields (Authorization, Accept). Host, Content-Length and Connection are the
  // client's own and must not be named here.
  std::vector<std::pair<std::string, std::string>> headers{};  // {}: may be left out of {...}
};

struct ClientResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // every field, in arrival order
  std::string body;

  // The first field named `name` (case-insensitive), or "" when there is none.
  std::string_view Header(std::string_view name) const;
};

struct HttpClientOptions {
  std::chrono::milliseconds timeout{30'000};  // a request's deadline when Send is given none
  HttpLimits limits;                          // of an answer's header and body
};

class HttpClient {
 public:
  // Connects at the first Send, not here.
  explicit HttpClient(HttpEndpoint endpoint, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and reads its answer (any status), within options.timeout or `timeout`.
  Result<ClientResponse> Send(const ClientRequest& request);
  Result<ClientResponse> Send(const ClientRequest& request, std::chrono::milliseconds timeout);

  // Closes the connection, if one is open; the next Send opens a new one.
  void Close();

  const HttpEndpoint& endpoint() const;
  // Connections opened so far (successful connects): 1 after any number of requests on one
  // kept-alive connection.
  std::uint64_t connections_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gshare::net
