// Front: the Open Inference Protocol (KServe v2) REST endpoints of `gshare serve`, as the handler
// of an HttpServer (net/http_server.h). It routes, authenticates, parses and validates, and hands
// each inference to an InferenceBackend; it runs nothing itself. docs/serve.md lists the
// endpoints and the status of every error.
//
// Keys: every endpoint but /v2/health/* needs `Authorization: Bearer <key>`, resolved to a tenant
// by an Authenticator. A tenant sees only its own models: another tenant's model gets the very
// bytes an unknown name gets, so no answer tells whether a name exists elsewhere.
//
// Shares: each inference request takes, from when its header is checked until it is answered,
// one place of `max_in_flight` and its body's declared size (a chunked one: the largest allowed)
// of `max_buffered_bytes`. Both are FairShares (common/fair_share.h): a tenant always gets an
// equal share of each among the tenants active in it and may borrow what the others leave; a
// request beyond what it may take is answered 429 before its body is read.
//
// Parsing: an inference body of at most kInlineParseBytes is parsed on the io thread; a larger one
// on the ParsePool when one is given (the server's is), so that no io thread is held by it. Its
// deadline is stamped when it arrives, before it waits for the pool.
//
// Answers: the backend answers on its own thread (the live node's loop), and the front hands the
// answer over once, to where it is written: the connection's io thread (Responder::Run), or the
// parse pool, in its tenant's turn, for an answer over kInlineParseBytes (a gRPC answer always);
// there an answer the backend left encoded is decoded, named and written. So the backend's thread
// does no codec work for an answer, and an answer of at most kInlineParseBytes over HTTP crosses
// threads once on its way back (one through the parse pool crosses twice).
//
// Threading: Handle runs on the server's io threads and never blocks; the backend's callback may
// run on any thread, before or after Infer returns. The Front, its Authenticator, its backend and
// its clock must outlive the server whose handler it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/common/fair_share.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/net/http_server.h"
#include "gshare/protocol/infer.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/serve/authenticator.h"
#include "gshare/serve/infer_answer.h"
#include "gshare/serve/parse_pool.h"
#include "gshare/tensor/tensor_spec.h"

namespace gshare::serve {

// The one model version the front serves: a function is one model with one version.
inline constexpr std::string_view kModelVersion = "1";

// A model as one tenant sees it.
struct ModelInfo {
  std::string name;
  bool ready = false;  // it can take requests now
  // A request's deadline is its arrival plus this (the function's SLO).
  Duration slo{};
  // For the metadata endpoint; may be left empty ({}: and out of a {...}).
  std::string platform{};  // the runtime
  int max_batch = 0;       // the largest batch it runs (0: not batched); the config endpoint
  // Its tensors (tensor/tensor_spec.h); none: it declares nothing, and requests are not checked.
  // Each request's inputs must fit `inputs` (400 naming the tensor, before it is queued), and its
  // requested outputs be among `outputs`.
  std::vector<TensorSpec> inputs{};
  std::vector<TensorSpec> outputs{};
  // The function is sent tensors in the binary form, which carries any bytes: a BYTES element
  // that is not UTF-8 is refused (400) only where this is false (JSON text cannot carry it).
  bool binary_tensors = false;
};

// A model's counts and durations since it was deployed, across its versions (Triton's statistics
// extension): requests answered with its result and failed (from arrival to answer), and of those
// answered with its result, how long they queued (arrival to run start) and ran (run start to
// answer), how long their inputs took to encode for the function (compute_input) and, for answers
// decoded alone, how long the function's answer took to decode (compute_output), in nanoseconds.
struct ModelStatistics {
  std::string name;
  std::uint64_t success_count = 0;
  std::uint64_t success_ns = 0;
  std::uint64_t fail_count = 0;
  std::uint64_t fail_ns = 0;
  std::uint64_t queue_count = 0;
  std::uint64_t queue_ns = 0;
  std::uint64_t infer_count = 0;
  std::uint64_t infer_ns = 0;
  std::uint64_t input_count = 0;
  std::uint64_t input_ns = 0;
  std::uint64_t output_count = 0;
  std::uint64_t output_ns = 0;
};

// What the front serves from. The server's implementation is the live node behind the scheduler;
// tests give a fake. Every method is called from the server's io threads at once and must not
// block.
class InferenceBackend {
 public:
  // The answer may come still encoded (InferAnswer): the front decodes it where it writes it.
  using InferCallback = std::function<void(Result<InferAnswer>)>;

  virtual ~InferenceBackend() = default;

  // Whether the server can take inference requests at all (/v2/health/ready).
  virtual bool Ready() const = 0;
  // The model `name` of `tenant`, or nothing where the tenant has none by that name (whether or
  // not another tenant has).
  virtual std::optional<ModelInfo> FindModel(std::string_view tenant,
                                             std::string_view name) const = 0;
  // Runs `request` on `tenant`'s model `model`, calling `done` exactly once, from any thread,
  // possibly before Infer returns. `done` must return at once: the front moves the answer's
  // decoding and writing off the calling thread. The error codes the front maps to HTTP statuses:
  // InvalidArgument or OutOfRange (the request does not fit the model) 400, NotFound 404,
  // ResourceExhausted (overload, over quota) 429, Unavailable 503, DeadlineExceeded (it could not
  // start before `deadline`, and never ran) 504, anything else 500. The message reaches the
  // client as it is, except NotFound's, which the front replaces so that it leaks nothing.
  // Returns a ticket for Cancel (0: nothing to cancel).
  virtual std::uint64_t Infer(std::string_view tenant, std::string_view model, InferRequest request,
                              TimePoint deadline, InferCallback done) = 0;
  // The client of request `ticket` went away: where it has not started it never will, and its
  // `done` is called with Cancelled; where it has, it finishes and its answer is dropped. A ticket
  // already answered is ignored. Called from any thread, after or concurrently with `done`.
  virtual void Cancel(std::uint64_t ticket) = 0;
  // The statistics of `tenant`'s models (all of them, or the one named), by name; a backend that
  // keeps none answers none.
  virtual std::vector<ModelStatistics> Statistics(std::string_view /*tenant*/,
                                                  std::optional<std::string_view> /*name*/) const {
    return {};
  }
};

struct FrontOptions {
  std::string server_name = "gshare";
  std::string server_version;  // empty: this build's version
  // Bounds on an inference request's JSON; a body past max_text_bytes is answered 413.
  ParseLimits parse_limits{};
  // Inference requests between their header check and their answer, and the bytes of their
  // bodies, shared fairly between tenants.
  std::size_t max_in_flight = 1'024;
  std::uint64_t max_buffered_bytes = 1ULL << 30;
  // Told of every inference request answered, refusals included: its protocol ("http" or "grpc")
  // and its status (HTTP's; a gRPC answer's is the HTTP status its code maps from; 499 where the
  // client went away first). Any thread; it must not block. Empty: nothing is told.
  std::function<void(std::string_view protocol, int status)> on_inference_answer{};
};

class Front {
 public:
  // `authenticator`, `backend`, `clock` and `parse_pool` (may be null: every body parses on the
  // io thread) must outlive the Front.
  Front(FrontOptions options, const Authenticator& authenticator, InferenceBackend& backend,
        const Clock& clock, ParsePool* parse_pool = nullptr);

  // Answers one request through `responder` (now, or later for an inference).
  void Handle(net::ServerRequest request, net::Responder responder);
  // The header check (HttpServer::HeaderCheck): the answer that refuses `head` for its route, its
  // method, its key, its declared body size or the shares it would take, or nothing (then the
  // shares are taken and kept in head.hold). Handle makes the same checks again, and takes the
  // shares where the request comes without them.
  std::optional<net::HttpResponse> CheckHead(net::ServerRequest& head);
  // What `tenant` holds now of the in-flight places and of the body bytes (tests).
  std::uint64_t InFlightHeldBy(const std::string& tenant) const {
    return in_flight_share_.held_by(tenant);
  }
  std::uint64_t BufferedBytesHeldBy(const std::string& tenant) const {
    return body_share_.held_by(tenant);
  }
  // Tells FrontOptions::on_inference_answer of an inference answered outside the Front (a gRPC
  // request refused before it reached it). Any thread.
  void InferenceAnswered(std::string_view protocol, int status) const {
    if (options_.on_inference_answer) options_.on_inference_answer(protocol, status);
  }
  // Handle, as an HttpServer::Handler bound to this Front.
  net::HttpServer::Handler Handler();

  // An inference request that arrived by another protocol (the gRPC service): the same checks in
  // the same order as an HTTP one (the key in `authorization`, "Bearer <key>"; the message's size
  // `wire_bytes` against the text limit; the shares; the version; the model), then `parse` (called
  // only once those passed, on the calling thread; its error is a 400), then the tensor checks, the
  // same deadline and the same backend. `done` is called exactly once, from any thread, possibly
  // before InferParsed returns: with the answer (model name, version and id set), or with the error
  // an HTTP client would have got (its status and message; a model another tenant has answers as
  // an unknown one). The returned function cancels the request (as a client gone away: Cancel);
  // safe to call from any thread, any number of times, also after `done`.
  struct ParsedOutcome {
    int status = 200;
    std::string message;                    // the error's, when status is not 200
    std::optional<InferResponse> response;  // the answer, when status is 200
  };
  std::function<void()> InferParsed(std::string_view authorization, std::string_view name,
                                    std::optional<std::string_view> version,
                                    std::uint64_t wire_bytes,
                                    const std::function<Result<InferRequest>()>& parse,
                                    std::function<void(ParsedOutcome)> done);

 private:
  // A request routed and its key checked: what it asks, or the answer that refuses it.
  struct Admission {
    std::optional<net::HttpResponse> refusal;  // set: answer this and stop
    enum class Kind { kHealthLive, kHealthReady, kServerMetadata, kModel } kind = Kind::kModel;
    std::string tenant;  // the key's tenant (kServerMetadata, kModel)
    std::string_view name;
    std::optional<std::string_view> version;
    std::string_view action;  // "", "ready" or "infer"
  };
  // The checks that need no body, in an order that depends on nothing a caller cannot see: the
  // path, the method, the key, the declared body size. Views are into `request.target`.
  Admission Admit(const net::ServerRequest& request) const;

  // An inference request's shares, or the 429 that refuses them.
  Result<std::shared_ptr<void>> TakeShares(const std::string& tenant, std::uint64_t body_bytes);

  // `json_bytes`: Inference-Header-Content-Length, where given (infer_body.h).
  void HandleModel(std::string body, std::optional<std::size_t> json_bytes,
                   net::Responder responder, const std::string& tenant, std::string_view name,
                   std::optional<std::string_view> version, std::string_view action,
                   std::shared_ptr<void> shares);
  void Infer(std::string body, std::optional<std::size_t> json_bytes, net::Responder responder,
             const std::string& tenant, const ModelInfo& model, std::shared_ptr<void> shares);
  // Parses `body` (JSON, or the binary data extension's form) and hands the request to the
  // backend (on an io thread or the parse pool); `shares` are kept until it is answered.
  void ParseAndRun(std::string_view body, std::optional<std::size_t> json_bytes,
                   net::Responder responder, const std::string& tenant, const ModelInfo& model,
                   TimePoint deadline, std::shared_ptr<void> shares);
  // The part of every inference after its parse: the model's tensors checked, the answer format's
  // parameters stripped, the request handed to the backend; `done` gets the answer (which names
  // the model, its version and the request's id once taken) or the error's HTTP response, on the
  // backend's thread. Returns the backend's ticket (0: none).
  std::uint64_t Run(InferRequest request, const std::string& tenant, const ModelInfo& model,
                    TimePoint deadline,
                    std::function<void(Result<InferAnswer>, net::HttpResponse)> done);

  const FrontOptions options_;
  const Authenticator& authenticator_;
  InferenceBackend& backend_;
  const Clock& clock_;
  ParsePool* const parse_pool_;
  FairShare in_flight_share_;
  FairShare body_share_;
};

}  // namespace gshare::serve
