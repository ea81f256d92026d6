// The CPU's features through cpuid, the best OpenBLAS core type for them, and the start-up
// restart that loads it.
#include "ops/blas_core.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "ops/cpu_threads.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace pipeworks {
namespace {

// OpenBLAS's x86 core names by the width of the kernels they run: a higher tier runs wider
// vectors. Within AVX-512, Cooperlake ranks below SkylakeX: OpenBLAS 0.3.21 runs gpt-small's
// GEMMs slower with it (bench/README.md, "OpenBLAS kernels").
constexpr std::array<std::pair<std::string_view, int>, 19> k_tiers{{
    {"prescott", 1}, {"opteron_sse3", 1}, {"barcelona", 1},
    {"core2", 2}, {"penryn", 2}, {"dunnington", 2}, {"atom", 2},
    {"nehalem", 3},
    {"sandybridge", 4}, {"bulldozer", 4}, {"piledriver", 4}, {"steamroller", 4},
    {"haswell", 5}, {"zen", 5}, {"excavator", 5},
    {"cooperlake", 6},
    {"skylakex", 7}, {"sapphirerapids", 7}, {"generic", 0},
}};

int tier(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& [n, t] : k_tiers)
    if (n == lower) return t;
  return -1;
}

}  // namespace

cpu_features read_cpu_features() {
  cpu_features f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse3 = c & (1u << 0);
  f.ssse3 = c & (1u << 9);
  f.sse4_2 = c & (1u << 20);
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
  // XGETBV: which register files the operating system saves across context switches.
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // XMM and YMM state
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // and opmask, ZMM0-15 upper halves, ZMM16-31
  f.avx = avx && os_ymm;
  f.fma = fma && os_ymm;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b & (1u << 5)) && os_ymm;
    f.avx512f = (b & (1u << 16)) && os_zmm;
    f.avx512dq = (b & (1u << 17)) && os_zmm;
    f.avx512cd = (b & (1u << 28)) && os_zmm;
    f.avx512bw = (b & (1u << 30)) && os_zmm;
    f.avx512vl = (b & (1u << 31)) && os_zmm;
  }
#endif
  return f;
}

std::string_view best_blas_core(const cpu_features& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512cd && f.avx2 && f.fma)
    return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  if (f.avx) return "Sandybridge";
  if (f.sse4_2) return "Nehalem";
  if (f.ssse3) return "Core2";
  return "";
}

bool blas_core_weaker(std::string_view picked, std::string_view best) {
  const int p = tier(picked), b = tier(best);
  return p >= 0 && b >= 0 && p < b;
}

std::optional<std::string> blas_core_change(std::optional<std::string_view> forced,
                                            std::string_view picked, std::string_view best,
                                            bool keep) {
  if (keep) return std::nullopt;
  // No better core known for this CPU: a forced one goes, so that OpenBLAS detects the CPU.
  if (best.empty()) return forced ? std::optional<std::string>("") : std::nullopt;
  if (forced && *forced == best) return std::nullopt;  // already restarted with it
  if (blas_core_weaker(picked, best)) return std::string(best);
  return std::nullopt;
}

void run_with_best_blas_kernels(char** argv) {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const char* keep = std::getenv("PIPEWORKS_KEEP_OPENBLAS_CORETYPE");
  const std::optional<std::string> change = blas_core_change(
      forced ? std::optional<std::string_view>(forced) : std::nullopt, blas_core_name(),
      best_blas_core(read_cpu_features()), keep && std::string_view(keep) == "1");
  if (!change) return;
  if (change->empty())
    unsetenv("OPENBLAS_CORETYPE");
  else
    setenv("OPENBLAS_CORETYPE", change->c_str(), 1);
  execv("/proc/self/exe", argv);
  // execv failed: carry on with the kernels loaded rather than stop.
}

}  // namespace pipeworks
