// BodySink: where the TCP front (http_server.h) writes a request body that is too large to hold
// in memory (a model file uploaded to `gshare serve`), piece by piece as it arrives, instead of
// collecting it into ServerRequest::body.
//
// The header check chooses it (ServerRequest::body_sink, with body_sink_limit); the server then
// calls Append with each piece, in order, on the connection's io thread, one call at a time, and
// hands the request to the handler with the same sink once the whole body has been given to it.
// Where the body fails to arrive (the client goes away, a timeout, a malformed chunk) or Append
// refuses it, the server drops its references to the sink without handing it on: the sink's
// destructor is where a partial body is thrown away.
#pragma once

#include <optional>
#include <string_view>

#include "gshare/net/http_message.h"

namespace gshare::net {

class BodySink {
 public:
  virtual ~BodySink() = default;
  // Takes the next `bytes` of the body. An answer refuses the request: the server sends it and
  // closes the connection (the rest of the body is not read). Must not block for long (an io
  // thread serves other connections too); a sink that throws refuses with 500.
  virtual std::optional<HttpResponse> Append(std::string_view bytes) = 0;
};

}  // namespace gshare::net
