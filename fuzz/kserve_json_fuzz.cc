// Fuzz target: the KServe v2 JSON parsers. The input is parsed as a request and as a response
// (with small limits, so that large shapes are refused quickly); whatever parses must serialize,
// and parse back equal.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gshare/protocol/kserve_json.h"
#include "small_limits.h"

namespace {

template <typename Message, typename Parse, typename Serialize>
void RoundTrip(std::string_view text, Parse parse, Serialize serialize) {
  const gshare::ParseLimits limits = SmallParseLimits();
  gshare::Result<Message> message = parse(text, limits);
  if (!message.ok()) {
    if (message.status().code() != gshare::StatusCode::kInvalidArgument) __builtin_trap();
    return;
  }
  const gshare::Result<std::string> written = serialize(*message);
  if (!written.ok()) __builtin_trap();
  const gshare::Result<Message> again = parse(*written, gshare::ParseLimits{});
  if (!again.ok() || !(*again == *message)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RoundTrip<gshare::InferRequest>(text, gshare::ParseInferRequest, gshare::SerializeInferRequest);
  RoundTrip<gshare::InferResponse>(text, gshare::ParseInferResponse,
                                   gshare::SerializeInferResponse);
  (void)gshare::ErrorJson(text);
  return 0;
}
