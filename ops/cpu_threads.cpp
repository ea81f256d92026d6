// oneTBB and OpenBLAS thread caps, and the name of the OpenBLAS kernels loaded.
#include "ops/cpu_threads.hpp"

#include <cblas.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include <tbb/global_control.h>

#include "base/cpu_count.hpp"

namespace pipeworks {
namespace {
std::mutex g_mutex;
std::unique_ptr<tbb::global_control> g_tbb_cap;
int g_threads = 0;
}  // namespace

void set_cpu_threads(int n) {
  if (n <= 0) n = usable_cores();
  std::lock_guard lock(g_mutex);
  g_tbb_cap.reset();
  g_tbb_cap = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(n));
  // OpenBLAS stays single-threaded: gemm cuts large products into oneTBB tasks, each one
  // OpenBLAS call, so oneTBB alone decides how many cores are busy.
  openblas_set_num_threads(1);
  g_threads = n;
}

int cpu_threads() {
  std::lock_guard lock(g_mutex);
  if (g_threads > 0) return g_threads;
  return usable_cores();
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace pipeworks
