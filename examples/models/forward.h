// The example models' forward pass on OpenBLAS (or, in a build without it, on the plain loops of
// blas_loops.cc; see blas.h): the kernel an example function runs on its (emulated) device memory.
//
// Forward computes logits [batch, classes] from inputs [batch, input_elements] with the model's
// weights, given as one block in the layout of model_layout.h. All memory is the caller's: the
// weight block (read only), the inputs (read only), a workspace of at least
// WorkspaceFloats(kind, batch) floats (overwritten; its prior contents never read) and the logits.
// Forward allocates nothing on the heap itself, so a function can carve every buffer out of its GPU
// slice. (OpenBLAS packs operands in its own buffer pool, set up on first use.)
//
// Linear layers are one cblas_sgemm over the batch (cblas_sgemv for a batch of one, which reads
// the weights once instead of packing them: 4 times faster for the MLP); each convolution is
// im2col into the workspace and one cblas_sgemm per example. Rounding differs from the double
// reference (reference.h) by far less than the comparison's tolerance (compare.h). With one BLAS
// thread the logits of a given batch are deterministic, call after call and wherever the buffers
// lie; an example's logits computed in a batch are not bit-identical to the same example alone
// (another routine, or another blocking of the product, sums in another order), only equal within
// tolerance.
//
// Threads: function processes run with OPENBLAS_NUM_THREADS=1 (one thread per function, as the
// node shares the CPU among functions and time-slices the GPU itself); UseSingleBlasThread sets
// the same at run time. Forward keeps no state: concurrent calls with distinct workspaces and
// outputs are safe where the BLAS library is (Debian's OpenBLAS pthread build is).
//
// Errors: InvalidArgument for a batch outside [1, kMaxBatch], spans of the wrong size, a workspace
// too small, or inputs not finite or beyond kMaxInputMagnitude (weights.h). Weights are not
// checked here: check them once at load with ValidateWeights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "examples/models/model_layout.h"
#include "gshare/common/status.h"

namespace gshare::examples {

// Floats of workspace Forward needs for `batch` examples: fixed + batch * per_example (see
// forward.cc for the parts). InvalidArgument for a batch outside [1, kMaxBatch].
Result<std::size_t> WorkspaceFloats(ModelKind kind, std::int64_t batch);
// The same in bytes (floats * sizeof(float)); a float's alignment suffices.
Result<std::size_t> WorkspaceBytes(ModelKind kind, std::int64_t batch);

Status Forward(ModelKind kind, std::span<const float> weights, std::span<const float> inputs,
               std::int64_t batch, std::span<float> workspace, std::span<float> logits);

// Sets OpenBLAS to one thread in this process (openblas_set_num_threads(1)); nothing to do in a
// build without OpenBLAS, whose loops run on the caller's thread.
void UseSingleBlasThread();
// The number of threads OpenBLAS uses in this process (1 without OpenBLAS).
int BlasThreads();
// OpenBLAS's build description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... SkylakeX MAX_THREADS=64"): the
// kernel it picked for this CPU, worth logging beside timings; without OpenBLAS, a sentence saying
// so. Static storage; do not free.
const char* BlasConfig();

}  // namespace gshare::examples
