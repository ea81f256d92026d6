// Which OpenBLAS kernel set ("core type") runs this CPU best, and the one start-up call that
// makes a program run with it.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace pipeworks {

// The x86 features that decide which OpenBLAS kernels can run: each true only when the CPU has
// it and the operating system saves the registers it needs (XGETBV).
struct cpu_features {
  bool sse3 = false, ssse3 = false, sse4_2 = false;
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
};

// This CPU's features (all false on a CPU that is not x86).
cpu_features read_cpu_features();

// The OpenBLAS core type that runs pipeworks' matrix products fastest on a CPU with these
// features, or "" when none is known to beat what OpenBLAS picks itself. AVX-512 F/BW/VL/DQ/CD
// gives SkylakeX (faster than Cooperlake on gpt-small's GEMMs: bench/README.md), AVX2 with FMA
// Haswell, AVX Sandybridge, SSE4.2 Nehalem, SSSE3 Core2.
std::string_view best_blas_core(const cpu_features& f);

// True when `picked`, a core name as openblas_get_corename() gives it, runs slower kernels than
// `best`. A name this table does not know is never called weaker.
bool blas_core_weaker(std::string_view picked, std::string_view best);

// What to do with OPENBLAS_CORETYPE at start-up: the value to run with, "" to run without it,
// or nothing to carry on as loaded. `forced` is the variable (nullopt when unset), `picked` the
// core OpenBLAS loaded, `best` best_blas_core() of this CPU, `keep` the user's request to keep
// the variable (PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1).
std::optional<std::string> blas_core_change(std::optional<std::string_view> forced,
                                            std::string_view picked, std::string_view best,
                                            bool keep);

// OpenBLAS picks its kernels when the library loads: from OPENBLAS_CORETYPE when that is set,
// else from the CPU, which an OpenBLAS older than the CPU does not know (Debian 12's 0.3.21
// runs SSE3 kernels on some AVX-512 CPUs). Programs call this first thing in main(): when the
// loaded core is weaker than this CPU's best, it sets OPENBLAS_CORETYPE to the best and
// executes the program again, once. Returns when no restart is needed, when
// PIPEWORKS_KEEP_OPENBLAS_CORETYPE=1 keeps the user's variable, or when the restart fails.
void run_with_best_blas_kernels(char** argv);

}  // namespace pipeworks
