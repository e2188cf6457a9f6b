// FrontBench: what the serving front adds to a request, measured in one run (docs/serve.md).
// `gshare bench front` is its command line.
//
// A `gshare serve` server runs in this process (one emulated GPU, the keepalive policy so that the
// function stays resident and no request waits for a restore) with the bundled echo function
// deployed for one tenant. In rounds, interleaved, one client sends the same small inference
// request sequentially:
//   - direct: to the echo function's own Unix socket, as the best a caller can do there (the
//     faster of a kept-alive connection and a connection per request, which is the node's way);
//   - front: to the server over TCP on a kept-alive connection: key check, JSON parse and
//     validation, the scheduler, the live executor, the function protocol, the answer.
// Figures are the median over rounds of each path's (nearest-rank) p50 and p99, in microseconds
// on the steady clock, and the difference of the p50s: the front's overhead over the best direct
// path.
//
// Then, in the same run, the protocols (ProtocolFigures): the same echo through the front as
// KServe v2 JSON over HTTP, the binary tensor extension over HTTP and gRPC with raw contents
// (where the build has gRPC), for a 1x16 FP32 input and a 1x3x224x224 one: each path's p50 of
// sequential requests (medians over the rounds, the paths interleaved), and its throughput with
// `clients` connections sending at once, the requests they finished over the time they took.
// Every answer is checked to be the input echoed.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::measure {

struct FrontBenchOptions {
  std::filesystem::path function_program;  // gshare-function
  int requests = 2000;                     // sequential requests per path and round
  int rounds = 7;
  std::function<void(const std::string&)> progress;  // a line per round (may be empty)
  // The protocols: sequential requests per path, size and round, and the requests of a
  // throughput measurement (per path and size; the large input takes a tenth of both).
  int protocol_requests = 500;
  int throughput_requests = 4000;
  int clients = 8;
};

// One path and input size: "http_json", "http_binary" or "grpc"; "1x16" or "1x3x224x224".
struct ProtocolFigures {
  std::string path;
  std::string size;
  double p50_us = 0;
  double rps = 0;
};

struct FrontBenchResult {
  double direct_kept_alive_p50_us = 0;
  double direct_kept_alive_p99_us = 0;
  double direct_new_connection_p50_us = 0;
  double direct_new_connection_p99_us = 0;
  double front_p50_us = 0;
  double front_p99_us = 0;
  double overhead_p50_us = 0;  // front p50 less the best direct p50
  std::vector<ProtocolFigures> protocols;
};

Result<FrontBenchResult> RunFrontBench(const FrontBenchOptions& options);

}  // namespace gshare::measure
