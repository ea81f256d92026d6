// Thread-count control for the CPU kernels, so that OpenBLAS and oneTBB share the cores
// without oversubscribing them, and a report of which OpenBLAS kernel set is in use.
#pragma once
#include <string>

namespace pipeworks {

// Caps oneTBB's parallelism at n (n <= 0: the cores this process may use, usable_cores()) and keeps OpenBLAS single-threaded, since
// the GEMMs run as oneTBB tasks of single-threaded OpenBLAS calls.
// Call once at start-up; later calls replace the cap.
void set_cpu_threads(int n);
int cpu_threads();

// The OpenBLAS core name in use ("Zen", "SkylakeX", "Haswell", ...).
std::string blas_core_name();

}  // namespace pipeworks
