// ReferenceAnswers: what a replayed function is sent and must answer, given by files rather than
// computed here: for a tenant's own model, the model run alone in another process (a script with
// the model's framework) writes them. `gshare replay --references DIR` reads, for each replayed
// function NAME that has them:
//
//   DIR/NAME.request.json    a KServe v2 inference request body: every request to NAME sends it
//   DIR/NAME.response.json   a KServe v2 inference response body: the outputs NAME must answer
//
// An answer is right when it has every reference output (by name) with the same datatype and
// shape, and for FP16, FP32 and FP64 outputs its largest difference from the reference is at most
// `relative_tolerance` times the reference's largest magnitude (an all-zero reference: exactly
// equal; integers, booleans and strings: equal). The files are read with the protocol's own parser
// (kserve_json.h): every number checked finite and in range.
//
// Threading: immutable after Load; Check and request may be called from any thread.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/protocol/infer.h"

namespace gshare::measure {

struct ReferenceAnswer {
  InferRequest request;         // its `id` is set per request by the replay
  std::vector<Tensor> outputs;  // what the answer must hold
};

class ReferenceAnswers {
 public:
  // The references of those of `functions` with both files in `dir`; a function with one file
  // and not the other, or a file that does not parse, is an error naming it. A missing `dir` is
  // an error.
  static Result<ReferenceAnswers> Load(const std::filesystem::path& dir,
                                       const std::vector<std::string>& functions,
                                       double relative_tolerance);

  // The function's reference, or null.
  const ReferenceAnswer* Find(const std::string& function) const;
  // "" when `outputs` answer the reference; why not otherwise.
  std::string Check(const ReferenceAnswer& reference, const std::vector<Tensor>& outputs) const;

  double relative_tolerance() const { return relative_tolerance_; }
  std::size_t size() const { return answers_.size(); }

 private:
  std::map<std::string, ReferenceAnswer> answers_;
  double relative_tolerance_ = 1e-4;
};

}  // namespace gshare::measure
