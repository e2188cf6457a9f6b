// The three single-precision products the forward pass needs, row-major, over caller memory.
//
// Two builds of them exist and CMake links one (GSHARE_WITH_OPENBLAS): blas_openblas.cc calls
// OpenBLAS (cblas_sgemv / cblas_sgemm), the default; blas_loops.cc is plain C++ loops with float
// accumulation, for builds that leave OpenBLAS out (a self-contained bundle, where the
// library and its Fortran runtime would weigh more than everything else). Both are deterministic
// for a given call on one thread, wherever the buffers lie; they round differently from each
// other, far inside the comparison's tolerance (compare.h).
#pragma once

#include <cstdint>

namespace gshare::examples {

// out[n] = weight[n, k] * in[k].
void MatrixVector(std::int64_t n, std::int64_t k, const float* weight, const float* in, float* out);
// out[rows, n] = in[rows, k] * weight[n, k]^T.
void MatrixMatrixTransposed(std::int64_t rows, std::int64_t n, std::int64_t k, const float* in,
                            const float* weight, float* out);
// out[m, n] = a[m, k] * b[k, n].
void MatrixMatrix(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                  float* out);

}  // namespace gshare::examples
