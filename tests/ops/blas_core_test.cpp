// Tests for ops/blas_core: the best OpenBLAS core as a pure function of the CPU's features, and
// when a program restarts to load it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"

using namespace pipeworks;

namespace {
cpu_features sse3_only() {
  cpu_features f;
  f.sse3 = true;
  return f;
}
cpu_features avx2_fma() {
  cpu_features f = sse3_only();
  f.ssse3 = f.sse4_2 = f.avx = f.avx2 = f.fma = true;
  return f;
}
cpu_features avx512() {
  cpu_features f = avx2_fma();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = true;
  return f;
}
}  // namespace

TEST_CASE("the best core follows the widest vectors the CPU and OS support", "[ops][blas]") {
  REQUIRE(best_blas_core(cpu_features{}).empty());
  REQUIRE(best_blas_core(sse3_only()).empty());  // Prescott is what OpenBLAS falls back to
  cpu_features ssse3 = sse3_only();
  ssse3.ssse3 = true;
  REQUIRE(best_blas_core(ssse3) == "Core2");
  ssse3.sse4_2 = true;
  REQUIRE(best_blas_core(ssse3) == "Nehalem");
  ssse3.avx = true;
  REQUIRE(best_blas_core(ssse3) == "Sandybridge");
  REQUIRE(best_blas_core(avx2_fma()) == "Haswell");
  REQUIRE(best_blas_core(avx512()) == "SkylakeX");
}

TEST_CASE("AVX-512 without one of F BW VL DQ CD or without FMA stays on Haswell kernels",
          "[ops][blas]") {
  for (bool cpu_features::*flag : {&cpu_features::avx512f, &cpu_features::avx512bw,
                                   &cpu_features::avx512vl, &cpu_features::avx512dq,
                                   &cpu_features::avx512cd}) {
    cpu_features f = avx512();
    f.*flag = false;
    REQUIRE(best_blas_core(f) == "Haswell");
  }
  cpu_features no_fma = avx512();
  no_fma.fma = false;
  REQUIRE(best_blas_core(no_fma) == "Sandybridge");
}

TEST_CASE("a core is weaker only when its kernels are narrower", "[ops][blas]") {
  REQUIRE(blas_core_weaker("Prescott", "SkylakeX"));
  REQUIRE(blas_core_weaker("Haswell", "SkylakeX"));
  REQUIRE(blas_core_weaker("Cooperlake", "SkylakeX"));
  REQUIRE(blas_core_weaker("Sandybridge", "Haswell"));
  REQUIRE(blas_core_weaker("PRESCOTT", "Haswell"));  // names compare without case
  REQUIRE_FALSE(blas_core_weaker("SkylakeX", "SkylakeX"));
  REQUIRE_FALSE(blas_core_weaker("Zen", "Haswell"));  // the same AVX2 kernels, tuned for AMD
  REQUIRE_FALSE(blas_core_weaker("SkylakeX", "Haswell"));
  REQUIRE_FALSE(blas_core_weaker("Zen5000", "Haswell"));  // a name this table does not know
  REQUIRE_FALSE(blas_core_weaker("Prescott", ""));
}

TEST_CASE("the start-up restart loads the best core once and only when it is better",
          "[ops][blas]") {
  using opt = std::optional<std::string_view>;
  // OpenBLAS fell back to SSE3 on an AVX-512 CPU: restart with SkylakeX.
  REQUIRE(blas_core_change(std::nullopt, "Prescott", "SkylakeX", false) == "SkylakeX");
  REQUIRE(blas_core_change(std::nullopt, "Cooperlake", "SkylakeX", false) == "SkylakeX");
  // A forced weaker core is replaced too, unless the user asks to keep it.
  REQUIRE(blas_core_change(opt("Haswell"), "Haswell", "SkylakeX", false) == "SkylakeX");
  REQUIRE_FALSE(blas_core_change(opt("Haswell"), "Haswell", "SkylakeX", true));
  // Already restarted with the best: no second restart, even when OpenBLAS did not know it.
  REQUIRE_FALSE(blas_core_change(opt("SkylakeX"), "SkylakeX", "SkylakeX", false));
  REQUIRE_FALSE(blas_core_change(opt("SkylakeX"), "Prescott", "SkylakeX", false));
  // Nothing better for this CPU: nothing changes.
  REQUIRE_FALSE(blas_core_change(std::nullopt, "Haswell", "Haswell", false));
  REQUIRE_FALSE(blas_core_change(std::nullopt, "Zen", "Haswell", false));
  REQUIRE_FALSE(blas_core_change(opt("Zen"), "Zen", "Haswell", false));
  REQUIRE_FALSE(blas_core_change(std::nullopt, "Prescott", "", false));
  // No best core known and a forced one: run without it, so that OpenBLAS detects the CPU.
  REQUIRE(blas_core_change(opt("Prescott"), "Prescott", "", false) == "");
}

TEST_CASE("the tests run with this CPU's best OpenBLAS kernels", "[ops][blas]") {
  // tests/test_main.cpp restarts each test binary as the CLI restarts itself, so the tests
  // check the kernels a user runs.
  const cpu_features f = read_cpu_features();
  if (f.avx2) REQUIRE(f.avx);
  if (f.avx512f) REQUIRE(f.avx2);
  const char* keep = std::getenv("PIPEWORKS_KEEP_OPENBLAS_CORETYPE");
  if (keep && std::string(keep) == "1") return;  // the user kept a core of their own
  REQUIRE_FALSE(blas_core_weaker(blas_core_name(), best_blas_core(f)));
}
