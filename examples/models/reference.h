// An independent reference implementation of the example models: plain C++ loops, no BLAS, every
// sum and every activation in double, only the final logits rounded to float. The node computes
// it for every response it checks; it shares with forward.h only the layout (model_layout.h), not
// a line of arithmetic.
//
// Cost: about the forward pass's multiply-adds in scalar double arithmetic, several times slower
// than the BLAS path; it allocates its own activations. Pure and thread-safe.
//
// Errors: InvalidArgument for a batch outside [1, kMaxBatch], a weight block of the wrong size, or
// inputs of the wrong size, not finite or beyond kMaxInputMagnitude.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "examples/models/model_layout.h"
#include "gshare/common/status.h"

namespace gshare::examples {

// Logits [batch, classes] for inputs [batch, input_elements].
Result<std::vector<float>> ReferenceForward(ModelKind kind, std::span<const float> weights,
                                            std::span<const float> inputs, std::int64_t batch);

}  // namespace gshare::examples
