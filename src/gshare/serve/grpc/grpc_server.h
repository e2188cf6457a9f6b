// GrpcServer: the KServe v2 gRPC service `inference.GRPCInferenceService` of `gshare serve`
// (protocol/grpc/inference.proto), on its own listening address beside the HTTP server.
//
// It serves no logic of its own: an inference goes through Front::InferParsed (the same key
// check, tenant isolation, size limit and fair shares, then the parse of its tensors on the gRPC
// thread, then the same deadline, tensor checks and backend as HTTP),
// and every other call is made, on the caller's behalf, as the equivalent HTTP request to the
// server's HTTP handler (health, metadata, config, statistics, the repository extension), whose
// answer is translated back. The key travels as `authorization: Bearer <key>` metadata. Each HTTP
// error becomes its gRPC status (GrpcCodeFor) with the same message; ServerReady and ModelReady
// answer `ready: false` where HTTP answers 503. ModelStreamInfer answers each request of a stream
// with one ModelStreamInferResponse, in the order they finish, with `error_message` set for a
// failed one (its infer_response carrying the request's id); a cancelled stream cancels its
// requests that have not started; a stream keeps at most kStreamInFlight requests unanswered (it
// reads no more until one is). A message larger than the front's text limit is refused by gRPC
// (RESOURCE_EXHAUSTED).
//
// Shutdown: BeginShutdown (any thread) stops new calls and gives those in flight `drain` to
// finish; Wait blocks until they have. The Front and the HTTP handler must outlive the server.
//
// Threading: calls are served on gRPC's threads; nothing here blocks them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gshare/common/status.h"
#include "gshare/net/http_server.h"
#include "gshare/serve/front.h"

namespace grpc {
class Server;
}

namespace gshare::serve {

inline constexpr std::string_view kDefaultGrpcListen = "127.0.0.1:8081";
inline constexpr std::size_t kStreamInFlight = 64;

struct GrpcServerOptions {
  std::string listen = std::string(kDefaultGrpcListen);  // HOST:PORT; port 0: any free one
  ParseLimits parse_limits{};                            // the front's
};

// The gRPC status code (grpc::StatusCode's value) of an HTTP error status.
int GrpcCodeFor(int http_status);

class GrpcServer {
 public:
  using HttpHandler = std::function<void(net::ServerRequest, net::Responder)>;

  // Listens and starts serving; Unavailable naming the address when it cannot listen there.
  static Result<std::unique_ptr<GrpcServer>> Start(GrpcServerOptions options, Front& front,
                                                   HttpHandler http);
  ~GrpcServer();  // BeginShutdown with no drain, then Wait
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  int port() const { return port_; }
  void BeginShutdown(std::chrono::milliseconds drain);
  void Wait();

  class Service;

 private:
  GrpcServer() = default;

  int port_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex shutdown_mutex_;
  std::thread shutdown_;  // runs the shutdown's drain
};

}  // namespace gshare::serve
