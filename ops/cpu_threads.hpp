// Thread-count control for the CPU kernels, so that OpenBLAS and oneTBB share the cores
// without oversubscribing them, and a report of which OpenBLAS kernel set is in use.
#pragma once
#include <string>

namespace pipeworks {

// Caps oneTBB's parallelism at n (n <= 0: all cores) and keeps OpenBLAS single-threaded, since
// the GEMMs run as oneTBB tasks of single-threaded OpenBLAS calls.
// Call once at start-up; later calls replace the cap.
void set_cpu_threads(int n);
int cpu_threads();

// The OpenBLAS core name in use ("Zen", "SkylakeX", "Haswell", ...).
std::string blas_core_name();

// OpenBLAS picks its kernels when the library loads, from OPENBLAS_CORETYPE when that is set.
// A forced core type can halve GEMM speed (Haswell kernels on an AVX-512 CPU). Programs call
// this first thing in main(): when the variable is set, it removes it and re-executes the
// program so that OpenBLAS detects the CPU itself. Returns only when no re-exec was needed
// (or PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1 asks to keep the variable).
void reexec_without_openblas_coretype(char** argv);

}  // namespace pipeworks
