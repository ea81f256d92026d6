// The main() of the test binaries above base/: it loads this CPU's best OpenBLAS kernels as the
// programs do (run_with_best_blas_kernels), then runs Catch2.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "ops/blas_core.hpp"

int main(int argc, char** argv) {
  pipeworks::run_with_best_blas_kernels(argv);
  return Catch::Session().run(argc, argv);
}
