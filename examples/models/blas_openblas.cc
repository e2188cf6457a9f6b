// The forward pass's products on OpenBLAS (GSHARE_WITH_OPENBLAS=ON, the default).
#include <cblas.h>

#include "examples/models/blas.h"
#include "examples/models/forward.h"

namespace gshare::examples {
namespace {

int Int(std::int64_t value) { return static_cast<int>(value); }  // all dims are far below INT_MAX

}  // namespace

void MatrixVector(std::int64_t n, std::int64_t k, const float* weight, const float* in,
                  float* out) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, Int(n), Int(k), 1.0F, weight, Int(k), in, 1, 0.0F, out,
              1);
}

void MatrixMatrixTransposed(std::int64_t rows, std::int64_t n, std::int64_t k, const float* in,
                            const float* weight, float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(rows), Int(n), Int(k), 1.0F, in, Int(k),
              weight, Int(k), 0.0F, out, Int(n));
}

void MatrixMatrix(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                  float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(m), Int(n), Int(k), 1.0F, a, Int(k), b,
              Int(n), 0.0F, out, Int(n));
}

void UseSingleBlasThread() { openblas_set_num_threads(1); }

int BlasThreads() { return openblas_get_num_threads(); }

const char* BlasConfig() { return openblas_get_config(); }

}  // namespace gshare::examples
